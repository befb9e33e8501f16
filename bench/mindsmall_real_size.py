"""MindSmallReranking at its real size, embeval alone: seconds and peak memory.

MTEB(eng, v2)'s largest task by far: 2,362,514 queries (37,162 distinct texts) and 97 million
candidate pairs over 5,277 documents, by mteb's descriptive statistics (read from the installed
mteb, never typed here). `bench/mteb_benchmark.py` leaves it out at its real size because mteb's
arm would need about 55 GB; this script times embeval's arm alone on synthetic data of the task's
shape: the same numbers of documents, queries, distinct query texts and judgments per query, and
candidate lists of mteb's smallest to largest size with its mean; random float32 vectors.

  python bench/mindsmall_real_size.py [--scale 1] [--dim 384] [--keep DIR]
                                      [--out bench/results/mindsmall_real_size.json]

The data is written to a temporary folder (about 3 GB at the real size) and scored by
`embeval score` in a fresh process, whose wall seconds, CPU seconds and peak resident memory are
recorded with the sizes and the main score.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _checkout  # noqa: F401  (this clone's embeval, from any folder)
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TASK = "MindSmallReranking"
LINES = 1 << 20  # lines written at once


def shape(scale: float) -> dict[str, float]:
    """The task's sizes from mteb's descriptive statistics (test split), queries scaled."""
    import mteb

    (task,) = mteb.get_tasks(tasks=[TASK])
    stats = task.metadata.descriptive_stats["test"]
    top = stats["top_ranked_statistics"]
    return {
        "documents": int(stats["num_documents"]),
        "queries": max(10, round(stats["num_queries"] * scale)),
        "distinct_query_texts": max(10, round(stats["queries_text_statistics"]["unique_texts"] * scale)),
        "candidates_min": int(top["min_top_ranked_per_query"]),
        "candidates_max": int(top["max_top_ranked_per_query"]),
        "candidates_mean": float(top["average_top_ranked_per_query"]),
        "judgments_mean": float(stats["relevant_docs_statistics"]["average_relevant_docs_per_query"]),
        "revision": task.metadata.dataset["revision"],
    }


def counts(rng: np.random.Generator, n: int, low: int, high: int, mean: float) -> np.ndarray:
    """n list sizes in [low, high] with the given mean: uniform around the mean, a few at the largest."""
    spread = int(min(mean - low, high - mean))
    sizes = rng.integers(round(mean) - spread, round(mean) + spread + 1, size=n)
    sizes[rng.choice(n, size=max(1, n // 10000), replace=False)] = high
    sizes[0] = low
    return np.clip(sizes, low, high)


def write_lines(path: Path, header: str, lines) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(header)
        for chunk in lines:
            f.write(chunk)


def synthesize(folder: Path, sizes: dict, seed: int) -> dict[str, int]:
    """Write corpus, queries, qrels and candidates, and the task file: the counts written."""
    rng = np.random.default_rng(seed)
    n_docs, n_queries = sizes["documents"], sizes["queries"]
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"_id": f"d{i}", "text": f"news item {i}"}) + "\n" for i in range(n_docs))
    text_of = rng.integers(0, sizes["distinct_query_texts"], size=n_queries)
    text_of[: sizes["distinct_query_texts"]] = np.arange(min(n_queries, sizes["distinct_query_texts"]))
    write_lines(
        folder / "queries.jsonl",
        "",
        (
            "".join(
                f'{{"_id": "q{q}", "text": "user history {text_of[q]}"}}\n' for q in range(a, min(a + LINES, n_queries))
            )
            for a in range(0, n_queries, LINES)
        ),
    )
    per_query = counts(rng, n_queries, sizes["candidates_min"], sizes["candidates_max"], sizes["candidates_mean"])
    first = rng.integers(0, n_docs, size=n_queries)
    clicked = rng.random(n_queries) < sizes["judgments_mean"] - 1  # a second judgment for this share

    def candidates(a, b):
        out = []
        for q in range(a, b):
            start = int(first[q])
            out.append("".join(f"q{q}\td{(start + j) % n_docs}\n" for j in range(int(per_query[q]))))
        return "".join(out)

    def judgments(a, b):
        out = []
        for q in range(a, b):
            start = int(first[q])
            out.append(f"q{q}\td{start}\t1\n")
            if clicked[q]:
                out.append(f"q{q}\td{(start + 1) % n_docs}\t0\n")
        return "".join(out)

    step = max(1, LINES // 64)
    write_lines(
        folder / "candidates.tsv",
        "query-id\tcorpus-id\n",
        (candidates(a, min(a + step, n_queries)) for a in range(0, n_queries, step)),
    )
    write_lines(
        folder / "qrels.tsv",
        "query-id\tcorpus-id\tscore\n",
        (judgments(a, min(a + LINES, n_queries)) for a in range(0, n_queries, LINES)),
    )
    (folder / "task.toml").write_text(
        'name = "SyntheticMindSmallReranking"\nkind = "reranking"\nfigure = "map_at_1000"\n[files]\n'
        'corpus = "corpus.jsonl"\nqueries = "queries.jsonl"\nqrels = "qrels.tsv"\ncandidates = "candidates.tsv"\n'
        f'[mteb]\nname = "{TASK}"\nrevision = "{sizes["revision"]}"\nsubset = "default"\nlanguages = ["eng-Latn"]\n',
        encoding="utf-8",
    )
    return {
        "documents": n_docs,
        "queries": n_queries,
        "distinct_query_texts": int(len(np.unique(text_of))),
        "candidate_pairs": int(per_query.sum()),
        "candidates_per_query": [int(per_query.min()), round(float(per_query.mean()), 2), int(per_query.max())],
        "judgments": int(n_queries + clicked.sum()),
    }


def vectors(folder: Path, dim: int, seed: int) -> None:
    """The export of the task and a vectors file of random float32 vectors (one per distinct text)."""
    from embeval import export_sentences
    from embeval.formats.vectors import write

    export_sentences(
        folder / "none", folder / "sentences", tasks=["SyntheticMindSmallReranking"], task_files=[folder / "task.toml"]
    )
    rng = np.random.default_rng([seed, dim])

    def encode(sentences):
        return rng.standard_normal((len(sentences), dim), dtype=np.float32)

    write(folder / "vectors.h5", folder / "sentences", encode, batch_size=65536, progress=False)


def score(folder: Path) -> dict:
    """embeval's scoring in a fresh process: seconds, CPU seconds, peak RSS, main score."""
    code = (
        "import json, os, resource, time\n"
        "import embeval\n"
        "from embeval.tasks.benchmarks import task_scores\n"
        f"folder = {str(folder)!r}\n"
        "cpu = sum(os.times()[:2]); start = time.perf_counter()\n"
        "record = embeval.score(folder + '/vectors.h5', folder + '/none', tasks=['SyntheticMindSmallReranking'],"
        " task_files=[folder + '/task.toml'], config={'bootstrap': 1000}, progress=False, log=lambda line: None)\n"
        "seconds = time.perf_counter() - start; cpu = sum(os.times()[:2]) - cpu\n"
        "(found,) = task_scores(record['tasks']).values()\n"
        "print(json.dumps({'seconds': round(seconds, 1), 'cpu_seconds': round(cpu, 1), 'main_score': found.value,"
        " 'peak_rss_mb': round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode:
        return {"error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the task's queries (default 1)")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "mindsmall_real_size.json"))
    parser.add_argument("--keep", metavar="DIR", help="write the data to DIR (a new folder) and keep it")
    args = parser.parse_args(argv)
    sizes = shape(args.scale)
    if args.keep:
        folder = Path(args.keep)
        folder.mkdir(parents=True)
    else:
        folder = Path(tempfile.mkdtemp(prefix="mindsmall-"))
    try:
        started = time.perf_counter()
        written = synthesize(folder, sizes, args.seed)
        vectors(folder, args.dim, args.seed)
        made = round(time.perf_counter() - started, 1)
        print(f"data written in {made} s: {written}", flush=True)
        found = score(folder)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    import mteb

    import embeval

    record = {
        "task": TASK,
        "what": "embeval score of synthetic data of the task's shape (mteb's descriptive statistics) x scale, "
        "random float32 vectors, 1000 bootstrap resamples, in a fresh process: wall and CPU seconds, peak RSS",
        "scale": args.scale,
        "dim": args.dim,
        "sizes": written,
        "embeval": found,
        "data_seconds": made,
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "machine": {
            "cpu_count": os.cpu_count(),
            "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "versions": {"embeval": embeval.__version__, "mteb": mteb.__version__},
        "driver_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    print(json.dumps(found))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"written: {out}")


if __name__ == "__main__":
    main()
