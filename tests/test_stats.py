"""The bootstrap: weighted statistics against direct computation, intervals against known
distributions, and the paired test's false-positive rate on encoders that are equally good."""

import numpy as np
import pytest
from scipy.stats import norm, pearsonr, spearmanr
from sklearn.metrics import f1_score

from embeval import stats
from embeval.kinds import caption_ranking
from embeval.tasks.catalog import statistic

Z = norm.ppf(0.975)


def resample(arrays, idx):
    return {k: v[idx] for k, v in arrays.items()}


def counts_of(idx, n):
    return np.bincount(idx, minlength=n)[None].astype(np.float64)


@pytest.mark.parametrize("seed", range(5))
def test_weighted_statistics_equal_the_statistics_of_the_resampled_items(seed):
    rng = np.random.default_rng(seed)
    n = 60
    labels = {"gold": rng.integers(0, 3, n), "pred": rng.integers(0, 3, n)}
    binary = {"gold": rng.integers(0, 2, n), "pred": rng.integers(0, 2, n)}
    scores = {"gold": np.round(rng.uniform(0, 5, n), 1), "system": np.round(rng.normal(size=n), 1)}  # ties
    idx = rng.integers(0, n, n)
    W = counts_of(idx, n)
    assert stats.accuracy(W, labels)[0] == pytest.approx(100 * np.mean(labels["pred"][idx] == labels["gold"][idx]))
    assert stats.f1_positive(W, binary)[0] == pytest.approx(100 * f1_score(binary["gold"][idx], binary["pred"][idx]))
    r = resample(scores, idx)
    assert stats.pearson(W, scores)[0] == pytest.approx(pearsonr(r["system"], r["gold"])[0], abs=1e-12)
    assert stats.spearman(W, scores)[0] == pytest.approx(spearmanr(r["system"], r["gold"])[0], abs=1e-12)


def test_stratified_statistics_average_the_strata():
    rng = np.random.default_rng(1)
    group = np.repeat([0, 1, 2], [20, 35, 15])
    n = len(group)
    scores = {"gold": rng.uniform(0, 5, n), "system": rng.normal(size=n), "group": group}
    labels = {"gold": rng.integers(0, 2, n), "pred": rng.integers(0, 2, n), "group": group}
    per = [spearmanr(scores["system"][group == g], scores["gold"][group == g])[0] for g in range(3)]
    ones = np.ones((1, n))
    assert stats.STATISTICS["scores"]["spearman.mean"].function(ones, scores)[0] == pytest.approx(np.mean(per))
    assert stats.STATISTICS["scores"]["spearman.wmean"].function(ones, scores)[0] == pytest.approx(
        np.average(per, weights=[20, 35, 15])
    )
    pooled = spearmanr(scores["system"], scores["gold"])[0]
    assert stats.observed(statistic("scores", "spearman.pooled"), scores) == pytest.approx(pooled)
    fold_acc = [np.mean(labels["pred"][group == g] == labels["gold"][group == g]) for g in range(3)]
    assert stats.observed(statistic("labels", "acc"), labels) == pytest.approx(100 * np.mean(fold_acc))


def test_stratified_resamples_keep_every_stratum_size_and_are_reproducible():
    group = np.repeat([0, 1, 2], [7, 11, 5])
    counts = stats.resample_counts(stats.rng_for(3, "STS13", "strata"), len(group), 50, group)
    for g, size in enumerate([7, 11, 5]):
        assert np.all(counts[:, group == g].sum(1) == size)
    again = stats.resample_counts(stats.rng_for(3, "STS13", "strata"), len(group), 50, group)
    other = stats.resample_counts(stats.rng_for(3, "STS14", "strata"), len(group), 50, group)
    assert np.array_equal(counts, again) and not np.array_equal(counts, other)


def test_recall_of_ranks():
    ranks = {"i2t": np.array([0, 3, 7, 20]), "t2i": np.array([[0, 0, 1, 5, 9]] * 4), "group": np.zeros(4, int)}
    W = np.ones((1, 4))
    assert caption_ranking.recall(W, ranks, "i2t", 5)[0] == pytest.approx(50.0)
    assert caption_ranking.recall(W, ranks, "t2i", 1)[0] == pytest.approx(40.0)
    expected = np.mean([25, 50, 75, 40, 60, 100])
    assert stats.observed(statistic("ranks", "mean_recall"), ranks) == pytest.approx(expected)


# Intervals against known distributions.


def test_accuracy_interval_width_matches_the_binomial_standard_error():
    """n items each correct with p = 0.7: the 95% interval is 2 * 1.96 * sqrt(p(1-p)/n) wide."""
    rng = np.random.default_rng(0)
    n = 2000
    arrays = {"gold": np.zeros(n, int), "pred": (rng.random(n) >= 0.7).astype(int)}
    ci = stats.bootstrap_ci(statistic("labels", "acc"), arrays, seed=1, task="T", resamples=2000)
    p = ci["value"] / 100
    expected = 100 * 2 * Z * np.sqrt(p * (1 - p) / n)
    assert ci["high"] - ci["low"] == pytest.approx(expected, rel=0.08)
    assert ci["low"] < ci["value"] < ci["high"]


@pytest.mark.parametrize("coefficient, variance", [("pearson", 1.0), ("spearman", 1.06)])
def test_correlation_interval_width_matches_fisher_theory(coefficient, variance):
    """Bivariate normal data with rho = 0.6: Fisher's z of r has standard error sqrt(v / (n - 3))
    (v = 1 for Pearson, 1.06 for Spearman, Fieller et al. 1957); the interval's width follows."""
    rng = np.random.default_rng(2)
    n, rho = 1500, 0.6
    x = rng.standard_normal(n)
    y = rho * x + np.sqrt(1 - rho**2) * rng.standard_normal(n)
    arrays = {"gold": x, "system": y}
    ci = stats.bootstrap_ci(statistic("scores", coefficient), arrays, seed=1, task="T", resamples=2000)
    z, se = np.arctanh(ci["value"]), np.sqrt(variance / (n - 3))
    expected = np.tanh(z + Z * se) - np.tanh(z - Z * se)
    assert ci["high"] - ci["low"] == pytest.approx(expected, rel=0.12)


def test_several_statistics_at_once_equal_each_alone():
    """bootstrap_cis shares each chunk of resamples between the figures of one prediction set: every
    figure's interval is the one its own resamples give (stratified or not, centred or not), here
    with more resamples than one chunk holds."""
    rng = np.random.default_rng(5)
    n = 3000
    arrays = {
        "gold": np.round(rng.uniform(0, 5, n), 1),
        "system": np.round(rng.normal(size=n), 1),
        "group": rng.integers(0, 3, n),
    }
    names = ("spearman.pooled", "pearson.mean", "spearman.wmean", "pearson.pooled")
    named = {name: statistic("scores", name) for name in names}
    named["centred"] = stats.Statistic(named["pearson.pooled"].function, False, centred=True)
    resamples = 2 * (stats.CHUNK_CELLS // n) + 7
    together = stats.bootstrap_cis(named, arrays, seed=3, task="T", resamples=resamples)
    assert list(together) == list(named)
    for name, stat in named.items():
        values = stats.resampled(stat, [arrays], 3, "T", resamples)[0]
        value = stats.observed(stat, arrays)
        alone = stats.centred_interval(value, values) if stat.centred else stats.interval(values)
        assert (together[name]["low"], together[name]["high"]) == alone, name
        assert together[name]["value"] == value


def test_accuracy_interval_covers_the_true_value_about_95_percent_of_the_time():
    rng = np.random.default_rng(3)
    n, p, trials = 300, 0.8, 200
    covered = 0
    for t in range(trials):
        arrays = {"gold": np.zeros(n, int), "pred": (rng.random(n) >= p).astype(int)}
        ci = stats.bootstrap_ci(statistic("labels", "acc"), arrays, seed=t, task="T", resamples=500)
        covered += ci["low"] <= 100 * p <= ci["high"]
    assert 0.90 <= covered / trials <= 0.985, covered


# The paired test.


def test_identical_encoders_never_differ():
    rng = np.random.default_rng(4)
    arrays = {"gold": rng.uniform(0, 5, 200), "system": rng.normal(size=200), "group": np.repeat([0, 1], 100)}
    for figure in ("spearman.pooled", "spearman.mean", "pearson.wmean"):
        test = stats.paired_test(statistic("scores", figure), arrays, dict(arrays), seed=1, task="STS12", resamples=300)
        assert test["diff"] == 0 and test["low"] == test["high"] == 0 and test["p"] == 1.0


def false_positive_rate(make_pair, kind, figure, trials, resamples=400, alpha=0.05):
    rejected = 0
    for t in range(trials):
        a, b = make_pair(np.random.default_rng(1000 + t))
        rejected += stats.paired_test(statistic(kind, figure), a, b, seed=t, task="T", resamples=resamples)["p"] < alpha
    return rejected / trials


def test_false_positive_rate_of_two_equally_accurate_classifiers():
    """Two classifiers right on each item with probability 0.75, independently: no real difference,
    so p < 0.05 should happen in about 5% of test sets."""
    n = 400

    def pair(rng):
        gold = np.zeros(n, int)
        return (
            {"gold": gold, "pred": (rng.random(n) >= 0.75).astype(int)},
            {"gold": gold, "pred": (rng.random(n) >= 0.75).astype(int)},
        )

    rate = false_positive_rate(pair, "labels", "acc", trials=400)
    assert 0.02 <= rate <= 0.085, rate


def test_false_positive_rate_of_two_equally_good_sts_encoders():
    """Cosines = gold + independent noise of equal variance for both encoders."""
    n = 300

    def pair(rng):
        gold = rng.uniform(0, 5, n)
        return (
            {"gold": gold, "system": gold + rng.normal(0, 2, n)},
            {"gold": gold, "system": gold + rng.normal(0, 2, n)},
        )

    rate = false_positive_rate(pair, "scores", "spearman", trials=250)
    assert 0.015 <= rate <= 0.095, rate


def test_a_real_difference_is_detected():
    n = 1000
    rng = np.random.default_rng(9)
    gold = np.zeros(n, int)
    a = {"gold": gold, "pred": (rng.random(n) >= 0.75).astype(int)}
    b = {"gold": gold, "pred": (rng.random(n) >= 0.85).astype(int)}
    test = stats.paired_test(statistic("labels", "acc"), a, b, seed=1, task="T", resamples=1000)
    assert test["p"] < 0.01 and test["low"] > 0 and test["diff"] == pytest.approx(test["b"] - test["a"])


def test_holm_adjustment():
    assert stats.holm([0.01, 0.04, 0.03, float("nan")])[:3] == pytest.approx([0.03, 0.06, 0.06])
    assert np.isnan(stats.holm([0.01, float("nan")])[1])
