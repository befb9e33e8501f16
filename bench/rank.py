"""`embeval rank` on 20 and 100 runs of a synthetic MTEB(eng, v2): time and peak memory.

The runs' predictions have MTEB(eng, v2)'s shape: its 41 tasks, each of its type's kind, with its real
number of test items (read from the descriptive statistics mteb ships with each task object, as
bench/mteb_benchmark.py reads them: queries of retrieval and reranking, test texts of classification,
pairs, embedded documents of clustering, texts of summarization), times --scale.

How the runs are made, without scoring 100 vectors files at full size: a few template runs are
scored by embeval on the same synthetic data of every task at a small size (bench/mteb_benchmark.py's
data and task files; random vectors of a different dimension each), so that every prediction set has
the layout embeval writes. Each task's items are then drawn (with replacement) up to its real count,
the same draw for every run, and every run takes each item's predictions from one of the templates at
random: every run holds the same test items (gold values, strata) and its own predictions, as
embeval's checks require. The figures are those of random vectors (near chance, the runs mostly tied):
what is measured is the cost, not the ranking.

Each size is ranked by `embeval rank`'s library call in a fresh process (imports done, then timed):
the seconds, the CPU seconds, the process's peak resident memory, and the time spent resampling the
tasks' figures (embeval.stats.resampled) apart from the rest (reading, checks, aggregation, the pairwise
tests of every ranking).

  python bench/rank.py [--runs 20,100] [--scale 1.0] [--templates 3] [--resamples 1000]
                       [--workdir DIR] [--out bench/results/rank.json]
  python bench/rank.py --markdown      # the table of docs/ranking.md, from the results file

A --workdir keeps the runs: a second call with it ranks them again without making them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

BENCHMARK = "MTEB(eng, v2)"
TEMPLATE_SCALE = 0.005  # the templates' data: 0.5% of each task (at least bench/mteb_benchmark.py's minimums)


def real_items(task, scale):
    """The number of test items of the task's prediction set at its real size, times scale."""
    import mteb_benchmark as mb

    from embeval.evaluate.clustering import embedded_documents

    kind, real = task.metadata.type, mb.sizes(task)
    if kind in mb.SEARCH_TYPES:
        n = real["queries"]
    elif kind == "Classification":
        n = real["test"]
    elif kind == "Clustering":
        n = len(
            embedded_documents(
                real["documents"],
                random.Random(42),
                task.max_fraction_of_documents_to_embed,
                task.max_document_to_embed,
            )
        )
    elif kind in ("PairClassification", "STS"):
        n = real["pairs"]
    else:
        n = real["texts"]
    return max(10, int(round(n * scale)))


def templates(tasks, count, workdir):
    """`count` template runs, each every task scored on the same small synthetic data with its own random
    vectors: [{task name: (results entry, predictions entry)}]."""
    import mteb_benchmark as mb

    import embeval
    from embeval.formats import predictions

    out = [{} for _ in range(count)]
    for task in tasks:
        for k in range(count):
            dim = 16 * (k + 2)  # another dimension: other random vectors, the same data (its seed is the task's)
            folder, _ = mb.prepare(task, TEMPLATE_SCALE, dim, 0, workdir / "templates")
            name = mb.own_name(task.metadata.name)
            results = folder / "results.json"
            record = embeval.score(
                folder / "vectors.h5",
                folder / "none",
                tasks=[name],
                task_files=[folder / "task.toml"],
                out=results,
                config={"bootstrap": 100},
                save_predictions=True,
                progress=False,
                log=lambda line: None,
            )
            saved = predictions.read_beside(results, record["predictions"])["encoder"][name]
            out[k][name] = (record["tasks"][name], saved, record)
        print(f"templates: {task.metadata.name}", file=sys.stderr, flush=True)
    return out


def grow(sets_of_templates, rows, choices):
    """One run's prediction sets: row i of each set taken from template choices[i]'s row rows[set][i] (the
    rows drawn once per set, the same for every run; arrays equal in every template, such as the gold
    values, taken as they are)."""
    out = {}
    for name, first in sets_of_templates[0].items():
        arrays = {}
        for field, array in first.arrays.items():
            stacked = np.stack([t[name].arrays[field] for t in sets_of_templates])
            same = np.array_equal(stacked, np.broadcast_to(stacked[:1], stacked.shape), equal_nan=True)
            arrays[field] = array[rows[name]] if same else stacked[choices, rows[name]]
        out[name] = type(first)(first.kind, arrays, first.figures, first.order)
    return out


def make_runs(tasks, count, scale, workdir, made):
    """`count` results files with their predictions (made: the templates)."""
    import mteb_benchmark as mb

    from embeval.formats import predictions
    from embeval.formats.results import write_json

    folder = workdir / f"runs-{count}"
    made_before = sorted(folder.glob("run*.json")) if folder.is_dir() else []
    if len(made_before) == count:  # an earlier call with this --workdir made them
        return made_before
    names = [task.metadata.name for task in tasks]
    rng = np.random.default_rng(46)
    draws = {}  # {task: (real count, {set: the template rows of the count's items})}
    for task in tasks:
        name = mb.own_name(task.metadata.name)
        n = real_items(task, scale)
        sets = made[0][name][1]["sets"]
        draws[name] = (n, {s: rng.integers(0, sets[s].items, n) for s in sets})
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in range(count):
        run_rng = np.random.default_rng([46, r])
        quality = run_rng.dirichlet(np.ones(len(made)))  # each run favours some templates
        record = json.loads(json.dumps(made[0][next(iter(made[0]))][2]))
        record["tasks"], kept = {}, {}
        for name, (n, rows) in draws.items():
            choices = run_rng.choice(len(made), size=n, p=quality)
            sets = grow([m[name][1]["sets"] for m in made], rows, choices)
            entry = made[0][name][1]
            kept[name] = {"data_sha256": entry["data_sha256"], "vectors_sha256": f"run{r}", "sets": sets}
            record["tasks"][name] = made[r % len(made)][name][0]
        record["benchmarks"] = {BENCHMARK: {"declared": names}}
        record["vectors"] = dict(record.get("vectors") or {}, file=f"run{r:03d}.h5", model=f"run{r:03d}")
        out = folder / f"run{r:03d}.json"
        side = predictions.sidecar_path(out)
        sha = predictions.write(side, {"encoder": kept})
        record["predictions"] = {"file": side.name, "sha256": sha}
        write_json(out, record)
        paths.append(out)
        print(f"runs: {r + 1} of {count}", file=sys.stderr, flush=True)
    return paths


def measure(paths, resamples):
    """In this process: rank the files, timed (imports done first)."""
    from embeval import stats
    from embeval.reports import rank

    spent: dict[str, float] = {}
    original = stats.resampled

    def timed(stat, arrays, seed, task, *args, **kwargs):
        start = time.perf_counter()
        try:
            return original(stat, arrays, seed, task, *args, **kwargs)
        finally:
            spent[task] = spent.get(task, 0.0) + time.perf_counter() - start

    stats.resampled = timed
    load = os.getloadavg()[0]
    cpu = os.times()
    start = time.perf_counter()
    result = rank.rank(paths, resamples=resamples)
    seconds = time.perf_counter() - start
    after = os.times()
    text = rank.text(result)
    by = {r["name"]: r for r in result["benchmarks"][0]["rankings"]}
    return {
        "runs": len(paths),
        "seconds": round(seconds, 1),
        "cpu_seconds": round(after.user + after.system - cpu.user - cpu.system, 1),
        "resampling_seconds": round(sum(spent.values()), 1),
        "slowest_tasks": {t: round(v, 1) for t, v in sorted(spent.items(), key=lambda kv: -kv[1])[:5]},
        "load": [round(load, 1), round(os.getloadavg()[0], 1)],  # the 1-minute load average, before and after
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "tasks_ranked": sum(1 for t in result["tasks"] if t["ranked"] >= 2),
        "benchmark_tasks": len(result["benchmarks"][0]["tasks"]),
        "best_set_mean_task": len(by["Mean (Task)"]["best"]),
        "text_lines": len(text.splitlines()),
    }


def table(record):
    lines = [
        "| runs | test items | seconds | CPU seconds | of the seconds, resampling | peak memory | predictions read "
        "| load |",
        "|---|---|---|---|---|---|---|---|",
    ]
    items = sum(record["items"].values())
    for row in record["rows"]:
        lines.append(
            f"| {row['runs']} | {items:,} per run ({record['scale']:g} x real) | {row['seconds']:.0f} | "
            f"{row['cpu_seconds']:.0f} | {row['resampling_seconds']:.0f} s | {row['peak_rss_mb']:,} MB | "
            f"{row['predictions_mb']:,} MB | {row.get('load', ['?'])[0]} |"
        )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="20,100", help="run counts to rank (comma-separated)")
    parser.add_argument("--scale", type=float, default=1.0, help="test items per task, times the real count")
    parser.add_argument("--templates", type=int, default=3)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--tasks", default=None, help="only these tasks of the benchmark (comma-separated)")
    parser.add_argument("--workdir", default=None, help="where the runs are written (default: a temporary folder)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "rank.json"))
    parser.add_argument("--measure", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--markdown", action="store_true", help="print the table of the results file and stop")
    args = parser.parse_args()
    if args.markdown:
        print(table(json.loads(Path(args.out).read_text())))
        return
    if args.measure:
        print(json.dumps(measure(args.measure, args.resamples)))
        return
    import mteb_benchmark as mb

    tasks = mb.benchmark_tasks(args.tasks.split(",") if args.tasks else None)
    counts = [int(c) for c in args.runs.split(",")]
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="embeval-rank-bench-"))
    try:
        started = time.perf_counter()
        runs = workdir / f"runs-{max(counts)}"
        ready = runs.is_dir() and len(list(runs.glob("run*.json"))) == max(counts)
        made = [] if ready else templates(tasks, args.templates, workdir)
        paths = make_runs(tasks, max(counts), args.scale, workdir, made)
        prepared = time.perf_counter() - started
        sizes = {mb.own_name(t.metadata.name): real_items(t, args.scale) for t in tasks}
        rows = []
        for count in counts:
            command = [sys.executable, __file__, "--resamples", str(args.resamples), "--measure"]
            done = subprocess.run(command + [str(p) for p in paths[:count]], capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(done.stderr[-3000:])
            row = json.loads(done.stdout.strip().splitlines()[-1])
            row["predictions_mb"] = round(
                sum(p.with_name(p.name[:-5] + ".predictions.npz").stat().st_size for p in paths[:count]) / 2**20
            )
            rows.append(row)
            print(
                f"{count:>4} runs: {row['seconds']:8.1f} s ({row['resampling_seconds']:.1f} s resampling, "
                f"{row['cpu_seconds']:.1f} CPU s), peak {row['peak_rss_mb']} MB, "
                f"predictions {row['predictions_mb']} MB",
                flush=True,
            )
        record = {
            "benchmark": BENCHMARK,
            "tasks": len(tasks),
            "scale": args.scale,
            "items": sizes,
            "resamples": args.resamples,
            "templates": args.templates,
            "rows": rows,
            "preparation_seconds": round(prepared, 1),
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load": os.getloadavg()},
        }
        Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {args.out}")
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
