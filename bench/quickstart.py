"""Time `embeval quickstart` as a user runs it: the default tasks, a new work folder, the data present.

    python bench/quickstart.py --data DIR [--encoder minilm|bow] [--device cpu]

Runs `python -m embeval quickstart` as its own process and reports its wall time, the CPU time of
it and its children (the exporter), the share of the wall time spent exporting, embedding and
scoring (from the time each of quickstart's stderr lines arrives and the results file's own
seconds), and the load average of the machine around the run: on a shared machine the wall time
is longer than on an idle one, the CPU time much less so. Writes the run's results file to
bench/results/quickstart_ENCODER.json and the timings to bench/results/quickstart_ENCODER_timing.json.
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"


def children_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_quickstart(data, encoder, device, workdir):
    """Run the command; return (stderr lines with their arrival second, stdout, wall s, CPU s)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO))
    command = [
        sys.executable,
        "-m",
        "embeval",
        "quickstart",
        "--data",
        str(data),
        "--workdir",
        str(workdir),
        "--encoder",
        encoder,
        "--device",
        device,
    ]
    cpu_before, start = children_cpu_seconds(), time.monotonic()
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=workdir.parent
    )
    lines = [(round(time.monotonic() - start, 2), line.rstrip("\n")) for line in process.stderr]
    stdout = process.stdout.read()
    if process.wait() != 0:
        sys.exit(f"quickstart failed (exit code {process.returncode}):\n" + "\n".join(line for _, line in lines))
    return lines, stdout, time.monotonic() - start, children_cpu_seconds() - cpu_before


def first(lines, prefix):
    return next(t for t, line in lines if line.startswith(prefix))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="SentEval data folder holding the default tasks")
    parser.add_argument("--encoder", default="minilm", choices=["minilm", "bow"])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    args = parser.parse_args()

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="embeval-bench-") as tmp:
        workdir = Path(tmp) / "quickstart"
        lines, stdout, wall, cpu = run_quickstart(args.data, args.encoder, args.device, workdir)
        results = workdir / f"results-{args.encoder}.json"
        record = json.loads(results.read_text())
        shutil.copyfile(results, RESULTS / f"quickstart_{args.encoder}.json")
        manifest = json.loads((workdir / "sentences" / "manifest.json").read_text())
    load_after = os.getloadavg()

    exported, embedding = first(lines, "exported "), first(lines, "embedding with ")
    scoring = record["seconds"]
    timing = {
        "command": f"embeval quickstart --encoder {args.encoder} --device {args.device} (default tasks)",
        "tasks": list(record["tasks"]),
        "sentences_embedded": manifest["union"]["count"],
        "wall_seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 1),
        "stages_wall_seconds": {
            "start_load_and_export": exported,
            "embed": round(wall - scoring - embedding, 1),
            "score": round(scoring, 1),
        },
        "task_seconds": {name: entry["seconds"] for name, entry in record["tasks"].items()},
        "headline": {
            name: entry["results"].get("all", entry["results"].get("cosine", {})).get("spearman")
            for name, entry in record["tasks"].items()
        },
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_1min_before": round(load_before[0], 2),
            "load_average_1min_after": round(load_after[0], 2),
            "load_average_15min_after": round(load_after[2], 2),
        },
    }
    out = RESULTS / f"quickstart_{args.encoder}_timing.json"
    out.write_text(json.dumps(timing, indent=1) + "\n")
    print(stdout)
    print(json.dumps(timing, indent=1))
    print(f"wrote {out} and {RESULTS / f'quickstart_{args.encoder}.json'}")


if __name__ == "__main__":
    main()
