"""How far embeval's retrieval figures are from mteb's on tie-heavy vectors, and whether the tie
exposure embeval records accounts for the queries where they differ.

A retrieval task whose vectors are hashed word counts with copies (most similarities exactly 0,
many exactly equal): embeval's exact search (exact scores, ties by its rule) against mteb 2.26's
retrieval evaluator run with mteb's own float32 cosine (`mteb.similarity_functions.cos_sim`) on the
same vectors. Prints each figure's largest difference over seeds; then, per query, whether any of
its pytrec_eval figures differs from embeval's, against embeval's tie exposure of the query
(embeval.evaluate.ir_metrics.Ties: `order`, and `main` for nDCG@10): a differing query that is not
exposed would be a difference the exposure does not explain. Writes bench/results/ties_mteb.json.

    python bench/ties_mteb.py [--seeds 3] [--docs 3000] [--queries 100]
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from mteb_helpers import TableEncoder, mteb_client  # noqa: E402
from test_blocking import counts, tie_heavy_task  # noqa: E402
from test_mteb_retrieval import TREC, run_mteb, write_task  # noqa: E402

from embeval.evaluate import ir_metrics  # noqa: E402
from embeval.evaluate.retrieval import _beyond  # noqa: E402
from embeval.tasks import beir  # noqa: E402
from embeval.train import search  # noqa: E402


class Float32Cosine(TableEncoder):
    """The table's vectors, with mteb's own float32 cosine similarity."""

    def similarity(self, a, b):
        from mteb.similarity_functions import cos_sim

        return cos_sim(np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32))


def one(client, seed, docs, queries):
    task = tie_heavy_task(seed=seed, n_docs=docs, n_queries=queries)
    folder = Path(tempfile.mkdtemp())
    paths = write_task(folder, task)
    data = beir.load_retrieval(paths["corpus"], paths["queries"], paths["qrels"], "T")
    q, d = counts(data.query_texts), counts(data.doc_texts)
    task["query_vectors"] = dict(zip(data.query_ids, q))
    task["doc_vectors"] = dict(zip(data.doc_ids, d))
    depth = min(1000, len(d))
    scores, rows = search.top_k(q, lambda a, b: d[a:b], len(d), min(depth + 1, len(d)), "cosine")
    ties = ir_metrics.Ties(len(rows), "ndcg_at_10", _beyond(rows, scores, depth, data.qrels))
    scores, rows = scores[:, :depth], rows[:, :depth]
    values = ir_metrics.per_query(rows, scores, data.qrels, ir_metrics.id_ranks(data.doc_ids), ties=ties)
    ours = ir_metrics.mteb_scores(values, "ndcg_at_10")
    import test_mteb_retrieval

    saved = test_mteb_retrieval.TableEncoder
    test_mteb_retrieval.TableEncoder = Float32Cosine
    try:
        reported, per_query, _, _ = run_mteb(client, task, data)
    finally:
        test_mteb_retrieval.TableEncoder = saved
    zero = float((scores == 0).mean())
    differs = np.zeros(len(rows), dtype=bool)
    differs_main = np.zeros(len(rows), dtype=bool)
    for row, query in enumerate(data.query_ids):
        for figure, trec in TREC.items():
            for k in ir_metrics.CUTOFFS:
                if abs(values[f"{figure}_at_{k}"][row] - per_query[query][f"{trec}{k}"]) > 1e-12:
                    differs[row] = True
                    differs_main[row] |= f"{figure}_at_{k}" == "ndcg_at_10"
    exposure = {
        "queries": len(rows),
        "exposed": int(ties.order.sum()),
        "exposed_main": int(ties.main.sum()),
        "differing": int(differs.sum()),
        "differing_main": int(differs_main.sum()),
        "differing_not_exposed": int((differs & ~ties.order).sum()),
        "differing_main_not_exposed": int((differs_main & ~ties.main).sum()),
    }
    return {name: abs(ours[name] - reported[name]) for name in ours}, zero, exposure


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--docs", type=int, default=3000)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    client = mteb_client()
    worst, zeros, exposures = {}, [], []
    for seed in range(args.seeds):
        diffs, zero, exposure = one(client, seed, args.docs, args.queries)
        zeros.append(zero)
        exposures.append(exposure)
        print(f"seed {seed}: {exposure}")
        for name, diff in diffs.items():
            worst[name] = max(worst.get(name, 0.0), diff)
    shown = ["ndcg_at_10", "map_at_10", "mrr_at_10", "recall_at_100", "ndcg_at_1000", "map_at_1000", "recall_at_1000"]
    print(f"{args.seeds} tasks of {args.docs} documents, {args.queries} queries; share of 0 scores in the lists "
          f"{np.mean(zeros):.2f}; load {os.getloadavg()}")  # fmt: skip
    print("| figure | largest |embeval - mteb| |")
    print("|---|---:|")
    for name in shown:
        print(f"| {name} | {worst[name]:.5f} |")
    print(f"| every figure | {max(worst.values()):.5f} |")
    out = ROOT / "bench" / "results" / "ties_mteb.json"
    record = {"seeds": args.seeds, "docs": args.docs, "queries": args.queries, "largest_difference": worst,
              "tie_exposure": exposures, "zero_share": float(np.mean(zeros)), "load_avg": os.getloadavg()}  # fmt: skip
    out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
