"""Bootstrap confidence intervals and paired bootstrap tests over per-item predictions.

A bootstrap resample of n test items is represented by its counts: how many times each item was
drawn (a row of W, summing to n). Every statistic is written for weighted items, so one count
matrix serves every figure and both runs of a paired comparison, and no resampled copy of the
data is ever built. With all counts 1 each statistic is the plain figure on the test set.

Resampling is stratified where the figure is an average over strata: items are drawn within
each stratum (an STS subset, an outer fold of the inner k-fold protocol, a COCO fold), keeping
its size, so the figure's definition (mean of per-stratum figures) holds in every resample.
Pooled figures resample over all items. Counts come from numpy's PCG64 seeded with the run's
seed and the task's name, so a task's resamples are the same in every run and in `compare`.
"""

import zlib
from dataclasses import dataclass

import numpy as np

from embeval import threads

LEVEL = 0.95
RESAMPLES = 1000
CHUNK_CELLS = 1 << 18  # resamples x items held at once (small enough to stay in cache)


def rng_for(seed, task, strata):
    """The random stream of one task's resamples (per stratification), independent of the run."""
    return np.random.Generator(np.random.PCG64([int(seed), zlib.crc32(task.encode()), zlib.crc32(strata.encode())]))


def resample_counts(rng, n, size, groups=None):
    """(size, n) float64 counts of `size` bootstrap resamples of n items.

    groups: None (draw n items from all) or an int array (n,) of strata: each stratum's items are
    drawn from that stratum only, as many as it holds."""
    counts = np.zeros(size * n, dtype=np.float64)
    offsets = (np.arange(size) * n)[:, None]
    if groups is None:
        members = [np.arange(n)]
    else:
        groups = np.asarray(groups)
        members = [np.flatnonzero(groups == g) for g in np.unique(groups)]
    for idx in members:
        draws = idx[rng.integers(0, len(idx), size=(size, len(idx)))]
        counts += np.bincount((draws + offsets).ravel(), minlength=size * n)
    counts = counts.reshape(size, n)
    return counts


def strata_of(arrays, stratified):
    """The strata of a stratified statistic's resamples; None (resample all items) when there are none,
    or only one: then the resamples, and so the figure's interval and tests, are the pooled figure's."""
    groups = arrays.get("group") if stratified else None
    if groups is None or len(groups) == 0 or np.all(groups == groups[0]):
        return None
    return groups


# Weighted statistics: W (b, n) counts, arrays of the prediction set -> (b,) values.


def accuracy(W, a):
    """Accuracy in percent; with strata ('group'), the mean of the strata's accuracies."""
    correct = (a["pred"] == a["gold"]).astype(np.float64)
    groups = a.get("group")
    if groups is None:
        return 100.0 * (W @ correct) / W.sum(1)
    values = [(W[:, groups == g] @ correct[groups == g]) / W[:, groups == g].sum(1) for g in np.unique(groups)]
    return 100.0 * np.mean(values, axis=0)


def f1_positive(W, a):
    """F1 of class 1 in percent (0 when there is no positive prediction or gold item)."""
    pred, gold = a["pred"] == 1, a["gold"] == 1
    tp, fp, fn = (W @ (p & g).astype(np.float64) for p, g in ((pred, gold), (pred, ~gold), (~pred, gold)))
    denominator = 2 * tp + fp + fn
    return np.where(denominator > 0, 100.0 * 2 * tp / np.where(denominator > 0, denominator, 1), 0.0)


def weighted_pearson(W, x, y):
    """Pearson r of (x, y) with item weights W (b, n); NaN where either side is constant
    (a relative spread below 1e-12) in a resample."""
    total = W.sum(1, keepdims=True)
    dx = x - (W * x).sum(1, keepdims=True) / total
    dy = y - (W * y).sum(1, keepdims=True) / total
    cov, vx, vy = ((W * u * v).sum(1) for u, v in ((dx, dy), (dx, dx), (dy, dy)))
    scale_x = (W * x * x).sum(1) if x.ndim == 2 else W @ (x * x)
    scale_y = (W * y * y).sum(1) if y.ndim == 2 else W @ (y * y)
    constant = (vx <= 1e-24 * scale_x) | (vy <= 1e-24 * scale_y)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = cov / np.sqrt(vx * vy)
    return np.clip(np.where(constant, np.nan, r), -1.0, 1.0)


def weighted_ranks(W, x):
    """Average ranks (1-based, ties averaged) of x in each weighted resample, as if every item were
    repeated as many times as its count: (b, n); the ranks of items with count 0 are unused."""
    order = np.argsort(x, kind="stable")
    xs = x[order]
    starts = np.r_[0, np.flatnonzero(np.diff(xs) != 0) + 1]
    tie_group = np.cumsum(np.r_[0, (np.diff(xs) != 0).astype(np.int64)])
    per_group = np.add.reduceat(W[:, order], starts, axis=1)
    below = np.cumsum(per_group, axis=1) - per_group
    ranks = np.empty_like(W)
    ranks[:, order] = (below + (per_group + 1) / 2)[:, tie_group]
    return ranks


def pearson(W, a):
    return weighted_pearson(W, a["system"], a["gold"])


def spearman(W, a):
    return weighted_pearson(W, weighted_ranks(W, a["system"]), weighted_ranks(W, a["gold"]))


def _per_group(coefficient, weighting):
    def statistic(W, a):
        groups = a["group"]
        values, sizes = [], []
        for g in np.unique(groups):
            member = groups == g
            values.append(coefficient(W[:, member], {k: v[member] for k, v in a.items() if k != "group"}))
            sizes.append(member.sum())
        values = np.array(values)
        return values.mean(0) if weighting == "mean" else np.average(values, axis=0, weights=sizes)

    return statistic


def experiment_counts(W, n_experiments):
    """(b, experiments) how often each of a protocol's experiments (MTEB's training draws, its
    clustering runs) is drawn in each resample: the experiments are resampled with the items, so the
    interval of their mean holds the spread between experiments too. The stream is fixed by W (a
    paired comparison draws the same experiments for both encoders); a row of W that is all ones (the
    figure itself) keeps every experiment once."""
    W = np.ascontiguousarray(W, dtype=np.float64)
    rng = np.random.default_rng(zlib.crc32(W.tobytes()))
    counts = rng.multinomial(n_experiments, np.full(n_experiments, 1 / n_experiments), size=len(W))
    counts = counts.astype(np.float64)
    counts[np.all(W == 1, axis=1)] = 1.0
    return counts


def item_mean(W, a):
    """Mean of per-item values a["value"] (e.g. each query's nDCG@10: resampling queries) with item weights W."""
    return (W @ a["value"]) / W.sum(1)


@dataclass(frozen=True)
class Statistic:
    """A figure computed from a prediction set: its function, whether resamples are stratified, and
    whether its interval is centred (`centred_interval`: for a figure whose resamples are shifted from
    it by construction, e.g. a v-measure, biased upwards on fewer distinct items)."""

    function: object
    stratified: bool
    centred: bool = False


STATISTICS = {
    "labels": {"acc": Statistic(accuracy, True), "f1": Statistic(f1_positive, False)},
    "scores": {
        "pearson": Statistic(pearson, False),
        "spearman": Statistic(spearman, False),
        "pearson.pooled": Statistic(pearson, False),
        "spearman.pooled": Statistic(spearman, False),
        "pearson.mean": Statistic(_per_group(pearson, "mean"), True),
        "spearman.mean": Statistic(_per_group(spearman, "mean"), True),
        "pearson.wmean": Statistic(_per_group(pearson, "wmean"), True),
        "spearman.wmean": Statistic(_per_group(spearman, "wmean"), True),
    },
    "values": {"mean": Statistic(item_mean, False)},
}


def items(arrays):
    """The number of items of a prediction set (the first axis of each of its arrays)."""
    return len(next(iter(arrays.values())))


def observed(stat, arrays):
    """The figure on the test set itself (every item once)."""
    return float(stat.function(np.ones((1, items(arrays))), arrays)[0])


def _distribution(stat_list, arrays_list, counts_source, resamples, n, progress=None):
    """Bootstrap values of each statistic in stat_list for each prediction set in arrays_list, all on
    the same resamples (each chunk of counts drawn once): (statistics, sets, B). The chunks follow
    the fair share of the CPU (statistics computed in torch take the CPUs other work leaves idle).
    progress(resamples): called after each chunk with the resamples it computed."""
    out = np.empty((len(stat_list), len(arrays_list), resamples))
    size = max(1, CHUNK_CELLS // max(n, 1))
    with threads.fair_share() as check:
        for start in range(0, resamples, size):
            check()
            W = counts_source(min(size, resamples - start))
            for s, stat in enumerate(stat_list):
                for i, arrays in enumerate(arrays_list):
                    out[s, i, start : start + len(W)] = stat.function(W, arrays)
            if progress is not None:
                progress(len(W))
    return out


def _counts_source(rng, n, groups):
    return lambda size: resample_counts(rng, n, size, groups)


def interval(values, level=LEVEL):
    """Percentile interval of bootstrap values (NaN resamples, e.g. a constant side, are left out)."""
    tail = 100 * (1 - level) / 2
    finite = values[np.isfinite(values)]
    if len(finite) == 0:
        return float("nan"), float("nan")
    return float(np.percentile(finite, tail)), float(np.percentile(finite, 100 - tail))


def centred_interval(value, values, level=LEVEL):
    """The interval of the figure's expected value from bootstrap values that a bias shifts from it:
    the resamples' spread about their own mean, reflected about the figure (the basic bootstrap
    interval with the bootstrap's bias taken out): value - (q_high - mean), value + (mean - q_low)."""
    finite = values[np.isfinite(values)]
    if len(finite) == 0:
        return float("nan"), float("nan")
    low, high = interval(finite - finite.mean(), level)
    return float(value - high), float(value - low)


def draws(named, arrays):
    """How many times bootstrap_cis draws its resamples for these statistics: once per kind of
    resampling (stratified, or over all items) among them."""
    return len({strata_of(arrays, stat.stratified) is None for stat in named.values()})


def resampled(stat, arrays_list, seed, task, resamples=RESAMPLES):
    """(k, B): the bootstrap values of `stat` for each of the k prediction sets of the same test items,
    on the task's own resamples (the ones its interval and its paired comparison use)."""
    groups = strata_of(arrays_list[0], stat.stratified)
    n = items(arrays_list[0])
    rng = rng_for(seed, task, "strata" if groups is not None else "all")
    return _distribution([stat], list(arrays_list), _counts_source(rng, n, groups), resamples, n)[0]


def bootstrap_ci(stat, arrays, seed, task, resamples=RESAMPLES, level=LEVEL):
    """{"value", "low", "high"}: the figure of Statistic `stat` and its percentile bootstrap interval
    (the centred interval for a `centred` statistic)."""
    return bootstrap_cis({"figure": stat}, arrays, seed, task, resamples, level)["figure"]


def bootstrap_cis(named, arrays, seed, task, resamples=RESAMPLES, level=LEVEL, progress=None):
    """{name: bootstrap_ci(stat, ...)} for the Statistics `named` of one prediction set, each the same
    as alone: the statistics resampled alike (stratified or not) share each chunk of resamples.
    progress(resamples): after each chunk (once per kind of resampling: `draws(named, arrays)` of them)."""
    n = items(arrays)
    out = {}
    for stratified in sorted({stat.stratified for stat in named.values()}):
        names = [name for name, stat in named.items() if stat.stratified == stratified]
        groups = strata_of(arrays, stratified)
        rng = rng_for(seed, task, "strata" if groups is not None else "all")
        source = _counts_source(rng, n, groups)
        values = _distribution([named[name] for name in names], [arrays], source, resamples, n, progress)
        for name, draws in zip(names, values[:, 0]):
            stat, value = named[name], observed(named[name], arrays)
            centred = getattr(stat, "centred", False)
            low, high = centred_interval(value, draws, level) if centred else interval(draws, level)
            out[name] = {"value": value, "low": low, "high": high}
    return {name: out[name] for name in named}


def paired_test(stat, arrays_a, arrays_b, seed, task, resamples=RESAMPLES, level=LEVEL):
    """B minus A on the same resampled test items: the difference, its percentile interval and the
    two-sided p-value of 'no difference'.

    p = (1 + #{|d* - d| >= |d|}) / (B + 1), where d is the observed difference and d* its
    bootstrap values: the resampled differences, centred on d, stand for the differences a
    population without a real difference would produce (Efron & Tibshirani 1993, ch. 16)."""
    values = resampled(stat, [arrays_a, arrays_b], seed, task, resamples)
    a, b = observed(stat, arrays_a), observed(stat, arrays_b)
    return paired_summary(a, b, values[0], values[1], level)


def paired_summary(a, b, values_a, values_b, level=LEVEL):
    """B minus A from the observed figures and their bootstrap values on the same resamples: the
    difference, its percentile interval and the two-sided p-value (see paired_test)."""
    diff = b - a
    deltas = np.asarray(values_b) - np.asarray(values_a)
    finite = deltas[np.isfinite(deltas)]
    low, high = interval(deltas, level)
    extreme = np.sum(np.abs(finite - diff) >= abs(diff) - 1e-12 * max(1.0, abs(diff)))
    p = float((1 + extreme) / (1 + len(finite))) if len(finite) else float("nan")
    return {"a": a, "b": b, "diff": diff, "low": low, "high": high, "p": p}


def holm(pvalues):
    """Holm-Bonferroni adjusted p-values (same order as given; NaN stays NaN)."""
    p = np.asarray(pvalues, dtype=np.float64)
    ok = np.flatnonzero(np.isfinite(p))
    adjusted = np.full(len(p), np.nan)
    order = ok[np.argsort(p[ok], kind="stable")]
    m, running = len(order), 0.0
    for i, idx in enumerate(order):
        running = max(running, min(1.0, (m - i) * p[idx]))
        adjusted[idx] = running
    return adjusted.tolist()
