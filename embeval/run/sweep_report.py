"""What a sweep reports: sweep.json, the files x tasks table, the best file per task (chosen on the
task's dev figure, never on test) and, when the files carry a `step`, a plot per task."""

import io
import math
import re
from pathlib import Path

from embeval.errors import EmbevalError, install_hint
from embeval.formats import atomic, targets
from embeval.formats.results import UNDEFINED, UNDEFINED_NOTE, write_json
from embeval.tasks.figures import lookup
from embeval.tasks.registry import TASKS
from embeval.untrusted import MAX_RECORD_BYTES, read_json

SWEEP_FORMAT = "embeval-sweep"
SWEEP_FORMAT_VERSION = 1
SUMMARY = "sweep.json"
LOG = "sweep.log"
PLOTS = "plots"
_LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ")  # each entry of sweep.log begins so


def _is_log(path):
    head = targets.read_head(path)
    return not head or _LOG_LINE.match(head.decode("utf-8", "replace")) is not None


SWEEP_SUMMARY = targets.Output(
    "a sweep summary that embeval wrote", lambda path: targets.json_format(path, SWEEP_FORMAT, MAX_RECORD_BYTES)
)
SWEEP_LOG = targets.Output("a sweep's log that embeval wrote", _is_log)


def output_targets(out_dir, tasks):
    """The files of a sweep's folder besides the results files: sweep.json, sweep.log, and the plot of
    each of `tasks` (the names a plot may have) that is there already."""
    out_dir = Path(out_dir)
    found = [
        targets.Target(out_dir / SUMMARY, SWEEP_SUMMARY, "--out-dir"),
        targets.Target(out_dir / LOG, SWEEP_LOG, "--out-dir"),
    ]
    plots = out_dir / PLOTS
    if plots.is_dir():
        found += [targets.Target(plots / f"{task}.png", targets.PLOT, "--out-dir") for task in tasks]
    return found


def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) else None


def _undefined(results, path):
    """Whether the results hold the figure at `path` without a value (null in a results file, NaN before
    it is written): computed, but undefined."""
    *parents, last = path.split(".")
    for part in parents:
        results = results.get(part) if isinstance(results, dict) else None
    if not isinstance(results, dict) or last not in results:
        return False
    value = results[last]
    return value is None or isinstance(value, float) and math.isnan(value)


def headline(spec, entry):
    """{"value", "low", "high", "dev"} of a task's entry: its headline figure, the figure's interval
    (when bootstrapped) and the dev figure the task's selection names (None when it has none); with
    "undefined": True when the headline figure was computed but has no value."""
    results = entry.get("results", {})
    path = spec.headline.path
    ci = ((entry.get("ci") or {}).get("figures") or {}).get(path) or {}
    selection = spec.selection
    figures = {
        "value": _number(lookup(results, path)),
        "low": _number(ci.get("low")),
        "high": _number(ci.get("high")),
        "dev": _number(lookup(results, selection)) if selection else None,
    }
    if _undefined(results, path):
        figures["undefined"] = True
    return figures


def undefined(summary):
    """Whether a headline figure of the sweep is undefined (shown as UNDEFINED, explained by UNDEFINED_NOTE)."""
    return any(f.get("undefined") for column in summary["tasks"].values() for f in column["values"].values())


def best_on_dev(values):
    """The label with the highest dev figure (the first one on ties), or None when no dev figure."""
    best = None
    for label, figures in values.items():
        if figures["dev"] is not None and (best is None or figures["dev"] > values[best]["dev"]):
            best = label
    return best


def summary(sources, left_out, out_dir, seconds):
    """sweep.json: each source, what was left out, and per task its headline figure of every source
    (with what the figure is, so that the summary is shown without the task's declaration)."""
    tasks = {}
    specs = {unit.task: unit.spec for source in sources for unit in source.units}
    for source in sources:
        for task, entry in source.record["tasks"].items():
            spec = specs[task]
            column = tasks.setdefault(
                task,
                {
                    "task_label": spec.label,
                    "figure": spec.headline.path,
                    "label": spec.headline.label,
                    "percent": spec.headline.percent,
                    "selected_by": spec.selection,
                    "values": {},
                },
            )
            column["values"][source.label] = headline(spec, entry)
    for column in tasks.values():
        column["best"] = best_on_dev(column["values"])
    return {
        "format": SWEEP_FORMAT,
        "format_version": SWEEP_FORMAT_VERSION,
        "seconds": seconds,
        "sources": [
            {
                "label": s.label,
                "file": str(s.path),
                "dims": s.dims,
                "step": s.step,
                "results": s.out.name,
                "complete": not s.failed,
                "failed": s.failed,
            }
            for s in sources
        ],
        "left_out": [{"file": item.path, "error": item.error} for item in left_out],
        "tasks": tasks,
    }


def _format(percent):
    return "{:.2f}" if percent else "{:.4f}"


def interval_text(figures, percent):
    """A headline figure's 95% interval as "[low, high]", or "" when it has none."""
    if figures is None or figures["low"] is None or figures["high"] is None:
        return ""
    fmt = _format(percent)
    return f"[{fmt.format(figures['low'])}, {fmt.format(figures['high'])}]"


def cell_text(figures, percent, ci=True):
    """A headline figure as the sweep's table prints it: "-" when missing, its interval in brackets."""
    if figures is not None and figures.get("undefined"):
        return UNDEFINED
    if figures is None or figures["value"] is None:
        return "-"
    text = _format(percent).format(figures["value"])
    interval = interval_text(figures, percent) if ci else ""
    return f"{text} {interval}" if interval else text


def grid(summary):
    """The files x tasks table as data: (header, rows, note). A row: the file's label, then per task
    (figures or None, is it the best file on the task's dev figure)."""
    tasks = list(summary["tasks"])
    header = ["file"] + [summary["tasks"][t]["task_label"] for t in tasks]
    rows = []
    for source in summary["sources"]:
        cells = []
        for task in tasks:
            column = summary["tasks"][task]
            cells.append((column["values"].get(source["label"]), column["best"] == source["label"]))
        rows.append((source["label"], cells))
    selected = sorted(
        {
            f"{summary['tasks'][t]['task_label']}: {summary['tasks'][t]['selected_by']}"
            for t in tasks
            if summary["tasks"][t]["selected_by"]
        }
    )
    note = "headline figure (accuracies in %, correlations as fractions) [95% interval]; "
    note += "* best file on the task's dev figure"
    if selected:
        note += " (" + ", ".join(selected) + ")"
    return header, rows, note


def table(summary):
    """Files x tasks: each task's headline figure with its interval; * marks the best file on dev."""
    header, found, note = grid(summary)
    percent = [column["percent"] for column in summary["tasks"].values()]
    rows = [
        [label] + [cell_text(figures, p) + (" *" if best else "") for (figures, best), p in zip(cells, percent)]
        for label, cells in found
    ]
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header] + rows]
    return "\n".join(lines + [note] + ([UNDEFINED_NOTE] if undefined(summary) else []))


def stepped(summary):
    """The sources that carry a `step` (the x axis of the curves)."""
    return [s for s in summary["sources"] if s["step"] is not None]


def curve(summary, task, plt):
    """The figure of a task's headline figure against the files' `step`, with its interval band (one
    line per truncation); None when no file with a step has that figure."""
    column = summary["tasks"][task]
    sources = stepped(summary)
    fig, ax = plt.subplots(figsize=(6, 4))
    drawn = False
    for dims in sorted({s["dims"] or 0 for s in sources}):
        scored = [
            s
            for s in sources
            if (s["dims"] or 0) == dims and (column["values"].get(s["label"]) or {}).get("value") is not None
        ]
        points = sorted(((s["step"], column["values"][s["label"]]) for s in scored), key=lambda p: p[0])
        if not points:
            continue
        drawn = True
        x = [p[0] for p in points]
        label = f"first {dims} dims" if dims else "all dims"
        ax.plot(x, [p[1]["value"] for p in points], marker="o", label=label)
        banded = [
            (p[0], p[1]["low"], p[1]["high"]) for p in points if p[1]["low"] is not None and p[1]["high"] is not None
        ]
        if banded:
            ax.fill_between([b[0] for b in banded], [b[1] for b in banded], [b[2] for b in banded], alpha=0.2)
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xlabel("step")
    ax.set_ylabel(column["label"])
    ax.set_title(column["task_label"])
    ax.legend()
    return fig


def plot(summary, out_dir, log):
    """One PNG per task of the headline figure against the files' `step` (see curve()). Returns the
    paths written ([] when no file has a step)."""
    if not stepped(summary):
        return []
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log(f"embeval: warning: the plots against step need matplotlib: {install_hint('report')}")
        return []
    folder = Path(out_dir) / PLOTS
    written = []
    for task in summary["tasks"]:
        fig = curve(summary, task, plt)
        if fig is None:
            continue
        path = folder / f"{task}.png"
        buffer = io.BytesIO()
        try:
            fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight", metadata={"Software": targets.PNG_SOFTWARE})
        finally:
            plt.close(fig)
        atomic.write_bytes(path, buffer.getvalue())
        written.append(path)
    return written


def find(path):
    """The sweep.json that `path` names (a sweep's folder, or its sweep.json), or None when `path` is not a
    sweep (e.g. a results file). A folder without a sweep.json is an error."""
    path = Path(path)
    if path.is_dir():
        if not (path / "sweep.json").is_file():
            raise EmbevalError(
                "a folder, but not a sweep's: it holds no sweep.json (embeval sweep --out-dir writes one)", file=path
            )
        return path / "sweep.json"
    try:
        record = read_json(path, MAX_RECORD_BYTES, warn=False, finite=True)
    except EmbevalError as err:
        if "not a regular file" in err.message or "larger than the limit" in err.message:
            raise
        return None
    return path if isinstance(record, dict) and record.get("format") == SWEEP_FORMAT else None


def _figures_ok(figures):
    return (
        isinstance(figures, dict)
        and set(figures) - {"undefined"} == {"value", "low", "high", "dev"}
        and all(v is None or _number(v) is not None for k, v in figures.items() if k != "undefined")
        and figures.get("undefined", False) in (True, False)
        and not (figures.get("undefined") and figures["value"] is not None)
    )


def load(path):
    """A sweep.json, checked: its summary, or a one-line error naming the file and what is wrong."""
    record = read_json(
        path,
        MAX_RECORD_BYTES,
        missing="sweep summary not found",
        invalid=lambda why: EmbevalError("not a sweep summary (not JSON)", file=path),
        finite=True,
    )
    if not isinstance(record, dict) or record.get("format") != SWEEP_FORMAT:
        raise EmbevalError("not an embeval sweep summary", file=path)
    if record.get("format_version") != SWEEP_FORMAT_VERSION:
        raise EmbevalError(
            f"sweep format version {record.get('format_version')!r}; this embeval reads version "
            f"{SWEEP_FORMAT_VERSION} (run the sweep again with this version)",
            file=path,
        )

    def bad(what, task=None):
        return EmbevalError(f"not a valid sweep summary: {what}", file=path, task=task)

    sources, tasks, left_out = record.get("sources"), record.get("tasks"), record.setdefault("left_out", [])
    if not isinstance(sources, list) or not isinstance(tasks, dict) or not isinstance(left_out, list):
        raise bad("'sources' must be a list, 'tasks' an object and 'left_out' a list")
    if not all(isinstance(item, dict) and isinstance(item.get("error"), str) for item in left_out):
        raise bad("each item of 'left_out' needs its 'error'")
    labels = []
    for i, source in enumerate(sources):
        if (
            not isinstance(source, dict)
            or not isinstance(source.get("label"), str)
            or not isinstance(source.get("file"), str)
        ):
            raise bad(f"sources[{i}] needs a 'label' and a 'file'")
        if source.get("step") is not None and _number(source["step"]) is None:
            raise bad(f"sources[{i}]: step {source['step']!r} is not a number")
        if source.get("dims") is not None and (not isinstance(source["dims"], int) or isinstance(source["dims"], bool)):
            raise bad(f"sources[{i}]: dims {source['dims']!r} is not a whole number")
        if not isinstance(source.setdefault("failed", {}), dict):
            raise bad(f"sources[{i}]: 'failed' must be an object (task: error)")
        source.setdefault("step", None)
        source.setdefault("dims", None)
        labels.append(source["label"])
    if len(set(labels)) != len(labels):
        raise bad("two sources have the same label")
    for task, column in tasks.items():
        if not isinstance(column, dict) or not isinstance(column.get("values"), dict):
            raise bad("the task's entry needs 'values'", task)
        if "percent" not in column:  # a summary written before the sweep recorded what its figures are
            if task not in TASKS:
                raise bad("a task this summary does not describe and embeval does not know", task)
            spec = TASKS[task]
            column.update(task_label=spec.label, label=spec.headline.label, percent=spec.headline.percent)
            column.setdefault("selected_by", spec.selection)
        for key, types in (("task_label", str), ("label", str), ("percent", bool)):
            if not isinstance(column.get(key), types):
                raise bad(f"'{key}' is missing or not a {types.__name__}", task)
        for label, figures in column["values"].items():
            if label not in labels:
                raise bad(f"'{label}' is not one of the sources", task)
            if not _figures_ok(figures):
                raise bad(f"the figures of '{label}' must be value, low, high and dev (numbers or null)", task)
        if column.get("best") is not None and column["best"] not in column["values"]:
            raise bad(f"best '{column['best']}' has no figures", task)
        column.setdefault("best", None)
        column.setdefault("selected_by", None)
    return record


def write(summary, out_dir, log):
    summary["plots"] = [str(p.relative_to(out_dir)) for p in plot(summary, out_dir, log)]
    write_json(Path(out_dir) / SUMMARY, summary)
