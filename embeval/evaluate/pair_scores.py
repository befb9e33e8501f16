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
score once and sums a block of resamples' counts with one sparse product per score: per run holding a
positive pair, its positives and the negatives since the previous such run; the best cuts can only
follow such a run (or the resample's first present run), so every figure of every resample is read
from the running sums of those few columns. Where the compiled kernels are built, the same sums
are counted from a block's draws and the figures read from them in C (`_figures_from_draws`: no
counts, no product; the average precision's sum added in order, the same to about 1e-14).
"""

import functools
import warnings

import numpy as np
import torch

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
    from sklearn.metrics.pairwise import paired_cosine_distances, paired_euclidean_distances, paired_manhattan_distances

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


FIRST_RUNS = 32  # runs searched from the top for a resample's first present one (then all of them, plainly)


class _Thresholds:
    """What the fast path derives once from a score's runs (most similar first) and the labels: one
    sparse matrix whose product with a block's counts gives every sum the figures take.

    Only a run holding a positive pair (a `positive run`) can end the best cut: moving a cut back over
    runs of negatives only keeps the true positives and drops false ones, so the cut after the last
    positive run before it is at least as good (or, without a true positive yet, the cut after the
    resample's first present run). The matrix's rows: each positive run's positives; the negatives
    between consecutive positive runs (a `stretch`: those before the first, ..., those after the last;
    a run's negatives belong with its positives); all the pairs of each of the first FIRST_RUNS runs."""

    def __init__(self, run, gold, n):
        run, gold = np.asarray(run, dtype=np.int64), np.asarray(gold)
        runs = int(run.max()) + 1 if len(run) else 0
        positive = gold == 1
        has_positive = np.zeros(runs, dtype=bool)
        has_positive[run[positive]] = True
        self.count = k = int(has_positive.sum())
        self.first = min(FIRST_RUNS, runs)
        self.first_negative_only = ~has_positive[: self.first]
        self.all_first = self.first == runs
        # each pair's row: its positive run's, or its stretch's (both: the positive runs before its run);
        # then the first runs' rows
        before = (np.cumsum(has_positive) - has_positive)[run]
        row = np.where(positive, before, k + before)
        early = np.flatnonzero(run < self.first)
        rows = np.r_[row, 2 * k + 1 + run[early]]
        self.n, self.height = n, 2 * k + 1 + self.first
        # the matrix row by row: each row's pairs (members[pointers[r]:pointers[r + 1]], in pair order)
        self.pointers = np.r_[0, np.cumsum(np.bincount(rows, minlength=self.height))].astype(np.int64)
        self.members = np.r_[np.arange(len(run)), early][np.argsort(rows, kind="stable")].astype(np.int32)

    @functools.cached_property
    def matrix(self):
        """A float32 torch CSR matrix (height, n), ones where a row holds a pair: its product with a
        block's counts (n, b) sums each row's counts."""
        with warnings.catch_warnings():  # torch's note that its sparse tensors are in beta
            warnings.simplefilter("ignore", UserWarning)
            return torch.sparse_csr_tensor(
                torch.from_numpy(self.pointers),
                torch.from_numpy(self.members.astype(np.int64)),
                torch.ones(len(self.members), dtype=torch.float32),
                size=(self.height, self.n),
                check_invariants=True,
            )


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


def _transposed(x, step=2048):
    """x.T as a C-contiguous array, copied a band of rows at a time (a tall, narrow x: numpy's copy is
    slower in one go)."""
    out = np.empty(x.shape[::-1], dtype=x.dtype)
    for start in range(0, len(x), step):
        out[:, start : start + step] = x[start : start + step].T
    return out


def fast_figures(counts, derived):
    """{"accuracy", "f1", "ap"}: (b,) numpy, the figures of resampled_figures from the transposed float32
    counts (n, b) in torch (_float32_counts) and a score's _Thresholds, the same values to rounding:
    sums of counts are integers (exact in float32 below 2^24 pairs), ratios and products are float64.
    With "missing": the resamples whose first present run is beyond the first FIRST_RUNS (their
    accuracy is left to the caller)."""
    sums = torch.from_numpy(_transposed((derived.matrix.to(counts.dtype) @ counts).numpy()))  # (b, rows)
    return figures_of_sums(sums, derived)


def figures_of_sums(sums, derived):
    """fast_figures' values from each resample's sums in the _Thresholds' rows (b, rows), a float32 tensor
    of whole numbers (from the counts' product, or counted from the draws by the compiled kernel)."""
    d, k = derived, derived.count
    b = len(sums)
    tp = sums[:, :k].cumsum(1)  # after each positive run
    fp_all = sums[:, k : 2 * k + 1].cumsum(1)
    fp = fp_all[:, :k]
    wanted = tp[:, -1:] if k else torch.zeros((b, 1), dtype=sums.dtype)
    total = wanted + fp_all[:, -1:]
    taken = tp + fp
    # AP: each positive run's positives x the precision after it (taken > 0 where positives are)
    precision = np.divide(tp.numpy(), taken.clamp_min(1.0).numpy(), dtype=np.float64)
    gained = np.einsum("bk,bk->b", sums[:, :k].numpy(), precision, dtype=np.float64)
    positives = wanted[:, 0].numpy().astype(np.float64)
    ap = np.where(positives > 0, gained / np.where(positives > 0, positives, 1.0), 0.0)
    errors, f1 = _best_cuts(torch, tp, fp, taken, wanted, total)
    # without a true positive: the cut after the first present run, if it holds negatives only
    first = sums[:, 2 * k + 1 :].numpy()
    present = first > 0
    found = present.any(1)
    at = np.argmax(present, axis=1) if first.shape[1] else np.zeros(b, dtype=np.int64)
    unwanted, total = fp_all[:, -1].numpy().astype(np.float64), total[:, 0].numpy().astype(np.float64)
    if first.shape[1]:
        count = first[np.arange(b), at].astype(np.float64)
        extra = found & d.first_negative_only[at] & (count < total)
        errors = np.where(extra, np.minimum(errors, count), errors)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = (unwanted - errors) / np.where(total > 0, total, 1.0)
    accuracy = np.where(np.isfinite(accuracy) & (accuracy > 0.0), accuracy, 0.0)
    out = {"accuracy": accuracy, "f1": f1, "ap": ap}
    if not d.all_first and not found.all():
        out["missing"] = ~found
    return out


def _same_runs(arrays, name):
    """The first of SCORES whose runs are `name`'s, number for number: its figures are `name`'s (the
    figures depend on the runs and the labels only). The model's cosine similarity and the cosine
    share their runs; on unit vectors the dot product and the Euclidean distance often do too."""
    from embeval import stats

    def find(a):
        mine = a[f"{name}.run"]
        return next(other for other in SCORES if np.array_equal(a[f"{other}.run"], mine))

    return stats.derived(arrays, ("same runs", name), find)


def _figures_fast(W, arrays, name):
    """resampled_figures' values by the fast path, computed once per block of resamples (and once for
    the scores that share their runs)."""
    from embeval import stats

    name = _same_runs(arrays, name)

    def build():
        counts = stats.per_block(W, arrays, "counts32.T", lambda: _float32_counts(W))
        n = W.shape[1]
        derived = stats.derived(arrays, ("thresholds", name), lambda a: _Thresholds(a[f"{name}.run"], a["gold"], n))
        out = fast_figures(counts, derived)
        missing = out.pop("missing", None)
        if missing is not None:  # a first present run beyond the first runs (almost never): plainly
            rows = np.flatnonzero(missing)
            plain = resampled_figures(W[rows], {k: arrays[k] for k in (f"{name}.run", "gold")}, name)
            for metric, values in plain.items():
                out[metric][rows] = values
        return out

    return stats.per_block(W, arrays, ("pair figures", name), build)


def _figures_from_draws(drawn, arrays, name):
    """resampled_figures' values for a block's draws (b, n), every score's sums counted at once from the
    draws by the compiled kernel (no counts, no product); None where it does not apply (no kernel,
    2^24 pairs or more: float32's exact whole numbers)."""
    from embeval import stats

    n = stats.items(arrays)
    kind = stats._draw_kind(drawn)
    if stats._kernels is None or kind is None or not 0 < n < 1 << 24 or drawn.shape[1] != n:
        return None
    figures = stats.per_draws(drawn, arrays, "pair figures", lambda: _all_figures_from_draws(drawn, kind, arrays, n))
    return figures[_same_runs(arrays, name)]


def _all_figures_from_draws(drawn, kind, arrays, n):
    """{score: figures} of the scores with runs of their own (_same_runs), from one kernel call."""
    from embeval import stats

    names = list(dict.fromkeys(_same_runs(arrays, name) for name in SCORES))
    found = [
        stats.derived(arrays, ("thresholds", name), lambda a, name=name: _Thresholds(a[f"{name}.run"], a["gold"], n))
        for name in names
    ]
    pointers, members = stats.derived(arrays, "pair rows", lambda a: _rows_of_all(found))
    heights = np.array([d.height for d in found], dtype=np.int64)
    b = len(drawn)
    out = np.empty(int(b * heights.sum()), dtype=np.float32)
    stats._kernels.row_sums(np.ascontiguousarray(drawn), kind, b, n, pointers, members, len(names), heights, out)
    figures, start = {}, 0
    for name, d in zip(names, found):
        values = np.empty((b, 4))
        negative_only = np.ascontiguousarray(d.first_negative_only, dtype=np.uint8)
        sums = out[start : start + b * d.height]
        stats._kernels.pair_figures(sums, b, d.height, d.count, d.first, negative_only, values)
        start += b * d.height
        result = {"accuracy": values[:, 0], "f1": values[:, 1], "ap": values[:, 2]}
        if not d.all_first and not values[:, 3].all():  # a first present run beyond the first runs
            rows = np.flatnonzero(values[:, 3] == 0)  # (almost never): plainly
            W = stats.counts_of(drawn[rows], n)
            plain = resampled_figures(W, {k: arrays[k] for k in (f"{name}.run", "gold")}, name)
            for metric, plainly in plain.items():
                result[metric][rows] = plainly
        figures[name] = result
    return figures


def _rows_of_all(found):
    """(pointers, members) of several _Thresholds' rows, one after another (pointers into the members of all)."""
    starts = np.cumsum([0] + [len(d.members) for d in found])
    return np.concatenate([d.pointers + start for d, start in zip(found, starts)]), np.concatenate(
        [d.members for d in found]
    )


def _float32_counts(W):
    """The block's counts, transposed, as a float32 tensor (n, b) (float64 for 2^24 pairs or more,
    beyond float32's exact integers)."""
    import torch

    dtype = np.float32 if W.shape[1] < 1 << 24 else np.float64
    return torch.from_numpy(np.ascontiguousarray(W.T, dtype=dtype))


def _one(metric, name):
    def from_draws(drawn, arrays):
        figures = _figures_from_draws(drawn, arrays, name)
        return None if figures is None else figures[metric]

    return Statistic(
        lambda W, arrays: resampled_figures(W, arrays, name)[metric],
        stratified=False,
        fast=lambda W, arrays: _figures_fast(W, arrays, name)[metric],
        from_draws=from_draws,
    )


def _max(metric):
    def from_draws(drawn, arrays):
        found = [_figures_from_draws(drawn, arrays, name) for name in SCORES]
        return None if found[0] is None else np.max([figures[metric] for figures in found], axis=0)

    return Statistic(
        lambda W, arrays: np.max([resampled_figures(W, arrays, name)[metric] for name in SCORES], axis=0),
        stratified=False,
        fast=lambda W, arrays: np.max([_figures_fast(W, arrays, name)[metric] for name in SCORES], axis=0),
        from_draws=from_draws,
    )


# figure -> embeval.stats.Statistic (pairs resampled over all pairs)
STATISTICS = {
    **{f"max_{metric}": _max(metric) for metric in ("accuracy", "f1", "ap")},
    **{f"{name}_{metric}": _one(metric, name) for name in SCORES for metric in ("accuracy", "f1", "ap")},
}
