"""`embeval score`: check everything, then run each task's evaluator and write the results.

A run has two phases. The pre-flight loads every requested task's data and checks its vectors
(structure, fingerprint, memory, values) before anything is scored or written, so bad input
never leaves a results file behind (nor touches the previous one). Then each task is scored and
the results file is rewritten atomically after it, so an interrupted run keeps what finished and
`resume=True` picks it up. Only data and vectors are read: no user code runs in this process.
"""
import hashlib
import json
import logging
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from embeval._version import __version__
from embeval.errors import DataFileError, EmbevalError, VectorsError
from embeval.evaluate import EVALUATORS, PARTIAL, geometry, normalize
from embeval.evaluate.context import Context
from embeval.formats import atomic, predictions
from embeval.formats.results import FORMAT, FORMAT_VERSION, write_json
from embeval.formats.sentences import (
    UNION,
    fingerprint,
    task_sentences,
    union_sentences,
)
from embeval.formats.vectors import VectorsFile, union_rows, warn_unverified
from embeval.memory import check_device_tables
from embeval.run import baseline
from embeval.run.config import build as build_config
from embeval.tasks.figures import SELECTION
from embeval.tasks.registry import TASK_NAMES, TASKS
from embeval.tasks.samples import split_rows

logger = logging.getLogger("embeval")

def resolve_device(name):
    """'auto' -> cuda when available, else cpu; 'cuda' without a GPU is an error."""
    name = (name or "auto").lower()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise EmbevalError("--device cuda asked for, but torch sees no CUDA device", file="--device")
    try:
        return torch.device(name)
    except RuntimeError:
        raise EmbevalError(f"unknown device {name!r} (use auto, cpu or cuda)", file="--device")


def describe_device(device):
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def versions():
    import h5py
    import scipy
    import sklearn

    return {"python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__,
            "torch": torch.__version__, "scikit-learn": sklearn.__version__, "h5py": h5py.__version__}


def file_digest(path, block=1 << 22):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(block), b""):
            h.update(chunk)
    return h.hexdigest()


def data_fingerprint(root, files):
    """sha256 over the task's data files (relative path and content): changes with any label or text."""
    h = hashlib.sha256()
    for path in files:
        h.update(f"{Path(path).relative_to(root).as_posix()}\0{file_digest(path)}\n".encode())
    return h.hexdigest()


def table_fingerprint(table):
    h = hashlib.sha256(f"{table.shape[0]}x{table.shape[1]}\n".encode())
    h.update(np.ascontiguousarray(table).data)
    return h.hexdigest()


class TaskDataCache:
    """Loads each task's data once per run."""

    def __init__(self, root):
        self.root = Path(root)
        self._data = {}

    def get(self, name):
        if name not in self._data:
            self._data[name] = TASKS[name].load(self.root)
        return self._data[name]


def _listed(names, limit=8):
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def plan(requested, explicit, vf, root, strict=False):
    """Split the requested tasks into those to score and those skipped, with the reason.

    strict: every requested task must be scored; one that would be skipped is an error.
    """
    names = set(vf.names())
    union = vf.union_tasks() or []
    todo, skipped = [], {"absent_from_file": [], "not_implemented": [], "no_data": []}
    for name in requested:
        task = TASKS[name]
        if name not in names and name not in union:
            skipped["absent_from_file"].append(name)
        elif task.evaluator not in EVALUATORS:
            skipped["not_implemented"].append(name)
        elif task.missing_files(root):
            if explicit or strict:
                raise DataFileError("missing data file; get the data with `embeval data fetch`",
                                    file=Path(root) / task.missing_files(root)[0], task=name)
            skipped["no_data"].append(name)
        else:
            todo.append(name)
    if strict:
        _refuse_skips(skipped, names, union, vf)
    return todo, skipped


def _refuse_skips(skipped, names, union, vf):
    absent = skipped["absent_from_file"]
    if absent:
        held = sorted(n for n in names if n in TASKS)
        where = [f"it holds {_listed(['/' + n for n in held])}" if held else "it holds no task dataset"]
        if union:
            where.append(f"/{UNION} was built from {_listed(union)}")
        raise VectorsError(f"absent from the file ({'; '.join(where)}); --strict requires every requested task",
                           file=vf.path, task=_listed(absent))
    if skipped["not_implemented"]:
        raise EmbevalError("embeval has no evaluator for this task yet; --strict requires every requested task",
                           file="--strict", task=_listed(skipped["not_implemented"]))


class UnionSource:
    """Rows of the /ALL dataset, rebuilt from the data of the tasks it was exported from."""

    def __init__(self, vf, cache):
        self.vf = vf
        self.cache = cache
        self._sentences = None
        self.verified = True

    def rows(self, task, sentences):
        ds = self.vf.dataset(UNION, task)
        if self._sentences is None:
            tasks = self.vf.union_tasks()
            for t in tasks:
                missing = TASKS[t].missing_files(self.cache.root)
                if missing:
                    raise DataFileError(f"the union in {self.vf.path.name} includes {t}: its data is needed to "
                                        "rebuild the union's sentence order", file=self.cache.root / missing[0], task=t)
            self._sentences = union_sentences(task_sentences(self.cache.get(t)) for t in tasks)
            self.verified = self.vf.check_fingerprint(ds, UNION, task, len(self._sentences),
                                                      fingerprint(self._sentences))
        return ds, union_rows(self._sentences, sentences)


class Located:
    """Where one task's vectors are, after the structural and fingerprint checks."""

    def __init__(self, name, vf, union, cache):
        self.name = name
        self.data = cache.get(name)
        self.sentences = task_sentences(self.data)
        self.fingerprint = fingerprint(self.sentences)
        if name in vf.names():
            self.dataset = vf.dataset(name, name)
            self.verified = vf.check_fingerprint(self.dataset, name, name, len(self.sentences), self.fingerprint)
            self.rows, self.source = None, f"/{name}"
        else:
            self.dataset, self.rows = union.rows(name, self.sentences)
            self.verified, self.source = union.verified, f"/{UNION}"
        self.data_sha256 = data_fingerprint(cache.root, self.data.files)
        self.vectors_sha256 = None

    @property
    def shape(self):
        return len(self.sentences), self.dataset.shape[1]

    def read(self, vf):
        return vf.read_rows(self.dataset, self.name, self.rows)


def preflight(todo, vf, cache, config=None):
    """Every check of every task before anything is scored: data, structure, fingerprint, memory,
    values. Returns (located tasks, the located reference task or None): the reference is
    STSBenchmark when a normalization needs statistics for STS12-16 (embeval.evaluate.normalize)."""
    config = config or {}
    union = UnionSource(vf, cache)
    located = [Located(name, vf, union, cache) for name in todo]
    reference = None
    if normalize.needs_statistics(config.get("normalize", "none")) and \
            any(TASKS[loc.name].evaluator == "cosine_sts" for loc in located):
        reference = next((loc for loc in located if loc.name == normalize.STATISTICS_TASK), None) or \
            _locate_reference(vf, union, cache, [loc.name for loc in located], config["normalize"])
    extra = [reference] if reference is not None and reference not in located else []
    bow_dim = config.get("baseline_bow_dim")
    for loc in located + extra:
        vf.check_memory(*loc.shape, loc.name)
        if bow_dim:
            vf.check_memory(loc.shape[0], bow_dim, loc.name)
    for loc in located + extra:
        loc.vectors_sha256 = table_fingerprint(loc.read(vf))
    unverified = sorted({loc.source.lstrip("/") for loc in located + extra if not loc.verified})
    if unverified:
        warn_unverified(vf.path, unverified)
    return located, reference


def _locate_reference(vf, union, cache, names, method):
    """STSBenchmark's vectors and data, needed by STS12-16 under a normalization with statistics."""
    name = normalize.STATISTICS_TASK
    sts = _listed([n for n in names if TASKS[n].evaluator == "cosine_sts"])
    why = (f"--normalize {method} estimates the statistics of STS12-16 on {name}'s train split"
           + (" and tunes on its dev split" if method == "tune" else ""))
    if name not in vf.names() and name not in (vf.union_tasks() or []):
        raise VectorsError(f"{why}, but the file has no {name} vectors; add {name} to it, or use --normalize "
                           "none or l2", file=vf.path, task=sts)
    missing = TASKS[name].missing_files(cache.root)
    if missing:
        raise DataFileError(f"{why}: its data is needed", file=Path(cache.root) / missing[0], task=name)
    return Located(name, vf, union, cache)


class Runs:
    """The encoders scored in one run: the vectors file, and the hashing bag of words baseline
    (--baseline-bow-dim). Each gives a task's table and what the results record about it."""

    def __init__(self, vf, config):
        self.vf = vf
        self.bow_dim = config.get("baseline_bow_dim")
        self.names = ["encoder"] + (["baseline"] if self.bow_dim else [])
        self._tables = {}

    def table(self, run, loc):
        if run == "encoder":
            return loc.read(self.vf)
        key = (run, loc.name)
        if key not in self._tables:
            self._tables = {key: baseline.encode(loc.sentences, self.bow_dim)}  # keep one at a time
        return self._tables[key]

    def vectors(self, run, loc, table):
        if run == "encoder":
            return None
        return {"source": baseline.label(self.bow_dim), "sha256": loc.fingerprint,
                "vectors_sha256": table_fingerprint(table), "count": int(table.shape[0]),
                "dim": int(table.shape[1]), "dtype": "float32"}

    def identity(self, run, loc):
        """What a reused result must have been computed from: the vectors' sha256 (the file), or the
        sentences' fingerprint (the baseline is a fixed function of the sentences and D)."""
        return loc.vectors_sha256 if run == "encoder" else loc.fingerprint

    def record(self, record, run):
        """The part of the results record that holds this run's tasks."""
        if run == "encoder":
            return record
        if "baseline" not in record:
            record["baseline"] = {"encoder": baseline.NAME, "rule": "exporters/bow_numpy.py",
                                  "dim": self.bow_dim, "tasks": {}}
        return record["baseline"]


def make_context(loc, table, device, config, progress, reference=None):
    """The Context of one task: its data, its table on the device, the rows of every split."""
    row_of = {s: i for i, s in enumerate(loc.sentences)}
    return Context(task=TASKS[loc.name], data=loc.data, table=torch.from_numpy(table).to(device),
                   rows={k: split_rows(s, row_of) for k, s in loc.data.splits.items()},
                   device=device, config=config, seed=config["seed"], progress=progress,
                   normalize=config.get("normalize", "none"), reference=reference)


def evaluate(ctx):
    """(results, prediction sets, tuning record or None) of the task's evaluator under the run's
    normalization. `tune` runs the evaluator once per method and keeps the best dev figure
    (first best wins); cosine STS tunes inside its evaluator, on STSBenchmark's dev split."""
    evaluator = EVALUATORS[ctx.task.evaluator]
    if ctx.normalize != "tune" or ctx.task.evaluator not in SELECTION:
        return evaluator(ctx), ctx.predictions, None
    key = SELECTION[ctx.task.evaluator]
    trials = {}
    for method in normalize.METHODS:
        trial = replace(ctx, normalize=method, predictions={})
        trials[method] = (evaluator(trial), trial.predictions)
    dev = {method: trials[method][0][key] for method in normalize.METHODS}
    best = max(normalize.METHODS, key=lambda m: (dev[m], -normalize.METHODS.index(m)))
    return trials[best][0], trials[best][1], {"chosen": best, "selected_by": key, "dev": dev}


def _normalize_record(ctx, config, results, tuned):
    if TASKS[ctx.task.name].evaluator == "cosine_sts":
        return {k: v for k, v in results["normalized"].items() if k in ("method", "statistics", "tuned_on", "dev")}
    info = normalize.summary(ctx, tuned["chosen"] if tuned else ctx.normalize)
    if tuned:
        info.update(selected_by=tuned["selected_by"], dev=tuned["dev"])
    return info


def score_task(located, table, device, config, progress, reference=None, vectors=None, reference_sha256=None):
    """Run one task's evaluator on its table; return (result entry, prediction sets).

    The entry holds the results, the bootstrap intervals of every figure (`ci`), the
    normalization (when one is configured) and, for STSBenchmark, the geometry diagnostics."""
    task = TASKS[located.name]
    start = time.perf_counter()
    ctx = make_context(located, table, device, config, progress, reference)
    results, sets, tuned = evaluate(ctx)
    entry = {"kind": task.kind, "results": results}
    if config.get("normalize", "none") != "none":
        entry["normalize"] = _normalize_record(ctx, config, results, tuned)
        if config["normalize"] == "tune":
            entry["normalize"]["requested"] = "tune"
    if config.get("bootstrap"):
        entry["ci"] = predictions.intervals(located.name, sets, config["seed"], config["bootstrap"])
    if located.name == geometry.TASK:
        entry["geometry"] = geometry.diagnostics(ctx.table, ctx.data, ctx.rows, config["seed"])
    entry.update({
        "seconds": round(time.perf_counter() - start, 3),
        "device": describe_device(device),
        "vectors": vectors or {"source": located.source, "sha256": located.fingerprint,
                               "vectors_sha256": located.vectors_sha256, "count": int(table.shape[0]),
                               "dim": int(table.shape[1]), "dtype": str(located.dataset.dtype)},
        "data_sha256": located.data_sha256,
    })
    if reference_sha256 is not None:
        entry["vectors"]["reference_sha256"] = reference_sha256
    return entry, sets


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a run; `saved` lists the tasks whose results are kept in the file `kept_in`."""

    def __init__(self, saved, kept_in):
        super().__init__()
        self.saved, self.kept_in = saved, kept_in


def load_previous(out):
    """The results record at `out` (None when there is none); anything else there is an error."""
    path = Path(out)
    if not path.exists():
        return None
    if path.is_dir():
        raise EmbevalError("is a folder; --out must name a results file", file=path)
    not_results = EmbevalError("exists and is not an embeval results file; refusing to overwrite it (choose "
                               "another --out)", file=path)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise not_results
    except OSError as err:
        raise EmbevalError(f"cannot read: {err.strerror}", file=path)
    if not isinstance(record, dict) or record.get("format") != FORMAT or not isinstance(record.get("tasks"), dict):
        raise not_results
    return record


def reuse_decision(previous, record, loc, run="encoder", identity=None, reference_sha256=None, has_predictions=None):
    """(previous entry, None, index of its record) when loc's result can be reused, else (None, why it
    is recomputed, None).

    previous: results records, most recent first; the first with a matching entry wins.
    has_predictions(index, run, task): whether that record's saved predictions hold the task (only
    asked when predictions are being saved)."""
    reason = None
    for i, earlier in enumerate(previous):
        entry, why = _reusable(earlier, record, loc, run, identity, reference_sha256)
        if entry is not None and has_predictions is not None and not has_predictions(i, run, loc.name):
            entry, why = None, "no saved predictions"
        if entry is not None:
            return entry, None, i
        reason = reason or why
    return None, reason, None


def _reusable(previous, record, loc, run="encoder", identity=None, reference_sha256=None):
    if previous.get("embeval") != record["embeval"]:
        return None, f"computed by embeval {previous.get('embeval')}"
    if previous.get("config") != record["config"]:
        return None, "configuration changed"
    tasks = previous["tasks"] if run == "encoder" else (previous.get(run) or {}).get("tasks", {})
    entry = tasks.get(loc.name) if isinstance(tasks, dict) else None
    if not isinstance(entry, dict) or not isinstance(entry.get("vectors"), dict):
        return None, "no previous result"
    key = "vectors_sha256" if run == "encoder" else "sha256"
    if entry["vectors"].get(key) != (loc.vectors_sha256 if identity is None else identity):
        return None, "vectors changed"
    if entry["vectors"].get("reference_sha256") != reference_sha256:
        return None, f"{normalize.STATISTICS_TASK}'s vectors changed"
    if entry.get("data_sha256") != loc.data_sha256:
        return None, "data changed"
    return entry, None


def describe_resume(sources, decisions, previous):
    """One line: which tasks are reused, which recomputed and why."""
    reused = [name for name, (entry, _) in decisions.items() if entry is not None]
    why = {}
    for name, (entry, reason) in decisions.items():
        if entry is None:
            why.setdefault(reason, []).append(name)
    parts = [f"resuming from {' and '.join(map(str, sources))}: reused {_listed(reused) if reused else 'no task'}"]
    parts += [f"recomputing {_listed(names)} ({reason})" for reason, names in why.items()]
    dropped = [name for name in dict.fromkeys(n for p in previous for n in p["tasks"]) if name not in decisions]
    if dropped:
        parts.append(f"not kept (not scored in this run): {_listed(dropped)}")
    return "; ".join(parts)


class ResultsFiles:
    """Where a run's results go. `out` is written once, when the run is complete; after each task the
    record so far goes to a progress file beside it (OUT.partial), which --resume reads and a complete
    run removes. So a run that fails or is interrupted never changes `out`, and keeps what finished.

    With predictions, OUT.predictions.npz (embeval.formats.predictions) is written just before `out` and
    named in it with its sha256; its progress file is OUT.predictions.npz.partial."""

    def __init__(self, out, save_predictions=False):
        self.out = Path(out)
        self.progress = self.out.with_name(self.out.name + ".partial")
        self.sidecar = predictions.sidecar_path(self.out) if save_predictions else None
        self.sidecar_progress = self.sidecar.with_name(self.sidecar.name + ".partial") if self.sidecar else None
        self.saved = []
        self.write_failed = False

    def check(self):
        """Before any work: writable, and nothing there that is not an embeval results file.
        Returns the earlier records (progress file first) a resume can reuse."""
        atomic.check_writable(self.out)
        atomic.check_writable(self.progress)
        if self.sidecar:
            atomic.check_writable(self.sidecar)
            atomic.check_writable(self.sidecar_progress)
        return [r for r in (load_previous(self.progress), load_previous(self.out)) if r is not None]

    def sources(self):
        return [p for p in (self.progress, self.out) if p.exists()]

    def previous_predictions(self, record):
        """The predictions an earlier record names (None when it has none or they cannot be read)."""
        saved = record.get("predictions")
        if not isinstance(saved, dict) or not isinstance(saved.get("file"), str):
            return None
        try:
            return predictions.read(self.out.parent / Path(saved["file"]).name, saved.get("sha256"))
        except EmbevalError as err:
            logger.info(f"not reusing the saved predictions: {err}")
            return None

    def task_done(self, record, runs):
        if self.sidecar:
            self._predictions(self.sidecar_progress, record, runs)
        self._write(self.progress, record)
        self.saved = list(record["tasks"])

    def complete(self, record, runs):
        if self.sidecar:
            self._predictions(self.sidecar, record, runs)
        self._write(self.out, record)
        for path in (self.progress, self.sidecar_progress):
            try:
                if path is not None:
                    path.unlink()
            except OSError:
                pass

    def kept(self):
        """What a failed run leaves, in words."""
        if not self.saved:
            return f"{self.out} was not changed"
        return (f"{self.out} was not changed; the results of {_listed(self.saved)} are kept in {self.progress}; "
                "rerun with --resume to reuse them")

    def _predictions(self, path, record, runs):
        try:
            sha = predictions.write(path, runs, {"embeval": __version__})
        except EmbevalError as err:
            self.write_failed = True
            raise EmbevalError(f"{err.message}; {self.kept()}", file=path)
        record["predictions"] = {"file": path.name, "sha256": sha}

    def _write(self, path, record):
        try:
            write_json(path, record)
        except EmbevalError as err:
            self.write_failed = True
            raise EmbevalError(f"{err.message}; {self.kept()}", file=path)


def score(vectors, data_dir, tasks=None, out=None, device="auto", config=None, progress=True, log=None,
          strict=False, resume=False, save_predictions=False):
    """Score every requested task present in the vectors file; write the results to `out`.

    Every task is checked before any is scored. `out` is written when the run is complete; after
    each task the results so far go to OUT.partial (see ResultsFiles). strict: a requested task
    that would be skipped (absent from the file, no data, no evaluator) is an error. resume:
    reuse the results in OUT.partial or `out` of tasks whose vectors, data, configuration and
    embeval version are unchanged. save_predictions: write every task's per-test-item
    predictions to OUT.predictions.npz. Ctrl-C raises Interrupted, naming what was kept.
    """
    log = log or (lambda msg: print(msg, file=sys.stderr))
    config = dict(config) if config else build_config()
    device = resolve_device(device)
    root = Path(data_dir)
    explicit = tasks is not None
    requested = list(tasks) if explicit else list(TASK_NAMES)
    if save_predictions and not out:
        raise EmbevalError("needs a results file to write the predictions beside (--out)", file="--save-predictions")
    files = ResultsFiles(out, save_predictions) if out else None
    if resume and files is None:
        raise EmbevalError("needs the results file to resume from (--out)", file="--resume")
    previous = files.check() if files else []
    record = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "embeval": __version__,
        "vectors": {"file": str(vectors)}, "data": {"path": str(root)},
        "config": config, "seed": config["seed"], "device": describe_device(device), "versions": versions(),
        "tasks": {}, "skipped": {}, "partial": {},
    }
    kept = {}  # run -> task -> {"data_sha256", "vectors_sha256", "sets"}
    started = time.perf_counter()
    try:
        extra = [normalize.STATISTICS_TASK] if normalize.needs_statistics(config.get("normalize", "none")) else []
        with VectorsFile(vectors, names=requested + [UNION] + extra) as vf:
            todo, record["skipped"] = plan(requested, explicit, vf, root, strict)
            cache = TaskDataCache(root)
            located, reference = preflight(todo, vf, cache, config)
            check_device_tables([(loc.name, loc.shape) for loc in located + [reference] if loc is not None], device)
            runs = Runs(vf, config)
            decisions = _reuse(files, previous, record, located, runs, reference) if resume else {}
            references = {}
            for loc in located:
                name = loc.name
                for run in runs.names:
                    entry, sets = decisions.get((run, name), (None, None))
                    if entry is None:
                        log(f"scoring {name}{'' if run == 'encoder' else ' (' + run + ')'} ...")
                        ref_ctx, ref_sha = None, None
                        if reference is not None and TASKS[name].evaluator == "cosine_sts":
                            if run not in references:
                                references[run] = make_context(reference, runs.table(run, reference), device,
                                                               config, False)
                            ref_ctx, ref_sha = references[run], runs.identity(run, reference)
                        table = runs.table(run, loc)
                        entry, sets = score_task(loc, table, device, config, progress, ref_ctx,
                                                 runs.vectors(run, loc, table), ref_sha)
                        log(f"  {name} done in {entry['seconds']:.1f} s")
                    runs.record(record, run)["tasks"][name] = entry
                    kept.setdefault(run, {})[name] = {"data_sha256": loc.data_sha256,
                                                      "vectors_sha256": entry["vectors"]["vectors_sha256"],
                                                      "sets": sets}
                if TASKS[name].evaluator in PARTIAL:
                    record["partial"][name] = PARTIAL[TASKS[name].evaluator]
                _finish(record, started)
                if files:
                    files.task_done(record, kept)
        _finish(record, started)
        if files:
            files.complete(record, kept)
    except KeyboardInterrupt:
        raise Interrupted(files.saved if files else [], files.progress if files else None)
    except EmbevalError:
        if files and files.saved and not files.write_failed:
            logger.info(files.kept())
        raise
    return record


def _reuse(files, previous, record, located, runs, reference):
    """{(run, task): (earlier entry, its prediction sets) or (None, None)}; said in one line."""
    if not previous:
        logger.info(f"nothing to resume: no {files.out} or {files.progress.name} yet; scoring every task")
        return {}
    saved = [files.previous_predictions(p) for p in previous] if files.sidecar else None

    def has_predictions(i, run, task):
        return saved[i] is not None and task in saved[i].get(run, {})

    decisions, said = {}, {}
    for loc in located:
        for run in runs.names:
            ref = runs.identity(run, reference) if reference is not None and \
                TASKS[loc.name].evaluator == "cosine_sts" else None
            entry, why, i = reuse_decision(previous, record, loc, run, runs.identity(run, loc), ref,
                                           has_predictions if saved is not None else None)
            sets = saved[i][run][loc.name]["sets"] if entry is not None and saved is not None else \
                ({} if entry is not None else None)
            decisions[(run, loc.name)] = (entry, sets)
            if loc.name not in said or (said[loc.name][0] is not None and entry is None):
                said[loc.name] = (entry, why if run == "encoder" else f"{run}: {why}")
    logger.info(describe_resume(files.sources(), said, previous))
    return decisions


def _finish(record, started):
    tasks = record["tasks"]
    record["data"]["fingerprint"] = hashlib.sha256(
        "".join(f"{n}\0{t['data_sha256']}\n" for n, t in sorted(tasks.items())).encode()).hexdigest()
    record["vectors"]["fingerprints"] = {n: t["vectors"]["vectors_sha256"] for n, t in tasks.items()}
    dims = sorted({t["vectors"]["dim"] for t in tasks.values()})
    record["vectors"]["dim"] = dims[0] if len(dims) == 1 else dims
    record["seconds"] = round(time.perf_counter() - started, 3)
