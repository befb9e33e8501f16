"""The bootstrap's statistical behaviour and its cost, on synthetic data with known answers.

false positives  paired test on two equally good encoders (independent errors): how often p < 0.05
                 (accuracy: both right with probability 0.75 on each of 500 items; STS: cosine =
                 gold + independent noise of equal variance on 1,500 pairs, pooled Spearman)
power            the same for a real difference (accuracy 0.75 vs 0.80 on 2,000 items)
coverage         how often the 95% interval of an accuracy (p = 0.8, 500 items) holds the true value
width            interval width against theory: binomial accuracy, Pearson and Spearman (Fisher z)
cost             seconds of predictions.intervals for task-sized prediction sets (1,000 resamples)

  python bench/bootstrap.py [--trials 1000] [--out bench/results/bootstrap.json]
"""

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import norm

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from embeval import stats  # noqa: E402
from embeval.formats import predictions  # noqa: E402
from embeval.tasks.catalog import statistic  # noqa: E402

Z = norm.ppf(0.975)


def rate(make_pair, kind, figure, trials, resamples):
    hits = 0
    for t in range(trials):
        a, b = make_pair(np.random.default_rng(10_000 + t))
        hits += stats.paired_test(statistic(kind, figure), a, b, seed=t, task="bench", resamples=resamples)["p"] < 0.05
    return hits / trials


def labels_pair(n, pa, pb):
    def make(rng):
        gold = np.zeros(n, int)
        return (
            {"gold": gold, "pred": (rng.random(n) >= pa).astype(int)},
            {"gold": gold, "pred": (rng.random(n) >= pb).astype(int)},
        )

    return make


def scores_pair(n):
    def make(rng):
        gold = rng.uniform(0, 5, n)
        return {"gold": gold, "system": gold + rng.normal(0, 2, n)}, {
            "gold": gold,
            "system": gold + rng.normal(0, 2, n),
        }

    return make


def coverage(trials, n=500, p=0.8, resamples=1000):
    rng = np.random.default_rng(1)
    covered = 0
    for t in range(trials):
        arrays = {"gold": np.zeros(n, int), "pred": (rng.random(n) >= p).astype(int)}
        ci = stats.bootstrap_ci(statistic("labels", "acc"), arrays, seed=t, task="bench", resamples=resamples)
        covered += ci["low"] <= 100 * p <= ci["high"]
    return covered / trials


def widths():
    rng = np.random.default_rng(2)
    out = {}
    n = 2000
    arrays = {"gold": np.zeros(n, int), "pred": (rng.random(n) >= 0.7).astype(int)}
    ci = stats.bootstrap_ci(statistic("labels", "acc"), arrays, seed=1, task="bench", resamples=2000)
    p = ci["value"] / 100
    out["accuracy_n2000_p0.7"] = {"bootstrap": ci["high"] - ci["low"], "theory": 100 * 2 * Z * np.sqrt(p * (1 - p) / n)}
    n, rho = 1500, 0.6
    x = rng.standard_normal(n)
    y = rho * x + np.sqrt(1 - rho**2) * rng.standard_normal(n)
    for coefficient, variance in (("pearson", 1.0), ("spearman", 1.06)):
        ci = stats.bootstrap_ci(
            statistic("scores", coefficient), {"gold": x, "system": y}, seed=1, task="bench", resamples=2000
        )
        z, se = np.arctanh(ci["value"]), np.sqrt(variance / (n - 3))
        out[f"{coefficient}_n1500_rho0.6"] = {
            "bootstrap": ci["high"] - ci["low"],
            "theory": float(np.tanh(z + Z * se) - np.tanh(z - Z * se)),
        }
    return out


def cost():
    rng = np.random.default_rng(3)
    cases = {
        "STS12 (3,108 pairs, 5 subsets)": {
            "all": predictions.scores(
                rng.uniform(0, 5, 3108), rng.normal(size=3108), np.repeat(np.arange(5), [750, 750, 459, 750, 399])
            )
        },
        "STS-B (1,379 pairs, regressor + cosine)": {
            "": predictions.scores(rng.uniform(0, 5, 1379), rng.normal(size=1379)),
            "cosine": predictions.scores(rng.uniform(0, 5, 1379), rng.normal(size=1379)),
        },
        "SNLI (9,824 test items)": {"": predictions.labels(rng.integers(0, 3, 9824), rng.integers(0, 3, 9824))},
        "MR (10,662 items, 10 folds)": {
            "": predictions.labels(rng.integers(0, 2, 10662), rng.integers(0, 2, 10662), np.arange(10662) % 10)
        },
        "COCO (5,000 images)": {
            "acc": predictions.ranks(
                rng.integers(0, 50, 5000), rng.integers(0, 200, (5000, 5)), np.repeat(np.arange(5), 1000)
            )
        },
    }
    out = {}
    for name, sets in cases.items():
        start = time.perf_counter()
        predictions.intervals("bench", sets, 1111, 1000)
        out[name] = round(time.perf_counter() - start, 3)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "bootstrap.json"))
    args = parser.parse_args()
    t, b = args.trials, args.resamples
    result = {
        "machine": {"python": platform.python_version(), "processor": platform.processor() or platform.machine()},
        "trials": t,
        "resamples": b,
        "false_positive_rate": {
            "accuracy_n500_p0.75": rate(labels_pair(500, 0.75, 0.75), "labels", "acc", t, b),
            "sts_spearman_n1500": rate(scores_pair(1500), "scores", "spearman", t // 2, b),
        },
        "power_accuracy_0.75_vs_0.80_n2000": rate(labels_pair(2000, 0.75, 0.80), "labels", "acc", t // 2, b),
        "coverage_accuracy_n500_p0.8": coverage(t // 2, resamples=b),
        "interval_width": widths(),
        "seconds_for_intervals": cost(),
    }
    print(json.dumps(result, indent=1))
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
