"""Reranking's gather of candidate vectors: how many entries to gather at once (RERANK_CELLS).

Each query's candidates are gathered from the table of distinct candidate vectors and multiplied
with the query, as mteb's reranking does one query at a time (one batched product where torch's
gives the same bits, else a product per query). A gather larger than the cache is written to memory
and read back by the products; this times the scoring of synthetic queries at several gather sizes,
for the shapes of MindSmallReranking (41 candidates) at 384 and 1024 dimensions and a wider list.

  python bench/rerank_chunks.py [--out bench/results/rerank_chunks.json]
"""

import argparse
import json
import platform
import time
from pathlib import Path

import _checkout  # noqa: F401  (this clone's embeval, from any folder)
import torch

from embeval.evaluate import mteb_similarity

ROOT = Path(__file__).resolve().parents[1]
SHAPES = [(8000, 41, 384), (8000, 41, 1024), (4000, 100, 384)]  # queries, candidates, dimensions
CELLS = [1 << 24, 1 << 22, 1 << 21, 1 << 20, 1 << 18]


def score(queries, table, rows, cells):
    g, c = rows.shape
    out = torch.empty(g, c)
    step = max(1, cells // (c * queries.shape[1]))
    for a in range(0, g, step):
        documents = table[rows[a : a + step]]
        out[a : a + step] = mteb_similarity.per_query(queries[a : a + step], documents, "cosine", prepared=True)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "rerank_chunks.json"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    generator = torch.Generator().manual_seed(0)
    rows_out = []
    for g, c, d in SHAPES:
        queries = torch.nn.functional.normalize(torch.randn(g, d, generator=generator), dim=1)
        table = torch.nn.functional.normalize(torch.randn(300, d, generator=generator), dim=1)
        rows = torch.randint(0, 300, (g, c), generator=generator)
        reference = None
        for cells in CELLS:
            best = float("inf")
            for _ in range(args.repeats):
                start = time.perf_counter()
                found = score(queries, table, rows, cells)
                best = min(best, time.perf_counter() - start)
            reference = found if reference is None else reference
            same = bool(torch.equal(found, reference))
            row = {
                "queries": g,
                "candidates": c,
                "dims": d,
                "cells": cells,
                "seconds": round(best, 4),
                "same_bits": same,
            }
            rows_out.append(row)
            print(json.dumps(row), flush=True)
    record = {
        "benchmark": "rerank_chunks",
        "threads": torch.get_num_threads(),
        "machine": platform.processor() or platform.machine(),
        "rows": rows_out,
    }
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print("written:", args.out)


if __name__ == "__main__":
    main()
