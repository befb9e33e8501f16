"""`embeval compare A.json B.json [...]`: paired bootstrap comparison of encoders on the same test items.

Every later file is compared with the first. For each task both scored, and each headline figure
(embeval.tasks.figures; for each classifier and for the normalized cosine figures too), the same
bootstrap resamples of the test items are applied to both runs' saved predictions: the
difference B - A, its 95% percentile interval and the paired bootstrap p-value
(embeval.stats.paired_test). p-values are also adjusted for the number of comparisons in the
table (Holm-Bonferroni). The runs must have predicted the same test items in the same order:
same task data (sha256), same item count, same gold values.
"""

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embeval import stats
from embeval.errors import EmbevalError
from embeval.formats import predictions
from embeval.formats.targets import Output, json_format
from embeval.memory import check_bootstrap
from embeval.reports.benchmarks import compare_pairs as benchmark_pairs
from embeval.reports.benchmarks import compare_rows as benchmark_rows
from embeval.reports.cells import COMPARE_FORMATS
from embeval.reports.tables import Cell, Table, default_labels, load, recorded_config, render, task_specs
from embeval.tasks.benchmarks import MEANS
from embeval.tasks.figures import variants
from embeval.tasks.registry import Registry, statistic
from embeval.untrusted import MAX_RECORD_BYTES

logger = logging.getLogger("embeval")

ALPHA = 0.05
FORMAT = "embeval-comparison"  # the `format` of the --json file, which recognizes an earlier one
COMPARISON = Output("a comparison that embeval wrote", lambda path: json_format(path, FORMAT, MAX_RECORD_BYTES))


def load_run(path):
    """(record, {task: prediction entry}) of a results file with saved predictions."""
    path = Path(path)
    record = load(path)
    saved = record.get("predictions")
    if not isinstance(saved, dict) or not isinstance(saved.get("file"), str):
        raise EmbevalError("has no saved predictions; score it again with --save-predictions to compare it", file=path)
    return record, predictions.read_beside(path, saved).get("encoder", {})


def locate(sets, path):
    """(set name, figure) of a figure path among a task's prediction sets, or None."""
    for name in sorted(sets, key=len, reverse=True):
        if name == "" or path.startswith(name + "."):
            figure = path[len(name) + 1 :] if name else path
            if figure in sets[name].figures:
                return name, figure
    return None


def _check_same_items(task, a_entry, b_entry, set_name, paths):
    where = f"{paths[0]}, {paths[1]}"
    if a_entry["data_sha256"] != b_entry["data_sha256"]:
        raise EmbevalError(
            "the runs scored different task data (data sha256 differs); a paired comparison needs the same test items",
            file=where,
            task=task,
        )
    a, b = a_entry["sets"][set_name], b_entry["sets"][set_name]
    if a.kind != b.kind or a.items != b.items:
        raise EmbevalError(
            f"the runs predicted different test items ({a.items} and {b.items} items in "
            f"{set_name or 'the headline set'})",
            file=where,
            task=task,
        )
    for key in ("gold", "group"):
        if (key in a.arrays) != (key in b.arrays) or (
            key in a.arrays and not np.array_equal(a.arrays[key], b.arrays[key])
        ):
            raise EmbevalError("the runs' test items differ (gold values or order)", file=where, task=task)


def _figure_paths(spec, results_a, results_b):
    """Figure paths to compare, with their labels, whether they are percentages and whether each is
    the task's headline figure."""
    out = []
    prefixes = [p for p in variants(results_a) if p in variants(results_b)]
    classifiers = [p for p in prefixes if p in ("logreg.", "mlp.")]
    for prefix in prefixes:
        if prefix == "" and classifiers:
            continue  # the top-level figures repeat one classifier's
        for i, fig in enumerate(spec.figures):
            label = fig.label if not prefix else f"{prefix[:-1]}: {fig.label}"
            out.append((prefix + fig.path, label, fig.percent, i == 0))
    return out


def compare(
    paths: Sequence[str | Path],
    labels: Sequence[str] | None = None,
    tasks: Sequence[str] | None = None,
    resamples: int | None = None,
    seed: int | None = None,
    level: float = stats.LEVEL,
    alpha: float = ALPHA,
    registry: Registry | None = None,
) -> dict[str, Any]:
    """The comparison as a dict: encoders, and one row per (other encoder, task, figure)."""
    if len(paths) < 2:
        raise EmbevalError("give at least two results files to compare", file="compare")
    if labels and len(labels) != len(paths):
        raise EmbevalError(
            f"{len(labels)} labels for {len(paths)} results files; give one --label per file", file="--label"
        )
    loaded = [load_run(p) for p in paths]
    _warn_same(paths, [record for record, _ in loaded])
    reference, ref_runs = loaded[0]
    configured = recorded_config(reference)
    seed = configured.seed if seed is None else seed
    wanted_resamples = resamples
    resamples = resamples or configured.bootstrap or stats.RESAMPLES
    check_bootstrap(resamples, "--resamples")
    names = labels or default_labels([r for r, _ in loaded], paths)
    encoders = [
        {"label": n, "file": str(p), "dim": r.get("vectors", {}).get("dim")}
        for n, (r, _), p in zip(names, loaded, paths)
    ]
    specs, not_compared = [], []
    without_value: dict[tuple, list] = {}  # (task, B, whose) -> labels of the figures undefined for that run or both
    known, unknown = task_specs([r for r, _ in loaded], paths, registry)
    for line in unknown:
        logger.warning(line)
    by_name = {spec.name: spec for spec in known}
    for other in range(1, len(loaded)):
        record, runs = loaded[other]
        wanted = [
            t for t in by_name if (tasks is None or t in tasks) and (t in reference["tasks"] or t in record["tasks"])
        ]
        _check_common(reference, record, wanted, tasks, (paths[0], paths[other]))
        for task in wanted:
            if task not in reference["tasks"] or task not in record["tasks"]:
                only = names[0] if task in reference["tasks"] else names[other]
                not_compared.append({"task": task, "b": names[other], "why": f"scored by {only} only"})
                continue
            if task not in ref_runs or task not in runs:
                not_compared.append({"task": task, "b": names[other], "why": "its predictions were not saved"})
                continue
            a_entry, b_entry = ref_runs[task], runs[task]
            for path, label, percent, headline in _figure_paths(
                by_name[task], reference["tasks"][task]["results"], record["tasks"][task]["results"]
            ):
                found_a, found_b = locate(a_entry["sets"], path), locate(b_entry["sets"], path)
                if found_a is None or found_b is None or found_a != found_b:
                    continue
                set_name, figure = found_a
                _check_same_items(task, a_entry, b_entry, set_name, (paths[0], paths[other]))
                stat = statistic(a_entry["sets"][set_name].kind, figure)
                undefined = [
                    names[i]
                    for i, entry in ((0, a_entry), (other, b_entry))
                    if not np.isfinite(stats.observed(stat, entry["sets"][set_name].arrays))
                ]
                if undefined:
                    whose = "both runs" if len(undefined) == 2 else undefined[0]
                    without_value.setdefault((task, names[other], whose), []).append(label)
                    continue
                specs.append(
                    (
                        a_entry["sets"][set_name],
                        b_entry["sets"][set_name],
                        figure,
                        {
                            "task": task,
                            "figure": path,
                            "label": label,
                            "percent": percent,
                            "headline": headline,
                            "a_label": names[0],
                            "b_label": names[other],
                            "n": a_entry["sets"][set_name].items,
                        },
                    )
                )
    for (task, b, whose), figure_labels in without_value.items():
        why = f"undefined for {whose} (constant scores): {'; '.join(figure_labels)}"
        not_compared.append({"task": task, "b": b, "why": why})
    pairs, skipped = benchmark_pairs(loaded, names, registry)  # the benchmark means, tested with the tasks
    not_compared += skipped
    needed = resamples_for(len(specs) + len(MEANS) * len(pairs), alpha)
    if wanted_resamples is None:
        resamples = max(resamples, needed)
    rows = []
    for a, b, figure, row in specs:
        test = stats.paired_test(statistic(a.kind, figure), a.arrays, b.arrays, seed, row["task"], resamples, level)
        rows.append(dict(test, **row))
    found, skipped = benchmark_rows(pairs, loaded, names, seed, resamples, level, registry)
    rows += found
    not_compared += skipped
    for row, adjusted in zip(rows, stats.holm([r["p"] for r in rows])):
        row["p_holm"] = adjusted
        row["significant"] = bool(row["p"] < alpha)
        row["significant_holm"] = bool(adjusted < alpha)
    return {
        "format": FORMAT,
        "encoders": encoders,
        "resamples": resamples,
        "resamples_needed": needed,
        "seed": seed,
        "level": level,
        "alpha": alpha,
        "rows": rows,
        "not_compared": not_compared,
    }


def _warn_same(paths, records):
    """A warning for each file compared with the first that is the same file, or that scored the same
    vectors (every difference is then 0: the comparison says nothing)."""
    first = Path(paths[0]).resolve()
    prints = (records[0].get("vectors") or {}).get("fingerprints")
    for path, record in zip(paths[1:], records[1:]):
        if Path(path).resolve() == first:
            logger.warning(f"{path}: compared with itself ({paths[0]} is the same file): every difference is 0")
        elif prints and (record.get("vectors") or {}).get("fingerprints") == prints:
            logger.warning(
                f"{path}: scored the same vectors as {paths[0]} (identical fingerprints): every difference is 0"
            )


def _check_common(a, b, wanted, tasks, paths):
    """Refuse a pair of results files with no task scored by both (among the requested tasks)."""
    if any(t in a["tasks"] and t in b["tasks"] for t in wanted):
        return
    names = [Path(str(p)).name for p in paths]
    if tasks is not None:
        what = f"none of the requested tasks ({', '.join(tasks)}) was scored by both {names[0]} and {names[1]}"
    else:
        what = (
            f"no task in common with {names[0]} ({names[0]} has {_few(a['tasks'])}; {names[1]} has "
            f"{_few(b['tasks'])}): nothing to compare"
        )
    raise EmbevalError(what, file=paths[1])


def _few(names, limit=6):
    names = list(names)
    if not names:
        return "no task"
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def resamples_for(comparisons, alpha=ALPHA):
    """The fewest resamples with which Holm's adjustment over `comparisons` tests can reach
    significance: the smallest bootstrap p-value is 1/(B+1), and Holm multiplies it by the number
    of tests, so B+1 must reach 2 x comparisons / alpha (a margin of 2)."""
    return max(stats.RESAMPLES, int(np.ceil(2 * comparisons / alpha)) - 1)


def table(result):
    """The comparison as a report Table (figures in the units of the papers: x100 for correlations)."""
    level = int(round(100 * result["level"]))
    dims = ", ".join(f"{e['label']} {e['dim']}-d" for e in result["encoders"])
    caption = (
        f"Paired comparison with {result['encoders'][0]['label']} ({dims}). Delta = B - A on the same test "
        f"items; [low, high]: its {level}% percentile bootstrap interval; p: two-sided paired bootstrap "
        f"p-value ({result['resamples']} resamples of the test items, seed {result['seed']}; "
        f"<= {1 / (result['resamples'] + 1):.1g}: no resample as extreme, the smallest p this many "
        f"resamples can show); p (Holm): adjusted for the {len(result['rows'])} comparisons of this table. "
        f"Significant: p < {result['alpha']:g}. Correlations x100, accuracies and recalls in %. Intervals "
        "reflect test-set sampling only, not the randomness of classifier training."
        + (
            ""
            if result["resamples"] >= result["resamples_needed"]
            else f" Too few resamples for Holm's adjustment to reach significance over this many comparisons: "
            f"use --resamples {result['resamples_needed']} or more."
        )
    )
    t = Table(
        "compare",
        "Paired comparison",
        caption,
        ["task", "figure", "A", "B", "A value", "B value", "Delta", "p", "p (Holm)", "significant"],
        metrics=["", "", "", "", "", "", "", "", ""],
    )
    for r in result["rows"]:
        scale = 1.0 if r["percent"] else 100.0
        verdict = "yes" if r["significant_holm"] else ("yes (uncorrected)" if r["significant"] else "no")
        floor = 1 / (result["resamples"] + 1)
        t.rows.append(
            [
                Cell(text=r["task"]),
                Cell(text=r["label"]),
                Cell(text=r["a_label"]),
                Cell(text=r["b_label"]),
                Cell(scale * r["a"]),
                Cell(scale * r["b"]),
                Cell(scale * r["diff"], scale * r["low"], scale * r["high"]),
                Cell(text=_p(r["p"], floor)),
                Cell(text=_p(r["p_holm"])),
                Cell(text=verdict),
            ]
        )
    t.notes += [f"Not compared: {r['task']} ({r['b']}: {r['why']})." for r in result["not_compared"]]
    return t


def _p(p, floor=None):
    if p is None or not np.isfinite(p):
        return "–"
    text = f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"
    return f"<= {text}" if floor is not None and p <= floor * (1 + 1e-9) else text


def text(result):
    """A plain-text table for the terminal."""
    t = table(result)
    cells = [[c.text if c.text is not None else _cell_text(c) for c in row] for row in t.rows]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(t.header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(t.header, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
    for skipped in result["not_compared"]:
        lines.append(f"not compared: {skipped['task']} ({skipped['b']}: {skipped['why']})")
    lines.append("")
    lines.append(t.caption)
    return "\n".join(lines)


def _cell_text(c):
    if c.value is None:
        return "–"
    out = f"{c.value:+.2f}" if c.low is not None else f"{c.value:.2f}"
    if c.low is not None:
        out += f" [{c.low:+.2f}, {c.high:+.2f}]"
    return out


FORMATS = COMPARE_FORMATS


def formatted(result, fmt):
    if fmt == "text":
        return text(result)
    return render([table(result)], fmt)
