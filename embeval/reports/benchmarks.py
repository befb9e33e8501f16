"""Benchmark tables of `embeval report` and benchmark rows of `embeval compare`: MTEB's leaderboard
means of the benchmarks the results files declare (embeval.tasks.benchmarks), one row per encoder,
with the Borda rank over the files and the means' bootstrap intervals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from embeval import stats
from embeval.reports.cells import Cell, Table
from embeval.tasks import benchmarks as bm


def _declared(records: Sequence[Mapping[str, Any]]) -> list[bm.Benchmark]:
    found: dict[str, bm.Benchmark] = {}
    for record in records:
        for benchmark in bm.declared(record):
            found.setdefault(benchmark.name, benchmark)
    return list(found.values())


def tables(rows: Sequence[Any], registry: Any = None) -> list[Table]:
    """One table per benchmark with at least one MTEB task in the rows (Encoder objects)."""
    scores = [bm.task_scores(enc.tasks, registry) for enc in rows]
    out = []
    for benchmark in _declared([enc.record for enc in rows]):
        if not any(bm.shown(benchmark, s) for s in scores):
            continue
        aggregates = bm.aggregate(benchmark, scores)
        if not aggregates or not aggregates[0].tasks:
            continue
        first = aggregates[0]
        types = list(dict.fromkeys(name for agg in aggregates for name in agg.types))
        ranked = len(rows) > 1
        of = len(benchmark.tasks) or len(first.tasks)
        caption = (
            f"{benchmark.name}: MTEB's leaderboard aggregation (mteb 2.26.24's summary table) of the main "
            f"score of {len(first.tasks)} of the benchmark's {of} tasks, x100: Mean (Task) over the tasks, "
            "each task type's mean, Mean (TaskType) the mean of the type means; a mean is not defined (–) "
            "when the encoder misses one of its tasks"
            + ("; Rank (Borda): MTEB's Borda count over the tasks and the encoders of this table" if ranked else "")
            + "; [low, high]: 95% bootstrap interval, each task's test items resampled as for its own interval."
        )
        table = Table(
            f"benchmark-{benchmark.name}",
            f"{benchmark.name} (MTEB's means), x100",
            caption,
            ["encoder", "dim", "tasks", *bm.MEANS, *types] + (["Rank (Borda)"] if ranked else []),
            metrics=["count", *bm.MEANS, *types] + (["rank"] if ranked else []),
        )
        for enc, agg in zip(rows, aggregates):
            stored = _stored(enc, benchmark.name, agg.tasks)
            cells = [Cell(text=f"{len(agg.tasks) - len(agg.missing)} of {of}")]
            for name in (*bm.MEANS, *types):
                value = agg.means.get(name) if name in bm.MEANS else agg.types.get(name)
                cells.append(_cell(value, stored.get(name)))
            if ranked:
                cells.append(Cell(text="–" if agg.borda is None else str(agg.borda)))
            table.rows.append([Cell(text=enc.label), Cell(text=str(enc.dim))] + cells)
        if any(agg.missing for agg in aggregates):
            table.notes.append(
                "Missing tasks: "
                + "; ".join(
                    f"{enc.label}: {', '.join(agg.missing)}" for enc, agg in zip(rows, aggregates) if agg.missing
                )
                + "."
            )
        out.append(table)
    return out


def _stored(enc: Any, name: str, tasks: Sequence[str]) -> dict[str, Any]:
    """The intervals the results file recorded for the benchmark, when over the same tasks."""
    body = ((enc.record.get("benchmarks") or {}) if enc.tasks is enc.record.get("tasks") else {}).get(name)
    if not isinstance(body, Mapping) or list(body.get("tasks", ())) != list(tasks):
        return {}
    return dict(body.get("ci") or {})


def _cell(value: float | None, ci: Any) -> Cell:
    if value is None:
        return Cell()
    if isinstance(ci, Mapping) and ci.get("low") is not None and ci.get("high") is not None:
        return Cell(100 * value, 100 * ci["low"], 100 * ci["high"])
    return Cell(100 * value)


def compare_pairs(
    loaded: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]], names: Sequence[str], registry: Any = None
) -> tuple[list[tuple[Any, ...]], list[dict[str, Any]]]:
    """The (benchmark, later run) pairs whose means `compare` tests, and the ones it cannot (why)."""
    ref_scores = bm.task_scores(loaded[0][0]["tasks"], registry)
    pairs, skipped = [], []
    for benchmark in _declared([record for record, _ in loaded]):
        for other in range(1, len(loaded)):
            scores = bm.task_scores(loaded[other][0]["tasks"], registry)
            if not (bm.shown(benchmark, ref_scores) and bm.shown(benchmark, scores)):
                continue
            aggregates = bm.aggregate(benchmark, [ref_scores, scores])
            if not aggregates[0].tasks:
                continue
            if aggregates[0].missing or aggregates[1].missing:
                why = "the runs did not score the same tasks of it"
                skipped.append({"task": benchmark.name, "b": names[other], "why": why})
                continue
            pairs.append((benchmark, other, ref_scores, scores, aggregates))
    return pairs, skipped


def compare_rows(
    pairs: Sequence[tuple[Any, ...]],
    loaded: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
    names: Sequence[str],
    seed: int,
    resamples: int,
    level: float,
    registry: Any = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Paired differences of each pair's benchmark means (B - A), every task on its own resamples:
    (rows in compare's form, pairs not compared and why)."""
    reference, ref_sets = loaded[0]
    rows, skipped = [], []
    for benchmark, other, ref_scores, scores, aggregates in pairs:
        tasks = aggregates[0].tasks
        wanted = {t: ref_scores[t] for t in tasks}
        values = bm.resampled_values(
            wanted, reference["tasks"], [ref_sets, loaded[other][1]], [ref_scores, scores], seed, resamples, registry
        )
        if values is None:
            why = "the prediction sets of its tasks' main scores were not saved"
            skipped.append({"task": benchmark.name, "b": names[other], "why": why})
            continue
        types = bm.type_of(tasks, [ref_scores, scores])
        resampled = [bm.means_of(v, types, tasks) for v in values]
        for name in bm.MEANS:
            test = stats.paired_summary(
                aggregates[0].means[name],
                aggregates[1].means[name],
                np.asarray(resampled[0][name]),
                np.asarray(resampled[1][name]),
                level,
            )
            rows.append(
                dict(
                    test,
                    task=benchmark.name,
                    figure=name,
                    label=name,
                    percent=False,
                    headline=name == bm.MEAN_TASK,
                    a_label=names[0],
                    b_label=names[other],
                    n=len(tasks),
                )
            )
    return rows, skipped
