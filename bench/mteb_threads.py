"""MTEB's classification and clustering protocols with scikit-learn's thread pools at their default
size and limited to one thread (threadpoolctl), the arms alternating in one run: the fits are small
(logistic regression on a few sentences per label, MiniBatchKMeans on batches of 512), and pools of
threads that wait for each other cost more than they give on a shared machine. Also checks that both
arms give the same figures, to the last bit.

  python bench/mteb_threads.py [--repeats 2] [--out bench/results/mteb_threads.json]
"""

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from embeval.evaluate import clustering, mteb_classification  # noqa: E402

DIM = 384


def classification_case(rng):
    """Banking77's shape: 77 labels, 10 experiments of 8 sentences per label, 3,080 test items."""
    centres = rng.standard_normal((77, DIM))

    def draw(n):
        y = rng.integers(0, 77, n)
        return (centres[y] + 3 * rng.standard_normal((n, DIM))).astype(np.float32), y

    (train_x, train_y), (test_x, test_y) = draw(77 * 20), draw(3_080)
    return lambda: mteb_classification.classify(train_x, train_y, test_x, test_y)[0]["accuracy"]


def clustering_case(rng):
    """2,048 documents embedded, 20 labels, 10 experiments of 16,384 draws (mteb's defaults)."""
    centres = rng.standard_normal((20, DIM))
    labels = rng.integers(0, 20, 2048)
    vectors = (centres[labels] + 3 * rng.standard_normal((2048, DIM))).astype(np.float32)
    return lambda: clustering.bootstrap_clustering(vectors, labels, max_fraction=None)[0]["v_measures"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "mteb_threads.json"))
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    cases = {
        "classification (mteb), 77 labels, 3,080 test items": classification_case(rng),
        "clustering (bootstrap), 2,048 documents x 10 experiments": clustering_case(rng),
    }
    pools = sorted({f"{p['internal_api']} {p['num_threads']}" for p in threadpool_info()})
    rows = {}
    print(f"thread pools: {', '.join(pools)}; load average {os.getloadavg()[0]:.1f}")
    print(f"{'case':<60} {'default s':>10} {'one thread s':>13} {'ratio':>6} {'same figures':>13}")
    for name, run in cases.items():
        seconds = {"default": 0.0, "one thread": 0.0}
        figures = {}
        for _ in range(args.repeats):
            for arm in ("default", "one thread"):
                start = time.perf_counter()
                if arm == "default":
                    figures[arm] = run()
                else:
                    with threadpool_limits(1):
                        figures[arm] = run()
                seconds[arm] += time.perf_counter() - start
        same = figures["default"] == figures["one thread"]
        default, single = seconds["default"] / args.repeats, seconds["one thread"] / args.repeats
        rows[name] = {
            "default_seconds": round(default, 3),
            "one_thread_seconds": round(single, 3),
            "default_over_one_thread": round(default / single, 2),
            "same_figures": same,
        }
        print(f"{name:<60} {default:>10.2f} {single:>13.2f} {default / single:>6.1f} {str(same):>13}")
    result = {
        "machine": {
            "python": platform.python_version(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "load_average": round(os.getloadavg()[0], 1),
            "thread_pools": pools,
        },
        "repeats": args.repeats,
        "cases": rows,
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
