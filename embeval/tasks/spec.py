"""TaskSpec: one task, declared once. SentEval's built-in tasks (embeval/tasks/senteval.toml) and a
user's task files go through the same reader, `read_spec`; only the built-ins' file formats are
SentEval's own (embeval.tasks.senteval).

A declaration's common keys are read here; the keys of its kind (labels, features, ...) by the kind
(embeval/kinds/). Paths in `files` are relative to the task file (built-ins: to the data folder).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from embeval.errors import DATA_HINT, DataFileError
from embeval.tasks import senteval
from embeval.tasks.catalog import SENTEVAL_FORMATS, known_kinds
from embeval.tasks.catalog import kind as kind_named
from embeval.tasks.declaration import Declaration, TaskFileError
from embeval.tasks.figures import Figure, Mteb
from embeval.untrusted import FILE_STEM, NAME, confine, is_name

if TYPE_CHECKING:
    from embeval.tasks.kind import Kind

TOKENIZATIONS = ("none", "whitespace")
TABULAR_FORMATS = ("tsv", "csv", "jsonl")
BUILT_IN = "built-in"


@dataclass(frozen=True)
class Report:
    """Where a task's figures appear in `embeval report`: shown or not, the table of its headline
    column (None: its kind's), the columns' order within their tables, and the header (None: the
    task's label)."""

    show: bool = True
    group: str | None = None
    order: int = 0
    header: str | None = None


@dataclass(frozen=True, kw_only=True)
class TaskSpec:
    """A task: its name and kind, its protocol, where its files are and how they are read, its
    kind's typed parameters, and how it is shown and exported. `declaration` is the table it was
    read from (recorded in results files, so that reports show the task without its file)."""

    name: str
    kind: str
    protocol: str | None
    files: tuple[tuple[str, str], ...]
    base: str | None  # the folder `files` are relative to; None: the data folder (built-ins)
    format: str
    params: Any
    label: str
    aliases: tuple[str, ...] = ()
    figure: str | None = None
    column_names: tuple[tuple[str, str], ...] = ()
    tokenization: str = "none"
    mteb: Mteb | None = None
    reference: str | None = None
    geometry: bool = False
    quickstart: bool = False
    report: Report = field(default_factory=Report)
    description: str = ""
    source: str = BUILT_IN
    outside_allowed: bool = False  # --allow-paths-outside: files may resolve outside the task file's folder
    declaration: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def builtin(self) -> bool:
        return self.source == BUILT_IN

    @property
    def kind_module(self) -> Kind:
        return kind_named(self.kind)

    @property
    def figures(self) -> tuple[Figure, ...]:
        """The task's figures, headline first (the declared main figure, else the kind's)."""
        figures = self.kind_module.figures(self)
        if self.figure is None:
            return figures
        main = next(f for f in figures if f.path == self.figure)
        return (main,) + tuple(f for f in figures if f.path != self.figure)

    @property
    def headline(self) -> Figure:
        return self.figures[0]

    @property
    def selection(self) -> str | None:
        """The dev figure that chooses among settings (a normalization, the best file of a sweep)."""
        return self.kind_module.selection(self)

    def paths(self, data_dir: str | Path | None = None) -> dict[str, Path]:
        """{file key: path} of the task's files (built-ins under data_dir). A task file's paths resolve
        (symlinks followed) inside its folder unless --allow-paths-outside was given."""
        if self.base is None:
            base = Path(data_dir if data_dir is not None else ".")
            return {key: base / rel for key, rel in self.files}
        return {
            key: confine(self.base, rel, self.outside_allowed, f"files.{key}", self.source, self.name, TaskFileError)
            for key, rel in self.files
        }

    def data_files(self) -> tuple[str, ...]:
        """The task's file paths as declared (relative to its base)."""
        return tuple(rel for _, rel in self.files)

    def missing_files(self, data_dir: str | Path | None = None) -> list[Path]:
        return [path for path in self.paths(data_dir).values() if not path.exists()]

    def require_data(self, data_dir: str | Path | None = None) -> None:
        """Raise the DataFileError of the task's first missing data file, if any (for a task file's task,
        naming the key and the task file that name it), or of one that is not a regular file or is too
        large to read."""
        from embeval.untrusted import check_data_file

        for key, path in self.paths(data_dir).items():
            if path.exists():
                check_data_file(path, self.name, DataFileError)  # a regular file, of a size that fits in memory
                continue
            if self.builtin:
                raise DataFileError(f"missing data file; {DATA_HINT}", file=path, task=self.name)
            raise DataFileError(
                f"missing data file, files.{key} of {self.source} (paths are relative to the task file's folder)",
                file=path,
                task=self.name,
            )

    def load(self, data_dir: str | Path | None = None) -> Any:
        """The task's data (its kind's shape), from its files."""
        if self.base is None and data_dir is not None and not Path(data_dir).is_dir():
            raise DataFileError(f"data folder not found; {DATA_HINT}", file=data_dir, task=self.name)
        return loader(self)(self, self.paths(data_dir))

    def record(self) -> dict[str, Any]:
        """What a results file keeps of the declaration: enough to show the task in a fresh process."""
        recorded: dict[str, Any] = {"source": self.source, "declaration": dict(self.declaration)}
        if self.outside_allowed:
            recorded["paths_outside_allowed"] = True
        return recorded


def loader(spec: TaskSpec) -> Any:
    """The function (spec, paths) -> data that reads the task's files: a SentEval format's reader
    (embeval.tasks.senteval), else its kind's."""
    if spec.format in SENTEVAL_FORMATS:
        return getattr(senteval, SENTEVAL_FORMATS[spec.format][0])
    return spec.kind_module.load


def _mteb(decl: Declaration) -> Mteb | None:
    table = decl.sub("mteb", None)
    if table is None:
        return None
    name = table.take("name")
    if not is_name(name, FILE_STEM):  # it names a result file of export-mteb
        raise table.error(
            f"{ascii(name)[:60]} is not an MTEB task name (letters, digits, '.', '-' or '_', starting with a "
            "letter or digit)",
            "name",
        )
    mteb = Mteb(
        name=name,
        dataset=table.take("dataset", default=""),
        revision=table.take("revision", default=""),
        pairs=table.take("pairs", (int,), 0),
        figures=table.take("figures", default=""),
        protocol=table.take("protocol", default=""),
        pooled_splits=table.strings("pooled_splits", ()),
        absent=table.take("absent", default=""),
        subset=table.take("subset", default="default"),
        languages=table.strings("languages", ("eng-Latn",)),
        split=table.take("split", default="test"),
        type=table.take("type", default=""),
        main_score=table.take("main_score", default=""),
        benchmarks=tuple(table.take("benchmarks", (list,), [])),
        revision_mismatch=table.take("revision_mismatch", default=""),
        revision_unverified=table.take("revision_unverified", default=""),
        revision_scored=table.take("revision_scored", default=""),
        parts=table.take("parts", (int,), 0),
        subset_languages=_subset_languages(table),
        notes=table.strings("notes", ()),
    )
    table.finish()
    return mteb


def _subset_languages(table: Declaration) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """[mteb] subset_languages: {subset: [languages]} of a part holding several of mteb's subsets."""
    found = table.take("subset_languages", (dict,), {})
    if not all(isinstance(v, list) and all(isinstance(x, str) for x in v) for v in found.values()):
        raise table.error("must map each subset to a list of languages", "subset_languages")
    return tuple((str(subset), tuple(values)) for subset, values in found.items())


def _report(decl: Declaration) -> Report:
    if not decl.has("report"):
        return Report()
    if decl.table["report"] is False:
        decl.take("report", (bool,))
        return Report(show=False)
    table = decl.sub("report")
    assert table is not None
    report = Report(
        group=table.take("group", default=None),
        order=table.take("order", (int,), 0),
        header=table.take("header", default=None),
    )
    table.finish()
    return report


def _files(decl: Declaration, kind: Kind, protocol: str | None, spec_format: str | None) -> tuple[tuple[str, str], ...]:
    """The [files] table: the keys its kind (or its SentEval format) reads, each a path."""
    table = decl.sub("files")
    assert table is not None
    required: tuple[str, ...]
    optional: tuple[str, ...]
    if spec_format in SENTEVAL_FORMATS:
        keys = SENTEVAL_FORMATS[spec_format][1]
        required, optional, free = (keys or (), (), keys is None)
    else:
        required, optional, free = kind.file_keys(protocol)
    files = []
    for key, value in table.table.items():
        if not isinstance(value, str) or not value:
            raise table.error("must be a path (a non-empty string)", key)
        if not free and key not in required + optional:
            expected = ", ".join(required + optional)
            raise table.error(
                f"is not a file of a {kind.name} task{f' ({protocol})' if protocol else ''}; its files are {expected}",
                key,
            )
        files.append((key, value))
    missing = [key for key in required if key not in table.table]
    if missing:
        raise table.error(
            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} required for a "
            f"{kind.name} task{f' ({protocol})' if protocol else ''}"
        )
    if not files:
        raise table.error("names no file")
    return tuple(files)


def _declared_format(decl: Declaration, kind: Kind) -> str | None:
    senteval = tuple(name for name, (_, _, kinds) in SENTEVAL_FORMATS.items() if kind.name in kinds)
    return decl.take("format", default=None, choices=kind.formats + senteval)


def _format(decl: Declaration, kind: Kind, files: tuple[tuple[str, str], ...], declared: str | None) -> str:
    """The files' format: declared, else told by the files' suffix."""
    if declared is not None:
        return declared
    by_suffix = {Path(path).suffix.lower().lstrip(".") for _, path in files}
    if len(by_suffix) == 1 and (suffix := by_suffix.pop()) in kind.formats:
        return suffix
    if len(kind.formats) == 1 and kind.formats[0] not in TABULAR_FORMATS:
        return kind.formats[0]  # a layout of several files (BEIR's), not told by a suffix
    if not kind.formats:
        raise decl.error("is required for this kind", "format")
    raise decl.error(
        f"cannot tell the files' format from their names; add format = one of {', '.join(kind.formats)}", "format"
    )


def read_spec(
    table: Mapping[str, Any], source: str = BUILT_IN, base: str | None = None, allow_outside: bool = False
) -> TaskSpec:
    """The TaskSpec a declaration describes, after every check that needs no data file.
    source: the task file (for messages), or "built-in"; base: the folder its paths are relative to
    (which they must stay inside unless allow_outside)."""
    if not isinstance(table, Mapping):
        raise TaskFileError("a task must be a table of keys", file=source)
    shown = table.get("name")
    decl = Declaration(table, source, shown if isinstance(shown, str) and is_name(shown) else "?")
    name = decl.take("name")
    if not is_name(name, NAME):
        raise decl.error(
            f"{ascii(name)[:60]}: a task name is a letter followed by letters, digits, '-' or '_' "
            "(at most 128 characters)",
            "name",
        )
    if name.upper() == "ALL":
        raise decl.error("'ALL' is the union export's name (ALL.txt, /ALL); choose another task name", "name")
    kind_name = decl.take("kind")
    if kind_name not in known_kinds():
        from difflib import get_close_matches

        close = get_close_matches(kind_name, known_kinds(), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise decl.error(f"unknown kind {kind_name!r}{hint}; kinds are {', '.join(known_kinds())}", "kind")
    kind = kind_named(kind_name)
    try:
        protocol = None
        if kind.protocols:
            protocol = decl.take("protocol", default=kind.protocols[0], choices=kind.protocols)
        elif decl.has("protocol"):
            raise decl.error(f"a {kind_name} task has no protocol to choose", "protocol")
        declared_format = _declared_format(decl, kind)
        files = _files(decl, kind, protocol, declared_format)
        spec_format = _format(decl, kind, files, declared_format)
        columns = decl.sub("columns", None)
        column_names: tuple[tuple[str, str], ...] = ()
        if columns is not None:
            known = kind.column_keys(protocol)
            for key in columns.table:
                value = columns.take(key)
                if key not in known:
                    raise columns.error(
                        f"is not a column of a {kind_name} task; its columns are {', '.join(known)}", key
                    )
                column_names += ((key, value),)
        params = kind.read_params(decl, protocol)
        spec = TaskSpec(
            name=name,
            kind=kind_name,
            protocol=protocol,
            files=files,
            base=base,
            format=spec_format,
            params=params,
            label=decl.take("short_name", default=name),
            aliases=decl.strings("aliases", ()),
            figure=decl.take("figure", default=None),
            column_names=column_names,
            tokenization=decl.take("tokenization", default="none", choices=TOKENIZATIONS),
            mteb=_mteb(decl),
            reference=decl.take("statistics_from", default=None),
            geometry=decl.take("geometry", (bool,), False),
            quickstart=decl.take("quickstart", (bool,), False),
            report=_report(decl),
            description=decl.take("description", default=""),
            source=source,
            outside_allowed=allow_outside,
            declaration=dict(table),
        )
    except TaskFileError:
        misspelt = decl.misspelt()
        if misspelt is not None:
            raise misspelt from None
        raise
    decl.finish()
    if spec.figure is not None:
        paths = [f.path for f in kind.figures(spec)]
        if spec.figure not in paths:
            raise decl.error(
                f"{spec.figure!r} is not a figure of this task; its figures are {', '.join(paths)}", "figure"
            )
    kind.check(spec, decl)
    if base is not None:
        spec.paths()  # every path inside the task file's folder, checked before any data is read
    return spec
