"""`embeval report`: paper-ready tables (markdown, LaTeX, CSV) from results files, one row per encoder.

- the transfer table of SentEval's paper (test accuracy; MRPC accuracy/F1; SICK-R and STS-B
  Pearson of the supervised regressor), one table per classifier that ran;
- the STS table of SimCSE's paper (cosine Spearman x100; STS12-16 over all pairs of the year
  pooled, SimCSE's "all"; STS-B and SICK-R on their test split), raw and, when scored, normalized;
- the probing table (test accuracy), one per classifier;
- the geometry table (alignment, uniformity, effective rank) and, with --plots, its PNG figures.

Every table has a dimension column, and its caption names the metric and the aggregation.
"""

import csv
import io
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from embeval.errors import EmbevalError
from embeval.formats import atomic
from embeval.formats.results import FORMAT, FORMAT_VERSION
from embeval.reports.cells import Cell, Table
from embeval.tasks.figures import lookup
from embeval.tasks.registry import TASKS

FORMATS = ("markdown", "latex", "csv")
CLASSIFIER_NAMES = {"logreg": "logistic regression", "mlp": "MLP"}


@dataclass
class Encoder:
    """One row: a results file's encoder, or the bag-of-words baseline it scored."""

    label: str
    dim: object
    tasks: dict
    record: dict


def load(path):
    """A results record; anything else is a one-line error."""
    path = Path(path)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EmbevalError("results file not found", file=path)
    except (UnicodeDecodeError, ValueError):
        raise EmbevalError("not an embeval results file (not JSON)", file=path)
    except OSError as err:
        raise EmbevalError(f"cannot read: {err.strerror}", file=path)
    if not isinstance(record, dict) or record.get("format") != FORMAT or not isinstance(record.get("tasks"), dict):
        raise EmbevalError("not an embeval results file", file=path)
    if record.get("format_version") != FORMAT_VERSION:
        raise EmbevalError(
            f"results format version {record.get('format_version')!r}; this embeval reads version "
            f"{FORMAT_VERSION} (score the vectors again with this version)",
            file=path,
        )
    check_structure(record, path)
    return record


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
            if not isinstance(entry, dict) or not isinstance(entry.get("results"), dict):
                raise bad("the task's entry has no 'results' object", name)
            for key in ("vectors", "ci", "geometry"):
                if key in entry and not isinstance(entry[key], dict):
                    raise bad(f"'{key}' is not an object", name)
            if not isinstance(entry.get("ci", {}).get("figures", {}), dict):
                raise bad("'ci.figures' is not an object", name)
            geometry = entry.get("geometry")
            if geometry is not None and (
                any(not _is_number(geometry.get(k)) for k in GEOMETRY_NUMBERS)
                or not isinstance(geometry.get("singular_values"), list)
                or not all(_is_number(v) for v in geometry["singular_values"])
            ):
                raise bad("'geometry' lacks a figure or has one that is not a number", name)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def default_label(record, path):
    name = Path(str(record.get("vectors", {}).get("file") or path)).name
    for suffix in (".h5", ".hdf5", ".results.json", ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def encoders(records, paths, labels=None, baselines=True):
    """One Encoder per results file, then each distinct baseline (dimension) once."""
    if labels and len(labels) != len(records):
        raise EmbevalError(
            f"{len(labels)} labels for {len(records)} results files; give one --label per file", file="--label"
        )
    rows, seen = [], set()
    for i, (record, path) in enumerate(zip(records, paths)):
        label = labels[i] if labels else default_label(record, path)
        rows.append(Encoder(label, _dim(record["tasks"]), record["tasks"], record))
    for record in records if baselines else []:
        base = record.get("baseline")
        if base and base.get("tasks") and base["dim"] not in seen:
            seen.add(base["dim"])
            rows.append(Encoder(f"{base['encoder']} (baseline)", base["dim"], base["tasks"], record))
    return rows


def _dim(tasks):
    dims = sorted({t["vectors"]["dim"] for t in tasks.values() if isinstance(t.get("vectors"), dict)})
    return dims[0] if len(dims) == 1 else ("/".join(map(str, dims)) if dims else None)


def cell(entry, path, scale):
    """The figure at `path` of a task entry (scaled to the table's units) with its interval; a figure
    derived for the intervals only (COCO's mean R@K) is read from them."""
    if entry is None:
        return Cell()
    ci = ((entry.get("ci") or {}).get("figures") or {}).get(path)
    ci = ci if isinstance(ci, dict) else {}
    value = lookup(entry["results"], path)
    if value is None:
        value = ci.get("value")
    if not _is_number(value):
        return Cell()
    low, high = (ci.get(k) if _is_number(ci.get(k)) else None for k in ("low", "high"))
    return Cell(scale * value, None if low is None else scale * low, None if high is None else scale * high)


def _classifier_variants(rows, tasks):
    """The classifiers that ran on these tasks: [] when only the configured one ran."""
    found = []
    for enc in rows:
        for name in tasks:
            results = (enc.tasks.get(name) or {}).get("results") or {}
            found += [c for c in ("logreg", "mlp") if isinstance(results.get(c), dict) and c not in found]
    return [c for c in ("logreg", "mlp") if c in found]


def _present(rows, tasks):
    return [t for t in tasks if any(t in enc.tasks for enc in rows)]


def group_columns(group):
    """[(task, column)] of a report group, by the columns' order, then registry order."""
    found = [(name, c) for name, task in TASKS.items() for c in task.columns if c.group == group]
    return sorted(found, key=lambda item: item[1].order)


def _has_classifier(rows, task):
    return any(c.per_classifier for c in TASKS[task].columns)


NOT_SETTINGS = ("baseline_bow_dim",)  # what one run adds, not how the figures are computed


def _settings(records, ci=True):
    configs = [{k: v for k, v in r.get("config", {}).items() if k not in NOT_SETTINGS} for r in records]
    differ = sorted({k for c in configs for k in c if any(c.get(k) != other.get(k) for other in configs)})
    if differ:
        return (
            f"The results files were scored with different settings ({', '.join(differ)}; see each file's "
            "config): their rows are not directly comparable."
        )
    config = records[0].get("config", {})
    classifier = config.get("classifier", {})
    text = (
        f"Configuration {config.get('preset', '?')} (kfold {config.get('kfold')}, {config.get('solver')} solver, "
        f"optim {classifier.get('optim')}, batch {classifier.get('batch_size')}, tenacity "
        f"{classifier.get('tenacity')}, epoch_size {classifier.get('epoch_size')}), seed {config.get('seed')}"
    )
    text += f"; normalization {config.get('normalize', 'none')}"
    if config.get("bootstrap") and ci:
        text += (
            f"; [low, high]: 95% percentile bootstrap interval over the test items "
            f"({config['bootstrap']} resamples, seed {config.get('seed')}; test-set sampling only, "
            "not classifier training randomness)"
        )
    return text + "."


def transfer_tables(rows, settings):
    columns = [(task, c) for task, c in group_columns("transfer") if task in _present(rows, [task])]
    if not columns:
        return []
    tasks = list(dict.fromkeys(task for task, _ in columns))
    by_classifier = [t for t in tasks if _has_classifier(rows, t)]
    kinds = {TASKS[t].kind for t in tasks}
    variants = _classifier_variants(rows, by_classifier) or [None]
    tables = []
    for variant in variants:
        prefix = f"{variant}." if variant else ""
        header = ["encoder", "dim"] + [c.header or TASKS[t].label for t, c in columns]
        metrics = [c.metric for _, c in columns]
        paths = [(t, (prefix if c.per_classifier else "") + c.path, c.scale) for t, c in columns]
        classifier = variant or _configured_classifier(rows)
        specs = [c.spec(t, classifier=classifier) for t, c in columns]
        who = {
            "logreg": "logistic regression",
            None: "the configured classifier",
            "mlp": f"an MLP ({_mlp_nhid(rows)} hidden units, sigmoid)",
        }[variant]
        caption = (
            f"SentEval transfer tasks. Classification: test accuracy (%) of {who}, SentEval's protocols "
            "(MR, CR, SUBJ, MPQA: nested k-fold, mean of the outer folds; TREC, MRPC: k-fold on train; "
            "the others: dev split). MRPC also F1 (%) of the paraphrase class. SICK-R and STS-B: test "
            "Pearson x100 of SentEval's supervised regressor on [|u-v|, u*v] (the same in every "
            "classifier's table)"
            + (
                ". COCO: mean of R@1, R@5, R@10 (%) image->text and text->image, 5 folds of 1k images"
                if "retrieval" in kinds
                else ""
            )
            + f". {settings}"
        )
        table = Table(
            f"transfer{'-' + variant if variant else ''}",
            f"Transfer tasks ({CLASSIFIER_NAMES[variant] if variant else 'configured classifier'})",
            caption,
            header,
            metrics=metrics,
            columns=specs,
        )
        for enc in rows:
            table.rows.append(
                [Cell(text=enc.label), Cell(text=str(enc.dim))]
                + [cell(enc.tasks.get(t), path, scale) for t, path, scale in paths]
            )
        tables.append(table)
    return tables


def _configured_classifier(rows):
    """The classifier of the top-level figures: logistic regression unless the configuration has hidden units."""
    nhids = {(enc.record.get("config", {}).get("classifier") or {}).get("nhid") or 0 for enc in rows}
    return "logreg" if nhids == {0} else ("mlp" if 0 not in nhids else "mixed")


def _mlp_nhid(rows):
    from embeval.evaluate.classify import MLP_NHID

    nhids = sorted({(enc.record.get("config", {}).get("classifier", {}).get("nhid") or MLP_NHID) for enc in rows})
    return "/".join(map(str, nhids))


def _average(cells):
    values = [c.value for c in cells]
    if not values or any(v is None for v in values):
        return Cell()
    return Cell(sum(values) / len(values))


def sts_tables(rows, settings):
    columns = dict(group_columns("sts"))
    tasks = _present(rows, list(columns))
    if not tasks:
        return []
    tables = []
    normalized = any(
        isinstance((enc.tasks.get(t) or {}).get("results", {}).get("normalized"), dict) for enc in rows for t in tasks
    )
    for kind in ("raw", "normalized") if normalized else ("raw",):
        prefix = "normalized." if kind == "normalized" else ""
        header = ["encoder", "dim"] + [TASKS[t].label for t in tasks] + ["Avg."]
        methods = sorted(
            {
                (enc.tasks.get(t) or {}).get("results", {}).get("normalized", {}).get("method", "")
                for enc in rows
                for t in tasks
            }
            - {""}
        )
        what = (
            "raw vectors"
            if kind == "raw"
            else f"normalized vectors ({', '.join(methods)}; statistics from "
            "training sentences only: STS-B's train split for STS12-16)"
        )
        caption = (
            "Semantic textual similarity without training (SimCSE's protocol): Spearman's correlation x100 "
            f"between the cosine of the two sentence vectors ({what}) and the gold score. STS12-16: all "
            "pairs of the year's subsets pooled into one correlation (SimCSE's \"all\"; not SentEval's "
            "mean or weighted mean over subsets). STS-B, SICK-R: the test split. Avg.: the mean of the "
            f"{len(tasks)} columns"
            + (" (not the 7 of SimCSE's table)" if len(tasks) != len(columns) else "")
            + f". {settings}"
        )
        table = Table(
            f"sts{'-normalized' if prefix else ''}",
            f"STS, cosine Spearman x100 ({kind})",
            caption,
            header,
            metrics=["Spearman x100"] * len(tasks) + ["mean"],
            columns=[columns[t].spec(t, vectors=kind) for t in tasks] + [None],
        )
        for enc in rows:
            cells = [cell(enc.tasks.get(t), prefix + columns[t].path, columns[t].scale) for t in tasks]
            table.rows.append([Cell(text=enc.label), Cell(text=str(enc.dim))] + cells + [_average(cells)])
        tables.append(table)
    return tables


def probing_tables(rows, settings):
    columns = dict(group_columns("probing"))
    tasks = _present(rows, list(columns))
    if not tasks:
        return []
    variants = _classifier_variants(rows, tasks) or [None]
    tables = []
    for variant in variants:
        prefix = f"{variant}." if variant else ""
        who = {
            "logreg": "logistic regression",
            "mlp": "the MLP grid (nhid 50/100/200 x dropout 0/0.1/0.2, tuned on dev)",
            None: "the configured classifier",
        }[variant]
        caption = (
            f"Probing tasks (Conneau et al., 2018): test accuracy (%) of {who}, regularization tuned on the dev "
            f"split; WordContent is always logistic regression. {settings}"
        )
        table = Table(
            f"probing{'-' + variant if variant else ''}",
            f"Probing tasks ({CLASSIFIER_NAMES.get(variant, 'configured classifier')})",
            caption,
            ["encoder", "dim"] + list(tasks),
            metrics=["accuracy %"] * len(tasks),
        )
        for enc in rows:
            cells = []
            for t in tasks:
                entry = enc.tasks.get(t)
                path = prefix + columns[t].path
                if entry is not None and variant and lookup(entry["results"], path) is None:
                    path = columns[t].path  # a task run with one classifier only (WordContent)
                cells.append(cell(entry, path, columns[t].scale))
            table.rows.append([Cell(text=enc.label), Cell(text=str(enc.dim))] + cells)
        tables.append(table)
    return tables


def _geometry(enc):
    """The geometry record of an encoder's results (from the task that hosts the diagnostics), or None."""
    return next(
        (
            entry["geometry"]
            for name, entry in enc.tasks.items()
            if name in TASKS and TASKS[name].geometry and isinstance(entry.get("geometry"), dict)
        ),
        None,
    )


def geometry_table(rows):
    found = [(enc, _geometry(enc)) for enc in rows]
    if not any(g for _, g in found):
        return []
    sample = next(g for _, g in found if g)
    caption = (
        "Geometry on STS-B (Wang & Isola, 2020; SimCSE): alignment = mean squared distance of the "
        f"L2-normalized vectors of the {sample['positive_pairs']} pairs with gold score >= "
        f"{sample['positive_threshold']:g} (all splits); uniformity = log mean exp(-2 x squared distance) "
        f"over the pairs of a seeded sample of {sample['uniformity_sample']} distinct sentences (both: lower "
        "is better); effective rank = exp(entropy of the normalized singular values) of the centred table "
        f"of STS-B's {sample['sentences']} distinct sentences."
    )
    table = Table(
        "geometry",
        "Geometry (STS-B)",
        caption,
        ["encoder", "dim", "alignment", "uniformity", "effective rank"],
        metrics=["alignment", "uniformity", "effective rank"],
    )
    for enc, geo in found:
        values = [Cell(geo[k]) if geo else Cell() for k in ("alignment", "uniformity", "effective_rank")]
        table.rows.append([Cell(text=enc.label), Cell(text=str(enc.dim))] + values)
    return [table]


def build(paths, labels=None, baselines=True, ci=True, published=None):
    """Every table of the report, in order, and the encoders (rows); ci: the captions explain the intervals;
    published: names of published baselines (embeval.reports.baselines) to add as rows."""
    records = [load(p) for p in paths]
    rows = encoders(records, paths, labels, baselines)
    settings = _settings(records, ci)
    tables = (
        transfer_tables(rows, settings)
        + sts_tables(rows, settings)
        + probing_tables(rows, settings)
        + geometry_table(rows)
    )
    if not tables:
        raise EmbevalError("no scored task to report", file=str(paths[0]))
    if published:
        from embeval.reports import baselines as published_baselines

        published_baselines.add_rows(tables, published)
    return tables, rows


# Rendering.


def _fmt(x, digits):
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _digits(table):
    return 3 if table.key == "geometry" else 2


def text_of(c, digits, ci, latex=False):
    if c.text is not None:
        return c.text
    if c.value is None:
        return "–" if not latex else "--"
    text = _fmt(c.value, digits)
    if c.mark:
        text += "$^\\dagger$" if latex else "\u2020"
    if ci and c.low is not None and c.high is not None:
        interval = f"[{_fmt(c.low, 1)}, {_fmt(c.high, 1)}]"
        text = f"{text}\\,{{\\scriptsize {interval}}}" if latex else f"{text} {interval}"
    return text


def markdown(tables, ci=True, figures=None):
    out = []
    for t in tables:
        out.append(f"### {t.title}\n")
        out.append(f"{t.caption}\n")
        out.append("| " + " | ".join(t.header) + " |")
        out.append("|" + "|".join("---" for _ in t.header) + "|")
        for row in t.rows:
            out.append("| " + " | ".join(text_of(c, _digits(t), ci).replace("|", "\\|") for c in row) + " |")
        out.append("")
        out += [f"{note}\n" for note in t.notes]
        for caption, path in (figures or {}).get(t.key, []):
            out.append(f"![{caption}]({path})\n")
            out.append(f"*{caption}*\n")
    return "\n".join(out)


def _latex_escape(text):
    for a, b in (
        ("\\", "\\textbackslash{}"),
        ("&", "\\&"),
        ("%", "\\%"),
        ("_", "\\_"),
        ("#", "\\#"),
        ("$", "\\$"),
        ("{", "\\{"),
        ("}", "\\}"),
        ("~", "\\textasciitilde{}"),
        ("^", "\\^{}"),
    ):
        text = text.replace(a, b)
    return (
        text.replace("|u-v|", "$|u-v|$")
        .replace("u*v", "$u \\ast v$")
        .replace(" x100", " $\\times$100")
        .replace("<=", "$\\leq$")
        .replace(">=", "$\\geq$")
    )


def latex(tables, ci=True, figures=None):
    out = ["% Needs \\usepackage{booktabs}."]
    for t in tables:
        out += [
            "\\begin{table}[t]",
            "\\centering",
            "\\small",
            "\\begin{tabular}{l" + "r" * (len(t.header) - 1) + "}",
            "\\toprule",
            " & ".join(_latex_escape(h) for h in t.header) + " \\\\",
            "\\midrule",
        ]
        for row in t.rows:
            out.append(
                " & ".join(
                    text_of(c, _digits(t), ci, latex=True) if c.text is None else _latex_escape(c.text) for c in row
                )
                + " \\\\"
            )
        caption = _latex_escape(" ".join([t.caption] + t.notes)).replace("\u2020", "$^\\dagger$")
        out += [
            "\\bottomrule",
            "\\end{tabular}",
            f"\\caption{{{caption}}}",
            f"\\label{{tab:embeval-{t.key}}}",
            "\\end{table}",
            "",
        ]
    return "\n".join(out)


def csv_text(tables, ci=True, figures=None):
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["table", "encoder", "dim", "column", "metric", "value", "ci_low", "ci_high", "caption", "differs"])
    for t in tables:
        caption = " ".join([t.caption] + t.notes)
        for row in t.rows:
            for header, metric, c in zip(t.header[2:], t.metrics, row[2:]):
                writer.writerow(
                    [
                        t.key,
                        row[0].text,
                        row[1].text,
                        header,
                        metric,
                        "" if c.value is None else repr(round(c.value, 6)),
                        "" if c.low is None else repr(round(c.low, 6)),
                        "" if c.high is None else repr(round(c.high, 6)),
                        caption,
                        "yes" if c.mark else "",
                    ]
                )
    return buffer.getvalue()


RENDERERS = {"markdown": markdown, "latex": latex, "csv": csv_text}


def render(tables, fmt, ci=True, figures=None):
    return RENDERERS[fmt](tables, ci, figures)


# Plots.

MARKERS = ["o", "s", "^", "D", "v", "P", "X"]
SPECTRUM_FLOOR = 1e-4  # relative singular values below this are numerically zero for the reader


def plots(rows, folder, relative_to=None):
    """PNG figures of the geometry: alignment vs uniformity, and the singular-value spectra.
    Returns {table key: [(caption, path relative to `relative_to`)]}."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        raise EmbevalError("the plots need matplotlib: pip install 'embeval[report]'", file="--plots")
    found = [(enc, _geometry(enc)) for enc in rows]
    found = [(enc, g) for enc, g in found if g]
    if not found:
        return {}
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise EmbevalError(f"cannot create the folder ({err.strerror})", file=folder)
    made = []
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for (enc, g), marker in zip(found, MARKERS * len(found)):
        ax.scatter([g["uniformity"]], [g["alignment"]], s=50, marker=marker, label=f"{enc.label} ({enc.dim}-d)")
    ax.xaxis.set_major_locator(MaxNLocator(4))
    ax.margins(0.3)
    ax.legend(fontsize=8)
    ax.set_xlabel("uniformity (lower is better)")
    ax.set_ylabel("alignment (lower is better)")
    ax.set_title("Alignment and uniformity on STS-B")
    ax.grid(alpha=0.3)
    made.append(
        (
            "Alignment (STS-B pairs with gold >= 4) against uniformity (sample of STS-B sentences); "
            "lower is better on both axes.",
            _save(fig, folder / "alignment_uniformity.png", plt),
        )
    )
    fig, ax = plt.subplots(figsize=(5, 4))
    for enc, g in found:
        values = [v for v in g["singular_values"] if v > 0]
        if values:
            ax.plot(range(1, len(values) + 1), [v / values[0] for v in values], label=f"{enc.label} ({enc.dim}-d)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    bottom, _ = ax.get_ylim()
    ax.set_ylim(bottom=max(bottom, SPECTRUM_FLOOR))
    ax.set_xlabel("index")
    ax.set_ylabel("singular value / largest")
    ax.set_title("Singular-value spectrum (centred STS-B sentences)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    made.append(
        (
            "Singular values of the centred table of STS-B's distinct sentences, divided by the largest; "
            f"a flatter spectrum uses more directions (less anisotropy); the axis stops at {SPECTRUM_FLOOR:g} "
            "(a line that drops out of the figure: a direction the vectors do not use).",
            _save(fig, folder / "spectrum.png", plt),
        )
    )
    base = Path(relative_to) if relative_to else Path.cwd()
    return {"geometry": [(caption, Path(os.path.relpath(path, base)).as_posix()) for caption, path in made]}


def _save(fig, path, plt):
    fig.tight_layout()
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png", dpi=120, metadata={"Software": None})
    finally:
        plt.close(fig)
    atomic.write_bytes(path, buffer.getvalue())
    return path
