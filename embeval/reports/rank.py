"""`embeval rank A.json B.json [...]`: a leaderboard of 2 to 100 results files with rank intervals.

Every figure is ranked from the same bootstrap resamples of the test items applied to every run: each
task's own resamples (embeval.stats.resampled, seeded by the seed and the task's name: the ones of its
interval and of `compare`), each benchmark aggregate recomputed in every resample as the benchmark
aggregates (embeval.tasks.benchmarks: Mean (Task), the type means, Mean (TaskType), Borda's points).

A ranking (a task's headline figure, a benchmark aggregate) gives each run its figure with its 95%
percentile interval, its rank (1 + the number of runs with a higher figure: ties share the best rank,
as Borda's ranks do) and its 95% rank interval. The rank interval comes from paired tests of every
pair of runs (Al Mohamad, Goeman and van Zwet's construction): a run's best possible rank is 1 + the
number of runs significantly better than it, its worst the number of ranked runs less the number it is
significantly better than. The tests are two-sided paired bootstrap tests of the studentized
differences, adjusted over all pairs by Holm's step-down with the thresholds of the bootstrap
distribution of the largest remaining statistic (Westfall and Young's max-T, Romano and Wolf's
step-down). With the familywise error of the pairwise decisions at 5%, all runs' true ranks lie in
their intervals together with 95% confidence (simultaneous intervals); the runs whose interval includes
1 are those no run is significantly better than: they cannot be told apart from the best. Borda's points
are a step function of the task figures, whose plain bootstrap understates their spread at ties: its
tests take each task figure's resampled deviation from the observed BORDA_SPREAD times (the rescaled
bootstrap), on the same resamples.

Memory: the runs' predictions are read task by task, a task's runs in groups that fit ARRAY_BUDGET
(each group on the same seeded resamples), resamples in chunks (embeval.stats); what is kept is each
ranking's (runs x resamples) values. See docs/ranking.md for the method, its checks and its limits.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from embeval import stats
from embeval.errors import EmbevalError
from embeval.formats import predictions
from embeval.formats.targets import Output, json_format
from embeval.memory import check_bootstrap
from embeval.reports.cells import RANK_FORMATS, Cell, Table
from embeval.reports.compare import locate
from embeval.reports.tables import default_labels, load, recorded_config, render, task_specs
from embeval.tasks import benchmarks as bm
from embeval.tasks.registry import Registry, statistic
from embeval.untrusted import MAX_RECORD_BYTES

logger = logging.getLogger("embeval")

MIN_RUNS, MAX_RUNS = 2, 100
ARRAY_BUDGET = 1 << 30  # bytes of one task's prediction arrays read at once (its runs in groups of this size)
PAIR_CHUNK = 256  # resamples of the pairwise statistics of every pair held at once
BORDA = "Rank (Borda)"
BORDA_SPREAD = 3.0  # Borda's resamples: each task figure's deviation from the observed, times this (docs/ranking.md)
FORMATS = RANK_FORMATS
FORMAT = "embeval-rank"  # the `format` of the --json file, which recognizes an earlier one
RANKING = Output("a ranking that embeval wrote", lambda path: json_format(path, FORMAT, MAX_RECORD_BYTES))
METHOD = (
    "percentile bootstrap over test items, the same resamples for every run; ranks from paired tests of all "
    "pairs, step-down max-T adjusted (simultaneous 95% rank intervals)"
)


@dataclass
class Ranking:
    """One figure ranked over the runs: observed (runs,) and bootstrap values (runs, resamples) in the
    statistic's units (NaN: the run is not ranked, or the figure is undefined in that resample)."""

    name: str
    family: str  # borda | mean | type | task
    scale: float  # to the table's units (x100 for fractions)
    observed: np.ndarray
    values: np.ndarray
    centred: bool = False  # the task's interval is the centred one (embeval.stats.centred_interval)
    task: str | None = None
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------- numbers


def borda_points(values: np.ndarray) -> np.ndarray:
    """Borda's points of each run (tasks, runs, ...) -> (runs, ...): in each task the runs with a finite
    figure are ranked, best first, ties sharing their average rank, and earn (n - rank) points, n the
    number of runs with a finite figure in any task; NaN for a run with none (mteb's count, as
    embeval.tasks.benchmarks.borda, element-wise over the trailing axes)."""
    finite = np.isfinite(values)
    shown = np.where(finite, values, -np.inf)
    present = finite.any(axis=0)
    n = present.sum(axis=0)
    points = np.zeros(values.shape[1:])
    for task, seen in zip(shown, finite):
        above = (task[None, :] > task[:, None]).sum(axis=1)  # runs with a higher figure, per run
        tied = (task[None, :] == task[:, None]).sum(axis=1)  # itself included
        rank = above + (tied + 1) / 2
        points += np.where(seen, n - rank, 0.0)
    return np.where(present, points, np.nan)


def ranks_of(observed: np.ndarray) -> np.ndarray:
    """1 + the number of runs with a higher figure (ties share the best rank); NaN for a run not ranked."""
    finite = np.isfinite(observed)
    shown = np.where(finite, observed, -np.inf)
    above = (shown[None, :] > shown[:, None]).sum(axis=1)
    return np.where(finite, 1.0 + above, np.nan)


@dataclass
class Pairs:
    """The pairwise tests of a ranking: differences (row minus column), step-down adjusted p-values and
    the decisions at level alpha; NaN where a run is not ranked."""

    diff: np.ndarray
    p_adjusted: np.ndarray
    significant: np.ndarray
    resamples: int  # resamples in which every ranked run has a figure (the others are left out)


def pairwise(observed: np.ndarray, values: np.ndarray, alpha: float, chunk: int = PAIR_CHUNK) -> Pairs:
    """Two-sided paired tests of every pair of ranked runs, adjusted over the pairs by the step-down max-T.

    For the pair (i, j): T = (x_i - x_j) / se, se the bootstrap standard deviation of the resampled
    difference, and T* = (d* - mean d*) / se in each resample (centred on the resamples' mean: the
    differences a population without a difference would give). Pairs sorted by |T|, largest first; the
    k-th pair's p-value is (1 + #{resamples whose largest |T*| over pairs k, k+1, ... reaches its |T|}) /
    (resamples + 1), made non-decreasing along the order (Westfall and Young's step-down, the resampling
    form of Holm's procedure). A difference whose resamples are all equal is decided by its sign alone
    (p = 1 / (resamples + 1), or 1 when it is 0)."""
    runs = len(observed)
    diff = np.full((runs, runs), np.nan)
    p_adjusted = np.full((runs, runs), np.nan)
    significant = np.zeros((runs, runs), dtype=bool)
    ranked = np.flatnonzero(np.isfinite(observed))
    V = values[ranked]
    usable = np.all(np.isfinite(V), axis=0)
    V = V[:, usable]
    B = V.shape[1]
    x = observed[ranked]
    diff[np.ix_(ranked, ranked)] = x[:, None] - x[None, :]
    if len(ranked) < 2 or B == 0:
        return Pairs(diff, p_adjusted, significant, B)
    i, j = np.triu_indices(len(ranked), 1)
    d = x[i] - x[j]
    mean = V.mean(axis=1)
    centre = mean[i] - mean[j]
    squares = np.zeros(len(i))
    for start in range(0, B, chunk):
        part = V[i, start : start + chunk] - V[j, start : start + chunk] - centre[:, None]
        squares += np.einsum("pb,pb->p", part, part)
    se = np.sqrt(squares / B)
    size = np.maximum(np.abs(V).max(axis=1), np.abs(x))
    constant = se <= 1e-12 * np.maximum(np.maximum(size[i], size[j]), np.finfo(float).tiny)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(constant, np.where(d == 0, 0.0, np.inf), np.abs(d) / np.where(constant, 1.0, se))
    order = np.argsort(-t, kind="stable")
    reach = np.zeros(len(order))
    threshold = t[order] * (1 - 1e-12)  # a resample as extreme as the figure counts (rounding aside)
    for start in range(0, B, chunk):
        part = V[i, start : start + chunk] - V[j, start : start + chunk] - centre[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            stat = np.where(constant[:, None], 0.0, np.abs(part) / np.where(constant, 1.0, se)[:, None])
        largest = np.maximum.accumulate(stat[order][::-1], axis=0)[::-1]  # max over pairs k, k+1, ...
        reach += (largest >= threshold[:, None]).sum(axis=1)
    p = np.maximum.accumulate((1 + reach) / (B + 1))
    adjusted = np.empty(len(order))
    adjusted[order] = p
    a, b = ranked[i], ranked[j]
    p_adjusted[a, b] = p_adjusted[b, a] = adjusted
    p_adjusted[ranked, ranked] = 1.0
    decided = (adjusted < alpha) & (d != 0)
    significant[a, b] = significant[b, a] = decided
    return Pairs(diff, p_adjusted, significant, B)


def rank_intervals(observed: np.ndarray, pairs: Pairs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rank, lowest rank, highest rank) of each run (NaN: not ranked): 1 + the runs significantly better
    than it, and the ranked runs less those it is significantly better than."""
    ranked = np.isfinite(observed)
    better = (pairs.significant & (pairs.diff < 0)).sum(axis=1)  # row minus column < 0: the column is better
    worse = (pairs.significant & (pairs.diff > 0)).sum(axis=1)
    low = np.where(ranked, 1.0 + better, np.nan)
    high = np.where(ranked, ranked.sum() - worse, np.nan)
    return ranks_of(observed), low, high


def summarize(ranking: Ranking, level: float, labels: Sequence[str]) -> dict[str, Any]:
    """A ranking's figures, intervals, ranks, best set and pairwise matrix (JSON-ready)."""
    alpha = 1 - level
    pairs = pairwise(ranking.observed, ranking.values, alpha)
    rank, low, high = rank_intervals(ranking.observed, pairs)
    runs: list[dict[str, Any] | None] = []
    for r, label in enumerate(labels):
        value = ranking.observed[r]
        if not np.isfinite(value):
            runs.append(None)
            continue
        draws = ranking.values[r]
        if ranking.family == "borda":  # its resamples are spread out for the tests: no interval of the points
            lo, hi = float("nan"), float("nan")
        elif ranking.centred:
            lo, hi = stats.centred_interval(float(value), draws, level)
        else:
            lo, hi = stats.interval(draws, level)
        runs.append(
            {
                "run": label,
                "value": float(value),
                "low": _plain(lo),
                "high": _plain(hi),
                "rank": int(rank[r]),
                "rank_low": int(low[r]),
                "rank_high": int(high[r]),
                "best": bool(low[r] == 1),
            }
        )
    ranked = [r for r, run in enumerate(runs) if run is not None]
    top = min(ranked, key=lambda r: (rank[r], r)) if ranked else None
    versus = []
    if top is not None:
        for r in ranked:
            if r == top:
                continue
            test = stats.paired_summary(
                float(ranking.observed[top]),
                float(ranking.observed[r]),
                ranking.values[top],
                ranking.values[r],
                level,
            )
            if ranking.family == "borda":
                test.update(low=None, high=None, p=None)
            versus.append(dict(test, run=labels[r], p_adjusted=_plain(pairs.p_adjusted[r, top])))
    matrix = [[_plain(v) for v in row] for row in pairs.diff]
    adjusted = [[_plain(v) for v in row] for row in pairs.p_adjusted]
    return {
        "name": ranking.name,
        "family": ranking.family,
        "task": ranking.task,
        "scale": ranking.scale,
        "ranked": len(ranked),
        "resamples_used": pairs.resamples,
        "runs": runs,
        "top": None if top is None else labels[top],
        "best": [labels[r] for r in ranked if low[r] == 1],
        "versus_top": versus,
        "matrix": {"diff": matrix, "p_adjusted": adjusted},
        "notes": list(ranking.notes),
    }


def _plain(value: Any) -> float | None:
    value = float(value)
    return None if math.isnan(value) else value


# ---------------------------------------------------------------------------------------------- reading


@dataclass
class Run:
    path: Path
    record: dict[str, Any]
    label: str
    sidecar: predictions.Sidecar


def _open_runs(paths: Sequence[str | Path], labels: Sequence[str] | None) -> list[Run]:
    if not MIN_RUNS <= len(paths) <= MAX_RUNS:
        raise EmbevalError(f"give {MIN_RUNS} to {MAX_RUNS} results files to rank ({len(paths)} given)", file="rank")
    if labels and len(labels) != len(paths):
        raise EmbevalError(
            f"{len(labels)} labels for {len(paths)} results files; give one --label per file", file="--label"
        )
    if labels and len(set(labels)) != len(labels):
        repeated = sorted({name for name in labels if list(labels).count(name) > 1})
        raise EmbevalError(f"each run needs a label of its own ({', '.join(repeated)} given twice)", file="--label")
    records = [load(p) for p in paths]
    for path, record in zip(paths, records):
        saved = record.get("predictions")
        if not isinstance(saved, dict) or not isinstance(saved.get("file"), str):
            raise EmbevalError("has no saved predictions; score it again with --save-predictions to rank it", file=path)
    names = list(labels) if labels else default_labels(records, paths)
    seen: dict[Path, int] = {}
    for i, path in enumerate(paths):
        first = seen.setdefault(Path(path).resolve(), i)
        if first != i:
            logger.warning(f"{path}: given twice ({paths[first]} is the same file): it ties with itself")
    runs: list[Run] = []
    try:
        for path, record, name in zip(paths, records, names):
            sidecar = predictions.read_beside(path, record["predictions"], opener=predictions.Sidecar)
            runs.append(Run(Path(path), record, name, sidecar))
    except BaseException:
        for run in runs:
            run.sidecar.close()
        raise
    return runs


@dataclass
class Figure:
    """A task entry's figure over the runs: observed (runs,), values (runs, resamples) in the statistic's
    units, NaN for runs left out of it."""

    observed: np.ndarray
    values: np.ndarray
    centred: bool


def _task_figures(
    task: str,
    paths: Sequence[str],
    runs: Sequence[Run],
    seed: int,
    resamples: int,
    budget: int,
    notes: list[str],
) -> tuple[dict[str, Figure], set[int]]:
    """The figures at `paths` of one task entry for every run that scored it on the same test items as
    the others, and the runs left out of it (each with a one-line note). The runs' arrays are read
    in groups that fit `budget` bytes; every group is resampled alike (the task's seeded stream)."""
    count = len(runs)
    out = {p: Figure(np.full(count, np.nan), np.full((count, resamples), np.nan), False) for p in paths}
    left_out: set[int] = set()

    def refuse(r: int, why: str) -> None:
        left_out.add(r)
        line = f"{runs[r].path}: {task}: left out of the ranking: {why}"
        notes.append(line)
        logger.warning(line)

    scored = [r for r, run in enumerate(runs) if task in run.record["tasks"]]
    entries = {}
    for r in scored:
        entry = runs[r].sidecar.entry(task)
        if entry is None:
            refuse(r, "its predictions of the task were not saved")
        else:
            entries[r] = entry
    if not entries:
        return out, left_out
    digests = [entries[r]["data_sha256"] for r in entries]
    common = max(dict.fromkeys(digests), key=digests.count)  # the data most runs scored (ties: the first)
    reference = next(r for r in entries if entries[r]["data_sha256"] == common)
    where = {p: locate(entries[reference]["sets"], p) for p in paths}
    for p in [p for p, found in where.items() if found is None]:
        line = f"{task}: the saved predictions have no {p}: not ranked on it"
        notes.append(line)
        logger.warning(line)
    for r in list(entries):
        if entries[r]["data_sha256"] != common:
            refuse(r, f"it scored other task data than {runs[reference].path.name} (data sha256 differs)")
            del entries[r]
            continue
        for p, found in where.items():
            if found is None:
                continue
            if locate(entries[r]["sets"], p) != found:
                refuse(r, f"its predictions have no {p} where {runs[reference].path.name}'s have it")
            else:
                a, b = entries[reference]["sets"][found[0]], entries[r]["sets"][found[0]]
                if a.kind == b.kind and a.items == b.items:
                    continue
                refuse(
                    r,
                    f"it predicted other test items than {runs[reference].path.name} ({b.items} and {a.items} "
                    f"items in {found[0] or 'the headline set'})",
                )
            del entries[r]
            break
    found_paths = {p: f for p, f in where.items() if f is not None}
    stats_of = {p: statistic(entries[reference]["sets"][f[0]].kind, f[1]) for p, f in found_paths.items()}
    for p in found_paths:
        out[p].centred = bool(getattr(stats_of[p], "centred", False))
    reference_arrays = {s: entries[reference]["sets"][s].arrays for s in {f[0] for f in found_paths.values()}}
    order = list(entries)
    group_size = 1  # the first run's arrays tell how many runs' fit the budget
    position = 0
    while position < len(order):
        group = order[position : position + group_size]
        position += len(group)
        kept = [r for r in group if _same_items(entries[r], reference_arrays)]
        for r in group:
            if r not in kept:
                refuse(r, f"its test items differ from {runs[reference].path.name}'s (gold values or order)")
        for p, (set_name, _) in found_paths.items():
            arrays = [entries[r]["sets"][set_name].arrays for r in kept]
            if not arrays:
                continue
            for r, one in zip(kept, arrays):
                out[p].observed[r] = stats.observed(stats_of[p], one)
            out[p].values[kept] = stats.resampled(stats_of[p], arrays, seed, task, resamples)
            del arrays
        if position == 1:
            used = sum(entries[group[0]]["sets"][s].arrays.nbytes() for s in reference_arrays)
            group_size = max(1, int(budget // max(used, 1)))
        for r in group:
            if r != reference:
                del entries[r]  # its arrays are read: let them go
    for r in left_out:
        for figure in out.values():
            figure.observed[r] = np.nan
            figure.values[r] = np.nan
    return out, left_out


def _same_items(entry: Mapping[str, Any], reference: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether a run's prediction sets hold the reference's test items: the same gold values and strata."""
    for name, theirs in reference.items():
        mine = entry["sets"][name].arrays
        for key in ("gold", "group"):
            if (key in mine) != (key in theirs) or (key in mine and not np.array_equal(mine[key], theirs[key])):
                return False
    return True


# ---------------------------------------------------------------------------------------------- the ranking


def rank(
    paths: Sequence[str | Path],
    labels: Sequence[str] | None = None,
    tasks: Sequence[str] | None = None,
    resamples: int | None = None,
    seed: int | None = None,
    level: float = stats.LEVEL,
    registry: Registry | None = None,
    budget: int = ARRAY_BUDGET,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The leaderboard of the results files as a dict (see the module's docstring): runs, benchmarks
    (each with its aggregates' rankings), tasks (each task's ranking) and notes. log(line): told each
    task as it is resampled."""
    runs = _open_runs(paths, labels)
    try:
        return _rank(runs, tasks, resamples, seed, level, registry, budget, log or (lambda line: None))
    finally:
        for run in runs:
            run.sidecar.close()


def _rank(
    runs: Sequence[Run],
    tasks: Sequence[str] | None,
    resamples: int | None,
    seed: int | None,
    level: float,
    registry: Registry | None,
    budget: int,
    log: Callable[[str], None],
) -> dict[str, Any]:
    records = [run.record for run in runs]
    paths = [str(run.path) for run in runs]
    labels = [run.label for run in runs]
    configured = recorded_config(records[0])
    seed = configured.seed if seed is None else seed
    resamples = resamples or configured.bootstrap or stats.RESAMPLES
    check_bootstrap(resamples, "--resamples")
    known, unknown = task_specs(records, paths, registry)
    for line in unknown:
        logger.warning(line)
    by_name = {spec.name: spec for spec in known}
    if tasks is not None:
        absent = [t for t in tasks if t not in by_name]
        if absent:
            raise EmbevalError(f"no results file scored {', '.join(absent)}: nothing to rank there", file="--tasks")
    wanted = [t for t in by_name if tasks is None or t in tasks]
    entries_of = [{t: e for t, e in record["tasks"].items() if t in wanted} for record in records]
    scores = [bm.task_scores(entries, registry) for entries in entries_of]
    benchmarks = _benchmarks(records, scores)
    in_benchmarks: set[str] = set()  # the entries whose MTEB main score a benchmark aggregates
    for benchmark in benchmarks:
        for t in bm.columns(benchmark, scores):
            for run_scores in scores:
                if t in run_scores:
                    in_benchmarks.update(run_scores[t].entries)
    notes: list[str] = []
    figures: dict[str, dict[str, Figure]] = {}
    left_out: dict[str, set[int]] = {}
    task_rankings = []
    for position, task in enumerate(wanted):
        log(f"rank: {task} ({position + 1} of {len(wanted)} tasks, {len(runs)} runs, {resamples} resamples)")
        spec = by_name[task]
        headline = spec.figures[0]
        wanted_paths = [headline.path]
        if task in in_benchmarks:
            main, _ = bm.main_figure(spec)
            wanted_paths += [main] if main != headline.path else []
        found, refused = _task_figures(task, wanted_paths, runs, seed, resamples, budget, notes)
        figures[task], left_out[task] = found, refused
        figure = found[headline.path]
        ranking = Ranking(
            task, "task", 1.0 if headline.percent else 100.0, figure.observed, figure.values, figure.centred, task
        )
        if 0 < np.isfinite(figure.observed).sum() < 2:
            ranking.notes.append(f"{task}: fewer than two runs scored it on the same test items: not ranked")
        task_rankings.append(ranking)
    out_benchmarks = []
    for benchmark in benchmarks:
        found_benchmark = _benchmark(benchmark, scores, by_name, figures, left_out, labels, level, resamples, notes)
        if found_benchmark is not None:
            out_benchmarks.append(found_benchmark)
    summarized = [summarize(r, level, labels) for r in task_rankings]
    if not any(s["ranked"] >= 2 for s in summarized) and not out_benchmarks:
        raise EmbevalError(
            "no task was scored by two of the runs on the same test items: nothing to rank", file=paths[0]
        )
    order = out_benchmarks[0]["order"] if out_benchmarks else _by_mean_rank(summarized, len(runs))
    return {
        "format": FORMAT,
        "runs": [
            {"label": run.label, "file": str(run.path), "dim": (run.record.get("vectors") or {}).get("dim")}
            for run in runs
        ],
        "order": order,
        "resamples": resamples,
        "seed": seed,
        "level": level,
        "method": METHOD,
        "benchmarks": out_benchmarks,
        "tasks": summarized,
        "notes": notes + [n for r in task_rankings for n in r.notes],
    }


def aggregate_rankings(
    tasks: Sequence[str], types: Mapping[str, str], observed: Mapping[str, np.ndarray], values: Mapping[str, np.ndarray]
) -> list[Ranking]:
    """A benchmark's rankings from its tasks' figures, observed (runs,) and resampled (runs, resamples),
    fractions, NaN where a run misses a task: Borda's points, Mean (Task), Mean (TaskType) and each type's
    mean, every resample aggregated as the figures are (embeval.tasks.benchmarks)."""
    seen = np.stack([observed[t] for t in tasks])
    rankings = []
    if seen.shape[1] > 1:
        spread = seen[:, :, None] + BORDA_SPREAD * (np.stack([values[t] for t in tasks]) - seen[:, :, None])
        points = borda_points(spread)
        rankings.append(Ranking(BORDA, "borda", 1.0, borda_points(seen[:, :, None])[:, 0], points))
    means = bm.means_of({t: observed[t] for t in tasks}, types, tasks)
    resampled = bm.means_of(values, types, tasks)
    for name in (*bm.MEANS, *dict.fromkeys(types[t] for t in tasks)):
        family = "mean" if name in bm.MEANS else "type"
        rankings.append(
            Ranking(name, family, 100.0, np.asarray(means[name], float), np.asarray(resampled[name], float))
        )
    return rankings


def _by_mean_rank(rankings: Sequence[Mapping[str, Any]], count: int) -> list[int]:
    """The runs in the order of their mean rank over the tasks that rank them (then the files' order;
    a run ranked on none last): the rows' order without a benchmark."""
    ranks: list[list[int]] = [[] for _ in range(count)]
    for ranking in rankings:
        if ranking["ranked"] >= 2:
            for r, run in enumerate(ranking["runs"]):
                if run is not None:
                    ranks[r].append(run["rank"])
    return sorted(range(count), key=lambda r: (sum(ranks[r]) / len(ranks[r]) if ranks[r] else math.inf, r))


def _benchmarks(records: Sequence[Mapping[str, Any]], scores: Sequence[Mapping[str, Any]]) -> list[bm.Benchmark]:
    """The benchmarks the records declare that the runs have figures of (as `report` shows them)."""
    found: dict[str, bm.Benchmark] = {}
    for record in records:
        for benchmark in bm.declared(record):
            found.setdefault(benchmark.name, benchmark)
    return [b for b in found.values() if any(bm.shown(b, s) for s in scores) and bm.columns(b, scores)]


def _benchmark(
    benchmark: bm.Benchmark,
    scores: Sequence[Mapping[str, bm.TaskScore]],
    by_name: Mapping[str, Any],
    figures: Mapping[str, Mapping[str, Figure]],
    left_out: Mapping[str, set[int]],
    labels: Sequence[str],
    level: float,
    resamples: int,
    notes: list[str],
) -> dict[str, Any] | None:
    """A benchmark's rankings: Borda's, Mean (Task), Mean (TaskType) and each type's mean."""
    count = len(scores)
    tasks = bm.columns(benchmark, scores)
    usable = []
    for r, run_scores in enumerate(scores):
        kept = {}
        for t, score in run_scores.items():
            if t not in tasks:
                continue
            if any(r in left_out.get(e, ()) for e in score.entries):
                continue  # left out of one of its entries: the task is missing for this run
            kept[t] = score
        usable.append(kept)
    entries_of = {}
    for t in tasks:
        names = [usable[r][t].entries for r in range(count) if t in usable[r]]
        reference = max(dict.fromkeys(names), key=names.count)
        entries_of[t] = reference
        for r in range(count):
            if t in usable[r] and usable[r][t].entries != reference:
                line = (
                    f"{labels[r]}: {t}: left out of {benchmark.name}: scored as {', '.join(usable[r][t].entries)}, "
                    f"the others as {', '.join(reference)} (other resamples: not paired)"
                )
                logger.warning(line)
                notes.append(line)
                del usable[r][t]
    aggregates = bm.aggregate(benchmark, usable)
    if not aggregates or not aggregates[0].tasks:
        return None
    tasks = aggregates[0].tasks
    types = bm.type_of(tasks, usable)
    values: dict[str, np.ndarray] = {}
    observed: dict[str, np.ndarray] = {}
    for t in tasks:
        total = np.zeros((count, resamples))
        for name in entries_of[t]:
            spec = by_name[name]
            path, scale = bm.main_figure(spec)
            total = total + figures[name][path].values * scale
        present = np.array([t in usable[r] for r in range(count)])
        values[t] = np.where(present[:, None], total / len(entries_of[t]), np.nan)
        observed[t] = np.array([usable[r][t].value if t in usable[r] else np.nan for r in range(count)])
    rankings = aggregate_rankings(tasks, types, observed, values)
    summarized = [summarize(r, level, labels) for r in rankings]
    by = {s["name"]: s for s in summarized}
    borda = np.array([np.inf if a.borda is None else a.borda for a in aggregates], dtype=float)
    mean_task = np.array(
        [-np.inf if a.means.get(bm.MEAN_TASK) is None else a.means[bm.MEAN_TASK] for a in aggregates], dtype=float
    )
    order = sorted(range(count), key=lambda r: (borda[r], -mean_task[r], r))
    of = len(benchmark.tasks) or len(tasks)
    return {
        "name": benchmark.name,
        "tasks": list(tasks),
        "declared": of,
        "types": list(dict.fromkeys(types[t] for t in tasks)),
        "scored": [len(tasks) - len(a.missing) for a in aggregates],
        "missing": {labels[r]: list(a.missing) for r, a in enumerate(aggregates) if a.missing},
        "order": order,
        "rankings": summarized,
        "headline": bm.MEAN_TASK if by.get(bm.MEAN_TASK, {}).get("ranked", 0) >= 2 else BORDA,
    }


# ---------------------------------------------------------------------------------------------- tables


def _rank_text(run: Mapping[str, Any] | None) -> Cell:
    if run is None:
        return Cell(text="–")
    text = f"{run['rank']} [{run['rank_low']}–{run['rank_high']}]"
    return Cell(float(run["rank"]), float(run["rank_low"]), float(run["rank_high"]), text=text)


def _figure_cell(run: Mapping[str, Any] | None, scale: float) -> Cell:
    if run is None:
        return Cell()
    low, high = run["low"], run["high"]
    return Cell(
        scale * run["value"],
        None if low is None else scale * low,
        None if high is None else scale * high,
    )


def _dims(result: Mapping[str, Any]) -> list[str]:
    return [str(run["dim"]) if run["dim"] is not None else "–" for run in result["runs"]]


def _caption(result: Mapping[str, Any], what: str, intervals: bool = True) -> str:
    level = int(round(100 * result["level"]))
    return (
        f"{what} "
        + (f"[low, high]: {level}% percentile bootstrap interval; " if intervals else "")
        + f"rank [best–worst]: {level}% rank interval, "
        f"simultaneous over the runs (every run's true rank lies in its interval together with {level}% "
        "confidence): a run ranks below another only where their paired difference is significant after the "
        f"step-down max-T adjustment over all pairs. {result['resamples']} resamples of each task's test items "
        f"(seed {result['seed']}), the same for every run; ties share the best rank. Intervals reflect "
        "test-set sampling only (not training randomness, nor the choice of tasks): embeval docs ranking."
    )


def leaderboard_table(result: Mapping[str, Any], benchmark: Mapping[str, Any]) -> Table:
    """MTEB's leaderboard of one benchmark: a row per run (Borda's order), its aggregates and type
    means with their intervals, and the rank intervals of Borda, Mean (Task) and Mean (TaskType)."""
    by = {r["name"]: r for r in benchmark["rankings"]}
    labels = [run["label"] for run in result["runs"]]
    dims = _dims(result)
    header = ["encoder", "dim", "tasks"]
    if BORDA in by:
        header.append(BORDA)
    for name in bm.MEANS:
        header += [name, "rank"]
    header += benchmark["types"]
    caption = _caption(
        result,
        f"{benchmark['name']}: MTEB's leaderboard (mteb 2.26.24's aggregation, x100) of {len(benchmark['tasks'])} of "
        f"its {benchmark['declared']} tasks, runs in the order of Borda's rank; a mean is not defined (–) when "
        "a run misses one of its tasks.",
    )
    table = Table(
        f"rank-{_slug(benchmark['name'])}",
        f"{benchmark['name']}: leaderboard with rank intervals",
        caption,
        header,
        metrics=["count"]
        + (["rank"] if BORDA in by else [])
        + ["mean", "rank", "mean", "rank"]
        + ["mean"] * len(benchmark["types"]),
    )
    for r in benchmark["order"]:
        row = [
            Cell(text=labels[r]),
            Cell(text=dims[r]),
            Cell(text=f"{benchmark['scored'][r]} of {benchmark['declared']}"),
        ]
        if BORDA in by:
            row.append(_rank_text(by[BORDA]["runs"][r]))
        for name in bm.MEANS:
            row += [_figure_cell(by[name]["runs"][r], 100.0), _rank_text(by[name]["runs"][r])]
        row += [_figure_cell(by[name]["runs"][r], 100.0) for name in benchmark["types"]]
        table.rows.append(row)
    if benchmark["missing"]:
        table.notes.append(
            "Missing tasks: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in benchmark["missing"].items()) + "."
        )
    return table


def best_table(result: Mapping[str, Any], ranking: Mapping[str, Any], title: str, order: Sequence[int]) -> Table:
    """Which runs cannot be told apart from the best on a ranking, and the tests behind it: each run's
    difference from the top run with its interval and p-values."""
    scale = ranking["scale"]
    labels = [run["label"] for run in result["runs"]]
    versus = {v["run"]: v for v in ranking["versus_top"]}
    unit = "points" if ranking["family"] == "borda" else ("x100" if scale == 100.0 else "%")
    level = int(round(100 * result["level"]))
    if ranking["family"] == "borda":
        how = (
            "Delta = run - top in Borda's points and the p-value of their paired test adjusted over every pair "
            f"of runs (step-down max-T; Borda's resamples spread {BORDA_SPREAD:g} times, embeval docs ranking)"
        )
    else:
        how = (
            f"Delta = run - top on the same resamples, its {level}% percentile interval, the paired bootstrap "
            "p-value and the p-value adjusted over every pair of runs (step-down max-T)"
        )
    table = Table(
        f"rank-best-{_slug(title)}",
        f"{title}: which runs cannot be told apart from the best",
        f"Each run against the top run ({ranking['top']}) on {ranking['name']} ({unit}): {how}. Best set: the "
        f"runs no run is significantly better than (rank interval includes 1): {', '.join(ranking['best'])}.",
        ["encoder", "dim", "figure", "rank", "Delta", "p", "p (adjusted)", "best set"],
        metrics=["figure", "rank", "difference", "p", "p", ""],
    )
    dims = _dims(result)
    for r in order:
        run = ranking["runs"][r]
        if run is None:
            continue
        test = versus.get(labels[r])
        row = [Cell(text=labels[r]), Cell(text=dims[r]), _figure_cell(run, scale), _rank_text(run)]
        if test is None:
            row += [Cell(text="(top)"), Cell(text="–"), Cell(text="–")]
        else:
            low, high = (None, None) if test["low"] is None else (scale * test["low"], scale * test["high"])
            row += [
                Cell(scale * test["diff"], low, high),
                Cell(text=_p(test["p"], ranking["resamples_used"])),
                Cell(text=_p(test["p_adjusted"], ranking["resamples_used"])),
            ]
        row.append(Cell(text="yes" if run["best"] else "no"))
        table.rows.append(row)
    return table


def tasks_table(result: Mapping[str, Any]) -> Table | None:
    """Every task's headline figure and rank interval: a row per run (the leaderboard's order) and a column
    per task, or, with more tasks than runs, a row per task and a column per run."""
    shown = [t for t in result["tasks"] if t["ranked"] >= 1]
    if not shown:
        return None
    labels = [run["label"] for run in result["runs"]]
    order = list(result["order"])
    caption = (
        _caption(result, "Each task's headline figure (accuracies in %, correlations x100) and its rank;", False)
        + " The figures' intervals: --json."
    )

    def cell(t: Mapping[str, Any], r: int) -> Cell:
        run = t["runs"][r]
        if run is None:
            return Cell(text="–")
        value = t["scale"] * run["value"]
        return Cell(value, text=f"{value:.2f} · {run['rank']} [{run['rank_low']}–{run['rank_high']}]")

    if len(shown) > len(order):
        header = ["task", "units", *[labels[r] for r in order]]
        table = Table(
            "rank-tasks", "Per task: figure and rank [best–worst]", caption, header, metrics=["figure"] * len(order)
        )
        for t in shown:
            units = "%" if t["scale"] == 1.0 else "x100"
            table.rows.append([Cell(text=t["name"]), Cell(text=units)] + [cell(t, r) for r in order])
    else:
        header = ["encoder", "dim", *[t["name"] for t in shown]]
        table = Table(
            "rank-tasks", "Per task: figure and rank [best–worst]", caption, header, metrics=["figure"] * len(shown)
        )
        dims = _dims(result)
        for r in order:
            table.rows.append([Cell(text=labels[r]), Cell(text=dims[r])] + [cell(t, r) for t in shown])
    best = [f"{t['name']}: {', '.join(t['best'])}" for t in shown if t["ranked"] >= 2]
    if best:
        table.notes.append("Cannot be told apart from the best (rank interval includes 1): " + "; ".join(best) + ".")
    return table


def matrix_table(result: Mapping[str, Any], ranking: Mapping[str, Any], title: str) -> Table:
    """The paired differences of every pair of runs (row minus column) with their adjusted p-values."""
    labels = [run["label"] for run in result["runs"]]
    order = [r for r in result["order"] if ranking["runs"][r] is not None]
    number = {r: k + 1 for k, r in enumerate(order)}
    scale = ranking["scale"]
    table = Table(
        f"rank-matrix-{_slug(title)}",
        f"{title}: paired differences (row - column) and adjusted p-values",
        f"{ranking['name']}: row minus column ({'points' if ranking['family'] == 'borda' else 'x100'}), and in "
        "parentheses the p-value adjusted over every pair (step-down max-T); * where significant at "
        f"{1 - result['level']:.2g}. Columns are numbered as the rows.",
        ["encoder", "dim", *[f"#{number[r]}" for r in order]],
        metrics=["difference"] * len(order),
    )
    dims = _dims(result)
    for r in order:
        row = [Cell(text=f"#{number[r]} {labels[r]}"), Cell(text=dims[r])]
        for c in order:
            if c == r:
                row.append(Cell(text="·"))
                continue
            d, p = ranking["matrix"]["diff"][r][c], ranking["matrix"]["p_adjusted"][r][c]
            star = "*" if p is not None and p < 1 - result["level"] else ""
            row.append(Cell(scale * d, text=f"{scale * d:+.2f} ({_p(p, ranking['resamples_used'])}){star}"))
        table.rows.append(row)
    return table


def _p(p: float | None, resamples: int | None = None) -> str:
    """A p-value; at the smallest a bootstrap of this many resamples can show, `<= 1/(resamples + 1)`."""
    if p is None or not np.isfinite(p):
        return "–"
    text = f"{p:.3f}" if p >= 1e-3 else f"{p:.1e}"
    return f"<= {text}" if resamples is not None and p <= (1 + 1e-9) / (resamples + 1) else text


def _slug(name: str) -> str:
    """A table key (an HTML id) of a name: letters, digits and '-'."""
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-")


def tables(result: Mapping[str, Any]) -> list[Table]:
    """The rank report's tables: each benchmark's leaderboard, its best sets and the matrix of its
    headline aggregate, then the per-task table."""
    out = []
    for benchmark in result["benchmarks"]:
        out.append(leaderboard_table(result, benchmark))
        by = {r["name"]: r for r in benchmark["rankings"]}
        for name in (BORDA, *bm.MEANS):
            if name in by and by[name]["ranked"] >= 2:
                out.append(best_table(result, by[name], f"{benchmark['name']}, {name}", benchmark["order"]))
        headline = by.get(benchmark["headline"])
        if headline and headline["ranked"] >= 2:
            out.append(matrix_table(result, headline, f"{benchmark['name']}, {headline['name']}"))
    per_task = tasks_table(result)
    if per_task is not None:
        out.append(per_task)
    notes = list(result["notes"])
    if out and notes:
        out[-1].notes += [n for n in notes if n not in out[-1].notes]
    return out


def text(result: Mapping[str, Any]) -> str:
    """Plain-text tables for the terminal."""
    lines: list[str] = []
    for t in tables(result):
        cells = [[_cell_text(c) for c in row] for row in t.rows]
        widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(t.header)]
        lines.append(t.title)
        lines.append("  ".join(h.ljust(w) for h, w in zip(t.header, widths)).rstrip())
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
        lines += t.notes
        lines.append(t.caption)
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _cell_text(c: Cell) -> str:
    if c.text is not None:
        return c.text
    if c.value is None:
        return "–"
    out = f"{c.value:.2f}"
    if c.low is not None and c.high is not None:
        out += f" [{c.low:.2f}, {c.high:.2f}]"
    return out


def markdown(result: Mapping[str, Any]) -> str:
    return render(tables(result), "markdown")


def formatted(result: Mapping[str, Any], fmt: str) -> str:
    """The leaderboard as text or markdown (HTML: embeval.reports.html.render_rank)."""
    return text(result) if fmt == "text" else markdown(result)


def for_report(
    paths: Sequence[str | Path], labels: Sequence[str] | None, registry: Registry | None = None
) -> dict[str, Any] | str | None:
    """The leaderboard `embeval report` shows: None for fewer than two files (or more than the most) or
    files without saved predictions, the one-line reason when it cannot be made, else the ranking."""
    if not MIN_RUNS <= len(paths) <= MAX_RUNS:
        return None
    if any(not isinstance(load(p).get("predictions"), dict) for p in paths):
        return None
    try:
        return rank(paths, labels=labels, registry=registry)
    except EmbevalError as err:
        return str(err)


def report_markdown(paths: Sequence[str | Path], labels: Sequence[str] | None, registry: Registry | None = None) -> str:
    """The leaderboard's section of `embeval report`'s markdown ("" when it has none)."""
    found = for_report(paths, labels, registry)
    if found is None:
        return ""
    if isinstance(found, str):
        return f"\n### Leaderboard with rank intervals\n\nNot available: {found}.\n"
    return "\n" + markdown(found)
