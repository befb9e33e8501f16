"""One `embeval sweep` of several files against one `embeval score` per file, and through a local Ray.

    python bench/sweep.py --data ../shared/senteval_data [--files 8] [--dim 384] [--tasks CR,MR,...]
        [--solvers senteval,lbfgs] [--config prototype] [--threads N]

Files: --files deterministic encoders (encoder i: the mean of random token vectors seeded by the
token and i), each with a root attribute `step`. Per solver, each arm runs as its own process(es)
with the same torch thread count (--threads; the process's OMP_NUM_THREADS): (a) one
`embeval score` per file, one after the other; (b) one `embeval sweep` of every file; (c) the same
sweep with --ray (a local Ray started by the command). Reports wall seconds, the peak resident
memory of the largest process, how many times the classification protocols prepared their samples
(features and folds), and checks that every file's results are the same in all arms.
With --against-tree CHECKOUT, the arms `separate@other` and `sweep@other` run the same commands with
the code of another checkout (an earlier commit), in the same run. Writes bench/results/sweep.json
and prints a table.
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

import _checkout  # noqa: F401  (this clone's embeval, from any folder)
import h5py
from classifiers import TASKS, encoder

HERE = Path(__file__).resolve().parent


def make_files(data, tasks, dim, count, work):
    from embeval.formats import sentences as export
    from embeval.formats.vectors import write
    from embeval.tasks.registry import TASKS as REGISTRY

    export.export([REGISTRY[t].load(data) for t in tasks], work / "sent")
    paths = []
    for i in range(count):
        path = work / f"enc{i}.h5"
        write(path, work / "sent", encoder(dim, salt=f"{i}\0"), batch_size=8192, progress=False)
        with h5py.File(path, "a") as f:
            f.attrs["step"] = 1000 * (i + 1)
        paths.append(path)
    return paths


def timed(command, env):
    """(wall seconds, peak RSS in MiB of the largest child process so far) of running `command`."""
    start = time.perf_counter()
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - start
    return seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def figures(path):
    record = json.loads(Path(path).read_text())
    return {t: dict(e["results"].items()) for t, e in record["tasks"].items()}


def run_arm(kind, paths, data, tasks, options, out, env, tree, counts):
    base = [sys.executable, str(HERE / "count_prepare.py"), str(tree), str(counts)]
    if kind == "separate":
        total, peak = 0.0, 0.0
        for path in paths:
            seconds, peak = timed(
                base
                + [
                    "score",
                    str(path),
                    "--data",
                    str(data),
                    "--tasks",
                    ",".join(tasks),
                    "--out",
                    str(out / f"{path.stem}.results.json"),
                    "--quiet",
                ]
                + options,
                env,
            )
            total += seconds
        return total, peak
    extra = ["--ray"] if kind == "ray" else []
    return timed(
        base
        + ["sweep", *map(str, paths), "--data", str(data), "--tasks", ",".join(tasks), "--out-dir", str(out), "--quiet"]
        + options
        + extra,
        env,
    )


def arm_child(args):
    """Each arm in a fresh process of its own, so the peak memory is that arm's."""
    paths = [Path(p) for p in args.paths.split(",")]
    kind, _, where = args.arm.partition("@")
    tree = Path(args.against_tree).resolve() if where == "other" else HERE.parent
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads), PYTHONPATH=str(tree))
    options = ["--config", args.config, "--solver", args.solver, "--device", "cpu", "--bootstrap", str(args.bootstrap)]
    counts = Path(args.out) / "prepare-counts.txt"
    seconds, peak = run_arm(kind, paths, args.data, args.tasks.split(","), options, Path(args.out), env, tree, counts)
    prepared = sum(int(line) for line in counts.read_text().split()) if counts.exists() else 0
    print(json.dumps({"seconds": round(seconds, 1), "peak_mib": round(peak), "preparations": prepared}))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--solvers", default="senteval,lbfgs")
    parser.add_argument("--config", default="prototype")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count(),
        help="torch threads per process (default: one per core, as torch's own)",
    )
    parser.add_argument("--arms", default="separate,sweep,ray")
    parser.add_argument("--against-tree", help="another checkout: adds the arms separate@other and sweep@other")
    parser.add_argument("--out", default=str(HERE / "results" / "sweep.json"))
    parser.add_argument("--arm", help=argparse.SUPPRESS)
    parser.add_argument("--paths", help=argparse.SUPPRESS)
    parser.add_argument("--solver", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm:
        return arm_child(args)
    tasks = args.tasks.split(",")
    if args.against_tree:
        args.arms += ",separate@other,sweep@other"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        paths = make_files(Path(args.data), tasks, args.dim, args.files, work)
        runs = {}
        for solver in args.solvers.split(","):
            runs[solver] = {}
            for arm in args.arms.split(","):
                out = work / f"{solver}-{arm}"
                out.mkdir()
                command = [
                    sys.executable,
                    __file__,
                    "--arm",
                    arm,
                    "--paths",
                    ",".join(map(str, paths)),
                    "--solver",
                    solver,
                    "--data",
                    args.data,
                    "--tasks",
                    args.tasks,
                    "--config",
                    args.config,
                    "--bootstrap",
                    str(args.bootstrap),
                    "--threads",
                    str(args.threads),
                    "--out",
                    str(out),
                ] + (["--against-tree", args.against_tree] if args.against_tree else [])
                result = subprocess.run(command, check=True, capture_output=True, text=True)
                runs[solver][arm] = json.loads(result.stdout.strip().splitlines()[-1])
                print(
                    f"{solver:9s} {arm:15s} {runs[solver][arm]['seconds']:8.1f} s  "
                    f"peak {runs[solver][arm]['peak_mib']:6d} MiB  {runs[solver][arm]['preparations']:5d} preparations",
                    flush=True,
                )
                write(args, tasks, runs)
            reference = {
                p.stem: figures(work / f"{solver}-{args.arms.split(',')[0]}" / f"{p.stem}.results.json") for p in paths
            }
            runs[solver]["identical"] = all(
                figures(work / f"{solver}-{arm}" / f"{p.stem}.results.json") == reference[p.stem]
                for arm in args.arms.split(",")
                for p in paths
            )
            arms = runs[solver]
            if "separate" in arms and "sweep" in arms:
                arms["speedup"] = round(arms["separate"]["seconds"] / arms["sweep"]["seconds"], 2)
            if "separate@other" in arms and "sweep@other" in arms:
                arms["speedup_other"] = round(arms["separate@other"]["seconds"] / arms["sweep@other"]["seconds"], 2)
            if "sweep" in arms and "ray" in arms:
                arms["ray_overhead_seconds"] = round(arms["ray"]["seconds"] - arms["sweep"]["seconds"], 1)
    write(args, tasks, runs)
    print(json.dumps(runs, indent=1))


def write(args, tasks, runs):
    """The results so far (after every arm, so a long run that is stopped keeps what it measured)."""
    result = {
        "against_tree": args.against_tree,
        "files": args.files,
        "dim": args.dim,
        "tasks": tasks,
        "config": args.config,
        "bootstrap": args.bootstrap,
        "torch_threads": args.threads,
        "machine": {
            "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
            "load_average": [round(x, 1) for x in os.getloadavg()],
        },
        "runs": runs,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
