"""Published baselines beside your encoders: `embeval report RESULTS... --baselines NAME,...`.

The figures live in baselines.json (beside this module), each with its source, its table, and how it
was computed. A baseline row takes, for each column of a report table, the published figure computed
the way that column is (same task, metric, protocol, classifier, STS aggregation, split); when the
source only has a figure computed otherwise, it is shown with a dagger and the table's notes say what
differs. Nothing is averaged across protocols silently. A row of task-specific supervised systems (protocol
"supervised": trained on the task itself, no transfer) is labelled so, and its notes name each column's system.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from embeval.errors import EmbevalError
from embeval.reports.cells import Cell
from embeval.tasks.registry import builtin

DATA = Path(__file__).with_name("baselines.json")
# How each field's values read in a note.
WORDS = {
    "pooled": "all pairs pooled",
    "wmean": "weighted mean over subsets",
    "mean": "mean over subsets",
    "logreg": "logistic regression",
    "mlp": "MLP",
    "cosine": "cosine, no training",
    "regressor": "SentEval's supervised regressor",
    "classifier": "a trained classifier",
    "supervised": "a task-specific supervised system (no transfer)",
    "spearman": "Spearman",
    "pearson": "Pearson",
    "accuracy": "accuracy",
    "f1": "F1",
    "raw": "raw vectors",
    "normalized": "normalized vectors",
    "test": "test split",
}
FIELDS = ("metric", "protocol", "classifier", "aggregation", "split", "vectors")


@dataclass(frozen=True)
class Figure:
    baseline: str
    task: str
    value: float  # in the report's units (correlations x100, accuracies %)
    metric: str
    protocol: str
    source: str
    table: str
    classifier: str | None = None
    aggregation: str | None = None  # STS12-16 only
    split: str | None = None  # STS-B and SICK-R only
    vectors: str = "raw"  # published figures are on the encoder's own vectors
    note: str | None = None
    system: str | None = None  # protocol "supervised": the system the source attributes the figure to


def _declares(task, field):
    """Whether a report column of the built-in task names `field` (an STS aggregation, a split): only
    then does a published figure's value of that field say how it was computed."""
    spec = builtin().get(task)
    return spec is not None and any(getattr(c, field) for c in spec.kind_module.columns(spec))


def read(path=DATA):
    """(baselines {name: {label, dim}}, sources {key: citation}, [Figure])."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    found = []
    for group in data["groups"]:
        for name, values in group["rows"].items():
            for task, value in values.items():
                found.append(
                    Figure(
                        name,
                        task,
                        value * group["scale"],
                        group["metric"],
                        group["protocol"],
                        group["source"],
                        group["table"],
                        classifier=group.get("classifier"),
                        aggregation=group.get("aggregation") if _declares(task, "aggregation") else None,
                        split=group.get("split") if _declares(task, "split") else None,
                        note=group.get("note"),
                        system=group.get("system"),
                    )
                )
    return data["baselines"], data["sources"], found


def resolve(names):
    """The baselines named (a baseline's name, or a source's: every baseline it has figures of)."""
    baselines, sources, figures = read()
    chosen = []
    for name in [n.strip() for n in names.split(",") if n.strip()]:
        if name in baselines:
            picked = [name]
        elif name in sources:
            picked = [b for b in baselines if any(f.baseline == b and f.source == name for f in figures)]
        else:
            raise EmbevalError(
                f"unknown baseline '{name}'; known: {', '.join(baselines)} "
                f"(or every baseline of a source: {', '.join(sources)})",
                file="--baselines",
            )
        chosen += [p for p in picked if p not in chosen]
    if not chosen:
        raise EmbevalError("no baseline named", file="--baselines")
    return chosen


def differences(column, figure):
    """What differs between how a column's figures and a published figure were computed (words). Under the
    column's protocol, a field the source does not state (a classifier the paper does not name) differs too."""
    out = []
    for key in FIELDS:
        want, have = column.get(key), getattr(figure, key)
        if want is None or want == have:
            continue
        if have is not None:
            out.append(f"{WORDS.get(have, have)}, not {WORDS.get(want, want)}")
        elif figure.protocol == column.get("protocol"):
            out.append(f"the source does not state the {key}; the column's is {WORDS.get(want, want)}")
    return out


CORRELATIONS = ("pearson", "spearman")


def comparable(column, figure):
    """A figure may stand in a column (marked when computed differently) only for the same task and the same
    kind of measure: accuracy for accuracy, F1 for F1, a correlation for a correlation."""
    want, have = column.get("metric"), figure.metric
    return figure.task == column["task"] and (want == have or (want in CORRELATIONS and have in CORRELATIONS))


def pick(column, figures, preferred=()):
    """The published figure for a column: one computed the same way, else the closest, with what differs.
    Ties go to the source table listed first in `preferred` (the one that fits the row's other columns best)."""
    candidates = [f for f in figures if comparable(column, f)]
    if not candidates:
        return None, []
    rank = {key: i for i, key in enumerate(preferred)}
    sources = [source for source, _ in preferred]
    best = min(
        candidates,
        key=lambda f: (
            len(differences(column, f)),
            f.metric != column.get("metric"),
            rank.get((f.source, f.table), len(rank)),
            sources.index(f.source) if f.source in sources else len(sources),
        ),
    )
    return best, differences(column, best)


def _preferred(columns, figures):
    """Source tables ordered by how many of the table's columns they fill best (fewest differences), then
    by how many their source fills, then in the data file's order."""
    fits = {}
    for column in columns:
        candidates = [f for f in figures if column is not None and comparable(column, f)]
        if not candidates:
            continue
        fewest = min(len(differences(column, f)) for f in candidates)
        for key in dict.fromkeys((f.source, f.table) for f in candidates if len(differences(column, f)) == fewest):
            fits[key] = fits.get(key, 0) + 1
    by_source = {}
    for (source, _), count in fits.items():
        by_source[source] = by_source.get(source, 0) + count
    order = list(dict.fromkeys((f.source, f.table) for f in figures))
    return sorted(fits, key=lambda key: (-fits[key], -by_source[key[0]], order.index(key)))


def add_rows(tables, names):
    """Append one row per named baseline to every table with published figures for it, with notes."""
    baselines, sources, figures = read()
    for table in tables:
        if not any(table.columns):
            continue
        used = {}
        for name in names:
            own = [f for f in figures if f.baseline == name]
            preferred = _preferred(table.columns, own)
            cells, marks, systems = [], [], {}
            for header, column in zip(table.header[2:], table.columns):
                if column is None:
                    cells.append(None)
                    continue
                figure, differ = pick(column, own, preferred)
                if figure is None:
                    cells.append(Cell())
                    continue
                cells.append(Cell(figure.value, mark=bool(differ)))
                used.setdefault(name, set()).add((figure.source, figure.table))
                if differ:
                    marks.append(f"{header}: {'; '.join(differ)}")
                if figure.system:
                    systems.setdefault(figure.system, []).append(header)
            if name not in used:
                continue
            label = baselines[name]["label"] + (" (supervised, no transfer)" if systems else "") + " [published]"
            cells = [
                _average(cells[:i]) if c is None and table.header[2 + i] == "Avg." else (c or Cell())
                for i, c in enumerate(cells)
            ]
            dim = baselines[name]["dim"]
            table.rows.append([Cell(text=label), Cell(text=None if dim is None else str(dim))] + cells)
            if marks:
                table.notes.append(f"\u2020 {label}: computed differently from the column: {'; '.join(marks)}.")
            if systems:
                named = "; ".join(f"{', '.join(headers)}: {system}" for system, headers in systems.items())
                table.notes.append(
                    f"{label}: not sentence embeddings but task-specific systems trained on each task itself (no "
                    f"transfer), as the source attributes them: {named}."
                )
        if used:
            cited = "; ".join(f"{baselines[n]['label']}: {_cite(sorted(used[n]), sources)}" for n in used)
            table.notes.append(
                f"Published rows (figures as printed in their source, not computed by embeval): {cited}."
            )


def _average(cells):
    values = [c.value for c in cells if c is not None]
    if not values or any(v is None for v in values):
        return Cell()
    return Cell(sum(values) / len(values), mark=any(c.mark for c in cells if c is not None))


def _cite(pairs, sources):
    by_source = {}
    for source, table in pairs:
        by_source.setdefault(source, []).append(table)
    return "; ".join(f"{sources[s].split('.')[0]}, {', '.join(t)}" for s, t in by_source.items())
