"""execute(unit): score one planned task of one source and return its record and prediction sets.

A unit carries paths and names only; the vectors file and the task data are opened here (through a
Workspace that keeps them between the units one process executes), so a unit can run in this
process or in a worker. Only data and vectors are read: no user code runs.
"""

import hashlib
import platform
import time
from collections.abc import Generator
from dataclasses import replace

import numpy as np
import torch

from embeval.evaluate import geometry, normalize
from embeval.evaluate.classify import drive
from embeval.evaluate.context import QUIET, Context
from embeval.formats import predictions
from embeval.formats.vectors import KeptTables, VectorsFile
from embeval.run import baseline
from embeval.run.plan import Located, TaskDataCache, UnionRows, table_fingerprint
from embeval.tasks.kind import TEXT
from embeval.tasks.registry import Registry


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


def check_budgets(units, workspace, device):
    """Refuse, before anything is scored, a memory budget below the least a unit's evaluation needs (its
    kind's least_budget: an exact search, planned down to one query against one row): one line naming
    the task, what needs the memory and the least --memory-budget that works."""
    import math

    from embeval.errors import EmbevalError
    from embeval.memory import available_memory, memory_limit, search_budget
    from embeval.untrusted import size_text

    budget = search_budget(device)
    for unit in units:
        if unit.source.bow_dim is not None:
            continue  # the baseline searches the same lists as the file's unit of the task
        data = workspace.data_cache(unit.data_dir).get(unit.spec)
        found = unit.spec.kind_module.least_budget(unit.spec, data, unit.vectors["dim"], device)
        if found is None or found[0] <= budget:
            continue
        need, what = found
        least = f"{math.ceil(need / 2**20)}MiB"
        free = available_memory() if device.type == "cpu" else None
        if free is not None and need > free:
            raise EmbevalError(
                f"{what} needs at least {size_text(need)}, more than the {size_text(free)} of memory available",
                task=unit.task,
            )
        given = memory_limit()
        shown = f"is {size_text(given)}" if given is not None else f"is by default {size_text(budget)}"
        raise EmbevalError(
            f"the memory budget {shown}, below what {unit.task} needs: {what} needs at least {size_text(need)}; "
            f"give --memory-budget {least} or more",
            file="--memory-budget",
        )


def describe_device(device):
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


class Workspace:
    """What one process keeps between the units it executes: open vectors files, loaded task data,
    union rows and the last baseline table. Close it when done."""

    def __init__(self, shards=None):
        self._files, self._caches, self._unions = {}, {}, {}
        self._baseline = (None, None)
        self.kept = KeptTables()  # the tables plan() read whole for their fingerprints, for the units
        self.shards = shards  # where searches over a corpus run (embeval.run.shards.RayShards), or here

    def vectors_file(self, path):
        if path not in self._files:
            self._files[path] = VectorsFile(path, guard=False, kept=self.kept)
        return self._files[path]

    def data_cache(self, data_dir):
        if data_dir not in self._caches:
            self._caches[data_dir] = TaskDataCache(data_dir)
        return self._caches[data_dir]

    def located(self, unit):
        vf = self.vectors_file(unit.source.path)
        cache = self.data_cache(unit.data_dir)
        # keyed by the union's tasks too: a unit whose lists are datasets of their own (retrieval's
        # queries and documents) carries no union tasks, and must not stand for the units that read /ALL
        key = (unit.source.path, unit.data_dir, tuple(spec.name for spec in unit.union))
        if key not in self._unions:
            self._unions[key] = UnionRows(vf, cache, Registry(unit.union, complete=False))
        return Located(unit.spec, vf, self._unions[key], cache)

    def table(self, unit, located, role=TEXT):
        """The unit's float32 table of a role (read from the file, or the baseline's bag of words),
        truncated to its first `source.dims` columns when the source says so."""
        if unit.source.bow_dim is None:
            return truncate(located.read(self.vectors_file(unit.source.path), role), unit.source.dims)
        key = (unit.task, unit.data_dir, unit.source.bow_dim)
        if self._baseline[0] != key:
            self._baseline = (key, baseline.encode(located.sentences, unit.source.bow_dim))
        return self._baseline[1]

    def close(self):
        for vf in self._files.values():
            vf.close()
        self._files.clear()
        self.kept.clear()


def truncate(table, dims):
    """The first `dims` columns of a table (all of them for None), not renormalized."""
    return table if dims is None else np.ascontiguousarray(table[:, :dims])


class RoleSource:
    """The rows of one of a task's sentence lists, read from the vectors file block by block (a
    kind that streams, such as retrieval over a large corpus, never holds the whole table)."""

    def __init__(self, vf, located, role, dims=None, shards=None, device="cpu"):
        self.vf, self.found, self.task, self.dims = vf, located.roles[role], located.name, dims
        self.path = vf.path
        self.count, self.dim = located.shape(role)
        if dims is not None:
            self.dim = dims
        self.shards, self.device = shards, device

    def blocks(self, start=0, stop=None, block_bytes=64 << 20):
        """(first row, float32 block) over rows start..stop."""
        for first, values in self.vf.blocks(
            self.found.dataset, self.task, self.found.rows, start, stop, block_bytes, check_finite=False
        ):
            yield first, truncate(values, self.dims)

    def read(self, start=0, stop=None):
        """Rows start..stop as one float32 array."""
        parts = [values for _, values in self.blocks(start, stop)]
        return np.concatenate(parts) if parts else np.zeros((0, self.dim), dtype=np.float32)

    def gather(self, rows):
        """The list's rows `rows` (any order, repeats allowed) as one float32 array."""
        rows = np.asarray(rows, dtype=np.int64)
        mapped = rows if self.found.rows is None else np.asarray(self.found.rows)[rows]
        return self.gather_file_rows(mapped)

    def gather_file_rows(self, rows, buffer=None):
        """Rows of the dataset itself (not of the list); read into `buffer` (a ReadBuffer: the array
        returned is then valid until its next use) when given."""
        if buffer is None or self.dims is not None:
            return truncate(self.vf.read_rows(self.found.dataset, self.task, rows), self.dims)
        return self.vf.read_rows(self.found.dataset, self.task, rows, out=buffer.take(len(rows), self.dim))

    def search(self, queries, rows, depth, similarity, progress=None, planned=None):
        """The `depth` best of the list's rows `rows` for each query (exact search, streamed, over Ray
        shards with --ray): (scores, indices into `rows`). progress(rows): after each block searched;
        planned(rows): the rows a round of passes will search (embeval.train.search.top_k)."""
        from embeval.run.shards import corpus_top_k

        return corpus_top_k(self, rows, queries, depth, similarity, self.device, self.shards, progress, planned)


class ArraySource:
    """A list's rows held in memory (the bag-of-words baseline computed here): RoleSource's reads."""

    def __init__(self, table, device="cpu"):
        self.table, self.device = np.asarray(table, dtype=np.float32), device
        self.count, self.dim = self.table.shape

    def gather(self, rows):
        return self.table[np.asarray(rows, dtype=np.int64)]

    def search(self, queries, rows, depth, similarity, progress=None, planned=None):
        from embeval.memory import search_budget
        from embeval.train import search

        documents = self.table[np.asarray(rows, dtype=np.int64)]
        return search.top_k(
            queries,
            lambda a, b: documents[a:b],
            len(documents),
            depth,
            similarity,
            search_budget(self.device),
            self.device,
            progress=progress,
            read_rows=lambda chosen: documents[chosen],
            planned=planned,
        )


def make_context(unit, located, workspace, device, progress=QUIET, reference=None):
    """The Context of one task: its data, the tables its kind holds on the device, the rows of its
    samples, and block-by-block sources of every list."""
    spec = unit.spec
    kind = spec.kind_module
    row_of = {role: {s: i for i, s in enumerate(sentences)} for role, sentences in located.lists.items()}
    held = kind.tables(spec)
    table = torch.from_numpy(workspace.table(unit, located)).to(device) if TEXT in held else None
    if unit.source.bow_dim is None:
        vf = workspace.vectors_file(unit.source.path)
        sources = {
            role: RoleSource(vf, located, role, unit.source.dims, workspace.shards, device) for role in located.lists
        }
    else:
        sources = {
            role: ArraySource(baseline.encode(sentences, unit.source.bow_dim), device)
            for role, sentences in located.lists.items()
        }
    config = unit.config
    return Context(
        task=spec,
        data=located.data,
        table=table,
        rows=kind.rows(spec, located.data, row_of),
        device=device,
        config=config,
        seed=config.seed,
        progress=progress,
        normalize=config.normalize if kind.normalizes(spec) else "none",
        reference=reference,
        sources=sources,
    )


def steps(evaluation):
    """An evaluation as a generator of fit requests, whether or not it asks for any."""
    if isinstance(evaluation, Generator):
        return (yield from evaluation)
    return evaluation


def evaluate(ctx):
    """(results, prediction sets, tuning record or None) of the task's kind under the run's
    normalization, as a generator of fit requests. `tune` runs the evaluation once per method and
    keeps the best dev figure (first best wins); a task without a selection figure (cosine STS)
    tunes inside its evaluation."""
    kind = ctx.task.kind_module
    key = ctx.task.selection
    if ctx.normalize != "tune" or key is None:
        results = yield from steps(kind.evaluate(ctx))
        return results, ctx.predictions, None
    trials = {}
    for method in normalize.METHODS:
        trial = replace(ctx, normalize=method, predictions={})
        trials[method] = ((yield from steps(kind.evaluate(trial))), trial.predictions)
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


def baseline_fingerprint(ctx):
    """The fingerprint of the bag-of-words baseline's tables: its table, or each list's (combined)."""
    if ctx.table is not None:
        return table_fingerprint(ctx.table.cpu().numpy())
    parts = "".join(f"{role}\0{table_fingerprint(source.table)}\n" for role, source in ctx.sources.items())
    return hashlib.sha256(parts.encode()).hexdigest()


def execute_steps(unit, device="cpu", workspace=None, progress=QUIET):
    """Score one unit as a generator of fit requests (embeval.evaluate.classify.FitRequest) that
    returns (its record entry, its prediction sets): run alone by `execute`, or with other files'
    units by a sweep, which answers the requests of several units together.

    The entry holds the results, the bootstrap intervals of every figure (`ci`), the normalization
    (when one is configured), the geometry diagnostics (on the task that hosts them), seconds,
    device, what the vectors and data were, and a declared task's declaration."""
    own = workspace is None
    workspace = workspace or Workspace()
    try:
        device = torch.device(device)
        start = time.perf_counter()
        located = workspace.located(unit)
        reference = None
        if unit.reference is not None:
            reference = make_context(unit.reference, workspace.located(unit.reference), workspace, device)
        ctx = make_context(unit, located, workspace, device, progress, reference)
        results, sets, tuned = yield from evaluate(ctx)
        config = unit.config
        entry = {"kind": ctx.task.kind, "results": results}
        if ctx.normalize != "none":
            entry["normalize"] = _normalize_record(ctx, results, tuned)
            if config.normalize == "tune":
                entry["normalize"]["requested"] = "tune"
        if config.bootstrap:

            def resampled(done, total):
                if done == 0:
                    what = f"bootstrap intervals, {config.bootstrap} resamples of the test items"
                    progress.stage(what, total, "resample")
                progress.step(done)

            entry["ci"] = predictions.intervals(unit.task, sets, config.seed, config.bootstrap, progress=resampled)
        if ctx.task.geometry and ctx.table is not None:
            entry["geometry"] = geometry.diagnostics(ctx.table, ctx.data, ctx.rows, config.seed)
        vectors = dict(unit.vectors)
        if unit.source.bow_dim is not None:
            vectors = {
                "source": vectors["source"],
                "sha256": vectors["sha256"],
                "vectors_sha256": baseline_fingerprint(ctx),
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
        if not unit.spec.builtin:
            entry["declaration"] = unit.spec.record()
        return entry, sets
    finally:
        if own:
            workspace.close()


def execute(unit, device="cpu", workspace=None, progress=QUIET):
    """Score one unit alone: (its record entry, its prediction sets)."""
    return drive(execute_steps(unit, device, workspace, progress), progress)
