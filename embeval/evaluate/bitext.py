"""MTEB's bitext mining protocol, as mteb 2.26.24 computes it (BitextMiningEvaluator, AbsTaskBitextMining).

Each sentence of the first side is matched with its nearest neighbour on the other side by the model's
similarity (the task's `similarity`: cosine or dot); the gold match of sentence i is sentence i
(BUCC names its own pairs).
Figures, from scikit-learn over (gold, predicted) indices with zero_division=0: accuracy, and precision,
recall and F1 averaged over the gold classes weighted by their support ("weighted"); the main score of
most tasks is f1. With one gold sentence per class, weighted recall equals accuracy, a class's F1 is
2 / (1 + c) when its sentence is matched correctly and c sentences in all chose it, and its precision 1 / c.

Ties: mteb takes torch.topk(k=1, sorted=False) of float32 similarities, which leaves the choice among
exactly equal similarities (duplicate sentences) to torch; `nearest` makes the same call on the same
float32 similarities (embeval.evaluate.mteb_similarity), so ties fall as in mteb.

The figures are not means of fixed per-sentence values (a sentence's precision depends on how many other
sentences chose the same match), so `weighted_figures` computes them under item weights directly: the
figure of a bootstrap resample (weights = counts) equals scikit-learn's on the resampled sentences.

Parallel subsets (`parallel_subsets`: FloresBitextMining, IN22Conv/IN22Gen, NTREX): one table holds a
column per language, row i of every column the same sentence; each of mteb's subsets "A-B" matches
column A's sentences among column B's (gold: the same row), scored as above; mteb reports each pair as
a subset of its own. `parallel_nearest` matches every pair; `parallel_figures` gives each pair's
figures and their mean over the pairs under item weights (a resample draws rows, the same rows in
every pair), for all pairs at once.
"""

import weakref
from collections import deque
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from embeval import stats
from embeval.evaluate import mteb_similarity

QUERY_CHUNK, CORPUS_CHUNK = 100, 500_000  # mteb's chunks of first and second sentences


def nearest(
    queries: np.ndarray | torch.Tensor, candidates: np.ndarray | torch.Tensor, similarity: str = "cosine"
) -> np.ndarray:
    """(queries,) the index of each query's most similar candidate, as mteb's BitextMiningEvaluator
    finds it: float32 similarities of 100 queries at a time against chunks of 500,000 candidates,
    torch.topk(k=1, sorted=False) in each chunk, the best over chunks (the earlier chunk on a tie)."""
    q, c = mteb_similarity.tensor(queries), mteb_similarity.tensor(candidates)
    out = np.empty(len(q), dtype=np.int64)
    for start in range(0, len(q), QUERY_CHUNK):
        best_score = np.full(len(q[start : start + QUERY_CHUNK]), -np.inf)
        for first in range(0, len(c), CORPUS_CHUNK):
            scores = mteb_similarity.matrix(q[start : start + QUERY_CHUNK], c[first : first + CORPUS_CHUNK], similarity)
            top_values, top_index = torch.topk(scores, 1, dim=1, largest=True, sorted=False)
            values, index = top_values[:, 0].double().numpy(), top_index[:, 0].numpy() + first
            better = values > best_score
            best_score[better] = values[better]
            out[start : start + len(values)][better] = index[better]
    return out


def weighted_figures(W: np.ndarray, gold: np.ndarray, predicted: np.ndarray) -> dict[str, np.ndarray]:
    """{"accuracy", "precision", "recall", "f1"}: (b,) the figures of each row of item weights W (b, n),
    as scikit-learn's weighted averages over gold classes with sample weights W[row]."""
    W = np.atleast_2d(np.asarray(W, dtype=np.float64))
    gold, predicted = np.asarray(gold, dtype=np.int64), np.asarray(predicted, dtype=np.int64)
    classes, index = np.unique(np.concatenate([gold, predicted]), return_inverse=True)
    gold_class, predicted_class = index[: len(gold)], index[len(gold) :]
    hit = (gold == predicted).astype(np.float64)

    def per_class(weights, labels):  # (b, classes) sums of the weights of the items of each class
        out = np.zeros((len(W), len(classes)))
        np.add.at(out.T, labels, weights.T)
        return out

    support = per_class(W, gold_class)
    chosen = per_class(W, predicted_class)
    true_positive = per_class(W * hit, gold_class)
    total = W.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(chosen > 0, true_positive / chosen, 0.0)
        recall = np.where(support > 0, true_positive / support, 0.0)
        f1 = np.where(support + chosen > 0, 2 * true_positive / (support + chosen), 0.0)
    return {
        "accuracy": (W @ hit) / total,
        "precision": (support * precision).sum(1) / total,
        "recall": (support * recall).sum(1) / total,
        "f1": (support * f1).sum(1) / total,
    }


class Classes:
    """What the fast path derives once from the gold and predicted indices: the items in the order of
    their gold class and of their predicted class, where each class begins there, and the class of
    each run (the classes present in gold or predictions, numbered as weighted_figures numbers them)."""

    def __init__(self, gold, predicted):
        gold, predicted = np.asarray(gold, dtype=np.int64), np.asarray(predicted, dtype=np.int64)
        classes, index = np.unique(np.concatenate([gold, predicted]), return_inverse=True)
        self.classes = len(classes)
        self.hit = (gold == predicted).astype(np.float64)
        self.by = []
        for labels in (index[: len(gold)], index[len(gold) :]):
            order = np.argsort(labels, kind="stable")
            starts = np.flatnonzero(np.r_[True, labels[order][1:] != labels[order][:-1]]) if len(order) else order
            self.by.append((order, starts, labels[order][starts] if len(order) else order))

    def per_class(self, weights, which):
        """(b, classes) the weights summed per gold (which=0) or predicted (1) class."""
        order, starts, present = self.by[which]
        out = np.zeros((len(weights), self.classes))
        ordered = np.take(weights, order, axis=1)
        out[:, present] = ordered if len(starts) == len(order) else np.add.reduceat(ordered, starts, axis=1)
        return out


def fast_weighted_figures(W: np.ndarray, derived: Classes) -> dict[str, np.ndarray]:
    """weighted_figures' values from the classes derived once (sums per class by sorting, not np.add.at)."""
    support, chosen = derived.per_class(W, 0), derived.per_class(W, 1)
    true_positive = derived.per_class(W * derived.hit, 0)
    total = W.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(chosen > 0, true_positive / chosen, 0.0)
        recall = np.where(support > 0, true_positive / support, 0.0)
        f1 = np.where(support + chosen > 0, 2 * true_positive / (support + chosen), 0.0)
    return {
        "accuracy": stats.product(W, derived.hit[:, None])[:, 0] / total,
        "precision": (support * precision).sum(1) / total,
        "recall": (support * recall).sum(1) / total,
        "f1": (support * f1).sum(1) / total,
    }


def mteb_scores(gold: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """The figures as mteb reports them, main score f1."""
    figures = {name: float(v[0]) for name, v in weighted_figures(np.ones((1, len(gold))), gold, predicted).items()}
    return {
        "precision": figures["precision"],
        "recall": figures["recall"],
        "f1": figures["f1"],
        "accuracy": figures["accuracy"],
        "main_score": figures["f1"],
    }


def parallel_nearest(
    table: np.ndarray | torch.Tensor,
    rows: Mapping[str, np.ndarray],
    pairs: Sequence[tuple[str, str]],
    similarity: str = "cosine",
) -> np.ndarray:
    """(rows per language, pairs) int32: for each pair (A, B), the row of B matched with each row of A,
    as `nearest(table[rows[A]], table[rows[B]])` finds it (each language's rows normalized once, in a
    copy of its own: a normalized row's bits depend on the row alone)."""
    table = mteb_similarity.tensor(table)
    prepared = {
        language: mteb_similarity.normalized(table[torch.as_tensor(np.asarray(own, dtype=np.int64))], similarity)
        for language, own in rows.items()
    }
    count = len(next(iter(rows.values()))) if rows else 0
    out = np.empty((count, len(pairs)), dtype=np.int32)
    for p, (first, second) in enumerate(pairs):
        out[:, p] = nearest(prepared[first], prepared[second], "dot")  # "dot" of normalized rows: the cosine
    return out


PARALLEL_CELLS = 1 << 22  # contested matches x resamples computed at once in parallel_figures


def parallel_figures(W: np.ndarray, pred: np.ndarray, per_pair: bool = False) -> dict[str, np.ndarray]:
    """{"accuracy", "precision", "recall", "f1"}: (b,) the mean over the pairs (columns of pred, rows
    matched, gold row i for row i) of weighted_figures under each row of item weights W (b, n); with
    per_pair (W one row), (pairs,) each pair's figures instead.

    With gold row i for row i, a pair's figures reduce to sums over its correctly matched rows c:
    accuracy and recall sum w_c; precision w_c^2 / (w_c + o_c) and F1 2 w_c^2 / (2 w_c + o_c), where
    o_c is the weight of the other rows matched with c (both w_c when no other row chose c)."""
    from scipy import sparse

    W = np.atleast_2d(np.asarray(W, dtype=np.float64))
    pred = np.asarray(pred, dtype=np.int64)
    n, pairs = pred.shape
    hit = pred == np.arange(n)[:, None]
    wrong_row, wrong_pair = np.nonzero(~hit)
    chosen = pred[wrong_row, wrong_pair]
    contested = hit[chosen, wrong_pair]  # another row chose a correctly matched row: it shares that row's class
    keys, key_of = np.unique(chosen[contested] * pairs + wrong_pair[contested], return_inverse=True)
    key_row, key_pair = keys // pairs, keys % pairs
    # row i chose key k's row in key k's pair: (keys, rows)
    choosers = sparse.csr_array((np.ones(len(key_of)), (key_of, wrong_row[contested])), shape=(len(keys), n))
    clear = hit.astype(np.float64)
    clear[key_row, key_pair] = 0.0  # the correctly matched rows no other row chose
    weights = np.ascontiguousarray(W.T)  # (n, b): a key's row of weights is one contiguous read
    total = W.sum(1)
    step = max(1, PARALLEL_CELLS // len(W))
    precision_terms, f1_terms = [], []
    for start in range(0, len(keys), step):
        part = slice(start, start + step)
        own = weights[key_row[part]]  # (k, b)
        other = choosers[part] @ weights  # (k, b)
        square = own * own
        precision_terms.append(np.divide(square, own + other, out=np.zeros_like(own), where=own > 0))
        f1_terms.append(np.divide(square, own + 0.5 * other, out=np.zeros_like(own), where=own > 0))
        if not per_pair:  # summed over the keys at once, not kept per key
            precision_terms[-1], f1_terms[-1] = precision_terms[-1].sum(0), f1_terms[-1].sum(0)
    if per_pair:
        precision_keys = np.concatenate(precision_terms)[:, 0] if precision_terms else np.zeros(0)
        f1_keys = np.concatenate(f1_terms)[:, 0] if f1_terms else np.zeros(0)
        hits, sure = W[0] @ hit, W[0] @ clear
        precision = sure + np.bincount(key_pair, precision_keys, minlength=pairs)
        f1 = sure + np.bincount(key_pair, f1_keys, minlength=pairs)
        return {
            "accuracy": hits / total[0],
            "precision": precision / total[0],
            "recall": hits / total[0],
            "f1": f1 / total[0],
        }
    sure = W @ clear.sum(1)
    accuracy = W @ hit.sum(1) / (pairs * total)
    precision = sure + sum(precision_terms, np.zeros(len(W)))
    f1 = sure + sum(f1_terms, np.zeros(len(W)))
    return {
        "accuracy": accuracy,
        "precision": precision / (pairs * total),
        "recall": accuracy,
        "f1": f1 / (pairs * total),
    }


_RECENT: deque = deque(maxlen=4)  # (W, pred, figures) of the last calls, W and pred held by weak references


def parallel_resampled(W: np.ndarray, pred: np.ndarray) -> dict[str, np.ndarray]:
    """parallel_figures(W, pred), computed once per chunk of resamples W and prediction set: the task's
    four figures' statistics (and a comparison's two sets) are evaluated on each chunk in turn."""
    for w, p, figures in _RECENT:
        if w() is W and p() is pred:
            return figures
    figures = parallel_figures(W, pred)
    _RECENT.append((weakref.ref(W), weakref.ref(pred), figures))
    return figures
