"""The expected mutual information of AMI: embeval's sum over distinct pairs of sizes against
scikit-learn's compiled loop over every pair, per overlap summed (embeval.evaluate.mutual_info's
CYTHON_SPEEDUP: the ratio of the two costs, above which scikit-learn's function gives the figure).

Random labellings of 16,384 items (MTEB's clustering draws) with 10 to 524 classes and clusters,
and 2,000 items with 10: each way's seconds (best of --repeats), its overlaps, its nanoseconds per
overlap, and the two expectations' difference.

  python bench/ami_cost.py [--out bench/results/ami_cost.json]
"""

import argparse
import json
import platform
import time
from pathlib import Path

import _checkout  # noqa: F401  (this clone's embeval, from any folder)
import numpy as np
from sklearn.metrics.cluster import contingency_matrix
from sklearn.metrics.cluster._expected_mutual_info_fast import expected_mutual_information

from embeval.evaluate import mutual_info

ROOT = Path(__file__).resolve().parents[1]
CASES = [(10, 2000), (26, 16384), (64, 16384), (129, 16384), (524, 16384)]  # classes and clusters, items


def best(function, args, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        value = function(*args)
        times.append(time.perf_counter() - start)
    return min(times), value


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "ami_cost.json"))
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []
    for k, n in CASES:
        gold, pred = rng.integers(0, k, n), rng.integers(0, k, n)
        a, b = np.unique(gold, return_counts=True)[1], np.unique(pred, return_counts=True)[1]
        ours_s, ours = best(mutual_info.expected_mutual_info, (a, b, n), args.repeats)
        table = contingency_matrix(gold, pred, sparse=True)
        theirs_s, theirs = best(expected_mutual_information, (table, n), args.repeats)
        distinct, every = mutual_info._terms(a, b, n, distinct=True), mutual_info._terms(a, b, n)
        row = {
            "classes": k,
            "items": n,
            "embeval_seconds": round(ours_s, 5),
            "embeval_overlaps": distinct,
            "embeval_ns_per_overlap": round(1e9 * ours_s / distinct, 1),
            "scikit_learn_seconds": round(theirs_s, 5),
            "scikit_learn_overlaps": every,
            "scikit_learn_ns_per_overlap": round(1e9 * theirs_s / every, 1),
            "ratio_per_overlap": round((ours_s / distinct) / (theirs_s / every), 2),
            "embeval_chosen": distinct * mutual_info.CYTHON_SPEEDUP <= every,
            "difference": abs(ours - float(theirs)),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    record = {"benchmark": "ami_cost", "machine": platform.processor() or platform.machine(), "rows": rows}
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print("written:", args.out)


if __name__ == "__main__":
    main()
