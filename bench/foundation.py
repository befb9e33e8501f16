"""Foundation benchmark: export time, STS scoring time at 768-d, and peak memory on a chunked file.

    python bench/foundation.py --data ../shared/senteval_data [--dim 768]

Each measurement runs the real command in a fresh process; peak memory is that process's maximum
resident set size. Writes bench/results/foundation_{dim}d.json.
"""

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np

HERE = Path(__file__).resolve().parent
STS = "STS12,STS13,STS14,STS15,STS16,STSBenchmark,SICKRelatedness"


def run(args):
    """Run `python -m embeval ARGS` in a child; return (seconds, peak RSS in MiB of that child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "embeval", *map(str, args)],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return seconds, max(peak, before) / 1024


def baseline_rss():
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import resource, embeval.run.score, embeval.cli.main;"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(out.stdout) / 1024


def write_random(path, export_dir, dim, chunked):
    """Gaussian vectors for every task of the export (the content does not matter for timing)."""
    manifest = json.loads((Path(export_dir) / "manifest.json").read_text())
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        for name, entry in manifest["tasks"].items():
            kw = (
                {"chunks": (min(entry["count"], 1024), dim), "compression": "gzip", "compression_opts": 1}
                if chunked
                else {}
            )
            ds = f.create_dataset(name, (entry["count"], dim), dtype="float32", **kw)
            for start in range(0, entry["count"], 8192):
                n = min(8192, entry["count"] - start)
                ds[start : start + n] = rng.standard_normal((n, dim), dtype=np.float32)
            ds.attrs["sha256"] = entry["sha256"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get("EMBEVAL_DATA", HERE.parent.parent / "shared/senteval_data"))
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="embeval-bench-"))
    results = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
        },
        "dim": args.dim,
    }

    times = [run(["export-sentences", "--data", args.data, "--out", work / "sent"])[0] for _ in range(args.repeat)]
    manifest = json.loads((work / "sent" / "manifest.json").read_text())
    results["export_all_tasks"] = {
        "seconds_min": min(times),
        "seconds_all": times,
        "tasks": len(manifest["tasks"]),
        "sentences": sum(e["count"] for e in manifest["tasks"].values()),
    }
    print(f"export-sentences, {len(manifest['tasks'])} tasks: {min(times):.2f} s (best of {args.repeat})")

    results["baseline_rss_mib"] = round(baseline_rss(), 1)
    for layout, chunked in (("contiguous", False), ("chunked_gzip", True)):
        path = work / f"{layout}.h5"
        write_random(path, work / "sent", args.dim, chunked)
        size = path.stat().st_size / 2**20
        runs = [
            run(["score", path, "--data", args.data, "--tasks", STS, "--out", work / f"{layout}.json"])
            for _ in range(args.repeat)
        ]
        seconds = min(r[0] for r in runs)
        peak = max(r[1] for r in runs)
        record = json.loads((work / f"{layout}.json").read_text())
        per_task = {t: e["seconds"] for t, e in record["tasks"].items()}
        results[f"score_sts_{layout}"] = {
            "seconds_min": seconds,
            "peak_rss_mib": round(peak, 1),
            "above_import_baseline_mib": round(peak - results["baseline_rss_mib"], 1),
            "file_mib": round(size, 1),
            "task_seconds": per_task,
        }
        print(
            f"score {STS} at {args.dim}-d, {layout} file of {size:.0f} MiB (all 16 tasks): "
            f"{seconds:.2f} s, peak RSS {peak:.0f} MiB (import baseline {results['baseline_rss_mib']:.0f} MiB)"
        )
    out = HERE / "results" / f"foundation_{args.dim}d.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
