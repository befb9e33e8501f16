"""plan(): what a run will score, as a list of work units, after every check.

The plan reads each requested task's data and vectors once (structure, fingerprint, memory, values)
before anything is scored, so bad input never leaves a results file behind. A work unit names
everything `execute` needs to score one task of one source — file paths, names and settings, no
open handles — so a unit can be executed in this process or sent to another one.
"""

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from embeval.errors import DATA_HINT, DataFileError, EmbevalError, VectorsError
from embeval.evaluate import EVALUATORS, normalize
from embeval.formats.sentences import (
    UNION,
    fingerprint,
    task_sentences,
    union_sentences,
)
from embeval.formats.vectors import VectorsFile, union_rows, warn_unverified
from embeval.run import baseline
from embeval.tasks.registry import TASKS

SKIP_REASONS = ("absent_from_file", "no_data", "not_implemented")


@dataclass(frozen=True)
class Source:
    """Where a task's vectors come from: a dataset of a vectors file (`dataset` is the task's name or
    the union's), or the hashing bag of words of dimension `bow_dim` computed from the sentences.
    `dims`: only the first `dims` columns of the file's vectors are used (a sweep's --dims)."""

    path: str
    dataset: str
    bow_dim: int | None = None
    dims: int | None = None

    @property
    def run(self):
        """The part of the results this source's records go to: "encoder" or "baseline"."""
        return "encoder" if self.bow_dim is None else "baseline"


@dataclass(frozen=True)
class Unit:
    """One task of one source, with what its record will say about its inputs.

    `vectors`: the record's description of the vectors (dataset, fingerprints, shape, dtype);
    `data_sha256`: the fingerprint of the task's data files; `reference`: the unit of the task that
    lends normalization statistics (STS12-16 take them from STS-B's train split), or None."""

    task: str
    source: Source
    data_dir: str
    config: dict = field(hash=False)
    vectors: dict = field(hash=False)
    data_sha256: str = ""
    reference: Optional["Unit"] = None

    @property
    def identity(self):
        """What a reused result must have been computed from: the vectors' sha256 (a file), or the
        sentences' fingerprint (the baseline is a fixed function of the sentences and its dimension)."""
        return self.vectors["vectors_sha256"] if self.source.bow_dim is None else self.vectors["sha256"]


@dataclass
class Plan:
    units: list[Unit]
    skipped: dict[str, list[str]]


def _listed(names, limit=8):
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


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
    """Loads each task's data once, and fingerprints its files once."""

    def __init__(self, root):
        self.root = Path(root)
        self._data = {}
        self._sha256 = {}

    def get(self, name):
        if name not in self._data:
            self._data[name] = TASKS[name].load(self.root)
        return self._data[name]

    def fingerprint(self, name):
        if name not in self._sha256:
            self._sha256[name] = data_fingerprint(self.root, self.get(name).files)
        return self._sha256[name]


class UnionRows:
    """Rows of each task's sentences in a /ALL union dataset, rebuilt from the data of the tasks the
    union was exported from."""

    def __init__(self, vf, cache):
        self.vf = vf
        self.cache = cache
        self._sentences = None
        self.verified = True

    def rows(self, sentences, task):
        ds = self.vf.dataset(UNION, task)
        if self._sentences is None:
            tasks = self.vf.union_tasks()
            for name in tasks:
                missing = TASKS[name].missing_files(self.cache.root)
                if missing:
                    raise DataFileError(
                        f"the union in {self.vf.path.name} includes {name}: its data is needed to "
                        "rebuild the union's sentence order",
                        file=self.cache.root / missing[0],
                        task=name,
                    )
            self._sentences = union_sentences(task_sentences(self.cache.get(name)) for name in tasks)
            self.verified = self.vf.check_fingerprint(
                ds, UNION, task, len(self._sentences), fingerprint(self._sentences)
            )
        return ds, union_rows(self._sentences, sentences)


class Located:
    """One task's data and where its vectors are in an open file, after the structural and
    fingerprint checks."""

    def __init__(self, name, vf, union, cache):
        self.name = name
        self.data = cache.get(name)
        self.sentences = task_sentences(self.data)
        self.fingerprint = fingerprint(self.sentences)
        if name in vf.names():
            self.dataset_name = name
            self.dataset = vf.dataset(name, name)
            self.verified = vf.check_fingerprint(self.dataset, name, name, len(self.sentences), self.fingerprint)
            self.rows = None
        else:
            self.dataset_name = UNION
            self.dataset, self.rows = union.rows(self.sentences, name)
            self.verified = union.verified
        self.data_sha256 = cache.fingerprint(name)

    @property
    def shape(self):
        return len(self.sentences), self.dataset.shape[1]

    def read(self, vf):
        return vf.read_rows(self.dataset, self.name, self.rows)


def wanted_datasets(requested, config):
    """The datasets a run may read: the requested tasks, a union, and the task lending statistics."""
    lenders = (
        [TASKS[n].statistics_from for n in requested if TASKS[n].statistics_from]
        if normalize.needs_statistics(config.get("normalize", "none"))
        else []
    )
    return list(dict.fromkeys(list(requested) + [UNION] + lenders))


def select(requested, explicit, vf, root, strict=False):
    """Split the requested tasks into those to score and those skipped, by reason.

    explicit: the tasks were named (a named task without data is an error); strict: every requested
    task must be scored."""
    names = set(vf.names())
    union = vf.union_tasks() or []
    todo, skipped = [], {reason: [] for reason in SKIP_REASONS}
    for name in requested:
        task = TASKS[name]
        if name not in names and name not in union:
            skipped["absent_from_file"].append(name)
        elif task.evaluator not in EVALUATORS:
            skipped["not_implemented"].append(name)
        elif task.missing_files(root):
            if explicit or strict:
                raise DataFileError(
                    f"missing data file; {DATA_HINT}", file=Path(root) / task.missing_files(root)[0], task=name
                )
            skipped["no_data"].append(name)
        else:
            todo.append(name)
    if strict:
        _refuse_skips(skipped, vf, union)
    if not todo:
        raise _nothing_to_score(requested, skipped, vf, union, root)
    return todo, skipped


def _held(vf, union):
    """What the file holds, in words, for errors."""
    held = sorted(n for n in vf.names() if n in TASKS)
    parts = [f"it holds {_listed(['/' + n for n in held])}" if held else "it holds no task dataset at its root"]
    if union:
        parts.append(f"/{UNION} was built from {_listed(union)}")
    grouped = vf.grouped_task_datasets()
    if grouped:
        groups = sorted({path.rsplit("/", 1)[0] for path in grouped})
        parts.append(
            f"task datasets were found inside {_listed(groups)} ({_listed(grouped, 3)}): embeval reads "
            "/TASK at the file's root, e.g. h5py's f.move('group/TASK', 'TASK')"
        )
    return "; ".join(parts)


def _refuse_skips(skipped, vf, union):
    if skipped["absent_from_file"]:
        raise VectorsError(
            f"absent from the file ({_held(vf, union)}); --strict requires every requested task",
            file=vf.path,
            task=_listed(skipped["absent_from_file"]),
        )
    if skipped["not_implemented"]:
        raise EmbevalError(
            "embeval has no evaluator for this task yet; --strict requires every requested task",
            file="--strict",
            task=_listed(skipped["not_implemented"]),
        )


def _nothing_to_score(requested, skipped, vf, union, root):
    """The one-line error of a run that would score nothing, saying why: the data folder, the tasks
    of the file without data, or what the file holds."""
    if not Path(root).is_dir():
        return DataFileError(f"nothing to score: the data folder {root} does not exist; {DATA_HINT}", file=root)
    if skipped["no_data"]:
        return DataFileError(
            f"nothing to score: no data for {_listed(skipped['no_data'])} in {root}; {DATA_HINT}", file=root
        )
    if skipped["absent_from_file"]:
        return VectorsError(
            f"nothing to score: {_listed(skipped['absent_from_file'])} absent from the file ({_held(vf, union)})",
            file=vf.path,
        )
    return EmbevalError(
        f"nothing to score: embeval has no evaluator for {_listed(skipped['not_implemented'])}", file=vf.path
    )


def _locate_lender(name, vf, union, cache, borrowers, method):
    """The task lending normalization statistics (STS-B for STS12-16), located in the file."""
    why = f"--normalize {method} estimates the statistics of {_listed(borrowers)} on {name}'s train split" + (
        " and tunes on its dev split" if method == "tune" else ""
    )
    if name not in vf.names() and name not in (vf.union_tasks() or []):
        raise VectorsError(
            f"{why}, but the file has no {name} vectors; add {name} to it, or use --normalize none or l2",
            file=vf.path,
            task=_listed(borrowers),
        )
    missing = TASKS[name].missing_files(cache.root)
    if missing:
        raise DataFileError(f"{why}: its data is needed", file=Path(cache.root) / missing[0], task=name)
    return Located(name, vf, union, cache)


def plan(vectors, data_dir, tasks=None, config=None, strict=False, check_memory=None, cache=None):
    """The work units of scoring `vectors` on `tasks` (None: every task the file and data hold), in the
    order given, after every check. Raises EmbevalError when there is nothing to score.

    check_memory(count, dim, task): an extra memory check of each table (the device's), or None.
    cache: a TaskDataCache of data_dir to reuse (a sweep plans many files on the same data)."""
    config = config or {}
    root = Path(data_dir)
    explicit = tasks is not None
    requested = list(tasks) if explicit else list(TASKS)
    with VectorsFile(vectors, names=wanted_datasets(requested, config)) as vf:
        todo, skipped = select(requested, explicit, vf, root, strict)
        cache = cache if cache is not None else TaskDataCache(root)
        union = UnionRows(vf, cache)
        located = {name: Located(name, vf, union, cache) for name in todo}
        method = config.get("normalize", "none")
        if normalize.needs_statistics(method):
            borrowers = {}
            for name in todo:
                if TASKS[name].statistics_from:
                    borrowers.setdefault(TASKS[name].statistics_from, []).append(name)
            for lender, names in borrowers.items():
                if lender not in located:
                    located[lender] = _locate_lender(lender, vf, union, cache, names, method)
        bow_dim = config.get("baseline_bow_dim")
        for loc in located.values():
            vf.check_memory(*loc.shape, loc.name)
            if check_memory is not None:
                check_memory(*loc.shape, loc.name)
            if bow_dim:
                vf.check_memory(loc.shape[0], bow_dim, loc.name)
        described = {name: _describe(loc, vf) for name, loc in located.items()}
        unverified = sorted({loc.dataset_name for loc in located.values() if not loc.verified})
        if unverified:
            warn_unverified(vf.path, unverified)
    sources = [Source(str(vectors), "")] + ([Source(str(vectors), "", bow_dim)] if bow_dim else [])
    units = []
    for name in todo:
        for source in sources:
            units.append(_unit(name, source, located, described, root, config))
    return Plan(units, skipped)


def _describe(loc, vf):
    """The record's description of a located task's vectors (reads and fingerprints the table)."""
    table = loc.read(vf)
    return {
        "source": f"/{loc.dataset_name}",
        "sha256": loc.fingerprint,
        "vectors_sha256": table_fingerprint(table),
        "count": int(table.shape[0]),
        "dim": int(table.shape[1]),
        "dtype": str(loc.dataset.dtype),
    }


def _unit(name, source, located, described, root, config):
    loc = located[name]
    source = Source(source.path, loc.dataset_name, source.bow_dim)
    vectors = dict(described[name])
    if source.bow_dim:
        vectors = {
            "source": baseline.label(source.bow_dim),
            "sha256": loc.fingerprint,
            "count": len(loc.sentences),
            "dim": source.bow_dim,
            "dtype": "float32",
        }
    lender = TASKS[name].statistics_from
    reference = None
    if lender and lender in located and normalize.needs_statistics(config.get("normalize", "none")):
        reference = _unit(lender, source, located, described, root, config)
    return Unit(
        task=name,
        source=source,
        data_dir=str(root),
        config=config,
        vectors=vectors,
        data_sha256=loc.data_sha256,
        reference=reference,
    )
