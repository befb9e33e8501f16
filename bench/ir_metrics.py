"""Cost of MTEB's retrieval figures: embeval.evaluate.ir_metrics.per_query against mteb's own scoring
(pytrec_eval plus mteb's MRR and nAUC, mteb._evaluators.retrieval_metrics.calculate_retrieval_scores)
on the same synthetic runs, arms interleaved within one run; also the peak memory of per_query
(tracemalloc, numpy's allocations) and the largest difference of a per-query figure between the two.

Each query has 1000 retrieved documents with scores on a coarse grid (many exact ties) and 1 to 10
judged documents (grades 0..3), about half of them retrieved.

  python bench/ir_metrics.py [--queries 1000 10000] [--repeats 3] [--out bench/results/ir_metrics.json]
"""

import argparse
import json
import platform
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from embeval.evaluate import ir_metrics  # noqa: E402

N_DOCS = 100_000
DEPTH = 1000
TREC = {"ndcg": "ndcg_cut_", "map": "map_cut_", "recall": "recall_", "precision": "P_", "hit_rate": "success_"}


def synthetic_run(n_queries, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.permutation(N_DOCS)  # distinct documents per query: a stride coprime with N_DOCS from a random start
    rows = base[(np.arange(DEPTH)[None] * 97 + rng.integers(0, N_DOCS, (n_queries, 1))) % N_DOCS]
    scores = np.sort(rng.integers(0, 400, rows.shape) / 400, axis=1)[:, ::-1]
    query, doc, grade = [], [], []
    for q in range(n_queries):
        judged = int(rng.integers(1, 11))
        picked = np.r_[rng.choice(rows[q], judged // 2 + 1, replace=False), rng.integers(0, N_DOCS, judged)]
        picked = np.unique(picked)
        query += [q] * len(picked)
        doc += picked.tolist()
        grade += rng.integers(0, 4, len(picked)).tolist()
    return rows, scores, (np.array(query), np.array(doc), np.array(grade))


def as_dicts(rows, scores, qrels, doc_ids):
    run = {f"q{q}": {doc_ids[r]: float(s) for r, s in zip(rows[q], scores[q])} for q in range(len(rows))}
    judged = {f"q{q}": {} for q in range(len(rows))}
    for q, d, g in zip(*qrels):
        judged[f"q{q}"][doc_ids[d]] = int(g)
    return run, judged


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "ir_metrics.json"))
    args = parser.parse_args()
    from mteb._evaluators.retrieval_metrics import calculate_retrieval_scores

    doc_ids = [f"doc{i}" for i in range(N_DOCS)]
    id_rank = ir_metrics.id_ranks(doc_ids)
    table = []
    for n in args.queries:
        rows, scores, qrels = synthetic_run(n)
        run, judged = as_dicts(rows, scores, qrels, doc_ids)
        times = {"embeval": [], "mteb": []}
        for _ in range(args.repeats):  # interleaved
            start = time.perf_counter()
            ours = ir_metrics.per_query(rows, scores, qrels, id_rank)
            times["embeval"].append(time.perf_counter() - start)
            start = time.perf_counter()
            reference = calculate_retrieval_scores(run, judged, list(ir_metrics.CUTOFFS))
            times["mteb"].append(time.perf_counter() - start)
        tracemalloc.start()
        ir_metrics.per_query(rows, scores, qrels, id_rank)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        worst = max(
            abs(ours[f"{figure}_at_{k}"][q] - reference.all_scores[f"q{q}"][f"{trec}{k}"])
            for q in range(n)
            for figure, trec in TREC.items()
            for k in ir_metrics.CUTOFFS
        )
        median = {arm: float(np.median(t)) for arm, t in times.items()}
        table.append(
            {
                "queries": n,
                "candidates_per_query": DEPTH,
                "embeval_seconds": round(median["embeval"], 3),
                "mteb_seconds": round(median["mteb"], 3),
                "mteb_over_embeval": round(median["mteb"] / median["embeval"], 1),
                "embeval_peak_mb": round(peak / 2**20, 1),
                "largest_per_query_difference": worst,
            }
        )
        print(
            f"{n:>6} queries x {DEPTH}: embeval {median['embeval']:.3f} s, mteb {median['mteb']:.3f} s "
            f"({median['mteb'] / median['embeval']:.1f}x), peak {peak / 2**20:.0f} MB, largest difference {worst:.1e}"
        )
    record = {
        "machine": {"python": platform.python_version(), "processor": platform.machine()},
        "repeats": args.repeats,
        "block_cells": ir_metrics.BLOCK_CELLS,
        "table": table,
    }
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
