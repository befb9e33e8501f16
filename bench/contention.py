"""embeval on a busy CPU: the same tasks alone and beside 1, 2 and 4 CPU-bound processes, this
checkout against another (the code before a change), in one run.

    git worktree add --detach /tmp/embeval-before <commit>
    python bench/contention.py --data DATA --against-tree /tmp/embeval-before \
        [--tasks sick-e,mrpc,trec-lbfgs,search,sweep] [--busy 0,1,2,4] [--against-busy 0,2]
        [--repeats 1] [--timeout 45] [--out bench/results/contention.json]

Tasks (each run in a fresh process, with the CPU's threads left to the code: no thread variable is
set, nor OpenMP's wait policy):
  sick-e      embeval score, SICKEntailment, --solver senteval (the split protocol)
  mrpc        embeval score, MRPC, --solver senteval (k-fold)
  trec-lbfgs  embeval score, TREC, --solver lbfgs
  search      exact search (embeval.train.search.top_k): 2,000 queries x 100,000 corpus rows, 256-d,
              random vectors, top 100, cosine
  sweep       embeval sweep of 3 files, SICKEntailment, --solver senteval
Vectors: tests/devbow.py's encoder (the sweep's files: its construction salted per file, 128-d).
Arms: beside k busy processes (`yes > /dev/null`, started before the arm's runs and stopped after),
k from --busy; the other tree runs in the arms of --against-busy, alternately with this one. The
seconds are those embeval records for the task (the search's are timed around it; the sweep's are
its whole process). A run of the other tree over --timeout is stopped and recorded as at least that long. Every arm
records the load average (`uptime`) before and after it; the figures of every run are compared
with this tree's first (or, with --compare-with FILE, with that run's). `--this-threads 1
--compare-with bench/results/contention.json --busy 0 --against-busy ""` checks that one thread
gives the same figures. Targets: beside k busy processes on c CPUs, each task within
(c + k) / c x its time alone x 1.5; alone, within 5% of the other tree's time.
"""

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TASKS = ("sick-e", "mrpc", "trec-lbfgs", "search", "sweep")
SCORED = {"sick-e": ("SICKEntailment", "senteval"), "mrpc": ("MRPC", "senteval"), "trec-lbfgs": ("TREC", "lbfgs")}
SWEEP_TASKS = "SICKEntailment"
SWEEP_FILES = 3
SEARCH = {"queries": 2000, "corpus": 100_000, "dim": 256, "k": 100}
THIS_TIMEOUT = 600.0  # this tree's runs are stopped only after this long (or --timeout, if longer)
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "KMP_BLOCKTIME", "GOMP_SPINCOUNT")

SEARCH_CHILD = """
import hashlib, json, sys, time
import embeval  # first: the package prepares the process before torch loads (when its code does)
import numpy as np
from embeval.train import search
q, n, d, k = (int(v) for v in sys.argv[1:5])
rng = np.random.default_rng(0)
queries = rng.standard_normal((q, d), dtype=np.float32)
corpus = rng.standard_normal((n, d), dtype=np.float32)
start = time.perf_counter()
scores, rows = search.top_k(queries, lambda a, b: corpus[a:b], n, k, "cosine")
seconds = time.perf_counter() - start
digest = hashlib.sha256(scores.tobytes() + rows.tobytes()).hexdigest()
print(json.dumps({"seconds": seconds, "figures": {"sha256 of scores and rows": digest}}))
"""


def make_vectors(data, work):
    """devbow vectors of the scored tasks, and SWEEP_FILES salted files for the sweep (a child
    process of this tree, so this process loads no torch)."""
    code = f"""
import sys
sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / "tests")!r}, {str(HERE)!r}]
from pathlib import Path
import devbow
from classifiers import encoder
from embeval.formats import sentences as export
from embeval.formats.vectors import write
from embeval.tasks.registry import TASKS
work = Path({str(work)!r})
names = sorted({{t for t, _ in {list(SCORED.values())!r}}} | set({SWEEP_TASKS!r}.split(",")))
export.export([TASKS[t].load({str(data)!r}) for t in names], work / "sent")
write(work / "devbow.h5", work / "sent", devbow.encode, batch_size=8192, progress=False)
for i in range({SWEEP_FILES}):
    write(work / f"file{{i}}.h5", work / "sent", encoder(128, salt=f"{{i}}\\0"), batch_size=8192, progress=False)
"""
    subprocess.run([sys.executable, "-c", code], check=True)


def environment(tree):
    env = {k: v for k, v in os.environ.items() if k not in THREAD_ENV}
    env["PYTHONPATH"] = str(tree)
    return env


def run_task(task, tree, data, work, timeout, threads=None):
    """(seconds, figures, threads record) of one task run by the code in `tree`; (timeout, None,
    None) when stopped. threads: --threads N (the search: OMP_NUM_THREADS=N)."""
    env = environment(tree)
    option = [] if threads is None else ["--threads", str(threads)]
    if threads is not None and task == "search":
        env["OMP_NUM_THREADS"] = str(threads)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        out = Path(tmp)
        if task in SCORED:
            name, solver = SCORED[task]
            command = [sys.executable, "-m", "embeval", "score", str(work / "devbow.h5"), "--data", str(data)]
            command += ["--tasks", name, "--solver", solver, "--device", "cpu", "--bootstrap", "0", "--quiet"]
            command += ["--out", str(out / "r.json")] + option
        elif task == "search":
            command = [sys.executable, "-c", SEARCH_CHILD] + [str(SEARCH[k]) for k in ("queries", "corpus", "dim", "k")]
        else:
            files = [str(work / f"file{i}.h5") for i in range(SWEEP_FILES)]
            command = [sys.executable, "-m", "embeval", "sweep", *files, "--data", str(data), "--tasks", SWEEP_TASKS]
            command += ["--solver", "senteval", "--device", "cpu", "--bootstrap", "0", "--quiet"]
            command += ["--out-dir", str(out / "sweep")] + option
        start = time.perf_counter()
        try:
            done = subprocess.run(command, env=env, cwd=tmp, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return float(timeout), None, None
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"{task} ({tree}) failed:\n{done.stderr[-2000:]}")
        if task in SCORED:
            record = json.loads((out / "r.json").read_text())
            entry = record["tasks"][SCORED[task][0]]
            return entry["seconds"], entry["results"], record.get("threads")
        if task == "search":
            result = json.loads(done.stdout.strip().splitlines()[-1])
            return result["seconds"], result["figures"], None
        figures, threads = {}, None
        for i in range(SWEEP_FILES):
            record = json.loads((out / "sweep" / f"file{i}.results.json").read_text())
            figures[f"file{i}"] = {t: e["results"] for t, e in record["tasks"].items()}
            threads = record.get("threads")
        return wall, figures, threads


def start_busy(k):
    """k CPU-bound processes (yes > /dev/null)."""
    return [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(k)]


def stop_busy(processes):
    for p in processes:
        p.terminate()
    for p in processes:
        p.wait()


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def cpus():
    """The CPUs this process may use: its affinity (the bench's own measure; no cgroup quota here)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.environ.get("EMBEVAL_DATA", str(ROOT.parent / "shared/senteval_data")))
    parser.add_argument("--against-tree", help="another checkout (the code before the change)")
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--busy", default="0,1,2,4", help="busy processes beside this tree's runs, per arm")
    parser.add_argument("--against-busy", default="0,2", help="the arms in which the other tree runs too")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each (task, tree) per arm; the fastest kept")
    parser.add_argument("--timeout", type=float, default=45.0, help="seconds before a run is stopped")
    parser.add_argument("--out", default=str(HERE / "results" / "contention.json"))
    parser.add_argument("--this-threads", type=int, help="run this tree with --threads N")
    parser.add_argument("--compare-with", help="a results file of this bench whose figures every run must equal")
    parser.add_argument("--table", metavar="FILE", help="print the Markdown table of a results file and stop")
    args = parser.parse_args()
    if args.table:
        return print(markdown(json.loads(Path(args.table).read_text())))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the busy processes on the way out
    if not args.against_tree:
        parser.error("--against-tree is required")
    tasks = args.tasks.split(",")
    unknown = sorted(set(tasks) - set(TASKS))
    if unknown:
        parser.error(f"unknown task {', '.join(unknown)}; tasks are {', '.join(TASKS)}")
    busy = [int(k) for k in args.busy.split(",")]
    against = {int(k) for k in args.against_busy.split(",") if k}
    trees = {"this": ROOT, "before": Path(args.against_tree).resolve()}
    c = cpus()
    started = time.perf_counter()
    result = {
        "machine": {
            "processor": platform.processor() or platform.machine(),
            "cpus": c,
            "python": platform.python_version(),
        },
        "against_tree": str(trees["before"]),
        "tasks": tasks,
        "repeats": args.repeats,
        "timeout_seconds": args.timeout,
        "arms": [],
    }
    with tempfile.TemporaryDirectory(prefix="embeval-contention-") as tmp:
        work = Path(tmp)
        make_vectors(args.data, work)
        reference = json.loads(Path(args.compare_with).read_text())["reference_figures"] if args.compare_with else {}
        result["this_threads"], result["compared_with"] = args.this_threads, args.compare_with
        print(f"{'busy':>4} {'task':11s} {'this s':>8} {'before s':>9}  same figures  load before/after", flush=True)
        for k in busy:
            arm = {"busy": k, "uptime_before": uptime(), "load_before": os.getloadavg()[0], "runs": {}}
            processes = start_busy(k)
            try:
                for task in tasks:
                    runs = {name: [] for name in trees if name == "this" or k in against}
                    for _ in range(args.repeats):
                        for name in runs:
                            threads = args.this_threads if name == "this" else None
                            limit = args.timeout if name == "before" else max(args.timeout, THIS_TIMEOUT)
                            runs[name].append(run_task(task, trees[name], args.data, work, limit, threads))
                    row = {}
                    for name, measured in runs.items():
                        finished = [m for m in measured if m[1] is not None]
                        for _, figures, _ in finished:
                            reference.setdefault(task, figures)
                        row[name] = {
                            "seconds": round(min(m[0] for m in measured), 3),
                            "all_seconds": [round(m[0], 3) for m in measured],
                            "timed_out": len(finished) < len(measured),
                            "same_figures": all(f == reference[task] for _, f, _ in finished) if finished else None,
                            "threads": next((t for _, _, t in finished if t), None),
                        }
                    arm["runs"][task] = row
                    other = row.get("before", {})
                    shown = (">" if other.get("timed_out") else "") + (f"{other['seconds']:.1f}" if other else "-")
                    same = all(r["same_figures"] is not False for r in row.values())
                    print(
                        f"{k:4d} {task:11s} {row['this']['seconds']:8.1f} {shown:>9}  {str(same):12s}  "
                        f"{arm['load_before']:.1f}/{os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
            finally:
                stop_busy(processes)
            arm["uptime_after"], arm["load_after"] = uptime(), os.getloadavg()[0]
            result["arms"].append(arm)
            write(result, args.out)
    result["targets"] = targets(result, c)
    result["reference_figures"] = reference
    result["seconds"] = round(time.perf_counter() - started, 1)
    write(result, args.out)
    for line in summary(result):
        print(line)
    print(f"wrote {args.out} ({result['seconds']:.0f} s)")


def targets(result, c):
    """Per task: this tree's slowdown beside k busy processes against (c + k) / c x 1.5, and its
    time alone against the other tree's (within 5%)."""
    arms = {arm["busy"]: arm["runs"] for arm in result["arms"]}
    out = {}
    for task in result["tasks"]:
        entry = {}
        alone = arms.get(0, {}).get(task)
        if alone:
            if "before" in alone and not alone["before"]["timed_out"]:
                ratio = alone["this"]["seconds"] / alone["before"]["seconds"]
                entry["alone_vs_before"] = {"ratio": round(ratio, 3), "met": ratio <= 1.05}
            for k, runs in arms.items():
                if k == 0 or task not in runs:
                    continue
                slowdown = runs[task]["this"]["seconds"] / alone["this"]["seconds"]
                bound = (c + k) / c * 1.5
                entry[f"beside_{k}"] = {
                    "slowdown": round(slowdown, 2),
                    "bound": round(bound, 2),
                    "met": slowdown <= bound and not runs[task]["this"]["timed_out"],
                }
                before = runs[task].get("before")
                if before and "before" in alone and not alone["before"]["timed_out"]:
                    entry[f"beside_{k}"]["before_slowdown"] = (
                        round(before["seconds"] / alone["before"]["seconds"], 2)
                        if not before["timed_out"]
                        else f"> {before['seconds'] / alone['before']['seconds']:.1f}"
                    )
        out[task] = entry
    return out


def summary(result):
    lines = ["", "targets (slowdown = time beside k busy / time alone, bound (c + k) / c x 1.5):"]
    for task, entry in result["targets"].items():
        parts = []
        if "alone_vs_before" in entry:
            a = entry["alone_vs_before"]
            parts.append(f"alone {a['ratio']:.2f}x before ({'met' if a['met'] else 'NOT met'})")
        for key, value in entry.items():
            if key.startswith("beside_"):
                parts.append(
                    f"{key.replace('_', ' ')}: {value['slowdown']:.2f}x <= {value['bound']:.2f} "
                    f"({'met' if value['met'] else 'NOT met'}; before {value.get('before_slowdown', '-')})"
                )
        lines.append(f"  {task}: " + "; ".join(parts))
    return lines


def markdown(result):
    """The docs' table of a results file: seconds per arm, this tree (slowdown against alone, the
    bound) and the other tree where it ran; the load average at each arm's start."""
    arms = result["arms"]
    head = ["task", *(f"beside {a['busy']} (load {a['load_before']:.1f})" for a in arms), "same figures"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for task in result["tasks"]:
        cells, same = [task], True
        for arm in arms:
            row = arm["runs"].get(task)
            if not row:
                cells.append("")
                continue
            this = f"{row['this']['seconds']:.1f} s"
            target = result.get("targets", {}).get(task, {}).get(f"beside_{arm['busy']}")
            if target:
                this += f" ({target['slowdown']:.2f}x, bound {target['bound']:.2f}x)"
            before = row.get("before")
            if before:
                this += f"; before {'> ' if before['timed_out'] else ''}{before['seconds']:.1f} s"
            cells.append(this)
            same = same and all(r["same_figures"] is not False for r in row.values())
        cells.append("yes" if same else "NO")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write(result, path):
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
