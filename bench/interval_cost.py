"""What 1,000 resamples of a task's 95% intervals cost, kind by kind: the fast paths against the plain
definitions, on the same seeded resamples (the values equal to 1e-12, checked here too).

For each kind, a prediction set of a task's size (synthetic: random scores, labels and predictions,
tie-heavy where the task's are) gets every figure's interval by embeval.formats.predictions.intervals
(the engine, each statistic's fast path), then by the same engine with each statistic's plain
definition (`--plain`: skipped where it would take minutes). CPU seconds of this process (every
thread's), the least of --repeats runs; the load average is recorded (the machine may be shared).

  python bench/interval_cost.py [--repeats 3] [--plain] [--only NAME,...] [--out bench/results/interval_cost.json]
"""

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from embeval import stats  # noqa: E402
from embeval.evaluate import mteb_classification, pair_scores  # noqa: E402
from embeval.formats import predictions  # noqa: E402
from embeval.formats.predictions import PredictionSet  # noqa: E402
from embeval.tasks import catalog  # noqa: E402

RESAMPLES = 1000


def pair_set(rng, n):
    gold = rng.integers(0, 2, n)
    scores = {name: np.round(rng.normal(size=n), 6) for name in pair_scores.SCORES}
    arrays = pair_scores.pair_arrays(scores, gold)
    return {"": PredictionSet("mteb-pairs", arrays, tuple(pair_scores.STATISTICS))}


def sts_set(rng, n):
    return {"all": predictions.scores(np.round(rng.uniform(0, 5, n), 2), rng.normal(size=n) * 0.05, np.zeros(n, int))}


def classification_set(rng, n, labels):
    arrays = {"gold": rng.integers(0, labels, n), "pred": rng.integers(0, labels, (n, 10))}
    return {"": PredictionSet("mteb-classification", arrays, tuple(mteb_classification.STATISTICS))}


def clustering_set(rng, documents, clusters):
    gold = np.repeat(rng.integers(0, clusters, (documents, 1)), 10, axis=1)
    count = rng.poisson(16_384 / documents, (documents, 10)).astype(np.float64)
    pred = np.where(count > 0, rng.integers(0, clusters, (documents, 10)), -1)
    arrays = {"documents": np.arange(documents), "gold": gold, "count": count, "pred": pred}
    return {"": PredictionSet("mteb-clustering", arrays, ("v_measure",))}


def per_item_set(rng, kind, n, figures):
    arrays = {name: np.round(rng.uniform(0, 1, n), 3) for name in figures}
    return {"": PredictionSet(kind, arrays, tuple(figures))}


def cases():
    """{name: (sets, plain is affordable)}: task-sized prediction sets of each kind."""
    rng = np.random.default_rng(0)
    retrieval = tuple(catalog.kind("retrieval").statistics["query_means"])
    summarization = tuple(catalog.kind("summarization").statistics["mteb-summarization"])
    gold = np.arange(2000)
    mined = {"gold": gold, "pred": np.where(rng.random(2000) < 0.7, gold, rng.integers(0, 2000, 2000))}
    multilabel = {
        "gold": (rng.random((2000, 20)) < 0.15).astype(np.int8),
        "pred": (rng.random((2000, 20, 10)) < 0.15).astype(np.int8),
    }
    regression = {"gold": np.round(rng.normal(50, 10, 2000), 0), "pred": rng.normal(50, 10, (2000, 10))}
    return {
        "STS, SICK-R's 9,927 pairs (one subset)": (sts_set(rng, 9927), True),
        "STS, STS12's 3,108 pairs (one subset)": (sts_set(rng, 3108), True),
        "STS, 5 subsets of STS12 (SentEval's mean, wmean, pooled)": (
            {
                "all": predictions.scores(
                    np.round(rng.uniform(0, 5, 3108), 1),
                    rng.normal(size=3108),
                    np.repeat(np.arange(5), [750, 750, 459, 750, 399]),
                )
            },
            True,
        ),
        "pair classification, TwitterSemEval2015's 16,777 pairs": (pair_set(rng, 16_777), True),
        "pair classification, SprintDuplicateQuestions' 101,000 pairs": (pair_set(rng, 101_000), False),
        "classification (MTEB), Imdb's 25,000 test items, 2 labels": (classification_set(rng, 25_000, 2), True),
        "classification (MTEB), Banking77's 3,080 test items, 77 labels": (classification_set(rng, 3080, 77), True),
        "clustering, StackExchangeClusteringP2P.v2's 2,996 embedded documents": (clustering_set(rng, 2996, 524), True),
        "clustering, ArXivHierarchicalClustering's 258 embedded documents": (clustering_set(rng, 258, 129), True),
        "retrieval, 1,000 queries, every figure": (per_item_set(rng, "query_means", 1000, retrieval), True),
        "summarization, 100 texts": (per_item_set(rng, "mteb-summarization", 100, summarization), True),
        "bitext mining, 2,000 pairs": ({"": PredictionSet("mteb-bitext", mined, ("f1", "accuracy"))}, True),
        "multilabel classification, 2,000 rows, 20 labels": (
            {"": PredictionSet("mteb-multilabel", multilabel, ("accuracy", "f1", "lrap", "hamming"))},
            True,
        ),
        "regression, 2,000 test items (without Kendall's tau)": (
            {"": PredictionSet("mteb-regression", regression, ("r2", "mae", "mse", "rmse"))},
            True,
        ),
        "SentEval classification, SNLI's 9,824 test items": (
            {"": predictions.labels(rng.integers(0, 3, 9824), rng.integers(0, 3, 9824))},
            True,
        ),
        "COCO, 5,000 images": (
            {
                "acc": predictions.ranks(
                    rng.integers(0, 50, 5000), rng.integers(0, 200, (5000, 5)), np.repeat(np.arange(5), 1000)
                )
            },
            True,
        ),
    }


def plainly(sets):
    """predictions' look-up of statistics, each taken by its plain definition (the engine, no fast path)."""
    original = predictions.statistic

    def plain(set_kind, figure):
        stat = original(set_kind, figure)
        return stats.Statistic(stat.function, stat.stratified, stat.centred)

    return plain


def timed(sets, repeats, plain=False):
    """(least CPU seconds of `repeats` runs of the sets' intervals, the intervals)."""
    original = predictions.statistic
    if plain:
        predictions.statistic = plainly(sets)
    try:
        best, out = float("inf"), None
        for _ in range(repeats):
            start = time.process_time()
            out = predictions.intervals("bench", sets, 1111, RESAMPLES)
            best = min(best, time.process_time() - start)
        return best, out
    finally:
        predictions.statistic = original


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--plain", action="store_true", help="also time the plain definitions (minutes)")
    parser.add_argument("--only", help="a comma list of parts of case names")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "interval_cost.json"))
    args = parser.parse_args()
    rows = {}
    print(f"{'case':<72}{'fast s':>9}{'plain s':>9}{'plain / fast':>13}")
    for name, (sets, affordable) in cases().items():
        if args.only and not any(part in name for part in args.only.split(",")):
            continue
        items = sum(pset.items for pset in sets.values())
        fast, got = timed(sets, args.repeats)
        row = {
            "items": items,
            "fast_cpu_s": round(fast, 4),
            "ns_per_item_and_resample": round(1e9 * fast / items / RESAMPLES, 1),
        }
        if args.plain and affordable:
            plain, expected = timed(sets, 1, plain=True)
            for path, ci in expected["figures"].items():
                for key in ("low", "high"):
                    a, b = got["figures"][path][key], ci[key]
                    assert (np.isnan(a) and np.isnan(b)) or abs(a - b) <= 1e-12, (name, path, key, a, b)
            row.update(plain_cpu_s=round(plain, 4), plain_over_fast=round(plain / fast, 1))
        rows[name] = row
        plain_s = row.get("plain_cpu_s", float("nan"))
        print(f"{name:<72}{fast:>9.3f}{plain_s:>9.3f}{row.get('plain_over_fast', float('nan')):>13.1f}", flush=True)
    result = {
        "what": __doc__.splitlines()[0],
        "resamples": RESAMPLES,
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cases": rows,
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
