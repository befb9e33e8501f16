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
    needed = resamples_for(_distinct_count(specs) + len(MEANS) * len(pairs), alpha)
    if wanted_resamples is None:
        resamples = max(resamples, needed)
    rows = []
    for a, b, figure, row in specs:
        test = stats.paired_test(statistic(a.kind, figure), a.arrays, b.arrays, seed, row["task"], resamples, level)
        rows.append(dict(test, **row))
    rows = distinct_tests(rows)
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


SAME = ("a", "b", "diff", "low", "high", "p")  # a test's outcome: equal outcomes on the same items, the same test


def _same_outcome(r, s):
    return (r["task"], r["b_label"], r["n"]) == (s["task"], s["b_label"], s["n"]) and all(
        np.isclose(r[k], s[k], rtol=1e-9, atol=1e-12, equal_nan=True) for k in SAME
    )


def distinct_tests(rows: list[dict]) -> list[dict]:
    """The rows with each distinct test once: figures whose comparison has the same outcome on the same
    test items and resamples (the figures, the difference, its interval and p-value) are one test, e.g. the
    mean, weighted mean and pooled correlations of an STS task with one subset. The first row stays (the
    headline comes first) and names the others in `same_test_as`; Holm's adjustment counts it once."""
    kept: list[dict] = []
    for row in rows:
        twin = next((k for k in kept if _same_outcome(k, row)), None)
        if twin is None:
            kept.append(row)
        else:
            twin.setdefault("same_test_as", []).append({"figure": row["figure"], "label": row["label"]})
    return kept


def _distinct_count(specs):
    """How many distinct tests the specs make, as far as their observed figures tell before testing."""
    seen: list[tuple] = []
    for a, b, figure, row in specs:
        stat = statistic(a.kind, figure)
        key = (row["task"], row["b_label"], row["n"], stats.observed(stat, a.arrays), stats.observed(stat, b.arrays))
        if not any(k[:3] == key[:3] and np.allclose(k[3:], key[3:], rtol=1e-9, atol=1e-12) for k in seen):
            seen.append(key)
    return len(seen)


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


LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
WIDTH = 100  # the terminal table's width: figure labels longer than LABEL_WIDTH get a line of their own
LABEL_WIDTH = 36


def _letters(result):
    """{encoder label: its letter} (A: the first file, which every other is compared with)."""
    return {e["label"]: LETTERS[i] if i < len(LETTERS) else f"#{i + 1}" for i, e in enumerate(result["encoders"])}


def _caption(result):
    level = int(round(100 * result["level"]))
    tests = len(result["rows"])
    return (
        f"Delta = B - A on the same test items; [low, high]: its {level}% percentile bootstrap interval; p: two-sided "
        f"paired bootstrap p-value ({result['resamples']} resamples of the test items, seed {result['seed']}; "
        f"<= {1 / (result['resamples'] + 1):.1g}: no resample as extreme, the smallest p this many "
        f"resamples can show); p (Holm), Holm p: adjusted for the {tests} comparison{'s' if tests != 1 else ''} of "
        f"this table (each distinct test once: figures that are one test, such as the mean and pooled "
        f"correlations of an STS task with one subset, are one row). Significant: p (Holm) < {result['alpha']:g}; "
        f"no*: only p < {result['alpha']:g}, before the adjustment. Correlations x100, accuracies and recalls in %. "
        "Intervals reflect test-set sampling only, not the randomness of classifier training."
        + (
            ""
            if result["resamples"] >= result["resamples_needed"]
            else f" Too few resamples for Holm's adjustment to reach significance over this many comparisons: "
            f"use --resamples {result['resamples_needed']} or more."
        )
    )


def _verdict(row):
    return "yes" if row["significant_holm"] else ("no*" if row["significant"] else "no")


def _notes(result):
    notes = [
        f"{r['task']}: {r['label']} is the same test as {'; '.join(o['label'] for o in r['same_test_as'])} "
        "(equal figures on every resample): one row, counted once."
        for r in result["rows"]
        if r.get("same_test_as")
    ]
    return notes + [f"Not compared: {r['task']} ({r['b']}: {r['why']})." for r in result["not_compared"]]


def table(result):
    """The comparison as a report Table (figures in the units of the papers: x100 for correlations). The
    encoders are named once: in the value columns' headers (two files), or by letter (more)."""
    letters = _letters(result)
    encoders = result["encoders"]
    dims = ", ".join(f"{letters[e['label']]} = {e['label']} ({e['dim']}-d)" for e in encoders)
    caption = f"Paired comparison with {encoders[0]['label']}: {dims}. " + _caption(result)
    several = len(encoders) > 2
    header = ["task", "figure"] + (
        ["B", "A value", "B value"] if several else [encoders[0]["label"], encoders[1]["label"]]
    )
    t = Table(
        "compare", "Paired comparison", caption, header + ["Delta", "p", "p (Holm)", "significant"], metrics=[""] * 9
    )
    floor = 1 / (result["resamples"] + 1)
    for r in result["rows"]:
        scale = 1.0 if r["percent"] else 100.0
        t.rows.append(
            [Cell(text=r["task"]), Cell(text=r["label"])]
            + ([Cell(text=letters.get(r["b_label"], r["b_label"]))] if several else [])
            + [
                Cell(scale * r["a"]),
                Cell(scale * r["b"]),
                Cell(scale * r["diff"], scale * r["low"], scale * r["high"]),
                Cell(text=_p(r["p"], floor)),
                Cell(text=_p(r["p_holm"])),
                Cell(text=_verdict(r)),
            ]
        )
    t.notes += _notes(result)
    return t


def _p(p, floor=None):
    if p is None or not np.isfinite(p):
        return "–"
    text = f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"
    return f"<= {text}" if floor is not None and p <= floor * (1 + 1e-9) else text


def text(result):
    """A plain-text table for the terminal, within WIDTH columns: the encoders named once above it, each
    task's figures under its name (a long figure label on a line of its own), the caption wrapped."""
    import textwrap

    letters = _letters(result)
    several = len(result["encoders"]) > 2
    lines = ["Paired comparison (each file against A):"]
    lines += [f"  {letters[e['label']]}  {e['label']} ({e['dim']}-d, {e['file']})" for e in result["encoders"]]
    header = ["A", "B" if not several else "other", "Delta [interval]", "p", "Holm p", "sig."]
    floor = 1 / (result["resamples"] + 1)
    body, task = [], None
    for r in result["rows"]:
        scale = 1.0 if r["percent"] else 100.0
        if r["task"] != task:
            task = r["task"]
            body.append((task, None))
        label = (f"{letters.get(r['b_label'], r['b_label'])}: " if several else "") + r["label"]
        values = [
            f"{scale * r['a']:.2f}",
            f"{scale * r['b']:.2f}",
            _cell_text(Cell(scale * r["diff"], scale * r["low"], scale * r["high"])),
            _p(r["p"], floor),
            _p(r["p_holm"]),
            _verdict(r),
        ]
        body.append((label, values))
    rows = [values for _, values in body if values]
    widths = [max([len(h)] + [len(v[i]) for v in rows]) for i, h in enumerate(header)]
    label_width = min(LABEL_WIDTH, max([len("task / figure")] + [len(label) + 2 for label, v in body if v]))

    def numbers(values):
        cells = [v.rjust(w) if i < 2 else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths))]
        return "  ".join(cells).rstrip()

    head = "task / figure".ljust(label_width) + "  " + numbers(header)
    lines += ["", head, "-" * len(head)]
    for label, values in body:
        if values is None:
            lines.append(label)
        elif len(label) + 2 > label_width:
            lines += ["  " + label, " " * label_width + "  " + numbers(values)]
        else:
            lines.append(("  " + label).ljust(label_width) + "  " + numbers(values))
    for skipped in result["not_compared"]:
        lines.append(f"not compared: {skipped['task']} ({skipped['b']}: {skipped['why']})")
    lines.append("")
    for note in _notes(result)[: len(_notes(result)) - len(result["not_compared"])]:
        lines += textwrap.wrap(note, WIDTH, subsequent_indent="  ")
    lines += textwrap.wrap(_caption(result), WIDTH)
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
