"""Benchmarks: a group of MTEB tasks whose figures are aggregated as MTEB's leaderboard aggregates them.

A benchmark is declared once (`Benchmark`: its name and its MTEB task names) and shown like any other
group of figures: in the terminal table, the results JSON (`benchmarks`), `embeval report` and
`embeval compare`. The aggregation is mteb 2.26.24's summary table (mteb.benchmarks._create_table):

- a task's score is the mean of its main score over its (subset, split) rows;
- the tasks are those of the benchmark that at least one of the compared runs scored; a run missing
  one of them (or whose score is NaN) has no mean (mteb's means skip nothing);
- `Mean (Task)`: the mean over the tasks; each task type's mean over its tasks; `Mean (TaskType)`:
  the mean of the type means;
- over several runs, the Borda rank: in each task the runs that scored it are ranked (best first,
  ties sharing the average rank) and earn (number of runs - rank) points; runs are ranked by their
  points, ties sharing the best rank.

The input is one `TaskScore` per MTEB task of a run, read from its results entries
(`task_scores`): an entry that records `mteb` (a mapping with `task`, `type`, `main_score` and
`value`, the main score aggregated over subsets and splits) is taken as it is; else a task with an
MTEB counterpart (a task file's [mteb] table, SentEval's STS tasks) contributes its MTEB main score
(its kind's `mteb_scores`) under its kind's MTEB type. Entries naming the same MTEB task (subsets
of it declared as tasks of their own) are its rows.

Intervals resample each task's test items with the task's own resamples (embeval.stats.resampled:
the ones of its interval and of its paired comparisons) and aggregate every resample as above.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from embeval import stats
from embeval.errors import EmbevalError

MEAN_TASK = "Mean (Task)"  # mteb's column names
MEAN_TASK_TYPE = "Mean (TaskType)"
MEANS = (MEAN_TASK, MEAN_TASK_TYPE)
IMPLICIT = "MTEB tasks"  # the benchmark of a run that declares none: every task with an MTEB score


def shown(benchmark: Benchmark, scores: Mapping[str, TaskScore]) -> bool:
    """Whether a run's figures of the benchmark are worth a row: a declared benchmark always; the
    implicit one when the run has MTEB tasks of two types or more (one type is its own table already)."""
    return bool(benchmark.tasks) or len({s.type for s in scores.values()}) >= 2


@dataclass(frozen=True)
class Benchmark:
    """A benchmark: its name and its MTEB task names (empty: every MTEB task of the runs)."""

    name: str
    tasks: tuple[str, ...] = ()


@dataclass(frozen=True)
class TaskScore:
    """One MTEB task of a run: its type, main score (name) and value (the mean of its rows), and the
    results entries it comes from."""

    task: str
    type: str
    main_score: str
    value: float
    entries: tuple[str, ...] = ()
    rows: tuple[float, ...] = ()


@dataclass
class Aggregate:
    """A benchmark's figures for one run (fractions; None: not defined, a task missing)."""

    benchmark: str
    tasks: list[str]  # the tasks aggregated, in the benchmark's order
    declared: int  # how many tasks the benchmark has (0: every MTEB task of the runs)
    missing: list[str]
    means: dict[str, float | None]
    types: dict[str, float | None]
    borda: int | None = None
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The benchmark's entry in the results JSON."""
        out: dict[str, Any] = {
            "tasks": list(self.tasks),
            "declared_tasks": self.declared,
            "missing": list(self.missing),
            **{name: _plain(v) for name, v in self.means.items()},
            "types": {name: _plain(v) for name, v in self.types.items()},
            "aggregation": "mteb 2.26.24's leaderboard summary: mean over tasks, mean of per-type means",
        }
        if self.intervals:
            out["ci"] = {name: {"low": low, "high": high} for name, (low, high) in self.intervals.items()}
        return out


def _plain(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def _recorded(name: str, found: Any) -> tuple[str, str, str, float]:
    """(task, type, main score, value) of an entry's recorded `mteb` mapping."""
    try:
        task, kind, main = str(found["task"]), str(found["type"]), str(found["main_score"])
        value = float(found["value"])
    except (KeyError, TypeError, ValueError):
        raise EmbevalError("its `mteb` record needs task, type, main_score and a numeric value", task=name) from None
    return task, kind, main, value


def _main_name(fields: Mapping[str, Any]) -> str:
    main = fields.get("main_score")
    for key, value in fields.items():
        if key != "main_score" and isinstance(value, float) and value == main:
            return key
    return "main_score"


def task_scores(entries: Mapping[str, Mapping[str, Any]], registry: Any = None) -> dict[str, TaskScore]:
    """The MTEB tasks of a run's results entries ({embeval task: entry}), by MTEB task name."""
    from embeval.tasks.registry import recorded_spec

    rows: dict[str, list[tuple[str, str, str, float]]] = {}
    for name, entry in entries.items():
        if isinstance(entry.get("mteb"), Mapping):
            found = _recorded(name, entry["mteb"])
        else:
            try:
                spec = recorded_spec(name, entry, registry)
            except EmbevalError:
                continue
            kind_type = spec.kind_module.mteb_type
            if spec.mteb is None or kind_type is None:
                continue
            fields = spec.kind_module.mteb_scores(spec, entry.get("results", {}))
            if fields is None or not isinstance(fields.get("main_score"), (int, float)):
                continue
            found = (spec.mteb.name, kind_type, _main_name(fields), float(fields["main_score"]))
        rows.setdefault(found[0], []).append((name, found[1], found[2], found[3]))
    out = {}
    for task, of_task in rows.items():
        types = {row[1] for row in of_task}
        if len(types) > 1:
            raise EmbevalError(f"the MTEB task {task} is recorded with several types ({', '.join(sorted(types))})")
        values = tuple(row[3] for row in of_task)
        out[task] = TaskScore(
            task, of_task[0][1], of_task[0][2], sum(values) / len(values), tuple(row[0] for row in of_task), values
        )
    return out


def columns(benchmark: Benchmark, runs: Sequence[Mapping[str, TaskScore]]) -> list[str]:
    """The tasks aggregated: the benchmark's tasks scored by at least one run (mteb's task columns)."""
    scored = [t for run in runs for t in run]
    order = list(benchmark.tasks) if benchmark.tasks else list(dict.fromkeys(scored))
    present = set(scored)
    return [t for t in order if t in present]


def type_of(tasks: Sequence[str], runs: Sequence[Mapping[str, TaskScore]]) -> dict[str, str]:
    """Each task's MTEB type, as the runs record it."""
    out: dict[str, str] = {}
    for run in runs:
        for task in tasks:
            if task in run:
                out.setdefault(task, run[task].type)
    return out


def means_of(values: Mapping[str, Any], types: Mapping[str, str], tasks: Sequence[str]) -> dict[str, Any]:
    """Mean (Task), Mean (TaskType) and each type's mean of per-task values (floats, or arrays of
    resampled values: element-wise), NaN where a task's value is missing or NaN (mteb's skipna=False)."""
    nan = float("nan")
    cols = [values.get(t, nan) for t in tasks]
    by_type: dict[str, list[Any]] = {}
    for task, value in zip(tasks, cols):
        by_type.setdefault(types[task], []).append(value)
    type_means = {name: _mean(vs) for name, vs in by_type.items()}
    out = {MEAN_TASK: _mean(cols), MEAN_TASK_TYPE: _mean(list(type_means.values()))}
    out.update(type_means)
    return out


def _mean(values: list[Any]) -> Any:
    if not values:
        return float("nan")
    total = values[0]
    for v in values[1:]:
        total = total + v  # left to right, as polars' mean_horizontal sums
    return total / len(values)


def borda(per_run: Sequence[Mapping[str, float]], tasks: Sequence[str]) -> list[int | None]:
    """The Borda rank of each run (1: best; None: a run that scored none of the tasks)."""
    present = [[t for t in tasks if _finite(run.get(t))] for run in per_run]
    n = sum(1 for p in present if p)
    points = [0.0] * len(per_run)
    for task in tasks:
        scored = [(i, float(run[task])) for i, run in enumerate(per_run) if _finite(run.get(task))]
        for i, rank in _average_ranks(scored):
            points[i] += n - rank
    ranked = [i for i, p in enumerate(present) if p]
    out: list[int | None] = [None] * len(per_run)
    for i in ranked:
        out[i] = 1 + sum(1 for j in ranked if points[j] > points[i])
    return out


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _average_ranks(scored: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """Ranks of descending values, ties sharing their average rank."""
    out = []
    for i, value in scored:
        above = sum(1 for _, v in scored if v > value)
        tied = sum(1 for _, v in scored if v == value)
        out.append((i, above + (tied + 1) / 2))
    return out


def aggregate(benchmark: Benchmark, runs: Sequence[Mapping[str, TaskScore]]) -> list[Aggregate]:
    """The benchmark's figures for each run (with the Borda rank when there are several runs)."""
    tasks = columns(benchmark, runs)
    types = type_of(tasks, runs)
    per_run = [{t: s.value for t, s in run.items() if t in types} for run in runs]
    ranks = borda(per_run, tasks) if len(runs) > 1 else [None] * len(runs)
    out = []
    for values, rank in zip(per_run, ranks):
        figures = means_of(values, types, tasks)
        out.append(
            Aggregate(
                benchmark.name,
                tasks,
                len(benchmark.tasks),
                [t for t in tasks if not _finite(values.get(t))],
                {m: _plain(figures[m]) for m in MEANS},
                {name: _plain(figures[name]) for name in dict.fromkeys(types[t] for t in tasks)},
                rank,
            )
        )
    return out


def resampled_values(
    scores: Mapping[str, TaskScore],
    entries: Mapping[str, Mapping[str, Any]],
    sets_per_run: Sequence[Mapping[str, Mapping[str, Any]]],
    scores_per_run: Sequence[Mapping[str, TaskScore]],
    seed: int,
    resamples: int,
    registry: Any = None,
) -> list[dict[str, np.ndarray]] | None:
    """Each MTEB task's main score in every bootstrap resample, per run ([{task: (B,)}], fractions),
    all runs on the same resamples: each entry's own (embeval.stats.resampled, seeded by its name),
    its statistic taken from its prediction sets ({embeval task: {"sets": ...}} per run); a task of
    several entries averages them, as its value does. None when a run lacks a task's prediction set."""
    from embeval.tasks.catalog import statistic
    from embeval.tasks.registry import recorded_spec

    per_run: list[dict[str, np.ndarray]] = [{} for _ in sets_per_run]
    for task, score in scores.items():
        sums: list[Any] = [0.0 for _ in sets_per_run]
        for name in score.entries:
            if any(
                task not in run_scores or name not in run_scores[task].entries or name not in sets
                for sets, run_scores in zip(sets_per_run, scores_per_run)
            ):
                return None
            found = [sets[name]["sets"] for sets in sets_per_run]
            spec = recorded_spec(name, entries[name], registry)
            located = _locate(found[0], _main_path(spec))
            if located is None or any(_locate(f, _main_path(spec)) != located for f in found):
                return None
            set_name, figure = located
            stat = statistic(found[0][set_name].kind, figure)
            values = stats.resampled(stat, [f[set_name].arrays for f in found], seed, name, resamples)
            for i in range(len(found)):
                sums[i] = sums[i] + values[i] * _scale(spec)
        for i in range(len(sets_per_run)):
            per_run[i][task] = sums[i] / len(score.entries)
    return per_run


def main_figure(spec: Any) -> tuple[str, float]:
    """Where a task's MTEB main score sits in its results, and the factor from its statistic's units to
    a fraction (what a benchmark aggregates)."""
    return _main_path(spec), _scale(spec)


def _main_path(spec: Any) -> str:
    """Where the MTEB main score sits in the task's results: its [mteb] figures (Spearman's for STS),
    else the headline figure."""
    if spec.mteb is not None and spec.mteb.figures:
        return str(spec.mteb.figures).format(coef="spearman")
    return str(spec.figures[0].path)


def _scale(spec: Any) -> float:
    """From the statistic's units to a fraction (percent figures / 100)."""
    path = _main_path(spec)
    for figure in spec.figures:
        if figure.path == path:
            return 0.01 if figure.percent else 1.0
    return 1.0


def _locate(sets: Mapping[str, Any], path: str) -> tuple[str, str] | None:
    for name in sorted(sets, key=len, reverse=True):
        if name == "" or path.startswith(name + "."):
            figure = path[len(name) + 1 :] if name else path
            if figure in sets[name].figures:
                return name, figure
    return None


def intervals(
    aggregate_of: Aggregate,
    values: Mapping[str, np.ndarray],
    types: Mapping[str, str],
    level: float = stats.LEVEL,
) -> dict[str, tuple[float, float]]:
    """The percentile interval of each of the benchmark's means over the resamples."""
    resampled = means_of(values, types, aggregate_of.tasks)
    out = {}
    for name in (*MEANS, *aggregate_of.types):
        array = np.asarray(resampled[name], dtype=np.float64)
        if array.ndim == 0 or not np.isfinite(array).any():
            continue
        out[name] = stats.interval(array, level)
    return out


def declared(record: Mapping[str, Any]) -> list[Benchmark]:
    """The benchmarks a results record declares (`benchmarks`: {name: {"declared": [...]}}), else those
    its entries' `mteb` rows name (`benchmarks`: the benchmarks a task was asked through; the
    benchmark's tasks are the tasks naming it), else the implicit one over its MTEB tasks."""
    found = record.get("benchmarks")
    if isinstance(found, Mapping) and found:
        return [
            Benchmark(str(name), tuple(str(t) for t in body.get("declared", body.get("tasks", ())) or ()))
            for name, body in found.items()
            if isinstance(body, Mapping)
        ]
    named: dict[str, list[str]] = {}
    for entry in (record.get("tasks") or {}).values():
        row = entry.get("mteb") if isinstance(entry, Mapping) else None
        if isinstance(row, Mapping) and isinstance(row.get("benchmarks"), list):
            for name in row["benchmarks"]:
                tasks = named.setdefault(str(name), [])
                if str(row.get("task")) not in tasks:
                    tasks.append(str(row.get("task")))
    if named:
        return [Benchmark(name, tuple(tasks)) for name, tasks in named.items()]
    return [Benchmark(IMPLICIT)]


def section(
    record: Mapping[str, Any],
    kept: Mapping[str, Mapping[str, Any]] | None = None,
    benchmarks: Sequence[Benchmark] | None = None,
    registry: Any = None,
) -> dict[str, Any]:
    """The results JSON's `benchmarks`: each benchmark's figures for this run, with intervals when the
    run was bootstrapped and its prediction sets are given (`kept`: {task: {"sets": ...}})."""
    scores = task_scores(record.get("tasks", {}), registry)
    chosen = list(benchmarks) if benchmarks else declared(record)
    config = record.get("config", {}) if isinstance(record.get("config"), Mapping) else {}
    out = {}
    for benchmark in chosen:
        if not shown(benchmark, scores):
            continue
        (agg,) = aggregate(benchmark, [scores])
        if not agg.tasks:
            continue
        resamples = config.get("bootstrap")
        if kept and isinstance(resamples, int) and resamples > 0:
            wanted = {t: scores[t] for t in agg.tasks}
            seed = int(config.get("seed", 1111))
            values = resampled_values(wanted, record["tasks"], [kept], [scores], seed, resamples, registry)
            if values is not None:
                agg.intervals = intervals(agg, values[0], type_of(agg.tasks, [scores]))
        body = agg.record()
        if benchmark.tasks:
            body["declared"] = list(benchmark.tasks)
        out[benchmark.name] = body
    return out


def lines(record: Mapping[str, Any]) -> list[str]:
    """The terminal table's lines of the record's benchmarks (x100, with intervals when recorded)."""
    found = record.get("benchmarks")
    if not isinstance(found, Mapping):
        return []
    out = []
    for name, body in found.items():
        if not isinstance(body, Mapping):
            continue
        of = body.get("declared_tasks") or len(body.get("tasks", ()))
        out.append(f"benchmark {name}: {len(body.get('tasks', ()))} of {of} tasks (mteb's leaderboard means)")
        ci = body.get("ci") or {}
        for label, value in [(m, body.get(m)) for m in MEANS] + list((body.get("types") or {}).items()):
            text = "  n/a" if value is None else f"{100 * value:5.2f}"
            if label in ci:
                text += f" [{100 * ci[label]['low']:.2f}, {100 * ci[label]['high']:.2f}]"
            out.append(f"  {label:<22}{text}")
        if body.get("missing"):
            out.append(f"  missing: {', '.join(body['missing'])}")
    return out
