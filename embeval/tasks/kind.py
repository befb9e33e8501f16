"""What a kind of task is. Each kind is one module under embeval/kinds/ whose KIND object (a Kind)
says everything about it: its protocols and parameters, the files it reads, the shape of its data
and its sentence lists, its evaluation, its figures and how the terminal and the reports show them,
its per-item statistics and whether its fits stack in a sweep. embeval.tasks.registry.KINDS names
each kind's module once; nothing else in embeval branches on a kind.

A kind module is imported when the registry reads a declaration of that kind: it must stay light
to import (numpy at most); torch, scipy and scikit-learn are imported inside its functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from embeval.stats import Statistic
from embeval.tasks.declaration import Declaration
from embeval.tasks.figures import Column, Figure
from embeval.tasks.groups import Group

if TYPE_CHECKING:
    from embeval.tasks.spec import TaskSpec

TEXT = "text"  # the role of the sentence list of a task whose sentences all play the same part


@dataclass(frozen=True)
class Line:
    """A line of the terminal table: what the figures are, and their text."""

    label: str
    text: str


class Kind:
    """The interface of a kind (defaults for what most kinds share). Subclasses set the class
    attributes and override the methods their kind needs."""

    name: ClassVar[str]
    summary: ClassVar[str]
    protocols: ClassVar[tuple[str, ...]] = ()  # the first is the default
    formats: ClassVar[tuple[str, ...]] = ("tsv", "csv", "jsonl")
    statistics: ClassVar[Mapping[str, Mapping[str, Statistic]]] = {}  # prediction-set kinds it adds
    stacks: ClassVar[bool] = False  # its evaluation yields fit requests that a sweep batches
    # Figures given under several aggregations (key, words), at aggregation_path.format(coef=..., aggregation=key).
    aggregations: ClassVar[tuple[tuple[str, str], ...]] = ()
    aggregation_path: ClassVar[str] = ""
    groups: ClassVar[Mapping[str, Group]] = {}  # report tables of its own, by key (see embeval.tasks.groups)
    mteb_type: ClassVar[str | None] = None  # MTEB's task type of its MTEB tasks (embeval.tasks.benchmarks)
    streamed: ClassVar[tuple[str, ...]] = ()  # roles read block by block, never whole (no memory check)

    # The declaration.

    def file_keys(self, protocol: str | None) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
        """(required [files] keys, optional ones, whether any other key is allowed) for a protocol."""
        return ("test",), (), False

    def column_keys(self, protocol: str | None) -> tuple[str, ...]:
        """The columns its tabular files have (a [columns] table may rename them)."""
        return ()

    def read_params(self, decl: Declaration, protocol: str | None) -> Any:
        """The kind's typed parameters from its keys of the declaration (None: it has none)."""
        return None

    def check(self, spec: TaskSpec, decl: Declaration) -> None:
        """Checks of the whole spec, after its keys are read."""

    def check_data(self, spec: TaskSpec, data: Any, config: Any) -> None:
        """Checks of the loaded data against the run's configuration (e.g. classes against folds), made
        before any task is scored; raise DataFileError naming what is wrong."""

    # Data.

    def load(self, spec: TaskSpec, paths: Mapping[str, Path]) -> Any:
        """The task's data from its files in a generic format (tsv, csv, jsonl)."""
        raise NotImplementedError(f"{self.name} tasks have no generic file format")

    def roles(self, spec: TaskSpec) -> tuple[str, ...]:
        """The roles of its sentence lists (one list, "text", unless its sentences play different parts)."""
        return (TEXT,)

    def sentences(self, spec: TaskSpec, data: Any) -> dict[str, list[str]]:
        """The task's sentence lists by role (export order, each sentence once)."""
        return {TEXT: list(dict.fromkeys(data.sentences()))}

    def rows(self, spec: TaskSpec, data: Any, row_of: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
        """Where each sample's sentences are in the tables: for split data, per split (rows of the
        first sentences, of the second or None) in the table of role "text"."""
        from embeval.tasks.samples import split_rows

        return {name: split_rows(split, row_of[TEXT]) for name, split in data.splits.items()}

    def tables(self, spec: TaskSpec) -> tuple[str, ...]:
        """The roles whose whole table the evaluation holds on the device (the others it reads in
        blocks from ctx.sources)."""
        return (TEXT,)

    def sizes(self, spec: TaskSpec, data: Any) -> str:
        """What `embeval tasks` says of the loaded data: splits and sizes."""
        return ", ".join(f"{name} {len(split)}" for name, split in data.splits.items())

    # Scoring.

    def evaluate(self, ctx: Any) -> Any:
        """The task's results (a dict), or a generator that yields fit requests (embeval.evaluate.
        requests) and returns them; prediction sets go to ctx.keep."""
        raise NotImplementedError

    def figures(self, spec: TaskSpec) -> tuple[Figure, ...]:
        """Its figures, the headline first (a declaration's `figure` may choose another)."""
        raise NotImplementedError

    def selection(self, spec: TaskSpec) -> str | None:
        """The dev figure that selects among settings, or None."""
        return None

    def normalizes(self, spec: TaskSpec) -> bool:
        """Whether the run's --normalize applies to the task (False: its protocol scores the vectors
        as given, and its results record no normalization)."""
        return True

    def runs_classifiers(self, spec: TaskSpec) -> bool:
        """Whether the run's --classifiers applies to the task (it trains SentEval's classifier under
        its protocol, once per classifier)."""
        return False

    def unit_bytes(self, spec: TaskSpec, count: int, dim: int, config: Any) -> int:
        """Memory one file's evaluation holds when it stacks with others in a sweep."""
        return 4 * count * dim

    def least_budget(self, spec: TaskSpec, data: Any, dim: int, device: Any) -> tuple[int, str] | None:
        """(bytes, what takes them): the least memory budget (--memory-budget) the evaluation can run
        under on `device` (an exact search's, planned down to one query against one row), or None when
        any budget will do (what it holds whole was checked against the memory available)."""
        return None

    # Showing results.

    def lines(self, spec: TaskSpec, results: Mapping[str, Any], ci: Mapping[str, Any] | None) -> list[Line]:
        """The terminal table's lines of one task's results."""
        from embeval.tasks.figures import lookup

        out = []
        for figure in spec.figures:
            value = lookup(results, figure.path)
            scale = 1.0 if figure.percent else 100.0
            text = num(value) if figure.percent else pct(value)
            out.append(Line(figure.label, text + ci_text(ci, figure.path, scale)))
        return out

    def columns(self, spec: TaskSpec) -> tuple[Column, ...]:
        """Its columns in `embeval report`'s tables."""
        return ()

    def mteb_scores(self, spec: TaskSpec, results: Mapping[str, Any]) -> dict[str, Any] | None:
        """MTEB's score fields of a result (main_score and the rest), or None when the results hold
        no figure computed MTEB's way."""
        return None


def pct(x: Any) -> str:
    """A fraction (a correlation) x100 as the terminal shows it, n/a when absent or NaN."""
    return "  n/a" if not isinstance(x, (int, float)) or isinstance(x, bool) or x != x else f"{100 * x:5.2f}"


def num(x: Any, fmt: str = "{:5.2f}") -> str:
    """A number as the terminal shows it, n/a when absent or NaN."""
    return "  n/a" if not isinstance(x, (int, float)) or isinstance(x, bool) or x != x else fmt.format(x)


def ci_text(ci: Mapping[str, Any] | None, path: str, scale: float = 100.0) -> str:
    """' [low, high]' of the interval of the figure at `path`, in the table's units (else nothing)."""
    found = (ci or {}).get(path)
    if not isinstance(found, Mapping) or found.get("low") is None or found.get("high") is None:
        return ""
    return f" [{scale * found['low']:.2f}, {scale * found['high']:.2f}]"
