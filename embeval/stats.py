"""Bootstrap confidence intervals and paired bootstrap tests over per-item predictions.

A bootstrap resample of n test items is represented by its counts: how many times each item was
drawn (a row of W, summing to n). Every statistic is written for weighted items, so one count
matrix serves every figure and both runs of a paired comparison, and no resampled copy of the
data is ever built. With all counts 1 each statistic is the plain figure on the test set.

Resampling is stratified where the figure is an average over strata: items are drawn within
each stratum (an STS subset, an outer fold of the inner k-fold protocol, a COCO fold), keeping
its size, so the figure's definition (mean of per-stratum figures) holds in every resample; a set
with a single stratum is resampled over all its items (the same resamples as its pooled figures).
Pooled figures resample over all items. Counts come from numpy's PCG64 seeded with the run's
seed and the task's name, so a task's resamples are the same in every run and in `compare`.

One engine draws the resamples, in blocks of many at once (`_blocks`: the same draws, in the same
order, as chunk after chunk of CHUNK_CELLS), and hands each block to every statistic. A Statistic
holds its plain definition (`function`) and may hold a fast one (`fast`) that gives the same values
(to 1e-12, tested on tie-heavy data) at a fraction of the cost: it derives what does not depend on
the resample once per prediction set (a sort, its runs of ties: `derived`) and shares what several
figures need within a block (`per_block`), so each resample costs a few passes over its counts.

Where the install built them (a C compiler: GCC or Clang), compiled kernels (embeval/_kernels.c) do
the hot loops: numpy's own PCG64 draws (checked against numpy once per process), the counts, the
scores sets' Spearman and Pearson sums and pair classification's figures straight from a block's
draws (`Statistic.from_draws`). Spearman's values, accuracies and F1s are the numpy path's bit for bit,
Pearson's and average precision's the same to about 1e-14 (their sums added in another order);
without the kernels numpy computes everything.
"""

import contextlib
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from embeval import threads
from embeval.memory import memory_limit

try:  # the compiled kernels (embeval/_kernels.c), built at install where a C compiler is: the same values
    from embeval import _kernels
except ImportError:  # pragma: no cover - an install without a C compiler: numpy computes them
    _kernels = None

LEVEL = 0.95
RESAMPLES = 1000
CHUNK_CELLS = 1 << 18  # resamples x items drawn per call of the generator (the order of the draws)
BLOCK_BYTES = 1 << 24  # float64 counts of a block of resamples handed to the statistics at once (16 MiB)


def rng_for(seed, task, strata):
    """The random stream of one task's resamples (per stratification), independent of the run."""
    return np.random.Generator(np.random.PCG64([int(seed), zlib.crc32(task.encode()), zlib.crc32(strata.encode())]))


COUNT_BINS = 1 << 16  # counts tallied at once (a few resamples' worth, to stay in cache)


def resample_counts(rng, n, size, groups=None):
    """(size, n) float64 counts of `size` bootstrap resamples of n items.

    groups: None (draw n items from all) or an int array (n,) of strata: each stratum's items are
    drawn from that stratum only, as many as it holds."""
    return counts_of(resample_draws(rng, n, size, groups), n)


def resample_draws(rng, n, size, groups=None):
    """(size, n) items drawn for `size` bootstrap resamples of n items (see resample_counts): the
    random stream's part of the work, to be done in its order; counts_of the rest, anywhere."""
    if groups is None:
        return _draw(rng, n, (size, n))
    groups = np.asarray(groups)
    parts = []
    for g in np.unique(groups):
        idx = np.flatnonzero(groups == g)
        parts.append(idx[_draw(rng, len(idx), (size, len(idx)))])
    return np.concatenate(parts, axis=1) if parts else np.empty((size, 0), dtype=np.int64)


def counts_of(draws, n, out=None):
    """(size, n) float64: how many times each of n items is in each row of draws (written into `out`,
    a float64 buffer of at least size * n, when given)."""
    size = len(draws)
    counts = np.empty((size, n)) if out is None else out[: size * n].reshape(size, n)
    kind = _draw_kind(draws)
    if _kernels is not None and kind is not None:
        _kernels.counts(np.ascontiguousarray(draws), kind, size, n, counts)
        return counts
    rows = max(1, COUNT_BINS // max(n, 1))
    offsets = (np.arange(rows, dtype=np.int64) * n)[:, None]
    for start in range(0, size, rows):
        part = draws[start : start + rows]
        flat = (part + offsets[: len(part)]).ravel()
        counts[start : start + len(part)] = np.bincount(flat, minlength=len(part) * n).reshape(len(part), n)
    return counts


def _draw_kind(draws):
    """The compiled kernels' name of the draws' integer type ("I": uint32, "q": int64; None: neither)."""
    return {np.dtype(np.uint32): "I", np.dtype(np.int64): "q"}.get(np.asarray(draws).dtype)


def _draw(rng, n, shape):
    """rng.integers(0, n, shape): drawn in uint32 below 2^32 items, the same draws as in int64 (numpy
    draws a range below 2^32 from 32-bit values either way), written in half the memory; by the
    compiled kernel where numpy's own draws are checked to be its (twice as fast: the draws are the
    one part of the resampling done in order)."""
    if 0 < n < 1 << 32 and _compiled_draws_agree() and type(rng.bit_generator) is np.random.PCG64:
        return _compiled_draw(rng, n, shape)
    return rng.integers(0, n, size=shape, dtype=np.uint32 if n <= 1 << 32 else np.int64)


_MASK64 = (1 << 64) - 1


def _compiled_draw(rng, n, shape):
    """rng.integers(0, n, shape, dtype=uint32) by the compiled kernel, which takes the PCG64 state from
    the generator and gives it back advanced as numpy would (n below 2^32)."""
    generator = rng.bit_generator
    out = np.empty(shape, dtype=np.uint32)
    with generator.lock:
        state = generator.state
        now, inc = state["state"]["state"], state["state"]["inc"]
        high, low, has, spare = _kernels.draw_pcg64(
            now >> 64, now & _MASK64, inc >> 64, inc & _MASK64, state["has_uint32"], state["uinteger"], n, out
        )
        state["state"] = {"state": (high << 64) | low, "inc": inc}
        state["has_uint32"], state["uinteger"] = has, spare
        generator.state = state
    return out


_DRAWS_AGREE: list[bool] = []


def _compiled_draws_agree():
    """Whether the compiled draws are numpy's, bit for bit, with this numpy (checked once per process on
    a few ranges and sizes: the draws and the generator's state after them)."""
    if not _DRAWS_AGREE:
        agree = _kernels is not None and hasattr(_kernels, "draw_pcg64")
        for n, sizes in ((1, (3, 5)), (5, (7,)), (9927, (3, 1001)), (3_000_000_001, (5, 3))):
            if not agree:
                break
            ours, numpys = (np.random.Generator(np.random.PCG64([7, n])) for _ in range(2))
            for size in (sizes, (1,), sizes):
                agree = agree and np.array_equal(
                    _compiled_draw(ours, n, size), numpys.integers(0, n, size=size, dtype=np.uint32)
                )
            agree = agree and ours.bit_generator.state == numpys.bit_generator.state
        _DRAWS_AGREE.append(bool(agree))
    return _DRAWS_AGREE[0]


def strata_of(arrays, stratified):
    """The strata of a stratified statistic's resamples; None (resample all items) when there are none,
    or only one: then the resamples, and so the figure's interval and tests, are the pooled figure's."""
    groups = arrays.get("group") if stratified else None
    if groups is None or len(groups) == 0 or np.all(groups == groups[0]):
        return None
    return groups


# What statistics derive once per prediction set, and share within a block of resamples.


class Prepared(dict):
    """A prediction set's arrays as the engine hands them to the statistics (a dict of its arrays):
    it keeps what they derive from the arrays once (shared by every block), and what they share
    within one block of resamples (each block's own: `for_block`)."""

    def __init__(self, arrays: Any, once: dict[Any, Any] | None = None, lock: Any = None) -> None:
        super().__init__(arrays)
        self.once: dict[Any, Any] = {} if once is None else once
        self.lock = lock or threading.Lock()
        self.block: dict[Any, Any] = {}
        self.block_of: Any = None

    def for_block(self):
        """The same set with a memo of its own for one block (blocks may be computed side by side)."""
        return Prepared(self, self.once, self.lock)


def derived(arrays, key, build):
    """build(arrays), computed once per prediction set the engine hands (a Prepared), else each call."""
    once = getattr(arrays, "once", None)
    if once is None:
        return build(arrays)
    with arrays.lock:
        if key not in once:
            once[key] = build(arrays)
        return once[key]


def per_block(W, arrays, key, build):
    """build(), computed once per block of resamples W for the prediction set (a Prepared), else each call."""
    if not isinstance(arrays, Prepared):
        return build()
    if arrays.block_of is not W:
        arrays.block.clear()
        arrays.block_of = W  # held: the block's id cannot be reused while it is the current one
    if key not in arrays.block:
        arrays.block[key] = build()
    return arrays.block[key]


def per_draws(drawn, arrays, key, build):
    """build(), computed once per block of draws for the prediction set (a Prepared), else each call:
    what several statistics' from_draws paths share (`drawn` held with it: a block's id cannot be reused
    while it is the current one)."""
    memo = arrays.block if isinstance(arrays, Prepared) else {}
    held = memo.get(key)
    if held is None or held[0] is not drawn:
        held = memo[key] = (drawn, build())
    return held[1]


def product(a, b):
    """a @ b in float64 by torch: its threads follow the run's fair share (the fast paths' products are
    thin, and numpy's BLAS pool, whose threads wait actively, costs more than it gives on a busy CPU)."""
    import torch

    left = torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64))
    return (left @ torch.from_numpy(np.ascontiguousarray(b, dtype=np.float64))).numpy()


# Weighted statistics: W (b, n) counts, arrays of the prediction set -> (b,) values. Each has its
# plain definition (the reference) and, where it pays, a fast one with the same values.


def accuracy(W, a):
    """Accuracy in percent; with strata ('group'), the mean of the strata's accuracies."""
    correct = (a["pred"] == a["gold"]).astype(np.float64)
    groups = a.get("group")
    if groups is None:
        return 100.0 * (W @ correct) / W.sum(1)
    values = [(W[:, groups == g] @ correct[groups == g]) / W[:, groups == g].sum(1) for g in np.unique(groups)]
    return 100.0 * np.mean(values, axis=0)


def _accuracy_fast(W, a):
    """accuracy: one product of the counts with each stratum's correct items and its items."""

    def columns(a):
        correct = (a["pred"] == a["gold"]).astype(np.float64)
        groups = a.get("group")
        if groups is None:
            return np.column_stack([correct, np.ones(len(correct))])
        member = (groups[:, None] == np.unique(groups)[None, :]).astype(np.float64)
        return np.hstack([member * correct[:, None], member])

    sums = product(W, derived(a, "accuracy", columns))
    half = sums.shape[1] // 2
    return 100.0 * np.mean(sums[:, :half] / sums[:, half:], axis=1)


def f1_positive(W, a):
    """F1 of class 1 in percent (0 when there is no positive prediction or gold item)."""
    pred, gold = a["pred"] == 1, a["gold"] == 1
    tp, fp, fn = (W @ (p & g).astype(np.float64) for p, g in ((pred, gold), (pred, ~gold), (~pred, gold)))
    denominator = 2 * tp + fp + fn
    return np.where(denominator > 0, 100.0 * 2 * tp / np.where(denominator > 0, denominator, 1), 0.0)


def _f1_positive_fast(W, a):
    def columns(a):
        pred, gold = a["pred"] == 1, a["gold"] == 1
        return np.column_stack([p & g for p, g in ((pred, gold), (pred, ~gold), (~pred, gold))]).astype(np.float64)

    tp, fp, fn = product(W, derived(a, "f1_positive", columns)).T
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


class _Sorted:
    """One variable of a set of items in ascending order, with its runs of equal values: `items`
    (the items in that order), `local` (their places in the set), `starts` (where each run begins;
    None without ties), `run` (the run of each position), `run_of_item` (the run of each of the
    set's items, in the set's order)."""

    def __init__(self, values, items):
        self.local = np.argsort(values[items], kind="stable")
        ordered = values[items][self.local]
        new = np.r_[True, ordered[1:] != ordered[:-1]] if len(ordered) else np.zeros(0, dtype=bool)
        self.items = np.ascontiguousarray(items[self.local], dtype=np.int64)
        self.fresh = new.astype(np.uint8)  # 1 where a run begins (the compiled kernel's runs)
        self.run = np.cumsum(new) - 1
        starts = np.flatnonzero(new)
        self.starts = starts if len(starts) < len(ordered) else None
        self.run_of_item = np.empty(len(items), dtype=np.int64)
        self.run_of_item[self.local] = self.run
        self.position = np.empty(len(items), dtype=np.int64)  # each of the set's items' place in the order
        self.position[self.local] = np.arange(len(items))
        # few ties (at least half as many runs as items): ranks item by item, the tied runs' mended
        self.by_item = self.starts is None or 2 * len(starts) >= len(ordered)
        self.tied = None
        if self.by_item and self.starts is not None:
            sizes = np.diff(np.r_[starts, len(ordered)])
            tied = np.flatnonzero(sizes > 1)
            self.tied = np.flatnonzero(sizes[self.run] > 1)  # the places in tied runs, in order
            self.tied_first = np.repeat(starts[tied], sizes[tied])  # the first place of each one's run
            self.tied_last = self.tied_first + np.repeat(sizes[tied], sizes[tied]) - 1
            self.tied_starts = np.r_[0, np.cumsum(sizes[tied])[:-1]]  # each tied run's start among them


class _RankPair:
    """What Spearman's fast path derives once for the items of a set (all, or one stratum): both
    sides sorted, and the run of y of each item in x's order."""

    def __init__(self, x, y, items):
        self.x, self.y = _Sorted(x, items), _Sorted(y, items)
        self.y_run_in_x = self.y.run_of_item[self.x.local]
        self.y_place_in_x = self.y.position[self.x.local]
        self.x_place_of_y = np.ascontiguousarray(self.x.position[self.y.local], dtype=np.int64)


def counts32(W, arrays):
    """The block's counts as float32 (exact: counts are integers), once per block of the set."""
    return per_block(W, arrays, "counts32", lambda: W.astype(np.float32))


def _running_sum(counts):
    """Running sums along the items of float32 counts (b, k) (torch's, vectorized; exact integers)."""
    import torch

    return torch.from_numpy(counts).cumsum(1).numpy()


def _ranks_of(counts, side):
    """(counts per item in the side's order (b, k), counts per run (b, runs), running sums of the
    runs' counts (b, runs)), float32 (exact integers)."""
    ordered = np.take(counts, side.items, axis=1)
    per_run = ordered if side.starts is None else np.add.reduceat(ordered, side.starts, axis=1)
    return ordered, per_run, _running_sum(per_run)


def _doubled(per_run, running, m):
    """2 x the centred mid-rank of each run, in place of the running sums: the mid-rank of a run is
    the count below it + (its count + 1) / 2, centred on the mean rank (m + 1) / 2; doubled, every
    value is an integer (exact in float32 below 2^23 items)."""
    running *= 2
    running -= per_run
    running -= m[:, None]
    return running


def _spread(per_run, doubled, cubes, m):
    """sum(c t^2) over a side's runs (c their counts, t their doubled centred mid-ranks): for a side
    without ties, (m^3 - sum(c^3)) / 3 from the sum of the cubed counts of the resample's items."""
    if cubes is not None:
        m = m.astype(np.float64)
        return (m * m * m - cubes) / 3
    return np.einsum("bk,bk,bk->b", per_run, doubled, doubled, dtype=np.float64)


def _item_ranks(counts, side):
    """(counts per item in the side's order (b, k), 2 x each item's centred mid-rank (b, k), the
    resample's count m (b,), sum(c^3) over the tied runs less sum(w^3) over their items (b,) or 0),
    for a side with few ties: the running sums of the items' counts give an item's doubled centred
    rank 2 s - w - m (s its running sum, w its count); an item of a tied run takes its run's,
    s_before + s_last - m, from the running sums around the run (float32, exact integers)."""
    ordered = np.take(counts, side.items, axis=1)
    running = _running_sum(ordered)
    m = running[:, -1].copy() if running.shape[1] else np.zeros(len(counts), dtype=counts.dtype)
    if side.tied is None:
        correction = 0.0
    else:
        before = np.take(running, np.maximum(side.tied_first - 1, 0), axis=1)
        before[:, side.tied_first == 0] = 0.0
        mended = before + np.take(running, side.tied_last, axis=1) - m[:, None]
        tied = np.take(ordered, side.tied, axis=1)
        runs = np.add.reduceat(tied, side.tied_starts, axis=1)
        correction = np.einsum("bk,bk,bk->b", runs, runs, runs, dtype=np.float64) - np.einsum(
            "bk,bk,bk->b", tied, tied, tied, dtype=np.float64
        )
    running *= 2
    running -= ordered
    running -= m[:, None]
    if side.tied is not None:
        running[:, side.tied] = mended
    return ordered, running, m, correction


def _spearman_of(counts, pair, cubes=None):
    """Spearman's rho of each resample (float32 counts (b, n)) from the doubled centred ranks:
    r = sum(w rx ry) / sqrt(sum(w rx^2) sum(w ry^2)), the weighted Pearson of the ranks (their
    weighted means are exactly the centre), the sums of exact integer products taken in float64.
    A side's spread is (m^3 - sum(c^3)) / 3 over its runs' counts c (from the cubed counts of the
    items where it has few ties). cubes: (b,) the sum of the cubed counts of the items (given for
    the whole set)."""
    if pair.x.by_item:
        Wx, rx, m, x_correction = _item_ranks(counts, pair.x)
    else:
        Wx, cx, tx = _ranks_of(counts, pair.x)
        m = tx[:, -1].copy() if tx.shape[1] else np.zeros(len(counts), dtype=counts.dtype)
        tx = _doubled(cx, tx, m)
        rx = np.take(tx, pair.x.run, axis=1)
    if cubes is None and (pair.x.by_item or pair.y.by_item):
        cubes = np.einsum("bk,bk,bk->b", Wx, Wx, Wx, dtype=np.float64)
    if pair.y.by_item:
        _, ry, _, y_correction = _item_ranks(counts, pair.y)
        ry = np.take(ry, pair.y_place_in_x, axis=1)
    else:
        _, cy, ty = _ranks_of(counts, pair.y)
        ty = _doubled(cy, ty, m)
        ry = np.take(ty, pair.y_run_in_x, axis=1)
    cross = np.einsum("bk,bk,bk->b", Wx, rx, ry, dtype=np.float64)
    vx = _spread(None, None, cubes + x_correction, m) if pair.x.by_item else _spread(cx, tx, None, m)
    vy = _spread(None, None, cubes + y_correction, m) if pair.y.by_item else _spread(cy, ty, None, m)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = cross / np.sqrt(vx * vy)
    return np.clip(np.where((vx > 0) & (vy > 0), r, np.nan), -1.0, 1.0)


COMPILED_ITEMS = 1 << 17  # the compiled Spearman's sums are exact integers in float64 up to this many items


def _spearman_compiled(W, pair):
    """_spearman_of by the compiled kernel (float64 counts (b, n), a set of at most COMPILED_ITEMS
    items): the same integer sums (in int64), so the same values bit for bit."""
    W = np.ascontiguousarray(W, dtype=np.float64)
    sums = np.empty((4, len(W)))
    _kernels.spearman_sums(W, len(W), W.shape[1], pair.x.items, pair.x.fresh, pair.y.fresh, pair.x_place_of_y, sums)
    return _rho(sums[0], sums[1], sums[2])


def _rho(cross, vx, vy):
    """Spearman's rho from its sums (as _spearman_of finishes them): NaN where a side is constant."""
    with np.errstate(invalid="ignore", divide="ignore"):
        r = cross / np.sqrt(vx * vy)
    return np.clip(np.where((vx > 0) & (vy > 0), r, np.nan), -1.0, 1.0)


def _compiled(W):
    return _kernels is not None and np.shape(W)[1] <= COMPILED_ITEMS


def _strata(a):
    """[(stratum, its items)] of a set, in stratum order; one stratum of all items without 'group'."""
    groups = a.get("group")
    n = len(a["gold"])
    if groups is None:
        return [(0, np.arange(n))]
    return [(g, np.flatnonzero(groups == g)) for g in np.unique(groups)]


def _spearman_fast(W, a, pooled=True):
    """Spearman's rho, pooled or per stratum ((strata, b)), each computed once per block."""

    def build():
        if pooled:
            pair = derived(a, "spearman.pooled", lambda a: _RankPair(a["system"], a["gold"], np.arange(len(a["gold"]))))
            if _compiled(W):
                return _spearman_compiled(W, pair)
            cubes = per_block(W, a, "cubes", lambda: np.einsum("bk,bk,bk->b", W, W, W))
            return _spearman_of(counts32(W, a), pair, cubes)
        pairs = derived(
            a, "spearman.strata", lambda a: [_RankPair(a["system"], a["gold"], items) for _, items in _strata(a)]
        )
        if len(pairs) == 1:
            return _spearman_fast(W, a, True)[None, :]
        if _compiled(W):
            return np.stack([_spearman_compiled(W, pair) for pair in pairs])
        return np.stack([_spearman_of(counts32(W, a), pair) for pair in pairs])

    return per_block(W, a, ("spearman", pooled), build)


def _pearson_columns(a, pooled):
    """(strata, design): each stratum's columns of Pearson's sums (n, 8 per stratum): its items' 1, x and
    y shifted by the stratum's means, their squares and product, x^2 and y^2 (0 outside the stratum)."""
    x, y = a["system"], a["gold"]
    strata = [(0, np.arange(len(x)))] if pooled else _strata(a)
    blocks = []
    for _, items in strata:
        member = np.zeros(len(x))
        member[items] = 1.0
        xs, ys = x - x[items].mean(), y - y[items].mean()
        blocks.append(
            member[:, None] * np.column_stack([np.ones(len(x)), xs, ys, xs * xs, ys * ys, xs * ys, x * x, y * y])
        )
    return strata, np.hstack(blocks)


def _pearson_of_sums(sums, strata, a, row_counts):
    """Pearson's r per stratum ((strata, b)) from each resample's sums of the strata's columns (b, 8 per
    stratum); a resample where a side is (nearly) constant, or its spread lost to rounding, by the plain
    definition on its counts (row_counts(row): (n,))."""
    sums = sums.reshape(len(sums), len(strata), 8).transpose(1, 0, 2)
    m, sx, sy, sxx, syy, sxy, scale_x, scale_y = np.moveaxis(sums, 2, 0)
    vx, vy, cov = sxx - sx * sx / m, syy - sy * sy / m, sxy - sx * sy / m
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.clip(cov / np.sqrt(vx * vy), -1.0, 1.0)
    doubtful = (vx <= 1e-9 * sxx) | (vy <= 1e-9 * syy) | (vx <= 1e-20 * scale_x) | (vy <= 1e-20 * scale_y)
    for s, row in zip(*np.nonzero(doubtful)):
        items = strata[s][1]
        r[s, row] = weighted_pearson(row_counts(row)[None, items], a["system"][items], a["gold"][items])[0]
    return r


def _pearson_fast(W, a, pooled=True):
    """Pearson's r, pooled or per stratum ((strata, b)), from one product of the counts with each
    stratum's sums (both sides shifted by their mean over the set: the spread is not lost to rounding).
    Resamples where a side is (nearly) constant are computed by the plain definition."""

    def build():
        strata, design = derived(a, ("pearson", pooled), lambda a: _pearson_columns(a, pooled))
        r = _pearson_of_sums(product(W, design), strata, a, lambda row: W[row])
        return r[0] if pooled else r

    return per_block(W, a, ("pearson", pooled), build)


def _scores_compiled(pair, design):
    """What the compiled kernel of a scores set needs (derived once, from the set's _RankPair and
    Pearson's pooled columns): each item's place in ascending x, where x's and y's runs begin, the place
    in x's order of each place in y's, Pearson's columns in x's order."""
    return (
        np.ascontiguousarray(pair.x.position, dtype=np.int64),
        pair.x.fresh,
        pair.y.fresh,
        pair.x_place_of_y,
        np.ascontiguousarray(design[pair.x.items]),
    )


def _scores_from_draws(drawn, a):
    """(Spearman's rho, Pearson's r) over all the set's items for each resample of a block of draws
    (b, n), counted and summed by the compiled kernel without the block's counts (once per block);
    None where it does not apply (no kernel, more than COMPILED_ITEMS items). Spearman's values are
    those of the counts' path bit for bit (the same integer sums); Pearson's sums are taken in x's
    order (the counts' path: a matrix product), the same to about 1e-15."""
    kind = _draw_kind(drawn)
    n = items(a)
    if _kernels is None or kind is None or not 0 < n <= COMPILED_ITEMS or drawn.shape[1] != n:
        return None
    return per_draws(drawn, a, "scores.from_draws", lambda: _scores_of_draws(drawn, kind, n, a))


def _scores_of_draws(drawn, kind, n, a):
    """_scores_from_draws' values, computed."""
    pair = derived(a, "spearman.pooled", lambda a: _RankPair(a["system"], a["gold"], np.arange(len(a["gold"]))))
    strata, columns = derived(a, ("pearson", True), lambda a: _pearson_columns(a, True))
    place, x_fresh, y_fresh, x_place_of_y, design = derived(
        a, "scores.compiled", lambda a: _scores_compiled(pair, columns)
    )
    sums = np.empty((len(drawn), 12))
    _kernels.scores_sums(
        np.ascontiguousarray(drawn), kind, len(drawn), n, place, x_fresh, y_fresh, x_place_of_y, design, sums
    )
    spearman = _rho(sums[:, 0], sums[:, 1], sums[:, 2])
    pearson = _pearson_of_sums(sums[:, 4:], strata, a, lambda row: counts_of(drawn[row : row + 1], n)[0])[0]
    return spearman, pearson


def _coefficient_from_draws(coefficient, weighting):
    """A correlation of a set over all its items (pooled, or the mean of a single stratum) from a block's
    draws by the compiled kernel (_scores_from_draws); None where the counts' path must compute it."""

    def statistic(drawn, a):
        if weighting != "pooled" and len(derived(a, "strata", _strata)) != 1:
            return None
        both = _scores_from_draws(drawn, a)
        if both is None:
            return None
        values = both[0 if coefficient == "spearman" else 1]
        return values if weighting == "pooled" else _aggregate(values[None, :], weighting, a)

    return statistic


def _coefficient_fast(coefficient, weighting):
    """The fast path of a correlation pooled over all items, or averaged over the strata."""
    fast = _spearman_fast if coefficient == "spearman" else _pearson_fast

    def statistic(W, a):
        if weighting == "pooled":
            return fast(W, a, True)
        return _aggregate(fast(W, a, False), weighting, a)

    return statistic


def _aggregate(values, weighting, a):
    """The mean ("mean") or size-weighted mean ("wmean") of per-stratum values (strata, b)."""
    if weighting == "mean":
        return values.mean(0)
    sizes = [len(items) for _, items in derived(a, "strata", _strata)]
    return np.average(values, axis=0, weights=sizes)


def experiment_counts(W, n_experiments):
    """(b, experiments) how often each of a protocol's experiments (MTEB's training draws, its
    clustering runs) is drawn in each resample: the experiments are resampled with the items, so the
    interval of their mean holds the spread between experiments too. The stream is fixed by the
    counts (a paired comparison draws the same experiments for both encoders): each run of
    CHUNK_CELLS // n resamples seeds its draws with its counts; a row of W that is all ones (the
    figure itself) keeps every experiment once."""
    W = np.asarray(W, dtype=np.float64)
    rows = max(1, CHUNK_CELLS // max(W.shape[1], 1))
    counts = np.empty((len(W), n_experiments))
    for start in range(0, len(W), rows):
        chunk = np.ascontiguousarray(W[start : start + rows])
        rng = np.random.default_rng(zlib.crc32(chunk))
        counts[start : start + rows] = rng.multinomial(
            n_experiments, np.full(n_experiments, 1 / n_experiments), size=len(chunk)
        )
    counts[np.all(W == 1, axis=1)] = 1.0
    return counts


def item_mean(W, a):
    """Mean of per-item values a["value"] (e.g. each query's nDCG@10: resampling queries) with item weights W."""
    return (W @ a["value"]) / W.sum(1)


def mean_of(name):
    """The Statistic of the mean over the resampled items of their values a[name] (e.g. each query's
    nDCG@10); its fast path takes the means of all the set's per-item float values with one product
    per block (a set's figures are asked for one after another on the same block)."""

    def plain(W, a):
        return (W @ a[name]) / W.sum(1)

    def columns(a):
        names = [k for k, v in a.items() if np.ndim(v) == 1 and np.asarray(v).dtype.kind == "f"]
        return names, np.column_stack([np.asarray(a[k], dtype=np.float64) for k in names] + [np.ones(items(a))])

    def fast(W, a):
        names, design = derived(a, "means", columns)
        if name not in names:
            return plain(W, a)
        sums = per_block(W, a, "means", lambda: product(W, design))
        return sums[:, names.index(name)] / sums[:, -1]

    return Statistic(plain, False, fast=fast)


@dataclass(frozen=True)
class Statistic:
    """A figure computed from a prediction set: its function (the plain definition), whether resamples
    are stratified, whether its interval is centred (`centred_interval`: for a figure whose resamples
    are shifted from it by construction, e.g. a v-measure, biased upwards on fewer distinct items), and
    its fast path (`fast`: the same values on the same resamples, to 1e-12; the engine's choice), and
    its path from a block's draws (`from_draws(draws, arrays)`: the same values again, without the
    block's counts; None where it does not apply, and the counts' path computes them)."""

    function: Any
    stratified: bool
    centred: bool = False
    fast: Any = None
    from_draws: Any = None

    @property
    def resampling(self) -> Any:
        """What the engine computes each block with: the fast path if there is one."""
        return self.fast or self.function


def _correlation(coefficient, weighting):
    """The Statistic of a correlation ("pearson", "spearman") pooled over all items ("pooled"), or the
    mean ("mean") or size-weighted mean ("wmean") of the strata's (resampled within the strata)."""
    plain = pearson if coefficient == "pearson" else spearman
    return Statistic(
        plain if weighting == "pooled" else _per_group(plain, weighting),
        weighting != "pooled",
        fast=_coefficient_fast(coefficient, weighting),
        from_draws=_coefficient_from_draws(coefficient, weighting),
    )


STATISTICS = {
    "labels": {
        "acc": Statistic(accuracy, True, fast=_accuracy_fast),
        "f1": Statistic(f1_positive, False, fast=_f1_positive_fast),
    },
    "scores": {
        "pearson": _correlation("pearson", "pooled"),
        "spearman": _correlation("spearman", "pooled"),
        **{f"{c}.{w}": _correlation(c, w) for w in ("pooled", "mean", "wmean") for c in ("pearson", "spearman")},
    },
    "values": {"mean": mean_of("value")},
}


def items(arrays):
    """The number of items of a prediction set (the first axis of each of its arrays)."""
    return len(next(iter(arrays.values())))


def observed(stat, arrays):
    """The figure on the test set itself (every item once), by the statistic's plain definition."""
    return float(stat.function(np.ones((1, items(arrays))), arrays)[0])


def _blocks(rng, n, groups, resamples, parts=1):
    """(first resample, draws) blocks of the resamples (counts_of(draws, n): their counts), each up to
    BLOCK_BYTES of counts and, where they can, at least `parts` of them: the same draws, in the same
    order, as the chunks of CHUNK_CELLS drawn one after another (a stratified draw takes its strata
    in turn within each chunk), so a block is whole chunks."""
    chunk = max(1, CHUNK_CELLS // max(n, 1))
    budget = BLOCK_BYTES
    if memory_limit():
        budget = max(1 << 16, min(budget, memory_limit() // 64))
    per = max(1, budget // (8 * max(n, 1) * chunk)) * chunk
    per = min(per, max(chunk, resamples // (parts * chunk) * chunk))
    for start in range(0, resamples, per):
        size = min(per, resamples - start)
        if groups is None:  # one call draws what the chunks' calls would, in the same order
            drawn = resample_draws(rng, n, size)
        else:
            drawn = np.concatenate(
                [resample_draws(rng, n, min(chunk, size - a), groups) for a in range(0, size, chunk)]
            )
        yield start, drawn


PARALLEL_CELLS = 1 << 20  # resamples x items x sets from which blocks are computed side by side
PARALLEL_BLOCKS = 4  # blocks at least, then (if the chunks allow), to share among the threads


def _distribution(stat_list, arrays_list, rng, n, groups, resamples, progress=None):
    """Bootstrap values of each statistic in stat_list for each prediction set in arrays_list, all on
    the same resamples (each block of counts drawn once): (statistics, sets, B). Blocks are drawn one
    after another (the random stream's order) and, for enough work, computed side by side on as
    many threads as the fair share of the CPU gives (measured between blocks; torch's operations on
    one thread each), at most that many blocks held at once. progress(resamples): called after each
    block with the resamples it computed (one call at a time)."""
    out = np.empty((len(stat_list), len(arrays_list), resamples))
    sets = [Prepared(arrays) for arrays in arrays_list]
    reporting = threading.Lock()

    buffers = threading.local()  # each thread's counts, reused block after block (no new pages to fault in)

    def counted(drawn):  # counted where the block is computed (side by side: on its thread)
        if getattr(buffers, "counts", None) is None or len(buffers.counts) < drawn.size:
            buffers.counts = np.empty(drawn.size)
        return counts_of(drawn, n, buffers.counts)

    def compute(start, drawn):
        W = None  # the block's counts, when a statistic needs them
        for i, arrays in enumerate(sets):
            block = arrays.for_block()
            for s, stat in enumerate(stat_list):
                values = None if stat.from_draws is None else stat.from_draws(drawn, block)
                if values is None:
                    W = counted(drawn) if W is None else W
                    values = stat.resampling(W, block)
                out[s, i, start : start + len(drawn)] = values
        if progress is not None:
            with reporting:
                progress(len(drawn))

    if n * resamples * len(sets) < PARALLEL_CELLS:
        with threads.fair_share() as check:
            for start, drawn in _blocks(rng, n, groups, resamples):
                check()
                compute(start, drawn)
        return out
    with _side_by_side() as run:
        for start, drawn in _blocks(rng, n, groups, resamples, PARALLEL_BLOCKS):
            run(compute, start, drawn)
    return out


@contextlib.contextmanager
def _side_by_side() -> Any:
    """run(f, *args): f(*args) on a pool of threads as large as the fair share of the CPU allows (at
    most torch's thread count), with torch on one thread each meanwhile; the calls are waited for
    when the block exits (their first error raised)."""
    import torch

    most = torch.get_num_threads()
    share = threads.FairShare(most)
    pending: list[Any] = []
    with threads.one_thread(), ThreadPoolExecutor(max(1, most)) as pool:

        def run(function, *args):
            allowed = share.share() or most
            while len(pending) >= allowed:
                pending.pop(0).result()
            pending.append(pool.submit(function, *args))

        try:
            yield run
        finally:
            for future in pending:
                future.result()


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
    return _distribution([stat], list(arrays_list), rng, n, groups, resamples)[0]


def bootstrap_ci(stat, arrays, seed, task, resamples=RESAMPLES, level=LEVEL):
    """{"value", "low", "high"}: the figure of Statistic `stat` and its percentile bootstrap interval
    (the centred interval for a `centred` statistic)."""
    return bootstrap_cis({"figure": stat}, arrays, seed, task, resamples, level)["figure"]


def bootstrap_cis(named, arrays, seed, task, resamples=RESAMPLES, level=LEVEL, progress=None):
    """{name: bootstrap_ci(stat, ...)} for the Statistics `named` of one prediction set, each the same
    as alone: the statistics resampled alike (over the strata or over all items) share each block.
    progress(resamples): after each block (once per kind of resampling: `draws(named, arrays)` of them)."""
    n = items(arrays)
    out = {}
    strata = {name: strata_of(arrays, stat.stratified) is not None for name, stat in named.items()}
    for stratified in sorted(set(strata.values())):
        names = [name for name in named if strata[name] == stratified]
        groups = strata_of(arrays, True) if stratified else None
        rng = rng_for(seed, task, "strata" if stratified else "all")
        values = _distribution([named[name] for name in names], [arrays], rng, n, groups, resamples, progress)
        whole, shared = np.ones((1, n)), Prepared(arrays)  # the figures' plain values share what they can
        for name, draws in zip(names, values[:, 0]):
            stat, value = named[name], float(named[name].function(whole, shared)[0])
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
