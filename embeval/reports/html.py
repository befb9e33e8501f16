"""`embeval report ... --format html`: one self-contained HTML file.

No script, no font, no link outside the file: the style sheet is inline and every figure is a PNG
inside the page (a data: URI). The page holds every table of the report (with published baselines
when asked for), a figure per table with each encoder's 95% intervals as error bars, STS12-16's three
aggregations (mean, weighted mean, pooled) side by side, and, for two or more results files scored
with --save-predictions, the paired comparison of each file with the first and its forest plot.
Given a sweep (render_sweep), the page holds the sweep's files x tasks table and, when the files carry
a `step`, each task's headline figure against step with its interval band.
"""

import base64
import html
import io
import tempfile
from pathlib import Path

from embeval.errors import EmbevalError, install_hint
from embeval.formats.results import UNDEFINED, UNDEFINED_NOTE
from embeval.reports import compare as paired
from embeval.reports import tables as rep
from embeval.run import sweep_report

STYLE = """
body { font-family: sans-serif; margin: 1.5em auto; padding: 0 1em; max-width: 84em; color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ccc; }
div.scroll { overflow-x: auto; } table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.4em; text-align: right; white-space: nowrap; }
th { background: #f2f2f2; } td:first-child, th:first-child, td.text, th.text { text-align: left; }
tr.published td { font-style: italic; color: #555; } tr.baseline td { color: #555; }
span.ci { color: #777; font-size: 0.85em; display: block; }
p.caption { font-size: 0.9em; color: #333; max-width: 72em; }
p.note { font-size: 0.85em; color: #555; } figure { margin: 1em 0; } figcaption { font-size: 0.85em; color: #444; }
img { max-width: 100%; height: auto; border: 1px solid #eee; }
"""
SWEEP_STYLE = "td.best { font-weight: bold; background: #eef6ee; }\n"
# Colours of the series of a figure, distinct for 17 series and told apart with colour-blindness:
# Okabe and Ito's eight, then Paul Tol's muted set; each series also gets a marker of its own
# (MARKERS, cycled), so that series stay distinct beyond the colours and in grey print.
PALETTE = (
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442",
    "#332288", "#44AA99", "#999933", "#882255", "#CC6677", "#DDCC77", "#117733", "#88CCEE", "#AA4499",
)  # fmt: skip
MARKERS = ("o", "s", "^", "v", "P", "X", "h")
GREY = "#999999"


def series_style(k: int) -> tuple[str, str]:
    """(colour, marker) of a figure's k-th series."""
    return PALETTE[k % len(PALETTE)], MARKERS[k % len(MARKERS)]


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise EmbevalError(f"the HTML report's figures need matplotlib: {install_hint('report')}", file="--format html")
    return plt


def _png(fig, plt):
    buffer = io.BytesIO()
    try:
        fig.tight_layout()
        fig.savefig(buffer, format="png", dpi=110, metadata={"Software": None})
    finally:
        plt.close(fig)
    return buffer.getvalue()


def _data_uri(png):
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _figure(png, caption, alt):
    return (
        f'<figure><img src="{_data_uri(png)}" alt="{html.escape(alt)}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


def _row_class(label):
    if label.endswith("[published]"):
        return ' class="published"'
    return ' class="baseline"' if label.endswith("(baseline)") else ""


def _cell(c, digits, ci):
    if c.text is not None:
        return html.escape(c.text)
    if c.undefined:
        return UNDEFINED
    if c.value is None:
        return "–"
    text = rep._fmt(c.value, digits) + ("\u2020" if c.mark else "")
    if ci and c.low is not None and c.high is not None:
        text += f' <span class="ci">[{rep._fmt(c.low, 1)}, {rep._fmt(c.high, 1)}]</span>'
    return text


def table_html(t, ci=True):
    digits = rep._digits(t)
    out = [
        f'<div class="scroll"><table id="table-{html.escape(t.key)}">',
        "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in t.header) + "</tr>",
    ]
    for row in t.rows:
        out.append(
            f"<tr{_row_class(row[0].text or '')}>" + "".join(f"<td>{_cell(c, digits, ci)}</td>" for c in row) + "</tr>"
        )
    out.append("</table></div>")
    return "\n".join(out)


def table_plot(t, plt):
    """Each encoder's figures per column with their intervals as error bars; published rows as open
    diamonds (a published figure computed differently from its column is left out). None for a table
    of one column (its table says all) or without figures."""
    columns = [i for i, h in enumerate(t.header[2:]) if h != "Avg."]
    series = [row for row in t.rows if any(_drawn(row[2 + i]) for i in columns)]
    if not series or len(columns) < 2:
        return None
    fig, ax = plt.subplots(figsize=(max(6.0, 0.85 * len(columns) + 2.5), 3.8))
    width = 0.8 / len(series)
    for k, row in enumerate(series):
        xs, ys, lows, highs = [], [], [], []
        for j, i in enumerate(columns):
            c = row[2 + i]
            if c.value is None or c.mark:
                continue
            xs.append(j - 0.4 + width * (k + 0.5))
            ys.append(c.value)
            # a percentile interval may miss its figure (a biased statistic): the bar spans both
            lows.append(max(0.0, c.value - c.low) if c.low is not None else 0.0)
            highs.append(max(0.0, c.high - c.value) if c.high is not None else 0.0)
        published = (row[0].text or "").endswith("[published]")
        colour, marker = series_style(k)
        ax.errorbar(
            xs,
            ys,
            yerr=[lows, highs],
            fmt="D" if published else marker,
            color=colour,
            capsize=3,
            markersize=5,
            mfc="none" if published else colour,
            label=row[0].text,
        )
    ax.set_xticks(range(len(columns)))
    ax.set_xticklabels([t.header[2 + i] for i in columns], rotation=30 if len(columns) > 8 else 0)
    ax.set_ylabel(
        t.metrics[columns[0]] if len({t.metrics[i] for i in columns}) == 1 else "accuracy % | correlation x100"
    )
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the axes, never on a figure
    ax.set_title(t.title, fontsize=10)
    return _png(fig, plt)


def _drawn(c):
    """A cell its table's figure draws: a figure, not one computed differently from its column (†)."""
    return c.value is not None and not c.mark


def has_published(t):
    """True when the table's figure shows a published figure (an open diamond)."""
    return any(
        (row[0].text or "").endswith("[published]")
        and any(_drawn(c) for h, c in zip(t.header[2:], row[2:]) if h != "Avg.")
        for row in t.rows
    )


def summary_table(tables, ci=True):
    """The page's first table: a row per encoder (computed rows, not published ones), and for each
    table of the report its headline figure: its Avg. column, else its one column (with the interval
    where one was computed), else the mean of its columns. None when the report has no such table."""
    picked = []
    for t in tables:
        if t.key == "geometry" or not t.header[2:]:
            continue
        picked.append((t, t.header.index("Avg.") if "Avg." in t.header else 2 if len(t.header) == 3 else None))
    if not picked:
        return None
    labels = list(
        dict.fromkeys(row[0].text for t, _ in picked for row in t.rows if not (row[0].text or "").endswith("]"))
    )
    head = "".join(
        f'<th><a href="#{html.escape(t.key)}">{html.escape(t.title)}</a><br>'
        f"{html.escape(t.header[i] if i is not None else f'mean of {len(t.header) - 2} columns')}</th>"
        for t, i in picked
    )
    out = ['<div class="scroll"><table id="table-summary">', f"<tr><th>encoder</th><th>dim</th>{head}</tr>"]
    for label in labels:
        dim, cells = "", []
        for t, i in picked:
            row = next((r for r in t.rows if r[0].text == label), None)
            dim = dim or (row[1].text if row else "")
            c = (row[i] if i is not None else rep._average(row[2:])) if row else None
            cells.append(f"<td>{_cell(c, rep._digits(t), ci)}</td>" if c is not None else "<td>–</td>")
        out.append(
            f"<tr{_row_class(label or '')}><td>{html.escape(label or '')}</td><td>{html.escape(dim or '')}</td>"
            + "".join(cells)
            + "</tr>"
        )
    out.append("</table></div>")
    return "\n".join(out)


def aggregated(rows, specs):
    """The tasks shown in the report whose figures come in several aggregations (cosine STS over
    subsets), with their kind's aggregations."""
    return [
        (spec, spec.kind_module)
        for spec in specs
        if spec.kind_module.aggregations and spec.report.show and any(spec.name in enc.tasks for enc in rows)
    ]


def aggregation_table(rows, specs, coef):
    """Each aggregated task's correlations of the raw vectors, its aggregations side by side."""
    found = aggregated(rows, specs)
    if not found:
        return None
    aggregations = list(dict.fromkeys(name for _, kind in found for _, name in kind.aggregations))
    header = '<tr><th>task</th><th class="text">encoder</th>' + "".join(
        f"<th>{html.escape(n)}</th>" for n in aggregations
    )
    out = [f'<div class="scroll"><table id="table-sts-aggregations-{coef}">', header + "</tr>"]
    for spec, kind in found:  # a row per task and encoder: as wide for 2 encoders as for 16
        for enc in rows:
            entry = enc.tasks.get(spec.name)
            if entry is None:
                continue
            cells = {
                name: _cell(rep.cell(entry, kind.aggregation_path.format(coef=coef, aggregation=key), 100.0), 2, True)
                for key, name in kind.aggregations
            }
            out.append(
                f"<tr{_row_class(enc.label)}><td>{html.escape(spec.label)}</td>"
                f'<td class="text">{html.escape(enc.label)}</td>'
                + "".join(f"<td>{cells.get(name, '–')}</td>" for name in aggregations)
                + "</tr>"
            )
    out.append("</table></div>")
    return "\n".join(out)


def aggregation_plot(rows, specs, plt):
    tasks = aggregated(rows, specs)
    found = [enc for enc in rows if any(spec.name in enc.tasks for spec, _ in tasks)]
    if not found:
        return None
    aggregations = tasks[0][1].aggregations
    width = 0.8 / len(aggregations)
    fig, axes = plt.subplots(1, len(found), figsize=(4.2 * len(found), 3.4), sharey=True, squeeze=False)
    for ax, enc in zip(axes[0], found):
        for k, (key, name) in enumerate(aggregations):
            values = [
                rep.cell(
                    enc.tasks.get(spec.name), kind.aggregation_path.format(coef="spearman", aggregation=key), 100.0
                ).value
                for spec, kind in tasks
            ]
            ax.bar(
                [i + (k - (len(aggregations) - 1) / 2) * width for i in range(len(tasks))],
                [v if v is not None else float("nan") for v in values],  # no bar for a figure without a value
                width=width,
                label=name,
                color=PALETTE[k],
            )
        ax.set_xticks(range(len(tasks)))
        ax.set_xticklabels([spec.label for spec, _ in tasks], fontsize=8)
        ax.set_title(f"{enc.label} ({enc.dim}-d)", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("cosine Spearman x100")
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the bars
    return _png(fig, plt)


def comparison_plot(result, plt):
    """Forest plot of B - A with its interval, for each task's headline figure (per classifier and vectors)."""
    rows = [r for r in result["rows"] if r.get("headline")]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 0.28 * len(rows) + 1.2))
    for i, r in enumerate(reversed(rows)):
        scale = 1.0 if r["percent"] else 100.0
        d, lo, hi = scale * r["diff"], scale * r["low"], scale * r["high"]
        ax.errorbar(
            [d],
            [i],
            xerr=[[d - lo], [hi - d]],
            fmt="o",
            color=PALETTE[0] if r["significant_holm"] else GREY,
            capsize=3,
            markersize=4,
        )
    ax.axvline(0.0, color="k", linewidth=0.8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{r['task']}: {r['label']} ({r['b_label']})" for r in reversed(rows)], fontsize=7)
    ax.set_xlabel(f"B - {result['encoders'][0]['label']} (points; correlations x100)")
    ax.grid(axis="x", alpha=0.3)
    return _png(fig, plt)


RANK_CAPTION = (
    "Each run's 95% rank interval (bar: the ranks it may hold) and its rank (dot), runs best first; blue: the "
    "runs whose interval includes 1 (no run is significantly better), grey: the others."
)
RANK_PANELS = 12  # tasks drawn when the runs have no benchmark


def rank_plot(result, plt):
    """Each run's rank interval as a bar, with a dot at its rank: a panel per headline ranking (each
    benchmark's Borda, Mean (Task) and Mean (TaskType); without a benchmark, up to RANK_PANELS tasks),
    runs in the leaderboard's order, best first (without a benchmark: by their mean rank over the
    tasks). The runs whose interval includes 1 (the best set) in colour, the others grey."""
    from matplotlib.ticker import MaxNLocator

    from embeval.reports import rank

    panels = []
    for benchmark in result["benchmarks"]:
        by = {r["name"]: r for r in benchmark["rankings"]}
        wanted = [name for name in (rank.BORDA, *rank.bm.MEANS) if by.get(name, {}).get("ranked", 0) >= 2]
        panels += [(f"{benchmark['name']}: {name}", by[name]) for name in wanted]
    if not result["benchmarks"]:
        panels = [(t["name"], t) for t in result["tasks"] if t["ranked"] >= 2][:RANK_PANELS]
    if not panels:
        return None
    labels = [run["label"] for run in result["runs"]]
    order = list(result["order"])
    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    height = max(2.2, 0.24 * len(order) + 1.0)
    fig, axes = plt.subplots(rows, columns, figsize=(3.6 * columns + 1.6, height * rows), squeeze=False, sharey=True)
    for ax, (title, ranking) in zip(axes.flat, panels):
        for y, r in enumerate(order):
            run = ranking["runs"][r]
            if run is None:
                continue
            colour = PALETTE[0] if run["best"] else GREY
            span = [run["rank_low"] - 0.3, run["rank_high"] + 0.3]  # the ranks low..high, each a unit wide
            ax.plot(span, [y, y], color=colour, linewidth=6, alpha=0.4, solid_capstyle="butt")
            ax.plot([run["rank"]], [y], "o", color=colour, markersize=5)
        ax.set_xlim(0.4, ranking["ranked"] + 0.6)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("rank (1 = best)")
        ax.set_title(title, fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    first = axes[0][0]
    first.set_yticks(range(len(order)))
    first.set_yticklabels([labels[r] for r in order])
    first.set_ylim(len(order) - 0.5, -0.5)  # best first, at the top
    for ax in axes[:, 0]:
        ax.tick_params(axis="y", labelsize=8)
    return _png(fig, plt)


def rank_section(result, plt):
    """The leaderboard with rank intervals as parts of a page: the picture, then its tables."""
    from embeval.reports import rank

    parts = []
    png = rank_plot(result, plt)
    if png:
        parts.append(_figure(png, RANK_CAPTION, "rank intervals"))
    for t in rank.tables(result):
        parts.append(f'<h3 id="{html.escape(t.key)}">{html.escape(t.title)}</h3>')
        parts.append(f'<p class="caption">{html.escape(t.caption)}</p>')
        parts.append(table_html(t))
        parts += [f'<p class="note">{html.escape(note)}</p>' for note in t.notes]
    return parts


def render_rank(result):
    """The HTML page of `embeval rank` (embeval.reports.rank.rank's result)."""
    plt = _pyplot()
    parts = _head(f"embeval rank: {len(result['runs'])} runs") + ["<h1>embeval rank</h1>", "<ul>"]
    for run in result["runs"]:
        parts.append(f"<li>{html.escape(run['label'])}: {html.escape(Path(run['file']).name)}</li>")
    parts.append("</ul>")
    parts += rank_section(result, plt)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _head(title, style=STYLE):
    return [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{style}</style></head><body>",
    ]


def sweep_table(summary, ci=True):
    """The sweep's files x tasks table (sweep_report.grid), the best file on each task's dev figure in bold
    and marked *."""
    header, rows, _ = sweep_report.grid(summary)
    steps = {s["label"]: s["step"] for s in summary["sources"]}
    with_step = any(step is not None for step in steps.values())
    percent = [column["percent"] for column in summary["tasks"].values()]
    names = header[:1] + (["step"] if with_step else []) + header[1:]
    out = [
        '<div class="scroll"><table id="table-sweep">',
        "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in names) + "</tr>",
    ]
    for label, cells in rows:
        line = [f"<td>{html.escape(label)}</td>"]
        if with_step:
            line.append(f"<td>{'–' if steps[label] is None else f'{steps[label]:g}'}</td>")
        for (figures, best), pct in zip(cells, percent):
            text = html.escape(sweep_report.cell_text(figures, pct, ci=False))
            interval = sweep_report.interval_text(figures, pct) if ci and text != "-" else ""
            if interval:
                text += f' <span class="ci">{html.escape(interval)}</span>'
            line.append(f'<td class="best">{text} *</td>' if best else f"<td>{text}</td>")
        out.append("<tr>" + "".join(line) + "</tr>")
    out.append("</table></div>")
    return "\n".join(out)


def render_sweep(path, ci=True):
    """The HTML page of a sweep: `path` is its sweep.json (see sweep_report.find)."""
    plt = _pyplot()
    summary = sweep_report.load(path)
    folder = Path(path).resolve().parent.name
    tasks = summary["tasks"]
    parts = _head(f"embeval sweep report: {folder}", STYLE + SWEEP_STYLE)
    parts.append(f"<h1>embeval sweep report: {html.escape(folder)}</h1>")
    parts.append(
        f"<p>{len(summary['sources'])} sources scored on {len(tasks)} tasks by <code>embeval sweep</code>"
        + (f" in {summary['seconds']:.0f} s" if isinstance(summary.get("seconds"), (int, float)) else "")
        + ".</p>"
    )
    parts.append("<ul>")
    for source in summary["sources"]:
        details = [Path(source["file"]).name]
        if source["dims"]:
            details.append(f"first {source['dims']} dimensions")
        if source["step"] is not None:
            details.append(f"step {source['step']:g}")
        failed = source.get("failed") or {}
        if failed:
            details.append("not scored: " + ", ".join(failed))
        parts.append(f"<li>{html.escape(source['label'])}: {html.escape(', '.join(details))}</li>")
    parts.append("</ul>")
    for item in summary.get("left_out", []):
        parts.append(f'<p class="note">Left out: {html.escape(item["error"])}</p>')
    selected = sorted({f"{c['task_label']}: {c['selected_by']}" for c in tasks.values() if c["selected_by"]})
    parts.append('<h2 id="sweep">Files x tasks</h2>')
    parts.append(
        '<p class="caption">Each task\'s headline figure (accuracies in %, correlations as fractions)'
        + (" with its 95% bootstrap interval where one was computed" if ci else "")
        + ". In bold and marked *: the best file on the task's dev figure, never chosen on test"
        + (f" ({html.escape(', '.join(selected))})" if selected else "")
        + "; a task without a dev figure has no best file.</p>"
    )
    parts.append(sweep_table(summary, ci))
    if sweep_report.undefined(summary):
        parts.append(f'<p class="note">{html.escape(UNDEFINED_NOTE)}</p>')
    parts.append('<h2 id="curves">Curves against step</h2>')
    if not sweep_report.stepped(summary):
        parts.append(
            '<p class="note">No curves: no file of this sweep carries a <code>step</code> attribute '
            "(the x axis of the curves). Give each vectors file a numeric root attribute "
            "<code>step</code> to plot each task's figure against it.</p>"
        )
        tasks = {}
    for task in tasks:
        fig = sweep_report.curve(summary, task, plt)
        if fig is None:
            parts.append(
                f'<p class="note">{html.escape(tasks[task]["task_label"])}: no file with a step has this figure.</p>'
            )
            continue
        banded = any(f["low"] is not None for f in tasks[task]["values"].values())
        parts.append(
            _figure(
                _png(fig, plt),
                f"{tasks[task]['task_label']} ({tasks[task]['label']}) against step"
                + (
                    "; band: its 95% bootstrap interval."
                    if banded
                    else " (no interval: the sweep was run without bootstrap)."
                ),
                f"{tasks[task]['task_label']} against step",
            )
        )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def render(
    paths, labels=None, baselines=True, ci=True, published=None, compare_tasks=None, resamples=None, registry=None
):
    """The HTML page of the report of these results files (and, when there are several with saved predictions,
    the leaderboard with rank intervals and the paired comparison)."""
    from embeval.reports import rank

    plt = _pyplot()
    tables, rows = rep.build(
        list(paths), labels=labels, baselines=baselines, ci=ci, published=published, registry=registry
    )
    records = [rep.load(p) for p in paths]
    specs, _ = rep.task_specs(records, paths, registry)
    names = labels or rep.default_labels(records, paths)
    parts = _head(f"embeval report: {', '.join(names)}") + ["<h1>embeval report</h1>", "<ul>"]
    for name, path, record in zip(names, paths, records):
        parts.append(
            f"<li>{html.escape(name)}: {html.escape(Path(str(path)).name)} (embeval "
            f"{html.escape(str(record.get('embeval', '?')))}, {len(record['tasks'])} tasks)</li>"
        )
    parts.append("</ul>")
    summary = summary_table(tables, ci)
    if summary:
        parts.append('<h2 id="summary">Summary</h2>')
        parts.append(
            '<p class="caption">Each table\'s headline figure per encoder: its Avg. column where it has one, '
            "else its one column with its 95% bootstrap interval, else the mean of its columns (a mean has no "
            "interval). Each heading links to its table below, whose caption says how the figures are "
            "computed.</p>"
        )
        parts.append(summary)
    for t in tables:
        parts.append(f'<h2 id="{html.escape(t.key)}">{html.escape(t.title)}</h2>')
        parts.append(f'<p class="caption">{html.escape(t.caption)}</p>')
        parts.append(table_html(t, ci))
        parts += [f'<p class="note">{html.escape(note)}</p>' for note in t.notes]
        if t.key != "geometry":
            png = table_plot(t, plt)
            if png:
                caption = "Each figure of the table; error bars: its 95% bootstrap interval (test-set sampling)."
                if has_published(t):
                    caption += (
                        " Open diamonds: published figures (no interval; those marked \u2020 in the table "
                        "are left out)."
                    )
                parts.append(_figure(png, caption, f"{t.title}: figures with intervals"))
        if t.key == "geometry":
            with tempfile.TemporaryDirectory() as folder:
                for caption, path in rep.plots(rows, folder, relative_to=folder, specs=specs).get("geometry", []):
                    parts.append(_figure((Path(folder) / path).read_bytes(), caption, caption))
    spearman = aggregation_table(rows, specs, "spearman")
    if spearman:
        parts.append('<h2 id="sts-aggregations">Cosine STS: the three aggregations side by side</h2>')
        parts.append(
            '<p class="caption">Cosine correlation x100 of the raw vectors over each task\'s subsets: '
            "mean (SentEval's 'mean'), weighted by subset size (SentEval's 'wmean'), and all pairs "
            "pooled into one correlation (SimCSE's and MTEB's 'all'). Papers differ in which they "
            "report; compare like with like. [low, high]: 95% bootstrap interval where one was "
            "computed.</p>"
        )
        parts += ["<h3>Spearman</h3>", spearman, "<h3>Pearson</h3>", aggregation_table(rows, specs, "pearson")]
        if any(
            rep.cell(enc.tasks.get(spec.name), kind.aggregation_path.format(coef=coef, aggregation=key), 1.0).undefined
            for enc in rows
            for spec, kind in aggregated(rows, specs)
            for key, _ in kind.aggregations
            for coef in ("spearman", "pearson")
        ):
            parts.append(f'<p class="note">{html.escape(UNDEFINED_NOTE)}</p>')
        png = aggregation_plot(rows, specs, plt)
        parts.append(
            _figure(png, "Cosine Spearman x100 of each task under the three aggregations.", "STS aggregations")
        )
    ranked = rank.for_report(list(paths), labels, registry)
    if ranked is not None:
        parts.append('<h2 id="rank">Leaderboard with rank intervals</h2>')
        if isinstance(ranked, str):
            parts.append(f'<p class="note">Not available: {html.escape(ranked)}.</p>')
        else:
            parts += rank_section(ranked, plt)
    if len(paths) >= 2:
        parts.append('<h2 id="compare">Paired comparison</h2>')
        try:
            result = paired.compare(
                list(paths), labels=labels, tasks=compare_tasks, resamples=resamples, registry=registry
            )
        except EmbevalError as err:
            parts.append(f'<p class="note">Not available: {html.escape(str(err))}.</p>')
        else:
            t = paired.table(result)
            parts.append(f'<p class="caption">{html.escape(t.caption)}</p>')
            parts.append(table_html(t))
            parts += [f'<p class="note">{html.escape(note)}</p>' for note in t.notes]
            png = comparison_plot(result, plt)
            if png:
                parts.append(
                    _figure(
                        png,
                        "Headline figure of each task: B - A with its 95% paired bootstrap "
                        "interval; blue: significant after Holm's adjustment.",
                        "paired comparison forest plot",
                    )
                )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
