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
import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embeval.errors import EmbevalError, install_hint
from embeval.formats import atomic
from embeval.formats.results import FORMAT, FORMAT_VERSION, MISSING, UNDEFINED, UNDEFINED_NOTE, check_structure, find
from embeval.formats.results import is_number as _is_number
from embeval.formats.targets import PNG_SOFTWARE
from embeval.reports.cells import TABLE_FORMATS, Cell, Table
from embeval.settings import MLP_NHID, RunConfig
from embeval.tasks.figures import CLASSIFIER_SETS, lookup
from embeval.tasks.groups import CLASSIFIER_WORDS, GROUPS, group
from embeval.tasks.registry import Registry, builtin, recorded_spec
from embeval.untrusted import MAX_RECORD_BYTES, read_json

logger = logging.getLogger("embeval")

FORMATS = TABLE_FORMATS


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
    record = read_json(
        path,
        MAX_RECORD_BYTES,
        missing="results file not found",
        invalid=lambda why: EmbevalError("not an embeval results file (not JSON)", file=path),
        finite=True,
    )
    if not isinstance(record, dict) or record.get("format") != FORMAT or not isinstance(record.get("tasks"), dict):
        raise EmbevalError("not an embeval results file", file=path)
    if record.get("format_version") != FORMAT_VERSION:
        raise EmbevalError(
            f"results format version {record.get('format_version')!r}; this embeval reads version "
            f"{FORMAT_VERSION} (score the vectors again with this version)",
            file=path,
        )
    check_structure(record, path)
    recorded_config(record, path)
    return record


def recorded_config(record: Mapping[str, Any], path: str | Path | None = None) -> RunConfig:
    """The configuration a results record was scored with (its `config` object: absent keys at their
    defaults, keys of another embeval version ignored); a value no configuration can have is a
    one-line error naming the file."""
    return RunConfig.from_record(record.get("config") or {}, source=path, partial=True)


def interval_only(record):
    """(task, figure path) of each figure a record has an interval of but not the figure itself (results
    of an earlier embeval kept COCO's mean R@K only in its interval): the report never shows a figure
    from its interval."""
    found = []
    runs = [record["tasks"]] + ([record["baseline"]["tasks"]] if "baseline" in record else [])
    for tasks in runs:
        for name, entry in tasks.items():
            for path, interval in ((entry.get("ci") or {}).get("figures") or {}).items():
                if find(entry["results"], path) is MISSING and _is_number((interval or {}).get("value")):
                    found.append((name, path))
    return list(dict.fromkeys(found))


def file_label(record, path):
    """The vectors file's name without its extension (else the results file's)."""
    name = Path(str(record.get("vectors", {}).get("file") or path)).name
    for suffix in (".h5", ".hdf5", ".results.json", ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def default_label(record, path):
    """The name of a results file's vectors in tables: the vectors file's root attribute `model` when it
    has one, else the vectors file's name; with the truncation a sweep's --dims made (NAME@DIMS)."""
    vectors = record.get("vectors") or {}
    model = vectors.get("model")
    label = model.strip() if isinstance(model, str) and model.strip() else file_label(record, path)
    truncated = vectors.get("truncated_to")
    return f"{label}@{truncated}" if truncated else label


def default_labels(records, paths):
    """default_label of each results file; a label several files share is followed by each results
    file's name (checkpoints of one model)."""
    labels = [default_label(r, p) for r, p in zip(records, paths)]
    return [
        f"{label} ({_stem(path)})" if labels.count(label) > 1 and _stem(path) != label else label
        for label, path in zip(labels, paths)
    ]


def _stem(path):
    name = Path(str(path)).name
    for suffix in (".results.json", ".json"):
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
    for label, record in zip(labels or default_labels(records, paths), records):
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
    """The figure at `path` of a task entry (scaled to the table's units) with its interval: not scored
    (no entry, or no such figure in its results: a dash), undefined (recorded as null: n/a), or a number.
    The figure is always the results' own, never its interval's value."""
    if entry is None:
        return Cell()
    ci = ((entry.get("ci") or {}).get("figures") or {}).get(path)
    ci = ci if isinstance(ci, dict) else {}
    value = find(entry["results"], path)
    if value is None or isinstance(value, float) and math.isnan(value):
        return Cell(undefined=True)
    if not _is_number(value):
        return Cell()
    low, high = (ci.get(k) if _is_number(ci.get(k)) else None for k in ("low", "high"))
    return Cell(scale * value, None if low is None else scale * low, None if high is None else scale * high)


def _classifier_variants(rows, columns):
    """The classifiers whose results sit under their own name for these columns' tasks ([] when only
    the configured one ran)."""
    found = []
    for enc in rows:
        for spec, column in columns:
            if column.per_classifier:
                results = (enc.tasks.get(spec.name) or {}).get("results") or {}
                found += [c for c in CLASSIFIER_SETS if isinstance(results.get(c), dict) and c not in found]
    return [c for c in CLASSIFIER_SETS if c in found]


NOT_SETTINGS = ("baseline_bow_dim",)  # what one run adds, not how the figures are computed
# Ends the part of the settings that only tables of trained figures (a classifier, a regressor) state.
TRAINED_ONLY_END = "\x00"


def _settings_for(settings, columns):
    """The settings sentence as a table states it: the training configuration only when one of its
    columns is a trained figure (not for cosine STS, retrieval or clustering)."""
    trains = any(
        c.per_classifier
        or c.protocol in ("classifier", "regressor")
        or (c.protocol is None and spec.kind_module.stacks)
        for spec, c in columns
    )
    if TRAINED_ONLY_END not in settings:
        return settings
    trained, rest = settings.split(TRAINED_ONLY_END, 1)
    return trained + rest if trains else rest[:1].upper() + rest[1:]


def _settings(records, ci=True):
    configs = [{k: v for k, v in r.get("config", {}).items() if k not in NOT_SETTINGS} for r in records]
    differ = sorted({k for c in configs for k in c if any(c.get(k) != other.get(k) for other in configs)})
    if differ:
        return (
            f"The results files were scored with different settings ({', '.join(differ)}; see each file's "
            "config): their rows are not directly comparable."
        )
    config = recorded_config(records[0])
    classifier = config.classifier
    text = (
        f"Configuration {config.preset} (kfold {config.kfold}, {config.solver} solver, "
        f"optim {classifier.optim}, batch {classifier.batch_size}, tenacity "
        f"{classifier.tenacity}, epoch_size {classifier.epoch_size}), "
    ) + TRAINED_ONLY_END
    text += f"seed {config.seed}; normalization {config.normalize}"
    if config.bootstrap and ci:
        text += (
            f"; [low, high]: 95% percentile bootstrap interval over the test items "
            f"({config.bootstrap} resamples, seed {config.seed}; test-set sampling only, "
            "not classifier training randomness)"
        )
    return text + "."


def _mlp_nhid(rows):
    nhids = sorted({recorded_config(enc.record).classifier.nhid or MLP_NHID for enc in rows})
    return "/".join(map(str, nhids))


def _configured_classifier(rows):
    """The classifier of the top-level figures: logistic regression unless the configuration has hidden units."""
    nhids = {recorded_config(enc.record).classifier.nhid for enc in rows}
    return "logreg" if nhids == {0} else ("mlp" if 0 not in nhids else "mixed")


def _average(cells):
    """The mean of a row's figures: not scored when one is not, undefined when one is."""
    values = [c.value for c in cells]
    if not values or any(v is None and not c.undefined for v, c in zip(values, cells)):
        return Cell()
    if any(c.undefined for c in cells):
        return Cell(undefined=True)
    return Cell(sum(values) / len(values))


def note_undefined(tables):
    """Add UNDEFINED_NOTE to the notes of each table with an undefined figure (once per table)."""
    for t in tables:
        if any(c.undefined for row in t.rows for c in row) and UNDEFINED_NOTE not in t.notes:
            t.notes.append(UNDEFINED_NOTE)
    return tables


def _notes(columns):
    """What the caption says of the columns: tasks with the same note named together, in order."""
    by_note = {}
    for spec, column in columns:
        if column.note:
            by_note.setdefault(column.note, []).append(column.header or spec.label)
    return "; ".join(f"{', '.join(dict.fromkeys(labels))}: {note}" for note, labels in by_note.items())


def group_tables(rows, specs, settings):
    """The report's tables: for every group of columns (embeval.tasks.groups), one table per
    classifier that ran (per-classifier columns), and one of normalized figures when scored."""
    columns, declared = {}, {}
    for spec in specs:
        declared.update(spec.kind_module.groups)
        for position, column in enumerate(spec.kind_module.columns(spec)):
            columns.setdefault(column.group, []).append(
                (column.order, len(columns.get(column.group, [])), position, spec, column)
            )
    order = [g for g in GROUPS if g in columns] + [g for g in columns if g not in GROUPS]
    tables = []
    for key in order:
        found = [(spec, column) for *_, spec, column in sorted(columns[key], key=lambda item: item[:3])]
        present = [(spec, c) for spec, c in found if any(spec.name in enc.tasks for enc in rows)]
        if present:
            tables += _tables_of(group(key, declared), present, rows, settings, len(found))
    return tables


def _tables_of(grp, columns, rows, settings, declared):
    variants = _classifier_variants(rows, columns) or [None]
    normalized = grp.normalized and any(
        isinstance((enc.tasks.get(spec.name) or {}).get("results", {}).get("normalized"), dict)
        for enc in rows
        for spec, _ in columns
    )
    tables = []
    for variant in variants:
        for vectors in ("raw", "normalized") if normalized else ("raw",):
            prefix = "normalized." if vectors == "normalized" else ""
            who = grp.who.get(variant, CLASSIFIER_WORDS[variant]).format(nhid=_mlp_nhid(rows))
            methods = sorted(
                {
                    recorded.get("method", "")
                    for enc in rows
                    for s, _ in columns
                    if isinstance(recorded := (enc.tasks.get(s.name) or {}).get("results", {}).get("normalized"), dict)
                    and isinstance(recorded.get("method", ""), str)
                }
                - {""}
            )
            what = (
                "raw vectors"
                if vectors == "raw"
                else (f"normalized vectors ({', '.join(methods)}; statistics from training sentences only)")
            )
            caption = grp.intro.format(who=who, vectors=what)
            notes = _notes(columns)
            if notes:
                caption += f" ({notes})"
            if grp.average and len(columns) > 1:
                caption += f". Avg.: the mean of the {len(columns)} columns"
                if grp.published_average_of and len(columns) != grp.published_average_of:
                    caption += f" (not the {grp.published_average_of} of SimCSE's table)"
            caption += f". {_settings_for(settings, columns)}"
            key = grp.key + (f"-{variant}" if variant else "") + ("-normalized" if prefix else "")
            title = grp.title + (f" ({CLASSIFIER_WORDS[variant]})" if variant or grp.who.get(None) else "")
            if grp.normalized:
                title = f"{grp.title} ({vectors})"
            average = grp.average and len(columns) > 1  # the mean of one column is that column
            header = (
                ["encoder", "dim"] + [c.header or spec.label for spec, c in columns] + (["Avg."] if average else [])
            )
            classifier = variant or _configured_classifier(rows)
            table = Table(
                key,
                title,
                caption,
                header,
                metrics=[c.metric for _, c in columns] + (["mean"] if average else []),
                columns=[c.spec(spec.name, classifier=classifier, vectors=vectors) for spec, c in columns]
                + ([None] if average else []),
            )
            for enc in rows:
                cells = []
                for spec, c in columns:
                    path = (f"{variant}." if variant and c.per_classifier else prefix) + c.path
                    entry = enc.tasks.get(spec.name)
                    if entry is not None and variant and c.per_classifier and lookup(entry["results"], path) is None:
                        path = c.path  # a task that ran with one classifier only (WordContent)
                    cells.append(cell(entry, path, c.scale))
                cells += [_average(cells)] if average else []
                table.rows.append([Cell(text=enc.label), Cell(text=str(enc.dim))] + cells)
            tables.append(table)
    return tables


def _geometry(enc, specs):
    """(host task's label, geometry record) of an encoder's results, or (None, None)."""
    for spec in specs:
        entry = enc.tasks.get(spec.name)
        if spec.geometry and entry is not None and isinstance(entry.get("geometry"), dict):
            return spec.label, entry["geometry"]
    return None, None


def geometry_table(rows, specs):
    found = [(enc, *_geometry(enc, specs)) for enc in rows]
    if not any(g for _, _, g in found):
        return []
    host, sample = next((h, g) for _, h, g in found if g)
    caption = (
        f"Geometry on {host} (Wang & Isola, 2020; SimCSE): alignment = mean squared distance of the "
        f"L2-normalized vectors of the {sample['positive_pairs']} pairs with gold score >= "
        f"{sample['positive_threshold']:g} (all splits); uniformity = log mean exp(-2 x squared distance) "
        f"over the pairs of a seeded sample of {sample['uniformity_sample']} distinct sentences (both: lower "
        "is better); effective rank = exp(entropy of the normalized singular values) of the centred table "
        f"of {host}'s {sample['sentences']} distinct sentences."
    )
    table = Table(
        "geometry",
        f"Geometry ({host})",
        caption,
        ["encoder", "dim", "alignment", "uniformity", "effective rank"],
        metrics=["alignment", "uniformity", "effective rank"],
    )
    for enc, _, geo in found:
        values = [Cell(geo[k]) if geo else Cell() for k in ("alignment", "uniformity", "effective_rank")]
        table.rows.append([Cell(text=enc.label), Cell(text=str(enc.dim))] + values)
    return [table]


def task_specs(records, paths, registry=None):
    """The TaskSpec of every task of the results files, in registry order then in the files' order,
    and one line for each task this version cannot show (the task and why). registry: the tasks
    known besides the built-ins (for results that do not record a task's declaration)."""
    specs, unknown = {}, []
    for record, path in zip(records, paths):
        runs = [record["tasks"]] + ([record["baseline"]["tasks"]] if "baseline" in record else [])
        for tasks in runs:
            for name, entry in tasks.items():
                if name in specs:
                    continue
                try:
                    specs[name] = recorded_spec(name, entry, registry)
                except EmbevalError as err:
                    unknown.append(f"{path}: {name}: not shown: {err.message}")
    ordered = [specs[n] for n in builtin() if n in specs] + [s for n, s in specs.items() if n not in builtin()]
    return ordered, list(dict.fromkeys(unknown))


def build(
    paths: Sequence[str | Path],
    labels: Sequence[str] | None = None,
    baselines: bool = True,
    ci: bool = True,
    published: Sequence[Any] | None = None,
    warn: Callable[[str], None] | None = None,
    registry: Registry | None = None,
) -> tuple[list[Table], list[Encoder]]:
    """Every table of the report, in order, and the encoders (rows); ci: the captions explain the intervals;
    published: names of published baselines (embeval.reports.baselines) to add as rows; warn(line): told
    each task of the files this version cannot show (default: the embeval logger)."""
    records = [load(p) for p in paths]
    specs, unknown = task_specs(records, paths, registry)
    for record, path in zip(records, paths):
        for task, figure in interval_only(record):
            unknown.append(
                f"{path}: {task}: {figure} is recorded only in its interval, not in the results (written by an "
                "earlier embeval?): the report does not show it; score the task again to show it"
            )
    for line in unknown:
        (warn or logger.warning)(line)
    rows = encoders(records, paths, labels, baselines)
    settings = _settings(records, ci)
    from embeval.reports.benchmarks import tables as benchmark_tables

    tables = group_tables(rows, specs, settings) + benchmark_tables(rows, registry) + geometry_table(rows, specs)
    if not tables:
        raise EmbevalError("no scored task to report" + (f" ({unknown[0]})" if unknown else ""), file=str(paths[0]))
    if published:
        from embeval.reports import baselines as published_baselines

        published_baselines.add_rows(tables, published)
    return note_undefined(tables), rows


# Rendering.


def _fmt(x, digits):
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _digits(table):
    return 3 if table.key == "geometry" else 2


def text_of(c, digits, ci, latex=False):
    if c.text is not None:
        return c.text
    if c.undefined:
        return UNDEFINED
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


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet reads as the start of a formula


def csv_cell(text):
    """A text cell of the CSV report that no spreadsheet runs as a formula: a text starting with one of
    FORMULA_STARTS gets a leading apostrophe (OWASP's advice on CSV injection). A carriage return inside
    it becomes a line feed (which the writer quotes; a bare one would end the row). Figures are numbers,
    left as they are."""
    text = "" if text is None else str(text)
    text = "'" + text if text.startswith(FORMULA_STARTS) else text
    return text.replace("\r\n", "\n").replace("\r", "\n")


def csv_text(tables, ci=True, figures=None):
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["table", "encoder", "dim", "column", "metric", "value", "ci_low", "ci_high", "caption", "differs"])
    for t in tables:
        caption = " ".join([t.caption] + t.notes)  # on the table's first row only, not repeated on each
        for row in t.rows:
            for header, metric, c in zip(t.header[2:], t.metrics, row[2:]):
                writer.writerow(
                    [
                        csv_cell(t.key),
                        csv_cell(row[0].text),
                        csv_cell(row[1].text),
                        csv_cell(header),
                        csv_cell(metric),
                        UNDEFINED if c.undefined else "" if c.value is None else repr(round(c.value, 6)),
                        "" if c.low is None else repr(round(c.low, 6)),
                        "" if c.high is None else repr(round(c.high, 6)),
                        csv_cell(caption),
                        "yes" if c.mark else "",
                    ]
                )
                caption = ""
    return buffer.getvalue()


RENDERERS = {"markdown": markdown, "latex": latex, "csv": csv_text}


def render(tables: Sequence[Table], fmt: str, ci: bool = True, figures: Mapping[str, Any] | None = None) -> str:
    """The tables as text in `fmt` (markdown, latex, csv); figures: the --plots figures a markdown report links."""
    return RENDERERS[fmt](tables, ci, figures)


# Plots.

MARKERS = ["o", "s", "^", "D", "v", "P", "X"]
PLOT_FILES = ("alignment_uniformity.png", "spectrum.png")  # what --plots DIR holds
SPECTRUM_FLOOR = 1e-4  # relative singular values below this are numerically zero for the reader


def plots(rows, folder, relative_to=None, specs=()):
    """PNG figures of the geometry: alignment vs uniformity, and the singular-value spectra.
    Returns {table key: [(caption, path relative to `relative_to`)]}."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        raise EmbevalError(f"the plots need matplotlib: {install_hint('report')}", file="--plots")
    found = [(enc, *_geometry(enc, specs)) for enc in rows]
    found = [(enc, g) for enc, _, g in found if g]
    host = next(h for enc in rows for h, g in [_geometry(enc, specs)] if g) if found else None
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
    (x_low, x_high), (y_low, y_high), spread = geometry_scale([g for _, g in found])
    ax.set_xlim(x_low, x_high)
    ax.set_ylim(y_low, y_high)
    ax.legend(fontsize=8)
    ax.set_xlabel("uniformity (lower is better)")
    ax.set_ylabel("alignment (lower is better)")
    ax.set_title(f"Alignment and uniformity on {host}")
    ax.grid(alpha=0.3)
    made.append(
        (
            f"Alignment ({host} pairs with gold >= 4) against uniformity (sample of {host} sentences); "
            f"lower is better on both axes. {spread}",
            _save(fig, folder / PLOT_FILES[0], plt),
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
    ax.set_title(f"Singular-value spectrum (centred {host} sentences)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    made.append(
        (
            f"Singular values of the centred table of {host}'s distinct sentences, divided by the largest; "
            f"a flatter spectrum uses more directions (less anisotropy); the axis stops at {SPECTRUM_FLOOR:g} "
            "(a line that drops out of the figure: a direction the vectors do not use).",
            _save(fig, folder / PLOT_FILES[1], plt),
        )
    )
    base = Path(relative_to) if relative_to else Path.cwd()
    return {"geometry": [(caption, Path(os.path.relpath(path, base)).as_posix()) for caption, path in made]}


def geometry_scale(points):
    """((x low, x high), (y low, y high), a sentence on the spread) of the alignment/uniformity figure: the
    axes reach their natural origin, alignment's 0 (its best; it is a mean squared distance) and
    uniformity's 0 (its worst: all vectors identical), so that the distance between encoders is seen at
    the scale of the values, not magnified by a window fitted around them; the sentence gives the spread."""
    alignment = [float(g["alignment"]) for g in points if g.get("alignment") is not None]
    uniformity = [float(g["uniformity"]) for g in points if g.get("uniformity") is not None]
    alignment = [v for v in alignment if math.isfinite(v)] or [0.0]
    uniformity = [v for v in uniformity if math.isfinite(v)] or [0.0]
    top = max(max(alignment), 0.0) * 1.15 or 1.0
    left = min(min(uniformity), 0.0) * 1.15 or -1.0
    text = (
        "Both axes reach 0 (alignment is at least 0, uniformity at most 0), so the gaps between encoders "
        f"are drawn at the scale of the values: alignment {_span(alignment)}, uniformity {_span(uniformity)}."
    )
    return (left, max(max(uniformity), 0.0) - 0.05 * left), (0.0, top), text


def _span(values):
    low, high = min(values), max(values)
    if len(values) < 2:
        return f"{low:.4g}"
    return f"{low:.4g} to {high:.4g} (a spread of {high - low:.2g})"


def _save(fig, path, plt):
    fig.tight_layout()
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png", dpi=120, metadata={"Software": PNG_SOFTWARE})
    finally:
        plt.close(fig)
    atomic.write_bytes(path, buffer.getvalue())
    return path
