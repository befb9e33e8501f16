"""MTEB(eng, v2) by name: `embeval --mteb` against `mteb.evaluate`, both reading the same dataset
copies from disk, task by task.

Every task of the benchmark (or those of --tasks) gets a copy of its dataset written in the layout
its mteb loader reads (bench/mteb_copies.py: README configs, parquet, the revision recorded as
`hf download --local-dir` records it), of its real size read from mteb's descriptive statistics
(after mteb's own sub-sampling), times --scale; every distinct text a random float32 vector of
--dim dimensions. Then, each arm in a fresh process that imports everything and warms up on the
first task before timing, its peak memory reset before each task (Linux clear_refs):

embeval   the task as `embeval export-sentences --mteb "MTEB(eng, v2)" --mteb-data DIR` takes it:
          the benchmark's own task object (its subsets and splits) loaded by mteb's loader from the
          copy, the kind's files written to embeval's cache (a fresh one for the run), the sentences
          exported ("load"); the vectors written (untimed); then scored from those files as
          `embeval score --mteb` scores them (embeval.score on the task's specs, default settings,
          95% intervals: "score")
mteb      `mteb.evaluate` of the benchmark's task object pointed at the copy (its loader, transform and
          evaluator; datasets' cache fresh for the run), an encoder serving the same vectors

Per task and arm: wall seconds, CPU seconds (every thread's), the process's peak resident memory
and what the task added to it, the main score (mteb's main score name; the arms' must be equal to
1e-6) and, for embeval's retrieval and reranking, the tie exposure. Totals per arm, overall and for
retrieval and reranking. MindSmallReranking's mteb arm needs more memory than 24 GB at its real
size: --mteb-skip leaves it out of that arm (bench/mindsmall_real_size.py times embeval on it).

  python bench/mteb_by_name.py [--tasks A,B] [--scale 1] [--dim 384] [--mteb-skip MindSmallReranking]
                               [--keep DIR] [--out bench/results/mteb_by_name.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
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
SEARCH = ("Retrieval", "Reranking")


def benchmark_tasks(names=None):
    import mteb

    tasks = list(mteb.get_benchmark(BENCHMARK).tasks)
    if names:
        known = {t.metadata.name: t for t in tasks}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise SystemExit(f"not tasks of {BENCHMARK}: {', '.join(unknown)}")
        tasks = [known[n] for n in names]
    return tasks


class Counter:
    """Texts "x<row>", each a row of the vectors matrix; titles empty (a document is its text)."""

    def __init__(self):
        self.n = 0

    def __call__(self, n, role):
        if role == "title":
            return [""] * n
        self.n += n
        return [f"x{i}" for i in range(self.n - n, self.n)]


def rows_of(texts):
    return np.fromiter((int(t[1:]) for t in texts), dtype=np.int64, count=len(texts))


def prepare(tasks, scale, dim, seed, root):
    """Every task's copy under root/datasets and the vectors of its texts (root/vectors.npy); the sizes."""
    import mteb_copies

    rng = np.random.default_rng(seed)
    texts = Counter()
    sizes = {}
    for task in tasks:
        size = mteb_copies.shape(task, scale, least=10)
        mteb_copies.write_copy(task, root / "datasets", size, texts, rng, form="parquet")
        sizes[task.metadata.name] = size
    vectors = np.lib.format.open_memmap(root / "vectors.npy", mode="w+", dtype=np.float32, shape=(texts.n, dim))
    for a in range(0, texts.n, 1 << 18):
        b = min(texts.n, a + (1 << 18))
        vectors[a:b] = rng.standard_normal((b - a, dim), dtype=np.float32)
    vectors.flush()
    return sizes


# The two arms, each in its own process.


def run_embeval(name, root, vectors):
    """The task through embeval's --mteb machinery: the benchmark's own task object (its subsets and
    splits, as `--mteb "MTEB(eng, v2)"` resolves it) loaded by mteb's loader from the copy and written
    to embeval's cache as the kind's files (embeval.tasks.mteb_source.task_specs), its sentences
    exported ("load"); then scored from those files (`embeval.score`, default settings: "score")."""
    from embeval.formats.sentences import export_sentences
    from embeval.formats.vectors import write
    from embeval.run.score import score
    from embeval.tasks import mteb_source
    from embeval.tasks.registry import builtin

    (task,) = benchmark_tasks([name])
    work = root / "embeval" / name
    shutil.rmtree(work, ignore_errors=True)

    def by_name():  # the registry --mteb makes: its tasks, a built-in of the same name giving way
        specs, _ = mteb_source.task_specs([mteb_source.Requested(task, [BENCHMARK])], root / "datasets")
        return builtin().with_mteb(specs), [spec.name for spec in specs]

    cpu, start = _cpu_seconds(), time.perf_counter()
    registry, names = by_name()
    export_sentences(root / "none", work / "sentences", names, registry=registry)
    load, load_cpu = time.perf_counter() - start, _cpu_seconds() - cpu
    write(work / "v.h5", work / "sentences", lambda texts: vectors[rows_of(texts)], progress=False)
    cpu, start = _cpu_seconds(), time.perf_counter()
    registry, names = by_name()  # from embeval's cache now, as a second command finds it
    record = score(
        work / "v.h5", root / "none", names, out=work / "results.json", progress=False, log=lambda line: None,
        registry=registry,
    )  # fmt: skip
    score, score_cpu = time.perf_counter() - start, _cpu_seconds() - cpu
    summary = record["mteb"][name]
    shutil.rmtree(work, ignore_errors=True)
    found = {
        "seconds": round(load + score, 3),
        "load_seconds": round(load, 3),
        "score_seconds": round(score, 3),
        "cpu_seconds": round(load_cpu + score_cpu, 2),
        "main_score": summary["value"],
    }
    if "tie_exposure" in summary:
        found["tie_exposure"] = summary["tie_exposure"]
    return found


class ServedRows:
    """mteb's encoder protocol serving the vectors' rows ("x<row>" texts), mteb's cosine similarity."""

    def __init__(self, vectors):
        from mteb.models.model_meta import ModelMeta

        self.vectors = vectors
        self.mteb_model_meta = ModelMeta(
            loader=None, name="embeval-bench/served-rows", revision="0", release_date=None, languages=None,
            n_parameters=None, memory_usage_mb=None, max_tokens=None, embed_dim=None, license=None,
            open_weights=None, public_training_code=None, public_training_data=None, framework=[],
            similarity_fn_name="cosine", use_instructions=None, training_datasets=None,
        )  # fmt: skip

    def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):
        texts = [text for batch in inputs for text in batch["text"]]
        return np.asarray(self.vectors[rows_of(texts)])

    def similarity(self, a, b):
        from mteb.models.model_meta import ScoringFunction
        from mteb.similarity_functions import select_similarity

        return select_similarity(a, b, ScoringFunction.COSINE)

    def similarity_pairwise(self, a, b):
        from mteb.models.model_meta import ScoringFunction
        from mteb.similarity_functions import select_pairwise_similarity

        return select_pairwise_similarity(a, b, ScoringFunction.COSINE)


def run_mteb(name, root, vectors):
    import mteb

    (task,) = benchmark_tasks([name])
    meta = task.metadata.model_copy(deep=True)
    meta.dataset["path"] = str(root / "datasets" / task.metadata.dataset["path"])
    task.metadata = meta
    cpu, start = _cpu_seconds(), time.perf_counter()
    result = mteb.evaluate(
        ServedRows(vectors), task, cache=None, show_progress_bar=False, encode_kwargs={"batch_size": 512}
    )
    seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
    (task_result,) = result.task_results
    return {"seconds": round(seconds, 3), "cpu_seconds": round(cpu, 2), "main_score": task_result.get_score()}


def _cpu_seconds():
    times = os.times()
    return times.user + times.system


def _status(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) / 1024
    return 0.0


def _peak_reset():
    import gc

    gc.collect()
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def worker(arm, names, root):
    """One arm over the tasks in this process: imports and a warm-up first, then each task timed."""
    import warnings

    warnings.filterwarnings("ignore")
    import datasets
    import mteb  # noqa: F401
    import torch  # noqa: F401
    from threadpoolctl import threadpool_limits

    import embeval.run.score  # noqa: F401  (embeval's imports before any timing)

    os.environ["EMBEVAL_CACHE"] = str(root / f"cache-{arm}")
    datasets.config.HF_DATASETS_CACHE = root / f"hf-{arm}"  # datasets builds each copy's tables afresh
    vectors = np.load(root / "vectors.npy", mmap_mode="r")
    threads = int(os.environ.get("BENCH_THREADS", "2"))

    def one(name):
        return run_embeval(name, root, vectors) if arm == "embeval" else run_mteb(name, root, vectors)

    with threadpool_limits(threads):  # warm-up, untimed: each library's first-call costs paid once
        try:
            one(names[0])
        except Exception:  # the timed run records it
            pass
    shutil.rmtree(root / f"cache-{arm}", ignore_errors=True)
    shutil.rmtree(root / f"hf-{arm}", ignore_errors=True)
    for name in names:
        _peak_reset()
        before = _status("VmRSS:")
        try:
            with threadpool_limits(threads):
                out = one(name)
            out["peak_rss_mb"] = round(_status("VmHWM:"), 1)
            out["added_mb"] = round(out["peak_rss_mb"] - before, 1)
        except Exception as err:  # recorded; the other tasks go on
            out = {"error": f"{type(err).__name__}: {err}".splitlines()[0][:300]}
        print(json.dumps({"task": name, **out}), flush=True)


def arm(name, names, root):
    done = subprocess.run(
        [sys.executable, __file__, "--worker", name, "--task-name", ",".join(names), "--root", str(root)],
        capture_output=True,
        text=True,
    )
    found = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            item = json.loads(line)
            found[item.pop("task")] = item
    last = (done.stderr or "").strip().splitlines()
    for task in names:
        found.setdefault(task, {"error": last[-1] if last else f"exit {done.returncode}"})
    return found


def totals(rows, types=None):
    chosen = [r for r in rows if types is None or r["type"] in types]
    both = [r for r in chosen if "error" not in r["embeval"] and "error" not in r.get("mteb", {"error": 1})]
    e = sum(r["embeval"]["seconds"] for r in both)
    m = sum(r["mteb"]["seconds"] for r in both)
    return {
        "tasks": len(both),
        "embeval_seconds": round(e, 2),
        "embeval_load_seconds": round(sum(r["embeval"]["load_seconds"] for r in both), 2),
        "embeval_score_seconds": round(sum(r["embeval"]["score_seconds"] for r in both), 2),
        "mteb_seconds": round(m, 2),
        "embeval_cpu_seconds": round(sum(r["embeval"]["cpu_seconds"] for r in both), 2),
        "mteb_cpu_seconds": round(sum(r["mteb"]["cpu_seconds"] for r in both), 2),
        "ratio": round(m / e, 2) if e else None,
        "embeval_peak_rss_mb": max((r["embeval"]["peak_rss_mb"] for r in both), default=None),
        "mteb_peak_rss_mb": max((r["mteb"]["peak_rss_mb"] for r in both), default=None),
        "equal": all(r["equal"] for r in both),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", help="a comma list of the benchmark's tasks (default: all 41)")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of each task's real size (default 1)")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mteb-skip", default="MindSmallReranking", help="tasks left out of mteb's arm ('' none)")
    parser.add_argument("--keep", help="write the copies here and keep them (default: a temporary folder)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "mteb_by_name.json"))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--task-name", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker, args.task_name.split(","), Path(args.root))
    import mteb

    import embeval

    tasks = benchmark_tasks(args.tasks.split(",") if args.tasks else None)
    skipped = {n for n in args.mteb_skip.split(",") if n}
    load, started = os.getloadavg(), time.perf_counter()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="mteb-by-name-"))
    try:
        sizes = prepare(tasks, args.scale, args.dim, args.seed, root)
        names = [t.metadata.name for t in tasks]
        ours = arm("embeval", names, root)
        theirs = arm("mteb", [n for n in names if n not in skipped], root) if set(names) - skipped else {}
        disk_mb = sum(p.stat().st_size for p in (root / "datasets").rglob("*") if p.is_file()) / 2**20
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    head = f"{'task':<40}{'type':<20}{'embeval s':>10}{'(load)':>8}{'mteb s':>9}{'ratio':>7}{'e MB':>8}{'m MB':>8}"
    print(f"{head}  equal")
    rows = []
    for task in tasks:
        name = task.metadata.name
        mine, other = ours[name], theirs.get(name, {"error": "left out (--mteb-skip)"})
        equal = "error" not in mine and "error" not in other and abs(mine["main_score"] - other["main_score"]) <= 1e-6
        row = {"task": name, "type": task.metadata.type, "main_score": task.metadata.main_score}
        row.update(sizes=sizes[name], embeval=mine, mteb=other, equal=equal)
        if "error" not in mine and "error" not in other:
            row["difference"] = abs(mine["main_score"] - other["main_score"])
        rows.append(row)
        both = "seconds" in mine and "seconds" in other
        print(
            f"{name:<40}{task.metadata.type:<20}{mine.get('seconds', float('nan')):>10.2f}"
            f"{mine.get('load_seconds', float('nan')):>8.2f}{other.get('seconds', float('nan')):>9.2f}"
            f"{(other['seconds'] / mine['seconds']) if both else float('nan'):>7.2f}"
            f"{mine.get('peak_rss_mb', float('nan')):>8.0f}{other.get('peak_rss_mb', float('nan')):>8.0f}  "
            f"{'yes' if equal else mine.get('error') or other.get('error') or 'NO'}",
            flush=True,
        )
    summary = {"all": totals(rows), "retrieval and reranking": totals(rows, SEARCH)}
    for what, t in summary.items():
        print(
            f"total, {what}: {t['tasks']} tasks, embeval {t['embeval_seconds']} s (load {t['embeval_load_seconds']}, "
            f"score {t['embeval_score_seconds']}), mteb {t['mteb_seconds']} s, mteb / embeval = {t['ratio']}x, "
            f"equal main scores: {t['equal']}"
        )
    record = {
        "benchmark": BENCHMARK,
        "what": (
            "copies of each task's dataset on disk in its loader's layout (parquet, README configs, the revision "
            "recorded), its real size (mteb's descriptive statistics) x scale, random float32 vectors per distinct "
            "text; embeval: --mteb's machinery on the benchmark's task object (mteb's loader on the copy, the kind's "
            "files written to a fresh cache, the sentences exported: load), then embeval.score on the task's "
            "specs (default settings, 95% intervals: score); mteb: mteb.evaluate of the "
            "benchmark's task pointed at the copy, datasets' cache fresh, an encoder serving the vectors; each arm "
            "in a fresh process, a warm-up task first, peak RSS reset before each task"
        ),
        "scale": args.scale,
        "dim": args.dim,
        "tasks_run": [t.metadata.name for t in tasks],
        "mteb_skipped": sorted(skipped & {t.metadata.name for t in tasks}),
        "threads": int(os.environ.get("BENCH_THREADS", "2")),
        "copies_mb": round(disk_mb, 1),
        "load_average_at_start": [round(x, 2) for x in load],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "wall_seconds": round(time.perf_counter() - started, 1),
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "versions": {"embeval": embeval.__version__, "mteb": mteb.__version__},
        "summary": summary,
        "rows": rows,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"written: {out}")


if __name__ == "__main__":
    main()
