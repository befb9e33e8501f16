"""What a sweep reports: sweep.json, the files x tasks table, the best file per task (chosen on the
task's dev figure, never on test) and, when the files carry a `step`, a plot per task."""
import math
from pathlib import Path

from embeval.formats.results import write_json
from embeval.tasks.figures import lookup
from embeval.tasks.registry import TASKS

SWEEP_FORMAT = "embeval-sweep"
SWEEP_FORMAT_VERSION = 1


def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        else None


def headline(task, entry):
    """{"value", "low", "high", "dev"} of a task's entry: its headline figure, the figure's interval
    (when bootstrapped) and the dev figure the task's selection names (None when it has none)."""
    results = entry.get("results", {})
    path = TASKS[task].headline.path
    ci = ((entry.get("ci") or {}).get("figures") or {}).get(path) or {}
    selection = TASKS[task].selection
    return {"value": _number(lookup(results, path)), "low": _number(ci.get("low")), "high": _number(ci.get("high")),
            "dev": _number(lookup(results, selection)) if selection else None}


def best_on_dev(values):
    """The label with the highest dev figure (the first one on ties), or None when no dev figure."""
    best = None
    for label, figures in values.items():
        if figures["dev"] is not None and (best is None or figures["dev"] > values[best]["dev"]):
            best = label
    return best


def summary(sources, left_out, out_dir, seconds):
    tasks = {}
    for source in sources:
        for task, entry in source.record["tasks"].items():
            column = tasks.setdefault(task, {"figure": TASKS[task].headline.path, "label": TASKS[task].headline.label,
                                             "selected_by": TASKS[task].selection, "values": {}})
            column["values"][source.label] = headline(task, entry)
    for column in tasks.values():
        column["best"] = best_on_dev(column["values"])
    return {"format": SWEEP_FORMAT, "format_version": SWEEP_FORMAT_VERSION, "seconds": seconds,
            "sources": [{"label": s.label, "file": str(s.path), "dims": s.dims, "step": s.step,
                         "results": s.out.name, "complete": not s.failed, "failed": s.failed} for s in sources],
            "left_out": [{"file": item.path, "error": item.error} for item in left_out],
            "tasks": tasks}


def _cell(figures, percent):
    if figures is None or figures["value"] is None:
        return "-"
    fmt = "{:.2f}" if percent else "{:.4f}"
    text = fmt.format(figures["value"])
    if figures["low"] is not None and figures["high"] is not None:
        text += f" [{fmt.format(figures['low'])}, {fmt.format(figures['high'])}]"
    return text


def table(summary):
    """Files x tasks: each task's headline figure with its interval; * marks the best file on dev."""
    tasks = list(summary["tasks"])
    header = ["file"] + [TASKS[t].label for t in tasks]
    rows = []
    for source in summary["sources"]:
        row = [source["label"]]
        for task in tasks:
            column = summary["tasks"][task]
            cell = _cell(column["values"].get(source["label"]), TASKS[task].headline.percent)
            row.append(cell + (" *" if column["best"] == source["label"] else ""))
        rows.append(row)
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header] + rows]
    note = "headline figure [95% interval]; * best file on the task's dev figure (" + \
        ", ".join(sorted({f"{TASKS[t].label}: {summary['tasks'][t]['selected_by']}" for t in tasks
                          if summary["tasks"][t]["selected_by"]})) + ")"
    return "\n".join(lines + [note])


def plot(summary, out_dir, log):
    """One PNG per task of the headline figure against the files' `step`, with its interval band (one
    line per truncation). Returns the paths written ([] when no file has a step)."""
    stepped = [s for s in summary["sources"] if s["step"] is not None]
    if not stepped:
        return []
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("embeval: warning: the plots against step need matplotlib: pip install 'embeval[report]'")
        return []
    folder = Path(out_dir) / "plots"
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for task, column in summary["tasks"].items():
        fig, ax = plt.subplots(figsize=(6, 4))
        for dims in sorted({s["dims"] or 0 for s in stepped}):
            scored = [s for s in stepped if (s["dims"] or 0) == dims
                      and column["values"].get(s["label"], {}).get("value") is not None]
            points = sorted(((s["step"], column["values"][s["label"]]) for s in scored), key=lambda p: p[0])
            if not points:
                continue
            x = [p[0] for p in points]
            label = f"first {dims} dims" if dims else "all dims"
            ax.plot(x, [p[1]["value"] for p in points], marker="o", label=label)
            banded = [(p[0], p[1]["low"], p[1]["high"]) for p in points if p[1]["low"] is not None]
            if banded:
                ax.fill_between([b[0] for b in banded], [b[1] for b in banded], [b[2] for b in banded], alpha=0.2)
        ax.set_xlabel("step")
        ax.set_ylabel(column["label"])
        ax.set_title(TASKS[task].label)
        ax.legend()
        path = folder / f"{task}.png"
        fig.savefig(path, dpi=100, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    return written


def write(summary, out_dir, log):
    summary["plots"] = [str(p.relative_to(out_dir)) for p in plot(summary, out_dir, log)]
    write_json(Path(out_dir) / "sweep.json", summary)
