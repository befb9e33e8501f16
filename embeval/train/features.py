"""Classifier inputs built from the per-sentence table, batch by batch (SPEC §4 "Pair features").

A task's samples index rows of the sentence table: single-sentence tasks use the row itself,
pair tasks [|u-v|, u*v] (MRPC, SICK, STS-B) and SNLI [u, v, u*v, |u-v|]. Features are built for
the samples a batch needs; `Features.dense()` materializes them only when they fit a memory budget.
"""

import numpy as np
import torch

from embeval.memory import dense_budget

KINDS = ("single", "pair", "snli")


def to_device(arrays, device):
    """numpy arrays on the device in one copy each; on a GPU through pinned memory, without
    waiting for the copy (the device orders it before the kernels that read it)."""
    out = []
    for a in arrays:
        host = torch.from_numpy(np.ascontiguousarray(a))
        if device.type == "cuda":
            host = host.pin_memory()
        out.append(host.to(device, non_blocking=True))
    return out


def feature_dim(dim, kind):
    """Width of the features of one sample for sentence vectors of width `dim`."""
    return {"single": dim, "pair": 2 * dim, "snli": 4 * dim}[kind]


def combine(u, v, kind, out=None):
    """The features of samples whose sentence vectors are u (and v): single, pair or snli.

    out: a buffer of the result's shape that pair features are written into; single features
    are u itself. Callers use the returned tensor."""
    if kind == "single":
        return u
    if kind == "pair":
        return torch.cat([(u - v).abs(), u * v], dim=-1, out=out)
    if kind == "snli":
        return torch.cat([u, v, u * v, (u - v).abs()], dim=-1, out=out)
    raise ValueError(f"unknown feature kind {kind!r}")


def shaped_buffer(out, idx, dim):
    """The buffer `out` (at least idx.numel() * dim values) viewed as idx.shape + (dim,), or None."""
    return None if out is None else out.reshape(-1)[: idx.numel() * dim].view(tuple(idx.shape) + (dim,))


def gather(matrix, idx, out=None):
    """matrix[idx] for an index tensor of any shape (index_select: faster than advanced indexing);
    out: a preallocated (idx.numel(), columns) tensor to write into."""
    rows = (
        torch.index_select(matrix, 0, idx.reshape(-1), out=out)
        if out is not None
        else matrix.index_select(0, idx.reshape(-1))
    )
    return rows.reshape(tuple(idx.shape) + (matrix.shape[1],))


def sample_features(table, ia, ib=None, kind="single"):
    """float32 features of the samples whose sentences are rows `ia` (and `ib`) of `table`."""
    u = table.index_select(0, torch.as_tensor(ia, dtype=torch.long, device=table.device))
    v = None if ib is None else table.index_select(0, torch.as_tensor(ib, dtype=torch.long, device=table.device))
    return combine(u, v, kind)


class Features:
    """features(idx) -> float32 tensor of shape idx.shape + (dim,) for sample indices idx."""

    def __init__(self, table, a_rows, b_rows=None, kind="single"):
        self.table = table
        self.a = torch.as_tensor(a_rows, device=table.device)
        self.b = None if b_rows is None else torch.as_tensor(b_rows, device=table.device)
        self.kind = kind
        self.dim = feature_dim(table.shape[1], kind)
        self.device = table.device

    def __len__(self):
        return len(self.a)

    def __call__(self, idx, out=None):
        """Features of samples idx; out: an optional (idx.numel(), dim) float32 buffer to build them in."""
        if self.kind == "single":
            return gather(self.table, self.a[idx], out)
        u = gather(self.table, self.a[idx])
        return combine(u, gather(self.table, self.b[idx]), self.kind, shaped_buffer(out, idx, self.dim))

    def nbytes(self):
        return len(self) * self.dim * 4

    def dense(self, limit=None):
        """A DenseFeatures when the whole matrix fits `limit` bytes (default: dense_budget), else
        self (built per batch)."""
        if (
            self.kind == "single"
            and len(self.a) == len(self.table)
            and bool((self.a == torch.arange(len(self.a), device=self.device)).all())
        ):
            return DenseFeatures(self.table)
        return self if self.nbytes() > (dense_budget(self.device) if limit is None else limit) else materialize(self)


def materialize(features, block=65536):
    """DenseFeatures holding features(i) for every sample index i, built `block` samples at a time."""
    rows = torch.arange(len(features), device=features.device)
    blocks = [features(rows[i : i + block]) for i in range(0, len(features), block)]
    return DenseFeatures(torch.cat(blocks) if blocks else torch.zeros((0, features.dim), device=features.device))


class DenseFeatures:
    """Features held as one matrix."""

    def __init__(self, matrix):
        self.matrix = matrix
        self.dim = matrix.shape[1]
        self.device = matrix.device

    def __len__(self):
        return self.matrix.shape[0]

    def __call__(self, idx, out=None):
        """Rows idx; out: an optional (idx.numel(), dim) float32 buffer they are written into."""
        return gather(self.matrix, torch.as_tensor(idx, device=self.device), out)

    def nbytes(self):
        return self.matrix.numel() * 4

    def dense(self, limit=None):
        return self
