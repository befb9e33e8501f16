"""Result records: plain JSON (written atomically) and the terminal table."""

import hashlib
import json
import logging
import math
import re

import numpy as np

from embeval.errors import EmbevalError
from embeval.formats import atomic
from embeval.formats.targets import Output, read_head
from embeval.tasks import benchmarks
from embeval.tasks.registry import recorded_spec

logger = logging.getLogger("embeval")

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


_FORMAT_KEY = re.compile(rb'\A\s*\{\s*"format"\s*:\s*"' + FORMAT.encode() + rb'"')


def is_results(path):
    """Whether a file is an embeval results file (or its progress file): a JSON object whose first key is
    `format`, "embeval-results", as every results file embeval writes begins. Its content is checked
    when it is read (run.outputs.load_previous)."""
    return _FORMAT_KEY.match(read_head(path)) is not None


RESULTS = Output("an embeval results file", is_results)


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
    lines += mteb_lines(record)
    for name, note in record.get("partial", {}).items():
        lines.append(f"partial: {name}: {note}")
    return "\n".join(lines)


def mteb_lines(record):
    """The table's lines of MTEB tasks scored by name whose dataset revision was not mteb's (a mismatch
    allowed) or could not be verified: one each."""
    lines = []
    for task, summary in (record.get("mteb") or {}).items():
        for key in ("revision_mismatch", "revision_unverified"):
            if isinstance(summary, dict) and summary.get(key):
                lines.append(f"{task}: {summary[key]}")
    return lines


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


GEOMETRY_NUMBERS = (
    "alignment",
    "uniformity",
    "effective_rank",
    "positive_pairs",
    "positive_threshold",
    "uniformity_sample",
    "sentences",
)


def check_structure(record, path):
    """Refuse, in one line naming the file and the task, a results file whose parts the report and
    the comparison read are not what embeval writes (a hand-edited or truncated record)."""

    def bad(what, task=None):
        return EmbevalError(f"not a valid embeval results file: {what}", file=path, task=task)

    if "config" not in record:
        raise bad("no 'config' (the settings the figures were computed with)")
    for key in ("config", "vectors", "baseline", "predictions"):
        if key in record and not isinstance(record[key], dict):
            raise bad(f"'{key}' is not an object")
    runs = [record["tasks"]]
    if "baseline" in record:
        base = record["baseline"]
        if not isinstance(base.get("tasks"), dict) or not isinstance(base.get("dim"), int):
            raise bad("'baseline' needs 'tasks' (an object) and 'dim' (an integer)")
        runs.append(base["tasks"])
    for tasks in runs:
        for name, entry in tasks.items():
            problem = entry_problem(entry)
            if problem:
                raise bad(problem, name)
            for figure, interval in entry.get("ci", {}).get("figures", {}).items():
                outside = _outside_interval(entry["results"], figure, interval)
                if outside:
                    logger.warning(f"{path}: {name}: {outside}")


def entry_problem(entry):
    """What makes one task's entry unlike what embeval writes (None: nothing): its parts, each figure
    against its interval's record, and its figures against their digest (`figures_sha256`)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("results"), dict):
        return "the task's entry has no 'results' object"
    if not isinstance(entry.get("kind"), str):
        return "the task's entry has no 'kind' (the kind of task it was scored as)"
    if not isinstance(entry.get("vectors"), dict):
        return "the task's entry has no 'vectors' object (what was scored)"
    for key in ("ci", "geometry"):
        if key in entry and not isinstance(entry[key], dict):
            return f"'{key}' is not an object"
    if not isinstance(entry.get("ci", {}).get("figures", {}), dict):
        return "'ci.figures' is not an object"
    for figure, interval in entry.get("ci", {}).get("figures", {}).items():
        problem = _interval_problem(entry["results"], figure, interval)
        if problem:
            return problem
    geometry = entry.get("geometry")
    if geometry is not None and (
        any(not is_number(geometry.get(k)) for k in GEOMETRY_NUMBERS)
        or not isinstance(geometry.get("singular_values"), list)
        or not all(is_number(v) for v in geometry["singular_values"])
    ):
        return "'geometry' lacks a figure or has one that is not a number"
    if "figures_sha256" in entry and entry["figures_sha256"] != figures_digest(entry):
        return "its figures and intervals do not match their digest figures_sha256 (edited by hand?)"
    return None


def figures_digest(entry):
    """The sha256 of a task entry's figures and intervals as written (canonical JSON): what
    `figures_sha256` records, so that a figure edited together with its interval is found."""
    content = {"results": entry.get("results"), "ci": entry.get("ci")}
    text = json.dumps(plain(content), sort_keys=True, allow_nan=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def is_number(value):
    """A finite number (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


MISSING = object()


def find(results, path):
    """The value at a dotted path of a task's results: a number, None (recorded as null: undefined), or
    MISSING when the results have no such figure."""
    value = results
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return MISSING
        value = value[part]
    return value


ROUNDED_TOLERANCE = 0.0101  # SentEval's accuracies and F1 in %, rounded to 2 decimals (see _tolerance)


def _tolerance(figure):
    """How far a recorded figure may lie from its interval's figure (computed again from the predictions,
    unrounded). For a percentage rounded to two decimals (SentEval's accuracies and F1; correlations are
    fractions, never rounded): one unit of the second decimal, SentEval rounding each outer fold's accuracy
    before their mean and the mean again (tests/test_predictions.py holds every run to this bound;
    docs/example and tests/regression differ by at most 0.0048). For the others, float rounding (those
    files: at most 1.2e-16)."""
    noise = 1e-9 * max(1.0, abs(figure))
    rounded = abs(figure) > 1 and abs(figure - round(figure, 2)) <= noise
    return noise + (ROUNDED_TOLERANCE if rounded else 0.0)


def _interval_problem(results, path, interval):
    """What is wrong with a figure's interval record against the figure in the results (None: nothing);
    intervals with values that are not numbers are left out of the tables, not refused."""
    if not isinstance(interval, dict):
        return f"the interval of {path} is not an object"
    figure = find(results, path)
    value, low, high = (interval.get(k) for k in ("value", "low", "high"))
    if figure is MISSING or (value is not None and not is_number(value)):
        return None
    if figure is None or value is None:
        if figure is None and value is None:
            return None
        shown = "null" if figure is None else f"{figure:g}"
        return f"{path} is {shown}, its interval's value {'null' if value is None else f'{value:g}'}"
    if not is_number(figure):
        return None
    tol = _tolerance(figure)
    if abs(figure - value) > tol:
        return f"{path} is {figure:g}, its interval's value {value:g} (edited by hand?)"
    return None


def _outside_interval(results, path, interval):
    """A warning when a figure lies outside its own interval (None: it lies inside). A percentile
    bootstrap interval of a biased figure may exclude it (a v-measure near chance: resampling repeats
    items, which reads as agreement); a figure edited with its interval's value reads the same."""
    figure = find(results, path)
    low, high = ((interval or {}).get(k) for k in ("low", "high"))
    if not (is_number(figure) and is_number(low) and is_number(high)):
        return None
    tol = _tolerance(figure)
    if low - tol <= figure <= high + tol:
        return None
    return (
        f"{path} is {figure:g}, outside its 95% interval [{low:g}, {high:g}]: a biased figure's bootstrap "
        "interval may exclude it (or the file was edited)"
    )
