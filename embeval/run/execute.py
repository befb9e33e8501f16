"""execute(unit): score one planned task of one source and return its record and prediction sets.

A unit carries paths and names only; the vectors file and the task data are opened here (through a
Workspace that keeps them between the units one process executes), so a unit can run in this
process or in a worker. Only data and vectors are read: no user code runs.
"""

import contextlib
import platform
import time
from dataclasses import replace

import numpy as np
import torch

from embeval.evaluate import EVALUATORS, geometry, normalize
from embeval.evaluate.context import QUIET, Context
from embeval.formats import predictions
from embeval.formats.vectors import VectorsFile
from embeval.run import baseline
from embeval.run.plan import Located, TaskDataCache, UnionRows, table_fingerprint
from embeval.tasks.registry import TASKS
from embeval.tasks.samples import split_rows


def resolve_device(name):
    """'auto' -> cuda when available, else cpu; 'cuda' without a GPU is an error."""
    from embeval.errors import EmbevalError

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


class Workspace:
    """What one process keeps between the units it executes: open vectors files, loaded task data,
    union rows and the last baseline table. Close it when done."""

    def __init__(self):
        self._files, self._caches, self._unions = {}, {}, {}
        self._held = None
        self._baseline = (None, None)

    def vectors_file(self, path):
        if path not in self._files:
            self._files[path] = VectorsFile(path, guard=False)
        return self._files[path]

    def data_cache(self, data_dir):
        if data_dir not in self._caches:
            self._caches[data_dir] = TaskDataCache(data_dir)
        return self._caches[data_dir]

    def located(self, unit):
        vf = self.vectors_file(unit.source.path)
        cache = self.data_cache(unit.data_dir)
        key = (unit.source.path, unit.data_dir)
        if key not in self._unions:
            self._unions[key] = UnionRows(vf, cache)
        return Located(unit.task, vf, self._unions[key], cache)

    @contextlib.contextmanager
    def holding_tables(self):
        """Within the block, each unit's table is read once and kept (for work that runs a unit again);
        each call gets a copy of its own, as a fresh read would give, so no run sees another's changes."""
        self._held = {}
        try:
            yield
        finally:
            self._held = None

    def table(self, unit, located):
        """The unit's float32 table (read from the file, or the baseline's bag of words), truncated to
        its first `source.dims` columns when the source says so."""
        if self._held is not None:
            key = (unit.source, unit.task)
            if key not in self._held:
                self._held[key] = self._read_table(unit, located)
            return self._held[key].copy()
        return self._read_table(unit, located)

    def _read_table(self, unit, located):
        if unit.source.bow_dim is None:
            return truncate(located.read(self.vectors_file(unit.source.path)), unit.source.dims)
        key = (unit.task, unit.data_dir, unit.source.bow_dim)
        if self._baseline[0] != key:
            self._baseline = (key, baseline.encode(located.sentences, unit.source.bow_dim))
        return self._baseline[1]

    def close(self):
        for vf in self._files.values():
            vf.close()
        self._files.clear()


def truncate(table, dims):
    """The first `dims` columns of a table (all of them for None), not renormalized."""
    return table if dims is None else np.ascontiguousarray(table[:, :dims])


def make_context(unit, located, table, device, progress=QUIET, reference=None, fit=None):
    """The Context of one task: its data, its table on the device, the rows of every split (fit: the
    classifier fitting function, None for classify.fit)."""
    row_of = {s: i for i, s in enumerate(located.sentences)}
    config = unit.config
    return Context(
        task=TASKS[unit.task],
        data=located.data,
        table=torch.from_numpy(table).to(device),
        rows={k: split_rows(s, row_of) for k, s in located.data.splits.items()},
        device=device,
        config=config,
        seed=config["seed"],
        progress=progress,
        normalize=config.get("normalize", "none"),
        reference=reference,
        fit=fit,
    )


def evaluate(ctx):
    """(results, prediction sets, tuning record or None) of the task's evaluator under the run's
    normalization. `tune` runs the evaluator once per method and keeps the best dev figure (first
    best wins); a task without a selection figure (cosine STS) tunes inside its evaluator."""
    evaluator = EVALUATORS[ctx.task.evaluator]
    key = ctx.task.selection
    if ctx.normalize != "tune" or key is None:
        return evaluator(ctx), ctx.predictions, None
    trials = {}
    for method in normalize.METHODS:
        trial = replace(ctx, normalize=method, predictions={})
        trials[method] = (evaluator(trial), trial.predictions)
    dev = {method: trials[method][0][key] for method in normalize.METHODS}
    best = max(normalize.METHODS, key=lambda m: (dev[m], -normalize.METHODS.index(m)))
    return trials[best][0], trials[best][1], {"chosen": best, "selected_by": key, "dev": dev}


def _normalize_record(ctx, results, tuned):
    if ctx.task.selection is None:
        return {k: v for k, v in results["normalized"].items() if k in ("method", "statistics", "tuned_on", "dev")}
    info = normalize.summary(ctx, tuned["chosen"] if tuned else ctx.normalize)
    if tuned:
        info.update(selected_by=tuned["selected_by"], dev=tuned["dev"])
    return info


def execute(unit, device="cpu", workspace=None, progress=QUIET, fit=None):
    """Score one unit: (its record entry, its prediction sets). fit: as make_context's.

    The entry holds the results, the bootstrap intervals of every figure (`ci`), the normalization
    (when one is configured), the geometry diagnostics (on the task that hosts them), seconds,
    device and what the vectors and data were."""
    own = workspace is None
    workspace = workspace or Workspace()
    try:
        device = torch.device(device)
        start = time.perf_counter()
        located = workspace.located(unit)
        table = workspace.table(unit, located)
        reference = None
        if unit.reference is not None:
            ref_located = workspace.located(unit.reference)
            reference = make_context(unit.reference, ref_located, workspace.table(unit.reference, ref_located), device)
        ctx = make_context(unit, located, table, device, progress, reference, fit)
        results, sets, tuned = evaluate(ctx)
        config = unit.config
        entry = {"kind": ctx.task.kind, "results": results}
        if config.get("normalize", "none") != "none":
            entry["normalize"] = _normalize_record(ctx, results, tuned)
            if config["normalize"] == "tune":
                entry["normalize"]["requested"] = "tune"
        if config.get("bootstrap"):
            entry["ci"] = predictions.intervals(unit.task, sets, config["seed"], config["bootstrap"])
        if ctx.task.geometry:
            entry["geometry"] = geometry.diagnostics(ctx.table, ctx.data, ctx.rows, config["seed"])
        vectors = dict(unit.vectors)
        if unit.source.bow_dim is not None:
            vectors = {
                "source": vectors["source"],
                "sha256": vectors["sha256"],
                "vectors_sha256": table_fingerprint(table),
                "count": vectors["count"],
                "dim": vectors["dim"],
                "dtype": vectors["dtype"],
            }
        if unit.reference is not None:
            vectors["reference_sha256"] = unit.reference.identity
        entry.update(
            {
                "seconds": round(time.perf_counter() - start, 3),
                "device": describe_device(device),
                "vectors": vectors,
                "data_sha256": unit.data_sha256,
            }
        )
        return entry, sets
    finally:
        if own:
            workspace.close()
