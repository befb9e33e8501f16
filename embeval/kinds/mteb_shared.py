"""What the kinds and protocols scored MTEB's way share (pair classification's "mteb" protocol,
classification's "mteb" protocol, clustering, summarization, bitext mining): the mteb version
their figures match, bootstrap statistics that import their protocol module only when used, the
terminal's lines of fractions, the report column of the headline figure, and MTEB's score fields.

Their figures are fractions in [0, 1], as mteb reports them; the terminal and the reports show
them x100. MTEB's protocols score the vectors as given: the run's --normalize does not apply.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

from embeval.stats import Statistic
from embeval.tasks.figures import Column, Figure, lookup
from embeval.tasks.kind import Line, ci_text, pct
from embeval.tasks.spec import TaskSpec

MTEB_VERSION = "2.26.24"  # the mteb whose evaluators the figures equal (embeval/evaluate's protocol modules)


def lazy_statistic(module: str, name: str, stratified: bool, centred: bool = False) -> Statistic:
    """The Statistic `name` of `module`'s STATISTICS (its plain definition, its fast path and its path
    from the draws), its module imported on first use (the protocol modules import scikit-learn; a
    kind module must stay light to import)."""

    def own() -> Statistic:
        return importlib.import_module(module).STATISTICS[name]  # type: ignore[no-any-return]

    def function(W: Any, arrays: Any) -> Any:
        return own().function(W, arrays)

    def fast(W: Any, arrays: Any) -> Any:
        return own().resampling(W, arrays)

    def from_draws(drawn: Any, arrays: Any) -> Any:
        path = own().from_draws
        return None if path is None else path(drawn, arrays)

    return Statistic(function, stratified, centred, fast, from_draws)


def fractions_line(
    label: str, results: Mapping[str, Any], paths: Sequence[str], ci: Mapping[str, Any] | None = None
) -> Line:
    """One terminal line: the figures at `paths` x100, separated by |, each followed by its interval
    (when `ci` holds one)."""
    return Line(label, " | ".join(pct(lookup(results, path)) + ci_text(ci, path) for path in paths))


def headline_column(spec: TaskSpec, group: str, note: str) -> tuple[Column, ...]:
    """The task's column in `embeval report`: its headline figure x100 in `group` (a [report] table
    may choose another group, header or order)."""
    if not spec.report.show:
        return ()
    headline = spec.headline
    return (
        Column(
            spec.report.group or group,
            headline.path,
            f"{headline.label} x100",
            scale=100.0,
            header=spec.report.header,
            order=spec.report.order,
            note=note,
        ),
    )


def score_fields(spec: TaskSpec, results: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any] | None:
    """MTEB's score fields `keys` of a result and its main_score (the task's headline figure, which a
    task names with `figure` when its MTEB counterpart's main score is another), or None when the
    results lack one of them; a null figure is written as mteb writes it, NaN."""
    if any(key not in results for key in keys):
        return None
    main = lookup(results, spec.headline.path)
    if not isinstance(main, (int, float)) or isinstance(main, bool):
        return None
    return {**{key: nan_for_null(results[key]) for key in keys}, "main_score": main}


def nan_for_null(value: Any) -> Any:
    """A figure as mteb writes it: a null figure of the results file (a NaN) back to NaN (mteb writes
    NaN, e.g. `ap` of a multi-class classification; inside lists, such as each experiment's scores,
    mteb writes null itself, so those are left as they are)."""
    return float("nan") if value is None else value


def figures_of(paths_and_labels: Sequence[tuple[str, str]]) -> tuple[Figure, ...]:
    """Figures (fractions) from (path, label) pairs."""
    return tuple(Figure(path, label, False) for path, label in paths_and_labels)
