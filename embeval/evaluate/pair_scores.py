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
without a positive pair has AP 0, as scikit-learn gives. The fast path (`fast_figures`) sorts each
score once and reads every resample's thresholds from running sums of its counts in that order.
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


def resampled_figures(W, arrays, name):
    """{"accuracy", "f1", "ap"}: (b,) the figures of score `name` on resamples W, by their plain
    definition (best_accuracy, best_f1, average_precision on the runs' counts); taken once for the
    figures asking for them on the same W where the engine hands the arrays (stats.per_block)."""
    from embeval import stats

    def build():
        runs, gold = Runs(arrays[f"{name}.run"]), arrays["gold"]
        shared = counted(W, runs, gold)
        return {
            "accuracy": best_accuracy(W, runs, gold, shared)[0],
            "f1": best_f1(W, runs, gold, shared)[0],
            "ap": average_precision(W, runs, gold, shared),
        }

    return stats.per_block(W, arrays, ("plain pair figures", name), build)


class _Thresholds:
    """What the fast path derives once from a score's runs (most similar first) and the labels.

    Only the runs holding a positive pair (`positive runs`) change the true positives, and only those
    holding a negative one change the false positives; the counts of each are summed per run, and
    the running sums of the two are read where they are needed: AP at every positive run, the
    accuracy and F1 thresholds at the cuts followed by a run holding a negative pair (moving a cut
    over runs of positives only never lowers either figure) and at each resample's last cut."""

    def __init__(self, run, gold, n):
        import torch

        run, gold = np.asarray(run, dtype=np.int64), np.asarray(gold)
        order = np.argsort(run, kind="stable")
        positive = gold[order] == 1
        runs = int(run.max()) + 1 if len(run) else 0
        has_positive, has_negative = np.zeros(runs, dtype=bool), np.zeros(runs, dtype=bool)
        has_positive[run[order][positive]] = True
        has_negative[run[order][~positive]] = True
        positive_runs, negative_runs = np.flatnonzero(has_positive), np.flatnonzero(has_negative)
        self.sizes = len(positive_runs), len(negative_runs)
        self.tied = runs < len(run)
        tensor = torch.from_numpy
        # the items of each kind in order, after the counts' column n (always 0): summed, the counts'
        # running sums start at 0 (index j: the sum over the first j runs of the kind)
        self.items = tuple(tensor(np.r_[n, order[mask]]) for mask in (positive, ~positive))
        self.run_of_item = tuple(
            tensor(1 + np.searchsorted(ids, run[order][mask]))
            for ids, mask in ((positive_runs, positive), (negative_runs, ~positive))
        )
        self.fp_at_positive = tensor(np.searchsorted(negative_runs, positive_runs, side="right"))
        cuts = np.flatnonzero(has_negative[1:])  # cut after run r, run r + 1 holding a negative pair
        self.tp_at_cut = tensor(np.searchsorted(positive_runs, cuts, side="right"))
        self.fp_at_cut = tensor(np.searchsorted(negative_runs, cuts, side="right"))
        self.run_ids = tensor(positive_runs), tensor(negative_runs)


TAIL = 32  # runs of a kind searched from the end for a resample's last present one (then all of them)


def _running(torch, counts, items, run_of_item, size, tied):
    """((b, size + 1) the counts of one kind's items summed per run, from a leading 0, (b, size + 1)
    their running sums)."""
    picked = counts.index_select(1, items)
    if tied:
        picked = torch.zeros((len(counts), size + 1), dtype=counts.dtype).index_add_(1, run_of_item, picked[:, 1:])
    return picked, picked.cumsum(1)


def _last_present(torch, running, run_ids):
    """((b,) the run, among all runs, of the last run of this kind with a count in each resample (-1:
    none), (b,) that run's count): from the running sums (b, runs + 1), searched at the end first."""
    b, width = running.shape
    total = running[:, -1:]
    if width == 1:
        return torch.full((b,), -1, dtype=torch.int64), torch.zeros(b, dtype=running.dtype)
    start = max(0, width - 1 - TAIL)
    reached = (running[:, start:] < total).sum(1) + start  # the first index whose sum is the total
    if start > 0:
        missed = running[:, start] >= total[:, 0]  # reached at or before the tail: count over all
        if bool(missed.any()):
            reached[missed] = (running[missed] < total[missed]).sum(1)
    found = total[:, 0] > 0
    reached = reached.clamp(1, width - 1)
    rows = torch.arange(b)
    count = running[rows, reached] - running[rows, reached - 1]
    return torch.where(found, run_ids[reached - 1], -1), torch.where(found, count, 0.0)


def _best_cuts(torch, cut_tp, cut_fp, taken, wanted, total):
    """((b,) the fewest errors fp - tp, (b,) the best F1 2 tp / (P + tp + fp)) over the allowed cuts
    (0 < taken < total; inf and 0 where none). taken only grows along the cuts, so the cuts no
    resample leaves out form one middle stretch, taken without a mask; only the few cuts before it
    and after it are masked."""
    b, width = taken.shape
    if width == 0:
        return np.full(b, np.inf), np.zeros(b)
    first = torch.searchsorted(taken, torch.zeros((b, 1), dtype=taken.dtype), right=True)  # taking none before
    end = torch.searchsorted(taken, total)  # taking all from here
    low, high = int(first.max()), int(end.min())
    wrong = cut_fp - cut_tp
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.divide(cut_tp.numpy(), (taken + wanted).numpy(), dtype=np.float64)
    if low >= high:  # no stretch common to every resample: all masked
        low = high = 0
    errors = wrong[:, low:high].amin(1).numpy().astype(np.float64) if high > low else np.full(b, np.inf)
    best = f1[:, low:high].max(1, initial=0.0)
    for edge in (slice(0, low), slice(high, width)):  # the masked cuts
        index = torch.arange(width)[edge]
        if len(index) == 0:
            continue
        allowed = (index >= first) & (index < end)
        errors = np.minimum(errors, torch.where(allowed, wrong[:, edge], torch.inf).amin(1).numpy())
        best = np.maximum(best, np.where(allowed.numpy(), f1[:, edge], 0.0).max(1))
    return errors, 2 * np.where(np.isfinite(best), best, 0.0)


def fast_figures(counts, derived):
    """{"accuracy", "f1", "ap"}: (b,) numpy, the figures of resampled_figures from float32 counts
    (b, n + 1, the last column 0) in torch and a score's _Thresholds, the same values to rounding:
    counts and running sums are integers (exact in float32 below 2^24 pairs), ratios are float64."""
    import torch

    d = derived
    positives, tp = _running(torch, counts, d.items[0], d.run_of_item[0], d.sizes[0], d.tied)  # (b, runs + 1)
    negatives, fp = _running(torch, counts, d.items[1], d.run_of_item[1], d.sizes[1], d.tied)
    wanted, unwanted = tp[:, -1].numpy().astype(np.float64), fp[:, -1].numpy().astype(np.float64)
    total = wanted + unwanted
    # AP: each positive run's positives x the precision there (the products are exact integers)
    tp_run = tp[:, 1:]
    taken = fp.index_select(1, d.fp_at_positive).add_(tp_run).clamp_min_(1.0)  # 0 only where nothing gained
    gained = positives[:, 1:].mul(tp_run)
    precision_sum = np.divide(gained.numpy(), taken.numpy(), dtype=np.float64).sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ap = np.where(wanted > 0, precision_sum / np.where(wanted > 0, wanted, 1.0), 0.0)
    # the cuts followed by a run holding a negative pair (allowed: taking some pairs, not all)
    cut_tp, cut_fp = tp.index_select(1, d.tp_at_cut), fp.index_select(1, d.fp_at_cut)
    taken = cut_tp + cut_fp
    errors, f1 = _best_cuts(torch, cut_tp, cut_fp, taken, tp[:, -1:], tp[:, -1:] + fp[:, -1:])
    # each resample's last cut, before the last run holding a pair (allowed where it takes some)
    last_positive, positive_count = _last_present(torch, tp, d.run_ids[0])
    last_negative, negative_count = _last_present(torch, fp, d.run_ids[1])
    last = torch.maximum(last_positive, last_negative)
    last_tp = wanted - torch.where(last_positive == last, positive_count, 0.0).numpy()
    last_fp = unwanted - torch.where(last_negative == last, negative_count, 0.0).numpy()
    last_taken = last_tp + last_fp
    last_ok = last_taken > 0
    errors = np.where(last_ok, np.minimum(errors, last_fp - last_tp), errors)
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.maximum(f1, np.where(last_ok & (last_tp > 0), 2 * last_tp / (wanted + last_taken), 0.0))
        accuracy = (unwanted - errors) / np.where(total > 0, total, 1.0)
    accuracy = np.where(np.isfinite(accuracy) & (accuracy > 0.0), accuracy, 0.0)
    return {"accuracy": accuracy, "f1": np.where(f1 > 0.0, f1, 0.0), "ap": ap}


def _figures_fast(W, arrays, name):
    """resampled_figures' values by the fast path, computed once per block of resamples."""
    from embeval import stats

    def build():
        counts = stats.per_block(W, arrays, "counts32", lambda: _float32_counts(W))
        n = W.shape[1]
        derived = stats.derived(arrays, ("thresholds", name), lambda a: _Thresholds(a[f"{name}.run"], a["gold"], n))
        return fast_figures(counts, derived)

    return stats.per_block(W, arrays, ("pair figures", name), build)


def _float32_counts(W):
    """The block's counts as a float32 tensor (b, n + 1) with a last column of zeros (float64 for
    2^24 pairs or more, beyond float32's exact integers)."""
    import torch

    dtype = np.float32 if W.shape[1] < 1 << 24 else np.float64
    out = np.zeros((len(W), W.shape[1] + 1), dtype=dtype)
    out[:, :-1] = W
    return torch.from_numpy(out)


def _one(metric, name):
    return Statistic(
        lambda W, arrays: resampled_figures(W, arrays, name)[metric],
        stratified=False,
        fast=lambda W, arrays: _figures_fast(W, arrays, name)[metric],
    )


def _max(metric):
    return Statistic(
        lambda W, arrays: np.max([resampled_figures(W, arrays, name)[metric] for name in SCORES], axis=0),
        stratified=False,
        fast=lambda W, arrays: np.max([_figures_fast(W, arrays, name)[metric] for name in SCORES], axis=0),
    )


# figure -> embeval.stats.Statistic (pairs resampled over all pairs)
STATISTICS = {
    **{f"max_{metric}": _max(metric) for metric in ("accuracy", "f1", "ap")},
    **{f"{name}_{metric}": _one(metric, name) for name in SCORES for metric in ("accuracy", "f1", "ap")},
}
