"""Normalization of the sentence vectors as a hyperparameter (Eger et al., 2019, "Pitfalls in the
Evaluation of Sentence Embeddings").

Methods, applied to every sentence vector before any feature is built:
- none: the vectors as given;
- l2: each vector divided by its Euclidean norm (a zero vector stays zero);
- zscore: each dimension minus its mean, divided by its standard deviation (population; a
  constant dimension is only centred);
- zscore+l2: zscore, then l2.

The mean and standard deviation are estimated on training sentences only, never on a test item:
each distinct sentence of the train split once; for MR, CR, SUBJ and MPQA (cross-validated, no
train split) the distinct sentences of each outer training fold, separately per fold; for
STS12-16 (test sets only) the distinct sentences of STSBenchmark's train split. `tune` scores
every method and keeps the one with the best dev figure (embeval.tasks.figures.SELECTION; STS12-16:
the cosine Spearman on STSBenchmark's dev split; first best wins in the order above).
"""

from dataclasses import dataclass

import numpy as np
import torch

from embeval.errors import EmbevalError
from embeval.settings import NORMALIZATION_METHODS
from embeval.train.features import (
    combine,
    dense_budget,
    feature_dim,
    materialize,
    shaped_buffer,
)

METHODS = NORMALIZATION_METHODS


def needs_statistics(method):
    return method in ("zscore", "zscore+l2", "tune")


@dataclass
class Normalizer:
    """x -> normalized x, row by row; `mean` and `scale` (1/std) are float32 (dim,) tensors for zscore."""

    method: str
    mean: torch.Tensor | None = None
    scale: torch.Tensor | None = None
    fitted_on: int = 0  # distinct sentences the statistics were estimated on

    def __call__(self, x):
        if self.method == "none":
            return x
        if self.method.startswith("zscore"):
            x = (x - self.mean) * self.scale
        if self.method.endswith("l2"):
            norms = x.norm(dim=-1, keepdim=True)
            x = torch.where(norms > 0, x / torch.where(norms > 0, norms, torch.ones_like(norms)), x)
        return x


def fit(method, table, rows=None, chunk=65536):
    """A Normalizer whose statistics come from table[rows] (distinct rows; all rows when None)."""
    if method not in METHODS:
        raise ValueError(f"unknown normalization {method!r}")
    if not method.startswith("zscore"):
        return Normalizer(method)
    rows = (
        torch.arange(len(table), device=table.device)
        if rows is None
        else torch.as_tensor(np.unique(np.asarray(rows)), dtype=torch.long, device=table.device)
    )
    if len(rows) == 0:
        raise EmbevalError("no training sentences to estimate the normalization statistics on", file="--normalize")
    total = torch.zeros(table.shape[1], dtype=torch.float64, device=table.device)
    for i in range(0, len(rows), chunk):
        total += table.index_select(0, rows[i : i + chunk]).double().sum(0)
    mean = total / len(rows)
    squares = torch.zeros_like(total)
    for i in range(0, len(rows), chunk):
        squares += ((table.index_select(0, rows[i : i + chunk]).double() - mean) ** 2).sum(0)
    std = torch.sqrt(squares / len(rows))
    scale = torch.where(std > 0, 1.0 / torch.where(std > 0, std, torch.ones_like(std)), torch.ones_like(std))
    return Normalizer(method, mean.float(), scale.float(), int(len(rows)))


def split_rows(ctx, name):
    """Every table row a split's samples use (sentence A and B), with repeats."""
    ia, ib = ctx.rows[name]
    return ia if ib is None else np.concatenate([ia, ib])


def for_task(ctx, method=None):
    """The task's Normalizer: statistics from its train split, or from the reference task's
    (STSBenchmark's) train split for STS12-16."""
    method = method or ctx.normalize
    if method == "none" or not method.startswith("zscore"):
        return Normalizer(method)
    if "train" in ctx.rows:
        return fit(method, ctx.table, split_rows(ctx, "train"))
    if ctx.reference is not None:
        return fit(method, ctx.reference.table, split_rows(ctx.reference, "train"))
    raise EmbevalError(
        f"{method} needs training sentences for its statistics; {ctx.task.name} has no train split", file="--normalize"
    )


def table(ctx, method=None):
    """The task's sentence table, normalized (the table itself for none)."""
    normalizer = for_task(ctx, method)
    return ctx.table if normalizer.method == "none" else normalizer(ctx.table)


def summary(ctx, method=None):
    """{"method", "statistics"}: the method and where its statistics come from, for the results."""
    method = method or ctx.normalize
    if not method.startswith("zscore"):
        return {"method": method}
    if ctx.task.protocol == "nested-kfold":
        source = "each outer training fold's distinct sentences, fold by fold"
    elif "train" in ctx.rows:
        source = f"the train split's {len(np.unique(split_rows(ctx, 'train')))} distinct sentences"
    else:
        count = len(np.unique(split_rows(ctx.reference, "train"))) if ctx.reference is not None else 0
        source = f"{ctx.task.reference}'s train split ({count} distinct sentences)"
    return {"method": method, "statistics": source}


class FoldFeatures:
    """Features of the samples under k fold-specific normalizations, in one index space.

    Index v * N + i is sample i normalized with fold v's statistics; so the batched trainer sees
    every outer fold's problems at once while each fold uses statistics of its own training
    samples only. Builds features batch by batch, as Features does; `fold_features` materializes
    them (dense) when they fit the memory budget."""

    def __init__(self, table, a_rows, b_rows, kind, normalizers):
        self.table = table
        self.a = torch.as_tensor(a_rows, device=table.device)
        self.b = None if b_rows is None else torch.as_tensor(b_rows, device=table.device)
        self.kind = kind
        self.n = len(self.a)
        self.views = normalizers
        self.mean = torch.stack([v.mean for v in normalizers])
        self.scale = torch.stack([v.scale for v in normalizers])
        self.l2 = normalizers[0].method.endswith("l2")
        self.dim = feature_dim(table.shape[1], kind)
        self.device = table.device

    def __len__(self):
        return self.n * len(self.views)

    def _vectors(self, rows, view):
        x = (self.table[rows] - self.mean[view]) * self.scale[view]
        if self.l2:
            norms = x.norm(dim=-1, keepdim=True)
            x = torch.where(norms > 0, x / torch.where(norms > 0, norms, torch.ones_like(norms)), x)
        return x

    def __call__(self, idx, out=None):
        """Features of samples idx; out: an optional (idx.numel(), dim) float32 buffer for pair features."""
        idx = torch.as_tensor(idx, device=self.device)
        view, sample = idx // self.n, idx % self.n
        u = self._vectors(self.a[sample], view)
        v = None if self.b is None else self._vectors(self.b[sample], view)
        return combine(u, v, self.kind, shaped_buffer(out, idx, self.dim) if v is not None else None)

    def nbytes(self):
        return len(self) * self.dim * 4

    def dense(self, limit=None):
        """Every view's features as one matrix (a gather per batch instead of normalizing each
        batch again) when they fit `limit` bytes (default: dense_budget), else self."""
        return self if self.nbytes() > (dense_budget(self.device) if limit is None else limit) else materialize(self)


def fold_features(ctx, method, a_rows, b_rows, fold_train_samples):
    """FoldFeatures for the outer folds whose training samples are given (sample indices)."""
    normalizers = []
    for train in fold_train_samples:
        rows = a_rows[train] if b_rows is None else np.concatenate([a_rows[train], b_rows[train]])
        normalizers.append(fit(method, ctx.table, rows))
    return FoldFeatures(ctx.table, a_rows, b_rows, ctx.task.params.features, normalizers).dense()
