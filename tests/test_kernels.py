"""The compiled kernels of the bootstrap (embeval/_kernels.c) give the numpy paths' values.

They are built at install where a C compiler is (`pip install` of the project); without them embeval
computes the same figures in numpy. Here both are run on the same resamples: the draws (numpy's own
PCG64 draws, and the generator's state after them) and the counts bit for bit, and whole intervals on
tie-heavy data, pooled and per stratum: Spearman's bit for bit, Pearson's (its sums added in another
order) to PEARSON_AGREEMENT."""

import numpy as np
import pytest

from embeval import stats

needs_kernels = pytest.mark.skipif(
    stats._kernels is None, reason="needs embeval's compiled kernels (built at install where a C compiler is)"
)
pytestmark = needs_kernels


@pytest.fixture
def numpy_only(monkeypatch):
    """Run the numpy paths: as an install without a C compiler does."""

    def use_numpy():
        monkeypatch.setattr(stats, "_kernels", None)
        monkeypatch.setattr(stats, "_DRAWS_AGREE", [False])

    return use_numpy


@pytest.mark.parametrize("n", [1, 2, 3, 7, 9927, 2**31 + 11, 2**32 - 1])
def test_compiled_draws_are_numpys(n):
    """The same integers as Generator.integers(0, n, dtype=uint32), and the generator left in the same
    state (the next draws, of any kind, are the same), whatever half-used 64-bit value it held."""
    assert stats._compiled_draws_agree()
    ours, numpys = (np.random.Generator(np.random.PCG64([3, n])) for _ in range(2))
    for shape in ((5,), (3, 7), (1,), (0,), (26, 257), (2, 3)):
        np.testing.assert_array_equal(
            stats._compiled_draw(ours, n, shape), numpys.integers(0, n, size=shape, dtype=np.uint32)
        )
        assert ours.bit_generator.state == numpys.bit_generator.state
    assert ours.random() == numpys.random()
    assert ours.integers(0, 10**12) == numpys.integers(0, 10**12)


def test_draws_of_no_items_are_numpys():
    """An empty set's resamples: numpy's empty draws (the compiled kernel needs at least one item)."""
    ours, numpys = (np.random.Generator(np.random.PCG64(8)) for _ in range(2))
    np.testing.assert_array_equal(stats._draw(ours, 0, (3, 0)), numpys.integers(0, 0, size=(3, 0), dtype=np.uint32))
    assert ours.bit_generator.state == numpys.bit_generator.state


def test_draws_fall_back_to_numpy_where_the_kernel_disagrees(monkeypatch):
    """A kernel whose draws are not numpy's (another numpy's algorithm) is checked once and not used."""

    def wrong(*args):
        out = args[-1]
        np.frombuffer(out, dtype=np.uint32)[:] = 0
        return args[0], args[1], args[4], args[5]

    kernels = type("Kernels", (), {"draw_pcg64": staticmethod(wrong)})
    monkeypatch.setattr(stats, "_kernels", kernels)
    monkeypatch.setattr(stats, "_DRAWS_AGREE", [])
    assert not stats._compiled_draws_agree()
    rng, reference = stats.rng_for(1, "T", "all"), stats.rng_for(1, "T", "all")
    np.testing.assert_array_equal(stats._draw(rng, 50, (4, 50)), reference.integers(0, 50, (4, 50), dtype=np.uint32))


@pytest.mark.parametrize("dtype", [np.uint32, np.int64])
def test_compiled_counts_are_bincounts(dtype):
    rng = np.random.default_rng(0)
    for n, rows in ((1, 3), (5, 1), (257, 40), (9927, 3)):
        draws = rng.integers(0, n, size=(rows, n)).astype(dtype)
        expected = np.stack([np.bincount(row, minlength=n) for row in draws]).astype(np.float64)
        np.testing.assert_array_equal(stats.counts_of(draws, n), expected)
        buffer = np.full(rows * n + 7, np.nan)
        np.testing.assert_array_equal(stats.counts_of(draws, n, buffer), expected)


def test_kernels_refuse_what_does_not_fit():
    """Sizes that do not match, and draws or items outside the set, are refused (nothing is written
    outside the buffers)."""
    kernels = stats._kernels
    out = np.empty((2, 5))
    with pytest.raises(ValueError):
        kernels.counts(np.zeros((2, 4), dtype=np.uint32), "I", 2, 5, out)
    with pytest.raises(ValueError, match="outside"):
        kernels.counts(np.full((2, 5), 5, dtype=np.uint32), "I", 2, 5, out)
    with pytest.raises(ValueError, match="outside"):
        kernels.counts(np.full((2, 5), -1, dtype=np.int64), "q", 2, 5, out)
    items, fresh = np.arange(5, dtype=np.int64), np.ones(5, dtype=np.uint8)
    sums = np.empty((4, 2))
    with pytest.raises(ValueError, match="outside"):
        kernels.spearman_sums(out, 2, 5, items + 1, fresh, fresh, items, sums)
    with pytest.raises(ValueError):
        kernels.spearman_sums(out, 2, 5, items, fresh, fresh, items, np.empty((3, 2)))
    big = np.zeros((1, (1 << 17) + 1))
    with pytest.raises(ValueError, match="2\\^17"):
        kernels.spearman_sums(big, 1, big.shape[1], items, fresh, fresh, items, np.empty((4, 1)))
    with pytest.raises(ValueError):
        kernels.draw_pcg64(0, 1, 0, 1, 0, 0, 0, np.empty(3, dtype=np.uint32))
    design, twelve, zeros = np.zeros((5, 8)), np.empty((2, 12)), np.zeros((2, 5), dtype=np.uint32)
    with pytest.raises(ValueError, match="outside"):
        kernels.scores_sums(zeros + 5, "I", 2, 5, items, fresh, fresh, items, design, twelve)
    with pytest.raises(ValueError, match="outside"):
        kernels.scores_sums(zeros, "I", 2, 5, items + 1, fresh, fresh, items, design, twelve)
    with pytest.raises(ValueError):
        kernels.scores_sums(zeros, "I", 2, 5, items, fresh, fresh, items, design, sums)


def test_pair_kernels_refuse_what_does_not_fit():
    """row_sums and pair_figures refuse pointers, members, heights and sizes that do not fit."""
    kernels = stats._kernels
    draws = np.zeros((2, 5), dtype=np.uint32)
    pointers, members, heights = np.array([0, 2, 5], dtype=np.int64), np.arange(5, dtype=np.int32), np.array([2])
    out = np.empty(4, dtype=np.float32)
    drawn = np.array([[0, 1, 2, 3, 4], [4, 4, 4, 4, 0]], dtype=np.uint32)
    kernels.row_sums(drawn, "I", 2, 5, pointers, members, 1, heights, out)
    np.testing.assert_array_equal(out, [2, 3, 1, 4])  # rows {0, 1} and {2, 3, 4}, each resample's counts
    with pytest.raises(ValueError, match="outside"):
        kernels.row_sums(draws + 5, "I", 2, 5, pointers, members, 1, heights, out)
    with pytest.raises(ValueError, match="outside"):
        kernels.row_sums(draws, "I", 2, 5, pointers, members + 5, 1, heights, out)
    with pytest.raises(ValueError, match="outside"):
        kernels.row_sums(draws, "I", 2, 5, np.array([0, 4, 2], dtype=np.int64), members, 1, heights, out)
    with pytest.raises(ValueError):
        kernels.row_sums(draws, "I", 2, 5, pointers, members, 1, heights, np.empty(3, dtype=np.float32))
    with pytest.raises(ValueError):
        kernels.row_sums(draws, "I", 2, 5, pointers, members, 2, heights, out)
    sums, figures = np.zeros((2, 4), dtype=np.float32), np.empty((2, 4))
    kernels.pair_figures(sums, 2, 4, 1, 1, np.ones(1, dtype=np.uint8), figures)
    with pytest.raises(ValueError, match="height"):
        kernels.pair_figures(sums, 2, 4, 1, 2, np.ones(2, dtype=np.uint8), figures)
    with pytest.raises(ValueError):
        kernels.pair_figures(sums, 2, 4, 1, 1, np.ones(1, dtype=np.uint8), np.empty((1, 4)))


def test_pair_intervals_need_no_counts(monkeypatch):
    """A pair classification set is resampled from the draws alone: each score's row sums are counted
    from them and its figures computed by the kernels; the block's counts are never built."""
    from embeval.evaluate import pair_scores

    def refused(*args, **kwargs):
        raise AssertionError("counts built")

    monkeypatch.setattr(stats, "counts_of", refused)
    rng = np.random.default_rng(6)
    n = 2000
    scores = {name: rng.integers(0, 300, n).astype(np.float64) for name in pair_scores.SCORES}
    arrays = pair_scores.pair_arrays(scores, (rng.random(n) < 0.2).astype(np.int64))
    cis = stats.bootstrap_cis(pair_scores.STATISTICS, arrays, 0, "pairs", 200)
    assert all(ci["low"] <= ci["value"] <= ci["high"] for ci in cis.values())


def test_scores_intervals_need_no_counts(monkeypatch):
    """A scores set over all its items is resampled from the draws alone (the kernel counts them as it
    sums): the block's counts are never built."""

    def refused(*args, **kwargs):
        raise AssertionError("counts built")

    monkeypatch.setattr(stats, "counts_of", refused)
    rng = np.random.default_rng(4)
    arrays = {"gold": np.round(rng.uniform(0, 5, 500), 1), "system": rng.normal(size=500), "group": np.zeros(500)}
    named = {name: stat for name, stat in stats.STATISTICS["scores"].items() if "." in name}
    cis = stats.bootstrap_cis(named, arrays, 0, "STS", 200)
    assert all(ci["low"] < ci["value"] < ci["high"] for ci in cis.values())


def sides(rng, n):
    """Tie-heavy, few-tie and tie-free sides, and a constant one."""
    return {
        "heavy": np.round(rng.uniform(0, 5, n), 0),
        "few": np.where(rng.random(n) < 0.1, 0.5, rng.normal(size=n)),
        "none": rng.normal(size=n),
        "constant": np.full(n, 2.0),
    }


PEARSON_AGREEMENT = 1e-14  # the largest disagreement measured on these cases: 2.7e-15


@pytest.mark.parametrize("n, groups", [(1, 1), (2, 1), (9, 2), (300, 1), (3000, 3), (20_000, 1)])
def test_intervals_are_the_numpy_paths(n, groups, numpy_only):
    """Every scores figure's resampled values (draws, counts, Spearman's and Pearson's sums compiled)
    equal those of the numpy paths, pooled and per stratum, for every pairing of tied and untied sides:
    Spearman's bit for bit, Pearson's to PEARSON_AGREEMENT."""
    rng = np.random.default_rng(n + groups)
    group = np.sort(rng.integers(0, groups, n))
    named = {name: stat for name, stat in stats.STATISTICS["scores"].items() if "." in name}
    cases = []
    for x_name, x in sides(rng, n).items():
        for y_name, y in sides(rng, n).items():
            if n >= 3000 and "constant" in (x_name, y_name):
                continue
            cases.append(((x_name, y_name), {"gold": y, "system": x, "group": group}))

    def values():
        out = []
        for _, arrays in cases:
            rng_ = stats.rng_for(5, "K", "all")
            out.append(stats._distribution(list(named.values()), [arrays], rng_, n, None, 120))
            out.append(stats._distribution(list(named.values()), [arrays], rng_, n, stats.strata_of(arrays, True), 40))
        return out

    compiled = values()
    numpy_only()
    assert stats._kernels is None
    spearman = [i for i, name in enumerate(named) if name.startswith("spearman")]
    pearson = [i for i, name in enumerate(named) if name.startswith("pearson")]
    for (case, _), a, b in zip([c for c in cases for _ in (0, 1)], compiled, values()):
        np.testing.assert_array_equal(a[spearman], b[spearman], err_msg=str(case))
        # Pearson's sums are added in another order (x's, not the matrix product's): the same to 1e-15
        np.testing.assert_array_equal(np.isnan(a[pearson]), np.isnan(b[pearson]), err_msg=str(case))
        np.testing.assert_allclose(a[pearson], b[pearson], rtol=0, atol=PEARSON_AGREEMENT, err_msg=str(case))


AP_AGREEMENT = 2e-14  # the largest disagreement measured on these cases: 7.4e-15


@pytest.mark.parametrize(
    "n, distinct, positives", [(5, 3, 0.3), (300, 50, 0.9), (3000, 3000, 0.01), (20_000, 100, 0.3)]
)
def test_pair_figures_are_the_numpy_paths(n, distinct, positives):
    """Every pair classification figure from the draws (row sums and figures compiled) equals the numpy
    path's on the same resamples (counts, a sparse product, cumulative sums): the best accuracy and F1
    bit for bit, the average precision (its sum added in order, not einsum's) to AP_AGREEMENT."""
    from embeval.evaluate import pair_scores

    rng = np.random.default_rng(n + distinct)
    scores = {name: rng.integers(0, distinct, n).astype(np.float64) for name in pair_scores.SCORES}
    arrays = pair_scores.pair_arrays(scores, (rng.random(n) < positives).astype(np.int64))
    drawn = stats.resample_draws(stats.rng_for(0, "pairs", "all"), n, 50)
    W = stats.counts_of(drawn, n)
    for name, stat in pair_scores.STATISTICS.items():
        compiled = stat.from_draws(drawn, stats.Prepared(arrays).for_block())
        numpy_path = stat.fast(W, stats.Prepared(arrays).for_block())
        if name.endswith("_ap"):
            np.testing.assert_allclose(compiled, numpy_path, rtol=0, atol=AP_AGREEMENT, err_msg=name)
        else:
            np.testing.assert_array_equal(compiled, numpy_path, err_msg=name)
