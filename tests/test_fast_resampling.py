"""The bootstrap's fast paths against the plain definitions, on the same seeded resamples.

Every statistic with a fast path (embeval.stats.Statistic.fast: sorted once, counts read as
multiplicities, shared within a block of resamples) must give the values of its plain definition
(Statistic.function, kept as the reference) to 1e-12, NaN where it is NaN, on tie-heavy data and on
degenerate resamples; and the engine's blocks must hold the same resamples as drawing chunk after
chunk of CHUNK_CELLS (the resamples of earlier versions, and of `compare`)."""

import numpy as np
import pytest

from embeval import stats
from embeval.evaluate import bitext, clustering, mteb_classification, mteb_multilabel, mteb_regression, pair_scores
from embeval.tasks.catalog import statistic as catalog_statistic

TOLERANCE = 1e-12


@pytest.fixture(params=["compiled", "numpy"])
def engine(request, monkeypatch):
    """The compiled kernels (embeval/_kernels.c, where the install built them) and the numpy paths (an
    install without a C compiler): each must give the plain definitions' values."""
    if request.param == "numpy":
        monkeypatch.setattr(stats, "_kernels", None)
        monkeypatch.setattr(stats, "_DRAWS_AGREE", [False])
    elif stats._kernels is None:
        pytest.skip("needs embeval's compiled kernels (built at install where a C compiler is)")
    return request.param


def plain(stat):
    """The statistic without its fast path: the engine computes its plain definition."""
    return stats.Statistic(stat.function, stat.stratified, stat.centred)


def assert_same(fast, reference, what):
    assert np.array_equal(np.isnan(fast), np.isnan(reference)), what
    finite = np.isfinite(reference)
    np.testing.assert_allclose(fast[finite], reference[finite], rtol=0, atol=TOLERANCE, err_msg=str(what))


def degenerate(W, n):
    """Resamples that draw one item n times, and every item once (the figure itself)."""
    W = W.copy()
    W[0] = 0.0
    W[0, n // 2] = n
    W[1] = 1.0
    return W


def check(named, arrays, resamples=60, task="fast", seeds=(0, 1)):
    """Each statistic's fast path equals its plain one: on the engine's resamples (values and interval)
    and on a block with degenerate resamples."""
    n = stats.items(arrays)
    for name, stat in named.items():
        assert stat.fast is not None, name
        for seed in seeds:
            fast = stats.resampled(stat, [arrays], seed, task, resamples)[0]
            reference = stats.resampled(plain(stat), [arrays], seed, task, resamples)[0]
            assert_same(fast, reference, (name, seed))
            ci = stats.bootstrap_ci(stat, arrays, seed, task, resamples)
            expected = stats.bootstrap_ci(plain(stat), arrays, seed, task, resamples)
            assert_same(
                np.array([ci["value"], ci["low"], ci["high"]]),
                np.array([expected[k] for k in ("value", "low", "high")]),
                name,
            )
        groups = stats.strata_of(arrays, stat.stratified)
        W = degenerate(stats.resample_counts(stats.rng_for(9, task, "x"), n, 12, groups), n) if groups is None else None
        if W is not None:
            with np.errstate(all="ignore"):
                assert_same(stat.fast(W, stats.Prepared(arrays).for_block()), stat.function(W, arrays), (name, "W"))


# The engine.


@pytest.mark.parametrize("n, groups", [(5, None), (3000, None), (3000, 3), (70_000, 2)])
def test_blocks_hold_the_resamples_of_chunk_after_chunk(n, groups, engine):
    """The counts the engine hands the statistics, block by block, are those of CHUNK_CELLS chunks
    drawn one after another (strata in turn within each chunk): earlier versions' resamples."""
    strata = None if groups is None else np.random.default_rng(0).integers(0, groups, n)
    resamples = 3 * max(1, stats.CHUNK_CELLS // n) + 5
    chunk = max(1, stats.CHUNK_CELLS // n)
    rng = stats.rng_for(4, "T", "all")
    chunks = [stats.resample_counts(rng, n, min(chunk, resamples - s), strata) for s in range(0, resamples, chunk)]
    for parts in (1, 4):
        found = stats._blocks(stats.rng_for(4, "T", "all"), n, strata, resamples, parts)
        blocks = [stats.counts_of(drawn, n) for _, drawn in found]
        np.testing.assert_array_equal(np.concatenate(blocks), np.concatenate(chunks))
        assert all(len(W) % chunk == 0 for W in blocks[:-1])  # whole chunks: experiment_counts' seeding holds
        assert len(blocks) >= min(parts, -(-resamples // chunk))


@pytest.mark.parametrize("n, groups", [(1, None), (7, None), (9_927, None), (70_000, None), (3000, 3)])
def test_counts_are_those_of_int64_draws(n, groups, engine):
    """resample_counts draws in uint32: the same draws as numpy's int64 ones, tallied one by one (the
    resamples of earlier versions)."""
    strata = None if groups is None else np.random.default_rng(1).integers(0, groups, n)
    rng = stats.rng_for(2, "T", "all")
    if strata is None:
        draws = rng.integers(0, n, size=(5, n))
    else:
        parts = [np.flatnonzero(strata == g) for g in np.unique(strata)]
        draws = np.concatenate([idx[rng.integers(0, len(idx), size=(5, len(idx)))] for idx in parts], axis=1)
    expected = np.stack([np.bincount(row, minlength=n) for row in draws]).astype(np.float64)
    np.testing.assert_array_equal(stats.resample_counts(stats.rng_for(2, "T", "all"), n, 5, strata), expected)


def test_experiment_draws_of_a_block_are_those_of_its_chunks():
    n = 5000
    chunk = stats.CHUNK_CELLS // n
    W = stats.resample_counts(stats.rng_for(1, "T", "all"), n, 3 * chunk + 4)
    together = stats.experiment_counts(W, 10)
    alone = np.concatenate([stats.experiment_counts(W[s : s + chunk], 10) for s in range(0, len(W), chunk)])
    np.testing.assert_array_equal(together, alone)


def test_blocks_computed_side_by_side_equal_one_after_another(monkeypatch, engine):
    """Blocks computed two at a time on two threads, whatever the test process's own thread count and
    the machine's load (the fair share left as large as the pool), give the values of one block after
    another."""
    import threading
    import time

    import torch

    from embeval import threads

    rng = np.random.default_rng(3)
    n = 2000
    arrays = {"gold": np.round(rng.uniform(0, 5, n), 0), "system": np.round(rng.normal(size=n), 1)}
    stat = stats.STATISTICS["scores"]["spearman"]
    alone = stats.resampled(stat, [arrays], 0, "T", 300)
    monkeypatch.setattr(stats, "PARALLEL_CELLS", 0)
    monkeypatch.setattr(stats, "BLOCK_BYTES", 8 * n * 20)  # blocks of one chunk each (131 resamples): 3
    monkeypatch.setattr(threads.FairShare, "share", lambda self: None)
    counts_of, from_draws, seen = stats.counts_of, stats._scores_from_draws, set()

    def computing():  # on the thread that computes the block
        seen.add(threading.get_ident())
        time.sleep(0.005)  # the next block is handed over while this one is computed

    def counted(draws, items, out=None):
        computing()
        return counts_of(draws, items, out)

    def summed(drawn, arrays):  # the compiled kernel's path: the counts are not built
        computing()
        return from_draws(drawn, arrays)

    monkeypatch.setattr(stats, "counts_of", counted)
    monkeypatch.setattr(stats, "_scores_from_draws", summed)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        side_by_side = stats.resampled(stat, [arrays], 0, "T", 300)
    finally:
        torch.set_num_threads(before)
    np.testing.assert_array_equal(side_by_side, alone)
    assert len(seen) == 2 and threading.get_ident() not in seen


def test_a_set_of_one_stratum_is_resampled_as_a_whole():
    """One stratum: its mean over strata is its pooled figure, on the same resamples (the same interval)."""
    rng = np.random.default_rng(2)
    n = 400
    arrays = {"gold": rng.uniform(0, 5, n), "system": rng.normal(size=n), "group": np.zeros(n, dtype=np.int64)}
    cis = stats.bootstrap_cis(
        {name: stats.STATISTICS["scores"][name] for name in ("spearman.pooled", "spearman.mean", "spearman.wmean")},
        arrays,
        seed=1,
        task="STS",
        resamples=200,
    )
    assert cis["spearman.pooled"] == cis["spearman.mean"] == cis["spearman.wmean"]


# Every statistic with a fast path, on tie-heavy data.


@pytest.mark.parametrize("n, groups", [(1, 1), (2, 1), (7, 2), (300, 1), (300, 3), (3000, 4)])
def test_scores_and_labels(n, groups, engine):
    rng = np.random.default_rng(n + groups)
    group = np.sort(rng.integers(0, groups, n))
    scores = {"gold": np.round(rng.uniform(0, 5, n), 0), "system": np.round(rng.normal(size=n), 1), "group": group}
    ungrouped = {k: v for k, v in scores.items() if k != "group"}
    check({name: stat for name, stat in stats.STATISTICS["scores"].items() if "." in name}, scores)
    check({name: stats.STATISTICS["scores"][name] for name in ("spearman", "pearson")}, ungrouped)
    labels = {"gold": rng.integers(0, 2, n), "pred": rng.integers(0, 2, n), "group": group}
    check(stats.STATISTICS["labels"], labels)
    check({"mean": stats.STATISTICS["values"]["mean"]}, {"value": np.round(rng.uniform(0, 1, n), 1)})


@pytest.mark.parametrize("n, groups", [(2, 1), (300, 1), (3000, 3)])
def test_correlations_with_few_ties(n, groups, engine):
    """Sides with few ties (ranked item by item, their tied runs mended): a few repeated values among
    distinct ones, on one side or both, a tied run at either end."""
    rng = np.random.default_rng(n + groups)
    few = rng.normal(size=n)
    few[rng.choice(n, size=n // 10)] = few[0]  # one long tied run
    few[rng.choice(n, size=n // 20)] = few.max()  # another, at the top
    pairs = np.round(rng.normal(size=n), 2)  # pairs and small runs
    group = np.sort(rng.integers(0, groups, n))
    for gold, system in ((few, pairs), (pairs, few), (few, rng.normal(size=n))):
        scores = {"gold": gold, "system": system, "group": group}
        check({name: stat for name, stat in stats.STATISTICS["scores"].items() if "." in name}, scores)
        check({name: stats.STATISTICS["scores"][name] for name in ("spearman",)}, {"gold": gold, "system": system})


@pytest.mark.parametrize("n, distinct", [(1, 1), (6, 2), (200, 5), (200, 200), (2500, 40)])
def test_pair_classification(n, distinct, engine):
    rng = np.random.default_rng(n + distinct)
    scores = {name: rng.integers(0, distinct, n).astype(np.float64) for name in pair_scores.SCORES}
    gold = (rng.random(n) < rng.uniform(0.05, 0.95)).astype(np.int64)
    check(pair_scores.STATISTICS, pair_scores.pair_arrays(scores, gold), seeds=(0,))


@pytest.mark.parametrize(
    "n, distinct, positives",
    [(3000, 3000, 0.01), (3000, 25, 0.01), (3000, 3000, 0.5), (2000, 8, 0.5), (500, 60, 0.0), (500, 60, 1.0)],
)
def test_pair_classification_rare_and_dense_positives(n, distinct, positives, engine):
    """The fast path reads only the cuts after runs holding a positive pair (and each resample's first
    present run): rare positives (long stretches of negatives), half positives (most runs), ties
    mixing both labels, and sets of one label only."""
    rng = np.random.default_rng(n + distinct)
    scores = {name: rng.integers(0, distinct, n).astype(np.float64) for name in pair_scores.SCORES}
    gold = (rng.random(n) < positives).astype(np.int64)
    check(pair_scores.STATISTICS, pair_scores.pair_arrays(scores, gold), seeds=(0,))


def test_pair_scores_that_share_their_runs_are_resampled_once(engine):
    """Scores with the same runs (the model's cosine and the cosine; on unit vectors the dot product
    and the Euclidean distance) are one computation per block, with the plain resampling's figures."""
    rng = np.random.default_rng(21)
    n = 300
    a, b = rng.normal(size=(n, 8)), rng.normal(size=(n, 8))
    a, b = a / np.linalg.norm(a, axis=1, keepdims=True), b / np.linalg.norm(b, axis=1, keepdims=True)
    arrays = pair_scores.pair_arrays(pair_scores.pair_scores(a, b), (rng.random(n) < 0.3).astype(np.int64))
    shared = {name: pair_scores._same_runs(arrays, name) for name in pair_scores.SCORES}
    same = {"similarity": "similarity", "cosine": "similarity", "manhattan": "manhattan"}
    assert shared == {**same, "euclidean": "similarity", "dot": "similarity"}
    check(pair_scores.STATISTICS, arrays, seeds=(0,))


def test_pair_figures_of_a_resample_whose_first_run_is_far_down():
    """A resample whose first present run is beyond the first FIRST_RUNS runs: its figures are taken
    plainly (the same values)."""
    n = 400
    rng = np.random.default_rng(8)
    scores = {name: rng.normal(size=n) for name in pair_scores.SCORES}
    arrays = pair_scores.pair_arrays(scores, (rng.random(n) < 0.3).astype(np.int64))
    W = stats.resample_counts(stats.rng_for(0, "far", "all"), n, 6)
    W[2] = 0.0
    W[2, arrays["cosine.run"] > pair_scores.FIRST_RUNS + 5] = 1.0  # the top runs left out
    derived = pair_scores._Thresholds(arrays["cosine.run"], arrays["gold"], n)
    assert "missing" in pair_scores.fast_figures(pair_scores._float32_counts(W), derived)
    for name, stat in pair_scores.STATISTICS.items():
        assert_same(stat.fast(W, stats.Prepared(arrays).for_block()), stat.function(W, arrays), name)
    if stats._kernels is None:
        return
    # the same from the draws (the compiled kernels): a resample of the lower runs' pairs only
    lower = np.flatnonzero(arrays["cosine.run"] > pair_scores.FIRST_RUNS + 5)
    drawn = stats.resample_draws(stats.rng_for(0, "far", "all"), n, 6)
    drawn[2] = lower[np.arange(n) % len(lower)]
    W = stats.counts_of(drawn, n)
    for name, stat in pair_scores.STATISTICS.items():
        assert_same(stat.from_draws(drawn, stats.Prepared(arrays).for_block()), stat.function(W, arrays), name)


@pytest.mark.parametrize("folds", [False, True])
def test_mteb_classification(folds):
    rng = np.random.default_rng(5)
    n = 600
    if folds:
        arrays = {"gold": rng.integers(0, 4, n), "pred": rng.integers(0, 4, (n, 1)), "group": rng.integers(0, 5, n)}
    else:
        arrays = {"gold": rng.integers(0, 3, n), "pred": rng.integers(0, 3, (n, 10))}
    check(mteb_classification.STATISTICS, arrays, resamples=3 * (stats.CHUNK_CELLS // n) + 7, seeds=(0,))


def test_clustering():
    rng = np.random.default_rng(6)
    k, experiments = 120, 4
    gold = np.repeat(rng.integers(0, 5, (k, 1)), experiments, axis=1)
    gold[:5, 1] = -1  # documents without a label at that level
    count = np.where(gold >= 0, rng.poisson(1.5, (k, experiments)), 0).astype(np.float64)
    pred = np.where(count > 0, rng.integers(0, 5, (k, experiments)), -1)
    check({"v": clustering.STATISTICS["bootstrap.v_measure"]}, {"gold": gold, "count": count, "pred": pred}, seeds=(0,))
    n = 300
    sets = {"gold": rng.integers(0, 4, n), "pred": rng.integers(0, 4, n), "group": np.sort(rng.integers(0, 3, n))}
    check({"v": clustering.STATISTICS["sets.v_measure"]}, sets, seeds=(0,))


def test_bitext_multilabel_regression_and_means():
    rng = np.random.default_rng(7)
    n = 400
    gold = np.arange(n)
    mined = {"gold": gold, "pred": np.where(rng.random(n) < 0.6, gold, rng.integers(0, 40, n))}
    check(catalog_statistic_set("mteb-bitext"), mined, seeds=(0,))
    assert bitext.Classes(mined["gold"], mined["pred"]).classes > 0
    multilabel = {
        "gold": (rng.random((n, 5)) < 0.3).astype(np.int8),
        "pred": (rng.random((n, 5, 4)) < 0.3).astype(np.int8),
    }
    check(mteb_multilabel.STATISTICS, multilabel, seeds=(0,))
    values = np.round(rng.normal(10, 2, n), 0).astype(np.float32)
    predictions = np.round(rng.normal(10, 2, (n, 3)), 1).astype(np.float32)
    predictions[:, 2] = predictions[:, 0]  # two equal experiments
    regression = {"gold": values, "pred": predictions}
    check({k: v for k, v in mteb_regression.STATISTICS.items() if v.fast is not None}, regression, seeds=(0,))
    per_query = {f"f{i}": np.round(rng.uniform(0, 1, n), 1) for i in range(3)}
    check({name: stats.mean_of(name) for name in per_query}, per_query, seeds=(0,))
    ranks = {
        "i2t": rng.integers(0, 12, n),
        "t2i": rng.integers(0, 12, (n, 5)),
        "group": np.repeat(np.arange(4), n // 4),
    }
    check(catalog_statistic_set("ranks"), ranks, seeds=(0,))


def catalog_statistic_set(set_kind):
    from embeval.tasks import catalog

    for name in catalog.KINDS:
        own = catalog.kind(name).statistics
        if set_kind in own:
            return own[set_kind]
    raise KeyError(set_kind)


# Prediction sets whose statistics' plain definitions already apply each resample's counts as item
# multiplicities, with nothing sorted or recomputed per resample (a fast path would be the same code):
# IFIR's levels and InstructIR's query groups (one product W @ values per block), and parallel bitext
# mining (each pair's figures as sums of the resampled rows' weights, once per block).
LINEAR_ALREADY = {
    ("instruction-retrieval", "instruction-levels"),
    ("instruction-retrieval", "query-groups"),
    ("bitext-mining", "mteb-bitext-parallel"),
}


def test_every_kind_statistic_has_a_fast_path_or_says_why_not():
    """Every statistic a kind registers resamples by a fast path, except Kendall's tau (regression):
    its plain definition already sorts each resample in O(n log n); and those of LINEAR_ALREADY."""
    from embeval.tasks import catalog

    missing = []
    for name in catalog.KINDS:
        for set_kind, figures in catalog.kind(name).statistics.items():
            if (name, set_kind) in LINEAR_ALREADY:
                continue
            for figure, stat in figures.items():
                if stat.resampling is stat.function and figure != "kendalltau":
                    missing.append((name, set_kind, figure))
    for set_kind, figures in stats.STATISTICS.items():
        missing += [("stats", set_kind, f) for f, s in figures.items() if s.fast is None]
    assert catalog_statistic("scores", "spearman.pooled").fast is not None
    assert missing == []
