"""MTEB's protocols (embeval/evaluate/pair_scores.py, clustering.py, mteb_classification.py): the
cost of each protocol's figures and of its bootstrap statistic, at the sizes of MTEB(eng, v2)'s tasks.

protocol   seconds for the figures on synthetic 384-d vectors (one run)
weighted   milliseconds per bootstrap resample of the main figure through its weighted statistic
           (embeval.stats' chunks of resamples)
explicit   milliseconds per resample recomputing the figure on the resampled items themselves
           (the items repeated as drawn); the two arms alternate block by block in one run

  python bench/mteb_protocols.py [--resamples 40] [--out bench/results/mteb_protocols.json]
"""

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import accuracy_score, f1_score, v_measure_score

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from embeval import stats  # noqa: E402
from embeval.evaluate import clustering, mteb_classification, pair_scores  # noqa: E402

DIM = 384


def timed(function, *args, **kwargs):
    start = time.perf_counter()
    out = function(*args, **kwargs)
    return out, time.perf_counter() - start


def pairs_case(rng):
    """TwitterURLCorpus's test size: 51,534 pairs, a third of them positive; max_ap."""
    n = 51_534
    a = rng.standard_normal((n, DIM)).astype(np.float32)
    b = (0.3 * a + rng.standard_normal((n, DIM))).astype(np.float32)
    labels = (rng.random(n) < 0.3).astype(np.int64)
    (figures, arrays), seconds = timed(pair_scores.evaluate_pairs, a, b, labels)

    def explicit(idx):
        scores = {name: arrays[name][idx] for name in pair_scores.SCORES}
        return pair_scores.evaluate_scores(scores, labels[idx])["max_ap"]

    return seconds, arrays, pair_scores.STATISTICS["max_ap"], explicit, None


def classification_case(rng, n_test, n_classes, figure):
    """A test split of n_test items, n_classes labels, MTEB's 10 experiments of 8 per label."""
    centres = rng.standard_normal((n_classes, DIM))

    def draw(n):
        y = rng.integers(0, n_classes, n)
        return (centres[y] + 3 * rng.standard_normal((n, DIM))).astype(np.float32), y

    (train_x, train_y), (test_x, test_y) = draw(20 * n_classes), draw(n_test)
    (figures, arrays), seconds = timed(mteb_classification.classify, train_x, train_y, test_x, test_y)

    def explicit(idx):
        if figure == "accuracy":
            return np.mean([accuracy_score(test_y[idx], pred[idx]) for pred in arrays["pred"].T])
        return np.mean([f1_score(test_y[idx], pred[idx], average="macro") for pred in arrays["pred"].T])

    return seconds, arrays, mteb_classification.STATISTICS[figure], explicit, None


def bootstrap_clustering_case(rng):
    """A split of 51,200 documents, 2,048 embedded (max_document_to_embed), 20 labels, one level."""
    n, k = 51_200, 20
    centres = rng.standard_normal((k, DIM))
    labels = rng.integers(0, k, n)
    vectors = (centres[labels] + 3 * rng.standard_normal((n, DIM))).astype(np.float32)
    (figures, arrays), seconds = timed(
        clustering.bootstrap_clustering, vectors, labels, max_fraction=None, max_documents=2048
    )

    def explicit(idx):
        weights = np.bincount(idx, minlength=len(arrays["documents"]))
        values = []
        for gold, count, pred in zip(arrays["gold"].T, arrays["count"].T, arrays["pred"].T, strict=True):
            repeated = np.repeat(np.arange(len(weights)), (count * weights).astype(np.int64))
            values.append(v_measure_score(gold[repeated], pred[repeated]))
        return np.mean(values)

    return seconds, arrays, clustering.STATISTICS["bootstrap.v_measure"], explicit, None


def set_clustering_case(rng):
    """10 sets of 2,000 documents with 10 labels each (a legacy task's test split)."""
    sets = []
    for _ in range(10):
        centres = rng.standard_normal((10, DIM))
        labels = rng.integers(0, 10, 2000)
        sets.append(((centres[labels] + 3 * rng.standard_normal((2000, DIM))).astype(np.float32), labels))
    (figures, arrays), seconds = timed(clustering.set_clustering, sets)
    groups = arrays["group"]

    def explicit(idx):
        return np.mean(
            [
                v_measure_score(arrays["gold"][idx[groups[idx] == g]], arrays["pred"][idx[groups[idx] == g]])
                for g in range(10)
            ]
        )

    return seconds, arrays, clustering.STATISTICS["sets.v_measure"], explicit, groups


def compare(arrays, statistic, explicit, groups, resamples, block=10):
    """(weighted ms, explicit ms) per resample, the arms alternating in blocks of the same resamples."""
    n = len(arrays["gold"]) if "documents" not in arrays else len(arrays["documents"])
    rng = stats.rng_for(0, "bench", "all")
    weighted_seconds = explicit_seconds = 0.0
    chunk = max(1, stats.CHUNK_CELLS // n)
    for _ in range(0, resamples, block):
        W = stats.resample_counts(rng, n, block, groups if statistic.stratified else None)
        start = time.perf_counter()
        for first in range(0, block, chunk):
            weighted = statistic.function(W[first : first + chunk], arrays)
        weighted_seconds += time.perf_counter() - start
        start = time.perf_counter()
        for row in W:
            value = explicit(np.repeat(np.arange(n), row.astype(np.int64)))
        explicit_seconds += time.perf_counter() - start
        assert abs(weighted[-1] - value) < 1e-9
    return 1000 * weighted_seconds / resamples, 1000 * explicit_seconds / resamples


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--resamples", type=int, default=40)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "mteb_protocols.json"))
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    cases = {
        "pair classification, 51,534 pairs, max_ap": lambda: pairs_case(rng),
        "classification, 25,000 items, 2 labels, accuracy": lambda: classification_case(rng, 25_000, 2, "accuracy"),
        "classification, 3,080 items, 77 labels, f1": lambda: classification_case(rng, 3_080, 77, "f1"),
        "clustering (bootstrap), 2,048 documents x 10 experiments, v_measure": lambda: bootstrap_clustering_case(rng),
        "clustering (sets), 10 sets x 2,000 documents, v_measure": lambda: set_clustering_case(rng),
    }
    rows = {}
    print(f"{'case':<72} {'protocol s':>10} {'weighted ms':>12} {'explicit ms':>12} {'ratio':>6}")
    for name, make in cases.items():
        seconds, arrays, statistic, explicit, groups = make()
        weighted, slow = compare(arrays, statistic, explicit, groups, args.resamples)
        rows[name] = {
            "protocol_seconds": round(seconds, 3),
            "weighted_ms_per_resample": round(weighted, 2),
            "explicit_ms_per_resample": round(slow, 2),
            "explicit_over_weighted": round(slow / weighted, 2),
        }
        print(f"{name:<72} {seconds:>10.2f} {weighted:>12.2f} {slow:>12.2f} {slow / weighted:>6.1f}")
    result = {
        "machine": {"python": platform.python_version(), "processor": platform.processor() or platform.machine()},
        "resamples": args.resamples,
        "cases": rows,
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
