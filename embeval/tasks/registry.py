"""The registry: the kinds of task (one line each), SentEval's built-in tasks and the tasks users
declare in task files.

Kinds are referred to by module path and imported on first use; kind modules are light, so reading
the registry imports no torch. The built-in tasks are declared in senteval.toml beside this module,
read by the same reader as a user's task file (embeval.tasks.spec.read_spec); their files are in
SentEval's formats (embeval.tasks.senteval), in SentEval's order.

A task file is TOML: one task at its top level, or several as [[task]] tables. `--task-file PATH`
(a file, or a folder of *.toml files) and the EMBEVAL_TASKS search path add declared tasks after
the built-ins.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from embeval.errors import EmbevalError
from embeval.tasks.catalog import KINDS, SENTEVAL_FORMATS, kind, known_kinds, statistic
from embeval.tasks.declaration import TaskFileError
from embeval.tasks.spec import TaskSpec, loader, read_spec
from embeval.untrusted import MAX_DECLARATION_BYTES, loads_toml, read_bytes

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

BUILTIN_FILE = Path(__file__).with_name("senteval.toml")
TASKS_PATH = "EMBEVAL_TASKS"


class Registry(Mapping[str, TaskSpec]):
    """Tasks by name, in order: the built-ins, then the declared ones in the order read. Names and
    aliases are unique in any case; a task that borrows normalization statistics names a task of the
    registry that has its own (unless `complete` is False: some of the tasks, such as a union's)."""

    def __init__(self, specs: Iterable[TaskSpec], complete: bool = True):
        self.mteb_names: list[str] = []  # the tasks asked by --mteb (embeval.tasks.mteb_source)
        self.unsupported: list[str] = []  # the mteb tasks --skip-unsupported left out
        self._specs: dict[str, TaskSpec] = {}
        self._spellings: dict[str, str] = {}
        for spec in specs:
            for spelling in (spec.name, *spec.aliases):
                key = spelling.lower()
                if key in self._spellings:
                    other = self._specs[self._spellings[key]]
                    where = "a built-in task" if other.builtin else f"declared in {other.source}"
                    raise TaskFileError(
                        f"the name {spelling!r} is already {other.name!r}, {where}", file=spec.source, task=spec.name
                    )
                self._spellings[key] = spec.name
            self._specs[spec.name] = spec
        for spec in self._specs.values() if complete else ():
            lender = self._specs.get(spec.reference) if spec.reference else None
            if spec.reference and (lender is None or lender.reference):
                raise TaskFileError(
                    f"statistics_from {spec.reference!r} is not a task with statistics of its own",
                    file=spec.source,
                    task=spec.name,
                )

    def __getitem__(self, name: str) -> TaskSpec:
        return self._specs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def declared(self) -> list[TaskSpec]:
        return [spec for spec in self._specs.values() if not spec.builtin]

    def sources(self) -> list[str]:
        """The task files the declared tasks come from (the inputs no command writes over)."""
        return list(dict.fromkeys(spec.source for spec in self.declared()))

    def inputs(self, data_dir: str | Path | None, tasks: Sequence[str | TaskSpec] | None = None) -> list[str | Path]:
        """The files scoring `tasks` (names or TaskSpecs; None: all) reads, the inputs no command writes
        over: the task files and every task's data files (a path a task file may not name is left out:
        reading it says why)."""
        found: list[str | Path] = list(self.sources())
        for task in self if tasks is None else tasks:
            spec = self._specs.get(task) if isinstance(task, str) else task
            if spec is None:
                continue
            if not spec.builtin:
                found.append(spec.source)
            try:
                found += spec.paths(data_dir).values()
            except EmbevalError:
                continue
        return found

    def canonical_name(self, spelling: str) -> str | None:
        """The name of a task as people write it (any case, or an alias such as STS-B), or None."""
        return self._spellings.get(spelling.strip().lower())

    def suggestion(self, spelling: str) -> str:
        """' (did you mean X?)' for a near spelling, else ''."""
        close = difflib.get_close_matches(spelling.lower(), list(self._spellings), n=1, cutoff=0.6)
        return f" (did you mean {self._spellings[close[0]]}?)" if close else ""

    def parse(self, text: str | None, source: str = "--tasks") -> list[str]:
        """Task names from a comma-separated list, in the order given (None: every task, in registry
        order). Case does not matter, aliases are accepted; an unknown name is an error with a
        suggestion."""
        if text is None:
            return list(self._specs)
        spellings = [t.strip() for t in text.split(",") if t.strip()]
        if not spellings:
            raise EmbevalError("no task named", file=source)
        names: list[str] = []
        for spelling in spellings:
            name = self.canonical_name(spelling)
            if name is None:
                raise EmbevalError(
                    f"unknown task {spelling}{self.suggestion(spelling)}; tasks are {', '.join(self._specs)}",
                    file=source,
                )
            if name not in names:
                names.append(name)
        return names

    def specs(self, names: Sequence[str] | None = None) -> list[TaskSpec]:
        return [self._specs[n] for n in (names if names is not None else self._specs)]

    def with_mteb(self, specs: Sequence[TaskSpec], unsupported: Sequence[str] = ()) -> Registry:
        """This registry and MTEB's tasks by name: a built-in of the same name or alias gives way, a
        declared task of the same name is an error."""
        spellings = {s.lower() for spec in specs for s in (spec.name, *spec.aliases)}
        kept = []
        for spec in self._specs.values():
            clash = {s.lower() for s in (spec.name, *spec.aliases)} & spellings
            if clash and not spec.builtin:
                raise TaskFileError(
                    f"declares {spec.name}, which --mteb names too; leave one of them out", file=spec.source
                )
            if not clash:
                kept.append(spec)
        combined = Registry(kept + list(specs))
        combined.mteb_names = [spec.name for spec in specs]
        combined.unsupported = list(unsupported)
        return combined

    def with_task_files(self, paths: Iterable[str | Path], allow_outside: bool = False) -> Registry:
        """This registry and the tasks the files (or folders of *.toml files) declare (their data files
        inside each task file's folder unless allow_outside)."""
        specs = list(self._specs.values())
        for path in paths:
            specs += read_task_path(path, allow_outside)
        return Registry(specs)


def _toml(path: Path) -> dict[str, Any]:
    data = read_bytes(path, MAX_DECLARATION_BYTES, TaskFileError, missing="task file not found")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise TaskFileError(f"not valid UTF-8 text (byte {err.start})", file=path)
    try:
        return loads_toml(text, TaskFileError, path)
    except tomllib.TOMLDecodeError as err:
        raise TaskFileError(f"not valid TOML: {err}", file=path)


def read_task_file(path: str | Path, allow_outside: bool = False) -> list[TaskSpec]:
    """The tasks a TOML task file declares: its top-level table, or each of its [[task]] tables.
    Paths inside are relative to the file's folder, and stay inside it unless allow_outside."""
    path = Path(path)
    table = _toml(path)
    folder = str(path.resolve().parent)
    if "task" in table and isinstance(table["task"], list):
        extra = [k for k in table if k != "task"]
        if extra:
            raise TaskFileError(f"keys {', '.join(extra)} outside the [[task]] tables", file=path)
        if not table["task"]:
            raise TaskFileError("declares no task", file=path)
        return [read_spec(entry, str(path), folder, allow_outside) for entry in table["task"]]
    return [read_spec(table, str(path), folder, allow_outside)]


def read_task_path(path: str | Path, allow_outside: bool = False) -> list[TaskSpec]:
    """The tasks of a task file, or of every *.toml file under a folder (sorted)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*.toml") if p.is_file())
        if not files:
            raise TaskFileError("a folder without task files (*.toml)", file=path)
        return [spec for p in files for spec in read_task_file(p, allow_outside)]
    return read_task_file(path, allow_outside)


def search_path() -> list[str]:
    """The task files and folders of EMBEVAL_TASKS (separated as PATH is)."""
    value = os.environ.get(TASKS_PATH, "")
    return [part for part in value.split(os.pathsep) if part]


@cache
def builtin() -> Registry:
    """SentEval's tasks, as declared in senteval.toml (their paths relative to the data folder)."""
    return Registry(read_spec(entry) for entry in _toml(BUILTIN_FILE)["task"])


def registry(task_files: Iterable[str | Path] = (), allow_outside: bool = False) -> Registry:
    """The built-in tasks, those of EMBEVAL_TASKS, then those of `task_files` (allow_outside: their data
    files may be outside each task file's folder)."""
    paths = search_path() + [str(p) for p in task_files]
    return builtin().with_task_files(paths, allow_outside) if paths else builtin()


def recorded_spec(name: str, entry: Mapping[str, Any], known: Mapping[str, TaskSpec] | None = None) -> TaskSpec:
    """The TaskSpec of a task of a results file: from the declaration the entry records (a declared
    task), else the built-in task of that name. A task this version cannot show raises TaskFileError
    saying why (an unknown kind, or a name it does not know)."""
    recorded = entry.get("declaration") if isinstance(entry, Mapping) else None
    if isinstance(recorded, Mapping) and isinstance(recorded.get("declaration"), Mapping):
        source = str(recorded.get("source", "a results file"))
        outside = recorded.get("paths_outside_allowed") is True
        return read_spec(recorded["declaration"], source, base=str(Path(source).parent), allow_outside=outside)
    known = known if known is not None else builtin()
    if name in known:
        return known[name]
    raise TaskFileError(
        "a task this version of embeval does not know, and the results do not record its declaration", task=name
    )


class _Builtins(Mapping[str, TaskSpec]):
    """TASKS: the built-in tasks by name, read on first use."""

    def __getitem__(self, name: str) -> TaskSpec:
        return builtin()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(builtin())

    def __len__(self) -> int:
        return len(builtin())


TASKS: Mapping[str, TaskSpec] = _Builtins()


def canonical_name(spelling: str) -> str | None:
    """The built-in task a spelling names, or None."""
    return builtin().canonical_name(spelling)


def parse_task_list(text: str | None, source: str = "--tasks") -> list[str]:
    """Built-in task names from a comma-separated list (see Registry.parse)."""
    return builtin().parse(text, source)


__all__ = [
    "KINDS",
    "SENTEVAL_FORMATS",
    "TASKS",
    "Registry",
    "builtin",
    "canonical_name",
    "kind",
    "known_kinds",
    "loader",
    "parse_task_list",
    "read_task_file",
    "read_task_path",
    "recorded_spec",
    "registry",
    "statistic",
]
