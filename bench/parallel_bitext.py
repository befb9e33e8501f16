"""Bitext mining over parallel subsets (embeval/evaluate/bitext.py: parallel_nearest, parallel_figures) at
FloresBitextMining's size: 204 languages of 1,012 parallel rows, its 41,412 ordered language pairs.

matching   seconds to match every row of every pair as mteb matches it (float32 similarities of 100
           rows at a time, torch.topk), on synthetic vectors (each language: a shared sentence vector
           plus noise of its own), and the process's peak resident memory
bootstrap  seconds for the resamples of the task's figures (the mean over the pairs of each pair's
           weighted F1, precision, recall, accuracy) through embeval.stats, all pairs at once
per pair   the same resamples pair by pair with weighted_figures (the general statistic of one pair),
           timed on --per-pair pairs and scaled to all of them

  python bench/parallel_bitext.py [--languages 204] [--rows 1012] [--dim 768] [--resamples 1000]
                                  [--per-pair 40] [--threads N] [--out bench/results/parallel_bitext.json]
(from any folder; a small run: --languages 12 --rows 200 --dim 64 --resamples 200)
"""

import argparse
import json
import platform
import resource
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from embeval import stats  # noqa: E402
from embeval.evaluate import bitext  # noqa: E402
from embeval.stats import Statistic  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--languages", type=int, default=204)
    parser.add_argument("--rows", type=int, default=1012)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--per-pair", type=int, default=40)
    parser.add_argument("--noise", type=float, default=1.2, help="each language's noise (sd) around a row's vector")
    parser.add_argument("--threads", type=int, default=None, help="torch's threads (default: torch's own)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "parallel_bitext.json"))
    args = parser.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    rng = np.random.default_rng(0)
    shared = rng.standard_normal((args.rows, args.dim))
    table = np.concatenate(
        [(shared + args.noise * rng.standard_normal(shared.shape)).astype(np.float32) for _ in range(args.languages)]
    )  # the languages' rows one after another, as a task's sentence table holds them
    rows = {f"l{i}": np.arange(i * args.rows, (i + 1) * args.rows) for i in range(args.languages)}
    pairs = [(a, b) for a in rows for b in rows if a != b]

    start = time.perf_counter()
    pred = bitext.parallel_nearest(table, rows, pairs)
    matching = time.perf_counter() - start
    each = bitext.parallel_figures(np.ones((1, args.rows)), pred, per_pair=True)

    named = {
        name: Statistic(lambda W, a, name=name: bitext.parallel_resampled(W, a["pred"])[name], False, centred=True)
        for name in ("f1", "accuracy", "precision", "recall")
    }
    start = time.perf_counter()
    intervals = stats.bootstrap_cis(named, {"pred": pred}, 1111, "Flores", args.resamples)
    bootstrap = time.perf_counter() - start

    chosen = rng.choice(len(pairs), size=min(args.per_pair, len(pairs)), replace=False)
    gold = np.arange(args.rows)
    W = stats.resample_counts(stats.rng_for(1111, "Flores", "all"), args.rows, args.resamples)
    start = time.perf_counter()
    for p in chosen:
        bitext.weighted_figures(W, gold, pred[:, p])
    per_pair = (time.perf_counter() - start) / len(chosen) * len(pairs)

    result = {
        "what": "bitext mining over parallel subsets: matching and bootstrap at FloresBitextMining's size",
        "command": "python bench/parallel_bitext.py " + " ".join(sys.argv[1:]),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor(),
            "python": sys.version.split()[0],
        },
        "languages": args.languages,
        "rows": args.rows,
        "dim": args.dim,
        "pairs": len(pairs),
        "resamples": args.resamples,
        "torch_threads": torch.get_num_threads(),
        "matching_seconds": round(matching, 2),
        "matching_ms_per_pair": round(1000 * matching / len(pairs), 3),
        "bootstrap_seconds_all_pairs_at_once": round(bootstrap, 2),
        "bootstrap_seconds_pair_by_pair_scaled": round(per_pair, 2),
        "peak_resident_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "mean_f1": float(each["f1"].mean()),
        "f1_interval": [intervals["f1"]["low"], intervals["f1"]["high"]],
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for key, value in result.items():
        if key != "machine":
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
