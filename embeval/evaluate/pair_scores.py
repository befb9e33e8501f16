"""MTEB's pair classification protocol (no training), as mteb 2.26.24 runs it; and its bootstrap statistics.

What mteb does (AbsTaskPairClassification, PairClassificationEvaluator), on labels 0/1:

- Five scores per pair, each as a float64 of the value computed in the encoder's dtype (float32
  vectors give float32 scores; mteb hands them on as Python floats):
  `cosine` 1 - scikit-learn's paired_cosine_distances (rows scaled to unit norm, zero rows left
  as they are, then 1 - |u' - v'|^2 / 2); `euclidean` paired_euclidean_distances |u - v|;
  `manhattan` paired_manhattan_distances sum |u - v|; `dot` numpy's dot of each pair, one row at
  a time; `similarity` the model's own pairwise similarity (`similarity=`): "cosine" (mteb's for a
  model whose ModelMeta names cosine or nothing; sentence-transformers' is the same on float32
  vectors): torch in float32, rows divided by max(|u|, 1e-12), then the sum of products; "dot"
  (a model that names dot): the float32 torch sum of products.
- Direction: cosine, dot and similarity rank a pair as similar when high; euclidean and manhattan
  are distances, similar when low (mteb never negates them, except for average precision).
- Per score: `accuracy` of the best threshold, `f1` of the best threshold with its `precision`
  and `recall`, and `ap`, scikit-learn's average_precision_score of the score (negated for the
  distances). The thresholds: the pairs sorted most similar first, a threshold may fall between
  two consecutive pairs of different scores only (never inside a run of tied scores, never
  before the first or after the last pair); the first best one in that order wins (accuracy
  starts at 0, so a figure of 0 keeps threshold -1; F1 needs a true positive, else F1, precision
  and recall are 0 at threshold 0). A threshold is the midpoint of the two scores it separates.
  mteb computes the thresholds but does not report them; embeval reports them as
  `{score}_accuracy_threshold` and `{score}_f1_threshold`.
- `max_{accuracy,f1,precision,recall,ap}`: the maximum of that figure over the five scores (each
  taken separately: max_precision is not the precision of the max_f1 score).
- Main figure: `max_ap` for 58 of the 62 pair classification tasks mteb 2.26 has not superseded
  (SprintDuplicateQuestions, TwitterSemEval2015 and TwitterURLCorpus in MTEB(eng, v2)); `max_accuracy`
  for TalemaaderPC, LegalBenchPC, Cmnli and Ocnli. Figures are fractions in [0, 1].

Bootstrap: `STATISTICS` holds each figure as f(W, arrays) -> (b,) over pairs resampled with counts W
(embeval.stats); a threshold is re-chosen in every resample, as the figure defines it. A resample
without a positive pair has AP 0, as scikit-learn gives.
"""

import numpy as np
import torch
from sklearn.metrics.pairwise import paired_cosine_distances, paired_euclidean_distances, paired_manhattan_distances

from embeval.errors import EmbevalError
from embeval.stats import Statistic

MTEB_VERSION = "2.26.24"
# the scores, in mteb's order; each names its figures ("cosine_ap", ...)
SCORES = ("similarity", "cosine", "manhattan", "euclidean", "dot")
HIGHER_IS_SIMILAR = {"similarity": True, "cosine": True, "manhattan": False, "euclidean": False, "dot": True}
METRICS = ("accuracy", "f1", "precision", "recall", "ap")
MAIN_SCORE = "max_ap"
SIMILARITIES = ("cosine", "dot")


def pair_scores(a: np.ndarray, b: np.ndarray, similarity: str = "cosine") -> dict[str, np.ndarray]:
    """{score name: (n,) float64} of the pairs (a[i], b[i]), computed as mteb computes them from the
    encoder's output (vectors in the dtype given). similarity: the model's own ("cosine" or "dot")."""
    if similarity not in SIMILARITIES:
        raise ValueError(f"similarity must be one of {SIMILARITIES}, not {similarity!r}")
    a, b = np.asarray(a), np.asarray(b)
    ta, tb = torch.tensor(a, dtype=torch.float32), torch.tensor(b, dtype=torch.float32)
    if similarity == "cosine":
        ta, tb = torch.nn.functional.normalize(ta, p=2, dim=1), torch.nn.functional.normalize(tb, p=2, dim=1)
    scores = {
        "similarity": (ta * tb).sum(dim=-1).numpy(),
        "cosine": 1 - paired_cosine_distances(a, b),
        "manhattan": paired_manhattan_distances(a, b),
        "euclidean": paired_euclidean_distances(a, b),
        "dot": np.array([np.dot(u, v) for u, v in zip(a, b, strict=True)]),
    }
    return {name: np.asarray(value, dtype=np.float64) for name, value in scores.items()}


class Runs:
    """The pairs' runs of equal score, most similar first: `run` (n,) the run of each pair,
    `values` the score of each run (None where only the runs are known)."""

    def __init__(self, run, values=None):
        self.run, self.values = np.asarray(run, dtype=np.int64), values

    @classmethod
    def of(cls, scores, higher_is_similar):
        scores = np.asarray(scores, dtype=np.float64)
        values, run = np.unique(scores, return_inverse=True)
        if higher_is_similar:
            values, run = values[::-1], len(values) - 1 - run
        return cls(run.reshape(-1), values)

    def counts(self, W, gold):
        """(positives, negatives): (b, runs) weighted counts of each run in each resample (one
        bincount a resample, of the run and label together)."""
        size = int(self.run.max()) + 1 if len(self.run) else 0
        gold = np.asarray(gold)
        if not np.isin(gold, (0, 1)).all():
            raise ValueError("pair labels must be 0 or 1")
        cell = 2 * self.run + gold.astype(np.int64)
        both = np.stack([np.bincount(cell, weights=w, minlength=2 * size) for w in W]).reshape(len(W), size, 2)
        return both[:, :, 1], both[:, :, 0]


def _cuts(positives, negatives):
    """Cumulative counts at each cut after a run, and which cuts mteb may choose: after a run that
    holds a pair, with a pair in a later run (a cut never falls before the first or after the last pair)."""
    present = (positives + negatives) > 0
    width = present.shape[1]
    last = width - 1 - np.argmax(present[:, ::-1], axis=1)  # the last run holding a pair
    allowed = present & (np.arange(width) < last[:, None])
    return np.cumsum(positives, axis=1), np.cumsum(negatives, axis=1), allowed


def counted(W, runs, gold):
    """(positives, negatives, (true positives, false positives, allowed cuts)): what the figures
    below take from the runs' counts; computed once, it serves all three."""
    positives, negatives = runs.counts(W, gold)
    return positives, negatives, _cuts(positives, negatives)


def _first_best(values, allowed, floor):
    """(best value, index) per row: the first allowed maximum above `floor`; index -1 where none."""
    masked = np.where(allowed, values, -np.inf)
    index = np.argmax(masked, axis=1)
    best = masked[np.arange(len(masked)), index]
    found = best > floor
    return np.where(found, best, floor), np.where(found, index, -1)


def best_accuracy(W, runs, gold, shared=None):
    """(accuracy, cut index) per resample: the best threshold's accuracy (0 and -1 without one above 0).
    shared: counted(W, runs, gold), if already computed."""
    positives, negatives, (tp, fp, allowed) = shared or counted(W, runs, gold)
    total = positives.sum(1, keepdims=True) + negatives.sum(1, keepdims=True)
    accuracy = (tp + (negatives.sum(1, keepdims=True) - fp)) / np.where(total > 0, total, 1)
    return _first_best(accuracy, allowed, 0.0)


def best_f1(W, runs, gold, shared=None):
    """(f1, precision, recall, cut index) per resample at the best-F1 threshold (zeros and -1 without one)."""
    positives, negatives, (tp, fp, allowed) = shared or counted(W, runs, gold)
    allowed = allowed & (tp > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = tp / (tp + fp)
        recall = tp / positives.sum(1, keepdims=True)
        f1 = 2 * precision * recall / (precision + recall)
    best, index = _first_best(f1, allowed, 0.0)
    rows = np.arange(len(index))
    found = index >= 0
    return (
        best,
        np.where(found, precision[rows, np.maximum(index, 0)], 0.0),
        np.where(found, recall[rows, np.maximum(index, 0)], 0.0),
        index,
    )


def average_precision(W, runs, gold, shared=None):
    """scikit-learn's average precision per resample: the sum over score runs of the recall gained
    times the precision there (0 without a positive pair)."""
    positives, negatives, (true_positive, false_positive, _) = shared or counted(W, runs, gold)
    taken = true_positive + false_positive  # counts are integers: exact, as a cumulative sum of both
    precision = np.divide(true_positive, taken, out=np.zeros_like(taken), where=taken > 0)
    total_positive = true_positive[:, -1]
    return (positives * precision).sum(1) / np.where(total_positive > 0, total_positive, 1)


def _threshold(runs, index, missing):
    """The midpoint of the two scores around cut `index` (mteb's threshold), or `missing` for -1."""
    if index < 0:
        return missing
    return float((runs.values[index] + runs.values[index + 1]) / 2)


def evaluate_scores(scores: dict[str, np.ndarray], labels: np.ndarray) -> dict[str, float]:
    """mteb's figures of each score (accuracy, f1, precision, recall, ap, and the two thresholds)
    and the max_* figures over the scores, from pair_scores' output and labels 0/1."""
    gold = _labels(labels)
    ones = np.ones((1, len(gold)))
    out = {}
    for name in SCORES:
        runs = Runs.of(scores[name], HIGHER_IS_SIMILAR[name])
        accuracy, accuracy_cut = best_accuracy(ones, runs, gold)
        f1, precision, recall, f1_cut = best_f1(ones, runs, gold)
        out.update(
            {
                f"{name}_accuracy": float(accuracy[0]),
                f"{name}_f1": float(f1[0]),
                f"{name}_precision": float(precision[0]),
                f"{name}_recall": float(recall[0]),
                f"{name}_ap": float(average_precision(ones, runs, gold)[0]),
                f"{name}_accuracy_threshold": _threshold(runs, int(accuracy_cut[0]), -1.0),
                f"{name}_f1_threshold": _threshold(runs, int(f1_cut[0]), 0.0),
            }
        )
    for metric in METRICS:
        out[f"max_{metric}"] = max(out[f"{name}_{metric}"] for name in SCORES)
    return out


def evaluate_pairs(a: np.ndarray, b: np.ndarray, labels: np.ndarray, similarity: str = "cosine"):
    """(figures, arrays): mteb's figures of the pairs (a[i], b[i]) with labels 0/1, and the per-pair
    arrays the bootstrap statistics take, all (n,): "gold" (labels), each score, and per score the
    run of equal scores each pair is in, numbered most similar first ("{score}.run")."""
    scores = pair_scores(a, b, similarity)
    return evaluate_scores(scores, labels), pair_arrays(scores, labels)


def pair_arrays(scores: dict[str, np.ndarray], labels: np.ndarray) -> dict[str, np.ndarray]:
    """The per-pair arrays of the bootstrap statistics (see evaluate_pairs)."""
    arrays = {"gold": _labels(labels)}
    for name in SCORES:
        arrays[name] = scores[name]
        arrays[f"{name}.run"] = Runs.of(scores[name], HIGHER_IS_SIMILAR[name]).run
    return arrays


def _labels(labels):
    gold = np.asarray(labels)
    if gold.ndim != 1 or not np.isin(gold, (0, 1)).all():
        raise EmbevalError("pair classification labels must be 0 or 1")
    return gold.astype(np.float64)


# Weighted statistics: W (b, n) counts of the pairs, arrays from evaluate_pairs -> (b,) values.


_LAST: dict[str, tuple] = {}  # score -> (W, its runs, gold, its figures) of the last W it was scored on


def _score_figures(W, arrays, name):
    """{"accuracy", "f1", "ap"}: (b,) the figures of one score on resamples W (resample_figures), kept
    for the next statistic asking for them on the same W (each score's figures are asked for alone
    and again by the max_* figures)."""
    run, gold = arrays[f"{name}.run"], arrays["gold"]
    held = _LAST.get(name)
    if held is not None and held[0] is W and held[1] is run and held[2] is gold:
        return held[3]
    figures = resample_figures(W, run, gold)
    _LAST[name] = (W, run, gold, figures)  # the references keep the ids from being reused
    return figures


def resample_figures(W, run, gold):
    """{"accuracy", "f1", "ap"}: (b,) best_accuracy's, best_f1's and average_precision's figures of
    the runs `run` (Runs.run) with labels `gold` on resample counts W, computed together from one
    counting, in torch (on the run's threads), with the same values: counts and their cumulative sums are
    integers (exact in any order), every other step is the same elementwise operation or first
    maximum, and AP's one sum of fractions is numpy's, as average_precision takes it."""
    W = np.ascontiguousarray(W, dtype=np.float64)
    b, size = len(W), int(run.max()) + 1
    cell = torch.from_numpy(2 * np.asarray(run, dtype=np.int64) + np.asarray(gold).astype(np.int64))
    both = torch.zeros((b, 2 * size), dtype=torch.float64).index_add_(1, cell, torch.from_numpy(W))
    positives, negatives = both[:, 1::2].contiguous(), both[:, 0::2].contiguous()
    present = (positives + negatives) > 0
    last = size - 1 - torch.argmax(present.flip(1).to(torch.uint8), dim=1)
    allowed = present & (torch.arange(size) < last[:, None])
    tp, fp = torch.cumsum(positives, dim=1), torch.cumsum(negatives, dim=1)
    wanted, unwanted = positives.sum(1, keepdim=True), negatives.sum(1, keepdim=True)
    total = wanted + unwanted
    accuracy = (tp + (unwanted - fp)) / torch.where(total > 0, total, 1.0)
    precision = tp / (tp + fp)
    recall = tp / wanted
    f1 = 2 * precision * recall / (precision + recall)
    figures = {
        "accuracy": _first_best_torch(accuracy, allowed),
        "f1": _first_best_torch(f1, allowed & (tp > 0)),
    }
    taken = tp + fp
    fraction = torch.where(taken > 0, tp / torch.where(taken > 0, taken, 1.0), 0.0)
    total_positive = tp[:, -1].numpy()
    share = (positives * fraction).numpy()
    figures["ap"] = share.sum(1) / np.where(total_positive > 0, total_positive, 1)
    return figures


def _first_best_torch(values, allowed):
    """_first_best(values, allowed, 0.0)'s best values, in torch (argmax: the first maximum)."""
    masked = torch.where(allowed, values, -torch.inf)
    best = masked.gather(1, torch.argmax(masked, dim=1, keepdim=True))[:, 0]
    return torch.where(best > 0.0, best, 0.0).numpy()


def _per_score(metric):
    def statistic(W, arrays, name):
        return _score_figures(W, arrays, name)[metric]

    return statistic


def _one(metric, name):
    return Statistic(lambda W, arrays: _per_score(metric)(W, arrays, name), stratified=False)


def _max(metric):
    return Statistic(
        lambda W, arrays: np.max([_per_score(metric)(W, arrays, name) for name in SCORES], axis=0), stratified=False
    )


# figure -> embeval.stats.Statistic (pairs resampled over all pairs)
STATISTICS = {
    **{f"max_{metric}": _max(metric) for metric in ("accuracy", "f1", "ap")},
    **{f"{name}_{metric}": _one(metric, name) for name in SCORES for metric in ("accuracy", "f1", "ap")},
}
