"""plan(): what a run will score, as a list of work units, after every check.

The plan reads each requested task's data and vectors once (structure, fingerprint, memory, values)
before anything is scored, so bad input never leaves a results file behind. A work unit names
everything `execute` needs to score one task of one source — its TaskSpec, file paths and
settings, no open handles — so a unit can be executed in this process or sent to another one.

A task's sentences come in lists by role (embeval.tasks.kind: one list, role "text", for most
kinds; queries and documents for retrieval). The list of role "text" is the dataset /TASK of the
vectors file (or rows of a union /ALL); a list of another role is /TASK.ROLE.
"""

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from embeval.errors import DATA_HINT, DataFileError, VectorsError
from embeval.evaluate import normalize
from embeval.formats import h5guard
from embeval.formats import vectors as vectors_format
from embeval.formats.h5guard import check_file
from embeval.formats.sentences import UNION, dataset_name, fingerprint, union_sentences
from embeval.formats.vectors import VectorsFile, union_rows, warn_unverified
from embeval.memory import check_bootstrap
from embeval.run import baseline
from embeval.settings import RunConfig, as_config
from embeval.tasks.files import file_digest
from embeval.tasks.kind import TEXT
from embeval.tasks.registry import Registry, builtin
from embeval.tasks.spec import TaskSpec

SKIP_REASONS = ("absent_from_file", "no_data")

logger = logging.getLogger("embeval")


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

    `spec`: the task; `vectors`: the record's description of the vectors (dataset, fingerprints,
    shape, dtype); `data_sha256`: the fingerprint of the task's data files; `reference`: the unit of
    the task that lends normalization statistics (STS12-16 take them from STS-B's train split)."""

    spec: TaskSpec
    source: Source
    data_dir: str
    config: RunConfig = field(hash=False)
    vectors: dict = field(hash=False)
    data_sha256: str = ""
    reference: "Unit | None" = None
    union: tuple = ()  # the TaskSpecs of the union /ALL the task's rows are in (empty: a dataset of its own)

    @property
    def task(self):
        return self.spec.name

    @property
    def identity(self):
        """What a reused result must have been computed from: the vectors' sha256 (a file), or the
        sentences' fingerprint (the baseline is a fixed function of the sentences and its dimension)."""
        return self.vectors["vectors_sha256"] if self.source.bow_dim is None else self.vectors["sha256"]


@dataclass
class Plan:
    units: list
    skipped: dict
    model: str | None = None  # the file's root attribute `model`: the results' name for the vectors


def _listed(names, limit=8):
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def data_fingerprint(spec, paths):
    """sha256 over the task's data files (declared path and content): changes with any label or text."""
    h = hashlib.sha256()
    for key, rel in spec.files:
        h.update(f"{Path(rel).as_posix()}\0{file_digest(paths[key])}\n".encode())
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
        self._lists = {}
        self._sha256 = {}

    def get(self, spec):
        if spec.name not in self._data:
            self._data[spec.name] = spec.load(self.root)
        return self._data[spec.name]

    def fingerprint(self, spec):
        if spec.name not in self._sha256:
            self._sha256[spec.name] = data_fingerprint(spec, spec.paths(self.root))
        return self._sha256[spec.name]

    def lists(self, spec):
        """The task's sentence lists by role (made once; callers do not change them)."""
        if spec.name not in self._lists:
            self._lists[spec.name] = spec.kind_module.sentences(spec, self.get(spec))
        return self._lists[spec.name]

    def list_fingerprint(self, spec, role, sentences):
        """The fingerprint of the task's list of a role (`sentences`, from lists()), computed once."""
        key = (spec.name, role)
        if key not in self._sha256:
            self._sha256[key] = fingerprint(sentences)
        return self._sha256[key]


class UnionRows:
    """Rows of each task's sentences in a /ALL union dataset, rebuilt from the data of the tasks the
    union was exported from (named in its `tasks` attribute)."""

    def __init__(self, vf, cache, registry):
        self.vf = vf
        self.cache = cache
        self.registry = registry
        self._sentences = None
        self.verified = True

    def specs(self):
        """The TaskSpecs of the union's tasks."""
        return [self.registry[name] for name in self.tasks() or []]

    def tasks(self):
        """The tasks of the file's union, checked to be tasks of the registry (None: no union)."""
        names = self.vf.union_tasks()
        unknown = [n for n in names or [] if n not in self.registry]
        if unknown:
            raise VectorsError(
                f"the `tasks` attribute of /ALL names unknown tasks {', '.join(unknown)} (declare "
                "them with --task-file)",
                file=self.vf.path,
                task=UNION,
            )
        return names

    def rows(self, sentences, task):
        ds = self.vf.dataset(UNION, task)
        if self._sentences is None:
            specs = self.specs()
            for spec in specs:
                missing = spec.missing_files(self.cache.root)
                if missing:
                    raise DataFileError(
                        f"the union in {self.vf.path.name} includes {spec.name}: its data is "
                        "needed to rebuild the union's sentence order",
                        file=missing[0],
                        task=spec.name,
                    )
            self._sentences = union_sentences(self.cache.lists(spec)[TEXT] for spec in specs)
            self.verified = self.vf.check_fingerprint(
                ds, UNION, task, len(self._sentences), fingerprint(self._sentences)
            )
        return ds, union_rows(self._sentences, sentences)


@dataclass
class RoleVectors:
    """Where one sentence list's vectors are: the dataset, its rows in a union (None: all rows in
    order), whether its fingerprint was verified."""

    dataset_name: str
    dataset: object
    rows: object
    fingerprint: str
    verified: bool


class Located:
    """One task's data and where its vectors are in an open file, per role, after the structural
    and fingerprint checks."""

    def __init__(self, spec, vf, union, cache):
        self.spec = spec
        self.name = spec.name
        self.data = cache.get(spec)
        self.lists = cache.lists(spec)
        names = vf.names()
        self.roles = {}
        for role, sentences in self.lists.items():
            name = dataset_name(spec.name, role)
            sha = cache.list_fingerprint(spec, role, sentences)
            if name in names or role != TEXT:
                ds = vf.dataset(name, spec.name)
                verified = vf.check_fingerprint(ds, name, spec.name, len(sentences), sha)
                self.roles[role] = RoleVectors(name, ds, None, sha, verified)
            else:
                ds, rows = union.rows(sentences, spec.name)
                self.roles[role] = RoleVectors(UNION, ds, rows, sha, union.verified)
        self.data_sha256 = cache.fingerprint(spec)
        in_union = any(r.dataset_name == UNION for r in self.roles.values())
        self.union_specs = tuple(union.specs()) if in_union else ()

    @property
    def sentences(self):
        """The task's list of role "text" (its only list, for most kinds)."""
        return self.lists[TEXT]

    @property
    def dataset_name(self):
        return "+".join(sorted({r.dataset_name for r in self.roles.values()}))

    @property
    def verified(self):
        return all(r.verified for r in self.roles.values())

    def shape(self, role=TEXT):
        found = self.roles[role]
        return len(self.lists[role]), found.dataset.shape[1]

    def read(self, vf, role=TEXT):
        found = self.roles[role]
        return vf.read_rows(found.dataset, self.name, found.rows)


def wanted_datasets(specs, config, registry):
    """The datasets a run may read: the requested tasks', a union, and the tasks lending statistics."""
    lenders = (
        [registry[s.reference] for s in specs if s.reference and s.reference in registry]
        if normalize.needs_statistics(config.normalize)
        else []
    )
    names = []
    for spec in list(specs) + lenders:
        names.append(spec.name)
        names += [dataset_name(spec.name, role) for role in spec.kind_module.roles(spec) if role != TEXT]
    return list(dict.fromkeys(names + [UNION]))


def select(specs, explicit, vf, root, union, strict=False, registry=None):
    """Split the requested tasks into those to score and those skipped, by reason: a task without data
    is skipped for that reason (whether or not the file has its vectors), a task with data whose
    vectors the file lacks as absent from the file.

    explicit: the tasks were named (a named task without data is an error, as is a task of a task
    file without its data); strict: every requested task must be scored; registry: the tasks known
    to the run (to name the file's datasets that match none, in errors)."""
    names = set(vf.names())
    todo, skipped, held_without_data = [], {reason: [] for reason in SKIP_REASONS}, []
    for spec in specs:
        roles = spec.kind_module.roles(spec)
        datasets = [dataset_name(spec.name, role) for role in roles]
        present = all(d in names for d in datasets) or (roles == (TEXT,) and spec.name in union)
        held = [d for d in datasets if d in names]
        if held and not present:
            lacking = ", ".join(f"/{d}" for d in datasets if d not in names)
            raise VectorsError(
                f"the file holds {', '.join(f'/{d}' for d in held)} but not {lacking}: every list of the "
                "task must be embedded (see the export's manifest)",
                file=vf.path,
                task=spec.name,
            )
        missing = spec.missing_files(root)
        if missing and (explicit or strict or not spec.builtin) and present:
            spec.require_data(root)
        if missing:
            skipped["no_data"].append(spec.name)
            if present:
                held_without_data.append(spec.name)
        elif not present:
            skipped["absent_from_file"].append(spec.name)
        else:
            todo.append(spec)
    if strict:
        _refuse_skips(skipped, vf, union, registry)
    if not todo:
        error = _nothing_to_score(skipped, held_without_data, vf, union, root, registry)
        if registry is not None and not registry.mteb_names:  # a file exported with --mteb, scored without it?
            from embeval.tasks.mteb_source import exported_hint

            known = task_datasets(registry)
            error.message += exported_hint([n for n in [*vf.names(), *union] if n not in known])
        raise error
    return todo, skipped


def task_datasets(registry):
    """The names of every dataset a task of the registry reads (/TASK, /TASK.ROLE), and the union's."""
    names = {UNION}
    for spec in registry.values():
        names.update(dataset_name(spec.name, role) for role in spec.kind_module.roles(spec))
    return names


def did_you_mean(name, registry):
    """' (did you mean X?)' for a dataset name that matches no task, naming the task it is likely meant
    for (another case, an alias such as stsb, a near spelling such as STS-12), else ''."""
    base, dot, role = name.rpartition(".")
    for spelling, suffix in [(name, "")] + ([(base, dot + role)] if dot else []):
        canonical = registry.canonical_name(spelling)
        if canonical is not None:
            return f" (did you mean {canonical}{suffix}?)"
    return registry.suggestion(name)


def unmatched(vf, registry):
    """The file's root datasets whose names match no dataset of a task of the registry (groups left out:
    what they hold is named by _held): [(name, did-you-mean)]."""
    if registry is None:
        return []
    known = task_datasets(registry)
    groups = set(vf.root_groups())
    return sorted((n, did_you_mean(n, registry)) for n in vf.names() if n not in known and n not in groups)


def _foreign(found):
    """'/a (did you mean A?), /b match no task' of unmatched()'s list."""
    names = _listed([f"/{name}{hint}" for name, hint in found])
    return f"{names} {'matches' if len(found) == 1 else 'match'} no task"


def warn_unmatched(vf, registry):
    """One warning naming the datasets of the file that match no task (they are not scored)."""
    found = unmatched(vf, registry)
    if found:
        logger.warning("%s: %s; not scored (a task of your own is declared with --task-file)", vf.path, _foreign(found))


def _held(vf, union, registry=None):
    """What the file holds, in words, for errors: the task datasets, the union's tasks, the datasets
    whose names match no task (with a did-you-mean) and task datasets inside groups."""
    foreign = unmatched(vf, registry)
    names = {name for name, _ in foreign}
    held = sorted(n for n in vf.names() if n != UNION and n not in names)
    parts = [f"it holds {_listed(['/' + n for n in held])}" if held else "it holds no task dataset at its root"]
    if foreign:
        parts.append(_foreign(foreign))
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


def _refuse_skips(skipped, vf, union, registry=None):
    if skipped["absent_from_file"]:
        raise VectorsError(
            f"absent from the file ({_held(vf, union, registry)}); --strict requires every requested task",
            file=vf.path,
            task=_listed(skipped["absent_from_file"]),
        )
    if skipped["no_data"]:
        raise DataFileError(
            "no data; --strict requires every requested task", file="--strict", task=_listed(skipped["no_data"])
        )


def _nothing_to_score(skipped, held_without_data, vf, union, root, registry=None):
    """The one-line error of a run that would score nothing, saying why: the data folder, the file's
    tasks without data, or what the file holds; first, a file holding only datasets that match no task
    and resemble none (a task of the user's own, scored without its task file)."""
    foreign = unmatched(vf, registry)
    misspelt = any(hint for _, hint in foreign)  # a built-in task's name misspelt: said below, with did-you-mean
    if foreign and not misspelt and not any(n in task_datasets(registry) for n in vf.names() if n != UNION):
        return VectorsError(
            f"nothing to score: {_foreign(foreign)}; a task of your own is scored with the task file that "
            "declares it: --task-file FILE",
            file=vf.path,
        )
    if not Path(root).is_dir() and not skipped["absent_from_file"]:
        return DataFileError(f"nothing to score: the data folder {root} does not exist; {DATA_HINT}", file=root)
    if held_without_data:
        return DataFileError(
            f"nothing to score: no data for {_listed(held_without_data)} in {root}; {DATA_HINT}", file=root
        )
    if skipped["absent_from_file"]:
        return VectorsError(
            f"nothing to score: {_listed(skipped['absent_from_file'])} absent from the file "
            f"({_held(vf, union, registry)})",
            file=vf.path,
        )
    if not Path(root).is_dir():
        return DataFileError(f"nothing to score: the data folder {root} does not exist; {DATA_HINT}", file=root)
    return DataFileError(
        f"nothing to score: no data for {_listed(skipped['no_data'])} in {root}; {DATA_HINT}", file=root
    )


def _locate_lender(spec, vf, union, cache, borrowers, method):
    """The task lending normalization statistics (STS-B for STS12-16), located in the file."""
    name = spec.name
    why = f"--normalize {method} estimates the statistics of {_listed(borrowers)} on {name}'s train split" + (
        " and tunes on its dev split" if method == "tune" else ""
    )
    if name not in vf.names() and name not in (union.tasks() or []):
        raise VectorsError(
            f"{why}, but the file has no {name} vectors; add {name} to it, or use --normalize none or l2",
            file=vf.path,
            task=_listed(borrowers),
        )
    missing = spec.missing_files(cache.root)
    if missing:
        raise DataFileError(f"{why}: its data is needed", file=missing[0], task=name)
    return Located(spec, vf, union, cache)


def read_whole(spec, role) -> bool:
    """Whether the scoring reads a role's table whole (not block by block: a kind's `streamed` roles)."""
    return role not in spec.kind_module.streamed


def plan(
    vectors, data_dir, tasks=None, config=None, strict=False, check_memory=None, cache=None, registry=None, kept=None
):
    """The work units of scoring `vectors` on `tasks` (TaskSpecs or names of `registry`'s tasks; None:
    every task of the registry the file and data hold), in the order given, after every check.
    Raises EmbevalError when there is nothing to score.

    check_memory(count, dim, task): an extra memory check of each table (the device's), or None.
    cache: a TaskDataCache of data_dir to reuse (a sweep plans many files on the same data).
    registry: the tasks known to this run (default: the built-ins).
    kept: a KeptTables the tables read whole for their fingerprints are kept in, for the scoring."""
    config = as_config(config)
    check_bootstrap(config.bootstrap)
    registry = registry if registry is not None else builtin()
    root = Path(data_dir)
    explicit = tasks is not None
    specs = [registry[t] if isinstance(t, str) else t for t in (tasks if explicit else registry)]
    if explicit:
        registry = Registry(list(registry.values()) + [s for s in specs if s.name not in registry])
    cache = cache if cache is not None else TaskDataCache(root)
    wanted = wanted_datasets(specs, config, registry)
    guard = h5guard.start(check_file(vectors), wanted, vectors_format.inspect_metadata)
    try:
        if explicit:
            _load_ahead(specs, cache)
        opened = VectorsFile(vectors, names=wanted, guard=guard, kept=kept)  # once the guard has finished unharmed
    except BaseException:
        guard.cancel()  # the child ended, if it still runs
        raise
    with opened as vf:
        union = UnionRows(vf, cache, registry)
        union_tasks = union.tasks() or []
        todo, skipped = select(specs, explicit, vf, root, union_tasks, strict, registry)
        warn_unmatched(vf, registry)
        model = vf.root_text("model")
        with AheadFingerprints(vf, todo) as ahead:  # large tables read while the task data loads
            located = {spec.name: Located(spec, vf, union, cache) for spec in todo}
            method = config.normalize
            if normalize.needs_statistics(method):
                borrowers = {}
                for spec in todo:
                    if spec.reference:
                        borrowers.setdefault(spec.reference, []).append(spec.name)
                for lender, names in borrowers.items():
                    if lender not in located:
                        located[lender] = _locate_lender(registry[lender], vf, union, cache, names, method)
            bow_dim = config.baseline_bow_dim
            for loc in located.values():
                loc.spec.kind_module.check_data(loc.spec, loc.data, config)
                for role in loc.roles:
                    if not read_whole(loc.spec, role):
                        continue  # read block by block: never whole in memory
                    vf.check_memory(*loc.shape(role), loc.name)
                    if check_memory is not None:
                        check_memory(*loc.shape(role), loc.name)
                if bow_dim:
                    vf.check_memory(sum(len(sentences) for sentences in loc.lists.values()), bow_dim, loc.name)
            constant = []
            described = {name: _describe(loc, vf, constant, ahead) for name, loc in located.items()}
            for name, what in constant:
                logger.warning("%s: %s: %s: scores computed on them mean nothing", vf.path, name, what)
            roles = [r for loc in located.values() for r in loc.roles.values()]
            unverified = sorted({r.dataset_name for r in roles if not r.verified})
            if unverified:
                warn_unverified(vf.path, unverified)
    sources = [Source(str(vectors), "")] + ([Source(str(vectors), "", bow_dim)] if bow_dim else [])
    units = []
    for spec in todo:
        for source in sources:
            units.append(_unit(spec, source, located, described, root, config))
    return Plan(units, skipped, model)


def _load_ahead(specs, cache):
    """Load and fingerprint the tasks' data while the vectors file's guard reads it (the data's own
    errors are left to the plan, which meets them again in its order)."""
    for spec in specs:
        try:
            for role, sentences in cache.lists(spec).items():
                cache.list_fingerprint(spec, role, sentences)
            cache.fingerprint(spec)
        except Exception:
            continue


class AheadFingerprints:
    """The fingerprints (VectorsFile.fingerprint_rows) of the requested tasks' own datasets of at least
    AHEAD_BYTES, read in a background thread while the main thread loads and checks the task data
    (reading and hashing release the GIL). Taken by _describe, where its error or warning surfaces
    as it would have without it; the reading stops when the plan ends first (an error). A table
    larger than the memory available is not read ahead: the plan refuses it before reading."""

    AHEAD_BYTES = 32 << 20

    def __init__(self, vf, specs):
        import threading
        from concurrent.futures import ThreadPoolExecutor

        self.stop = threading.Event()
        present = set(vf.names())
        wanted = {}
        for spec in specs:
            for role in spec.kind_module.roles(spec):
                name = dataset_name(spec.name, role)
                if name in present and name not in wanted and self._large(vf, name, spec.name):
                    wanted[name] = (spec.name, read_whole(spec, role))
        self.pool = ThreadPoolExecutor(1) if wanted else None
        self.futures = {}
        for name, (task, keep) in wanted.items():
            self.futures[(name, task)] = self.pool.submit(self._fingerprint, vf, name, task, keep)

    def _large(self, vf, name, task):
        """Whether the dataset holds AHEAD_BYTES or more (a small one is read where it is described,
        without a thread); a dataset refused by its checks is left to the reading ahead, whose error
        surfaces where it did."""
        try:
            ds = vf.dataset(name, task)
        except VectorsError:
            return True
        return ds.shape[0] * ds.shape[1] * ds.dtype.itemsize >= self.AHEAD_BYTES

    def _fingerprint(self, vf, name, task, keep):
        ds = vf.dataset(name, task)
        if ds.ndim != 2 or ds.shape[0] * ds.shape[1] * ds.dtype.itemsize < self.AHEAD_BYTES:
            return None  # small (or refused when located): read where it is described
        try:
            vf.check_memory(ds.shape[0], ds.shape[1], task)
        except VectorsError:
            return None  # refused before any read where the plan checks it (its rows could each be gigabytes)
        return vf.fingerprint_quietly(ds, task, stop=self.stop, keep=keep)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.pool is not None:
            self.stop.set()
            self.pool.shutdown(wait=True, cancel_futures=True)

    def fingerprint_rows(self, vf, ds, task, rows, keep=False):
        """vf.fingerprint_rows(ds, task, rows, keep=keep), read ahead when it was."""
        future = self.futures.pop((ds.name.lstrip("/"), task), None) if rows is None else None
        found = future.result() if future is not None else None
        if found is None:
            return vf.fingerprint_rows(ds, task, rows, keep=keep)
        result, warning = found
        if warning:
            logger.warning(warning)
        return result


def _describe(loc, vf, constant, ahead=None):
    """The record's description of a located task's vectors (reads and fingerprints each list's rows,
    block by block, or takes what `ahead` read): one role's fields at the top; with several roles,
    each under `roles` and their combined fingerprint at the top. Appends (task, what) to `constant`
    for each list whose vectors are all zero or all identical."""
    roles = {}
    for role, found in loc.roles.items():
        keep = read_whole(loc.spec, role)  # kept for the scoring, which reads it whole
        if ahead is not None:
            sha, count, dim, same = ahead.fingerprint_rows(vf, found.dataset, loc.name, found.rows, keep)
        else:
            sha, count, dim, same = vf.fingerprint_rows(found.dataset, loc.name, found.rows, keep=keep)
        if same is not None:
            where = ""
            if found.rows is not None:
                where = f" (the task's rows of /{UNION})"
            elif len(loc.roles) > 1:
                where = f" of /{found.dataset_name}"
            constant.append((loc.name, f"all {count} vectors{where} are {same}"))
        roles[role] = {
            "source": f"/{found.dataset_name}",
            "sha256": found.fingerprint,
            "vectors_sha256": sha,
            "count": count,
            "dim": dim,
            "dtype": str(found.dataset.dtype),
        }
        prompt = found.dataset.attrs.get("prompt")
        if isinstance(prompt, bytes):
            prompt = prompt.decode("utf-8", "replace")
        if isinstance(prompt, str) and prompt:
            roles[role]["prompt"] = prompt
    if list(roles) == [TEXT]:
        return roles[TEXT]
    dims = {r["dim"] for r in roles.values()}
    if len(dims) > 1:
        shapes = ", ".join(f"/{d['source'].lstrip('/')} {d['dim']}" for d in roles.values())
        raise VectorsError(
            f"the vectors of the task's lists have different dimensions ({shapes}); a query and "
            "its documents must be embedded in one space",
            file=vf.path,
            task=loc.name,
        )
    combined = hashlib.sha256("".join(f"{r}\0{d['vectors_sha256']}\n" for r, d in roles.items()).encode())
    sentences = hashlib.sha256("".join(f"{r}\0{d['sha256']}\n" for r, d in roles.items()).encode())
    return {
        "source": " + ".join(d["source"] for d in roles.values()),
        "sha256": sentences.hexdigest(),
        "vectors_sha256": combined.hexdigest(),
        "count": sum(d["count"] for d in roles.values()),
        "dim": dims.pop(),
        "dtype": "/".join(sorted({d["dtype"] for d in roles.values()})),
        "roles": roles,
    }


def _unit(spec, source, located, described, root, config):
    loc = located[spec.name]
    source = Source(source.path, loc.dataset_name, source.bow_dim)
    vectors = dict(described[spec.name])
    if source.bow_dim:
        vectors = {
            "source": baseline.label(source.bow_dim),
            "sha256": described[spec.name]["sha256"],
            "count": sum(len(sentences) for sentences in loc.lists.values()),
            "dim": source.bow_dim,
            "dtype": "float32",
        }
    reference = None
    if spec.reference and spec.reference in located and normalize.needs_statistics(config.normalize):
        reference = _unit(located[spec.reference].spec, source, located, described, root, config)
    return Unit(
        spec=spec,
        source=source,
        data_dir=str(root),
        config=config,
        vectors=vectors,
        data_sha256=loc.data_sha256,
        reference=reference,
        union=loc.union_specs,
    )
