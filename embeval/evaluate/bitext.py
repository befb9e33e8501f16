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
"""

import numpy as np
import torch

from embeval import stats
from embeval.evaluate import mteb_similarity

QUERY_CHUNK, CORPUS_CHUNK = 100, 500_000  # mteb's chunks of first and second sentences


def nearest(queries: np.ndarray, candidates: np.ndarray, similarity: str = "cosine") -> np.ndarray:
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
