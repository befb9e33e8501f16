"""Result records: plain JSON (written atomically) and the terminal table."""

import json
import math

import numpy as np

from embeval.formats import atomic
from embeval.tasks import benchmarks
from embeval.tasks.registry import recorded_spec

FORMAT = "embeval-results"
FORMAT_VERSION = 1
# A figure that was computed but has no value (recorded as null: a correlation of scores that do not vary)
# is shown as UNDEFINED in every output, with UNDEFINED_NOTE once; a figure not scored at all is a dash.
UNDEFINED = "n/a"
UNDEFINED_NOTE = (
    f"{UNDEFINED}: the figure is undefined: a correlation is undefined when the system's scores are constant "
    "(e.g. all vectors identical)."
)
# Every timing figure of a record sits under one of these keys, and nothing else does: two runs on
# the same inputs and configuration differ only there (on the CPU).
TIMING_KEYS = frozenset({"seconds"})


def plain(value):
    """JSON-ready copy: numpy scalars and arrays to Python, NaN and Inf to None."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    return value


def without_timing(value):
    """A copy of a record (or any part of it) with every TIMING_KEYS entry removed, at any depth."""
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value


def dumps(record):
    return json.dumps(plain(record), indent=1, allow_nan=False) + "\n"


def write_json(path, record):
    """Write the record to path atomically (temporary file, then rename)."""
    atomic.write_text(path, dumps(record))


def _num(x, fmt="{:5.2f}"):
    return "  n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else fmt.format(x)


def summary_rows(spec, results, ci=None):
    """(metric label, value text) lines for one task's results, as its kind shows them; ci: the
    entry's interval figures ({path: {value, low, high}}), shown as [low, high] after the figures
    that have one."""
    return [(line.label, line.text) for line in spec.kind_module.lines(spec, results, ci)]


def _entry_rows(spec, entry):
    rows = summary_rows(spec, entry["results"], (entry.get("ci") or {}).get("figures"))
    norm = entry.get("normalize")
    if norm and (spec.selection is not None or norm.get("requested") == "tune"):
        rows.append(("normalization", norm["method"] + (" (tuned on dev)" if norm.get("requested") == "tune" else "")))
    geo = entry.get("geometry")
    if geo:
        rows.append(
            (
                "alignment | uniformity (lower is better)",
                f"{_num(geo['alignment'], '{:.3f}')} | {_num(geo['uniformity'], '{:.3f}')}",
            )
        )
    return rows


def _block(record, tasks):
    scored = [(name, record["tasks"][name]) for name in tasks if name in record["tasks"]]
    lines = []
    if scored:
        rows = {name: _entry_rows(recorded_spec(name, t), t) for name, t in scored}
        width = max([len(n) for n, _ in scored] + [len("task")]) + 2
        labels = [label for name, _ in scored for label, _ in rows[name]]
        lw = max([len(x) for x in labels] + [6]) + 2
        lines.append(f"{'task':<{width}}{'metric':<{lw}}score")
        lines.append("-" * (width + lw + 24))
        for name, _ in scored:
            for i, (label, value) in enumerate(rows[name]):
                lines.append(f"{name if i == 0 else '':<{width}}{label:<{lw}}{value}")
    return lines


def _dimension(record):
    dim = record.get("vectors", {}).get("dim")
    return dim if dim is not None else sorted({t["vectors"]["dim"] for t in record["tasks"].values()}) or None


def table(record, tasks):
    """The terminal table: one block of lines per scored task, then what was skipped."""
    record = plain(record)  # NaN (an undefined figure, its interval) as in the results file: None
    lines = []
    if record.get("tasks"):
        vectors = record.get("vectors", {})
        model = f"model {vectors['model']}, " if vectors.get("model") else ""
        line = f"vectors: {vectors.get('file', '?')} ({model}dimension {_dimension(record)})"
        boot = record.get("config", {}).get("bootstrap")
        if boot:
            line += f"; [low, high]: 95% interval, bootstrap of the test items ({boot} resamples)"
        lines.append(line)
    lines += _block(record, tasks)
    found = benchmarks.lines(record)
    if found:
        lines += [""] + found
    base = record.get("baseline")
    if base and base.get("tasks"):
        lines.append("")
        lines.append(f"baseline: {base['encoder']} ({base['dim']}-d), for context")
        lines += _block(base, tasks)
    if any(UNDEFINED in line for line in lines):
        lines.append(UNDEFINED_NOTE)
    lines += skip_lines(record)
    for name, note in record.get("partial", {}).items():
        lines.append(f"partial: {name}: {note}")
    return "\n".join(lines)


def skip_lines(record):
    """The table's lines of skipped tasks, one per reason. A run that scored tasks of task files only
    says the built-in tasks it skipped in one line of their number (not two long lists of names)."""
    skipped = {reason: names for reason, names in record.get("skipped", {}).items() if names}
    lines = []
    scored = record.get("tasks", {})
    if scored and all("declaration" in entry for entry in scored.values()):
        from embeval.tasks.registry import builtin

        known = set(builtin())
        counts = {reason: count for reason, names in skipped.items() if (count := sum(name in known for name in names))}
        if counts:
            why = ", ".join(
                f"{count} {'with ' if reason == 'no_data' else ''}{skip_reason(reason, record)}"
                for reason, count in counts.items()
            )
            lines.append(f"skipped: {sum(counts.values())} built-in tasks ({why}; `embeval tasks` lists them)")
            skipped = {reason: [name for name in names if name not in known] for reason, names in skipped.items()}
    for reason, names in skipped.items():
        if names:
            lines.append(f"skipped ({skip_reason(reason, record)}): {', '.join(names)}")
    return lines


def skip_reason(reason, record):
    """Why tasks were skipped, in the words of the terminal table: each task is skipped for one reason
    only (a task without data is skipped for that, whether or not the file has its vectors)."""
    if reason == "absent_from_file":
        return "absent from the vectors file"
    if reason == "no_data":
        return f"no task data in {record.get('data', {}).get('path', 'the data folder')}"
    return reason.replace("_", " ")
