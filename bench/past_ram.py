"""Scoring a retrieval corpus larger than the memory the process may use.

Builds a retrieval task (BEIR files: short documents, a few hundred queries, judgments) and its
vectors file (random float32 vectors written block by block: the file is larger than the memory
budget given), then runs `embeval score --memory-budget BUDGET` in a subprocess for a small and a
large corpus of the same width, and reads each process's peak resident memory (wait4's ru_maxrss:
anonymous memory and any mapped file pages). The small corpus measures the constant (the
interpreter, torch, the task's data, the search within its budget); the large one must stay within
the budget plus that constant, although its vectors file is several times the budget.

    python bench/past_ram.py [--rows 500000] [--dim 1536] [--budget 512MiB] [--keep DIR]

Prints a table and writes bench/results/past_ram.json.
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from embeval.formats.vectors import write  # noqa: E402
from embeval.settings import parse_size  # noqa: E402

TASK_FILE = """name = "PastRam"
kind = "retrieval"
[files]
corpus = "data/corpus.jsonl"
queries = "data/queries.jsonl"
qrels = "data/qrels/test.tsv"
"""


def build(folder: Path, rows: int, dim: int, queries: int, seed: int = 0) -> Path:
    """The task's files, its export and its vectors file (written block by block) under folder."""
    rng = np.random.default_rng(seed)
    data = folder / "data"
    (data / "qrels").mkdir(parents=True)
    with open(data / "corpus.jsonl", "w", encoding="utf-8") as f:
        for i in range(rows):
            f.write(f'{{"_id": "d{i}", "text": "d{i}"}}\n')
    with open(data / "queries.jsonl", "w", encoding="utf-8") as f:
        for i in range(queries):
            f.write(f'{{"_id": "q{i}", "text": "q{i}"}}\n')
    with open(data / "qrels" / "test.tsv", "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for i in range(queries):
            for d in rng.choice(rows, 5, replace=False):
                f.write(f"q{i}\td{d}\t1\n")
    (folder / "task.toml").write_text(TASK_FILE, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run(
        [sys.executable, "-m", "embeval", "export-sentences", "--data", str(folder / "none"), "--out",
         str(folder / "sentences"), "--task-file", str(folder / "task.toml")],
        check=True, env=env, capture_output=True,
    )  # fmt: skip

    def encode(texts):
        block = np.random.default_rng(zlib.crc32(texts[0].encode())).standard_normal((len(texts), dim))
        return block.astype(np.float32)

    return write(folder / "v.h5", folder / "sentences", encode, batch_size=16384, progress=False)


def score(folder: Path, budget: str) -> dict:
    """`embeval score` of the task in a subprocess: seconds, peak RSS (bytes), exit code, the figure."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = folder / "r.json"
    command = [
        sys.executable, "-m", "embeval", "score", str(folder / "v.h5"), "--data", str(folder / "none"),
        "--task-file", str(folder / "task.toml"), "--out", str(out), "--bootstrap", "0",
        "--no-save-predictions", "--memory-budget", budget, "--quiet",
    ]  # fmt: skip
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    stderr = process.stderr.read().decode() if process.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"embeval score failed ({code}): {stderr.strip()[-2000:]}")
    record = json.loads(out.read_text())
    return {
        "seconds": round(seconds, 1),
        "peak_rss_bytes": usage.ru_maxrss * 1024,
        "ndcg_at_10": record["tasks"]["PastRam"]["results"]["ndcg_at_10"],
        "memory_budget": record["memory_budget"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=500_000, help="documents of the large corpus")
    parser.add_argument("--small", type=int, default=20_000, help="documents of the small corpus (the constant)")
    parser.add_argument("--dim", type=int, default=1536)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--budget", default="512MiB")
    parser.add_argument("--keep", type=Path, default=None, help="build the files here and keep them")
    args = parser.parse_args()
    budget = parse_size(args.budget)
    base = args.keep or Path(tempfile.mkdtemp(prefix="past_ram_"))
    runs = []
    try:
        for rows in (args.small, args.rows):
            folder = base / f"rows{rows}"
            if not (folder / "v.h5").exists():
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir(parents=True)
                started = time.perf_counter()
                build(folder, rows, args.dim, args.queries)
                print(f"built {rows} x {args.dim} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
            run = score(folder, args.budget)
            run.update(rows=rows, dim=args.dim, file_bytes=(folder / "v.h5").stat().st_size)
            runs.append(run)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    small, large = runs
    constant = small["peak_rss_bytes"]
    within = large["peak_rss_bytes"] <= budget + constant
    mib = 1 << 20
    print(f"memory budget {args.budget} ({budget / mib:.0f} MiB); {args.queries} queries; load {os.getloadavg()}")
    print("| corpus rows | dim | vectors file MiB | peak RSS MiB | seconds | nDCG@10 |")
    print("|---:|---:|---:|---:|---:|---:|")
    for run in runs:
        print(
            f"| {run['rows']:,} | {run['dim']} | {run['file_bytes'] / mib:,.0f} | {run['peak_rss_bytes'] / mib:,.0f} "
            f"| {run['seconds']} | {run['ndcg_at_10']:.5f} |"
        )
    print(
        f"large corpus: peak {large['peak_rss_bytes'] / mib:,.0f} MiB <= budget {budget / mib:.0f} MiB + constant "
        f"{constant / mib:,.0f} MiB (the small corpus's peak): {within}"
    )
    result = {
        "budget_bytes": budget,
        "queries": args.queries,
        "runs": runs,
        "constant_bytes": constant,
        "large_within_budget_plus_constant": within,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_avg": os.getloadavg()},
    }
    out = ROOT / "bench" / "results" / "past_ram.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    if not within:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
