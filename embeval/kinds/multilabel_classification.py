"""Multilabel classification, scored as MTEB scores it (embeval.evaluate.mteb_multilabel, mteb 2.26.24's
AbsTaskMultilabelClassification): n_experiments times, a training set drawn from train until each
label has samples_per_label rows (mteb's draw), scikit-learn's k-nearest-neighbours classifier fitted
on it and tested on the whole test split.

Files: `train` and `test` with text and labels columns. A labels value is a list: in TSV and CSV a
JSON array in the cell (`["sport", "politics"]`, `[3, 7]`, `[]`), in JSONL a JSON array. Labels are
strings or integers, all of one type in a task, each listed once per row.
Keys, with MTEB's defaults (its task attributes of the same names): samples_per_label (8),
n_experiments (10), n_neighbors (5, its classifier's), max_eval_samples (3000: a larger test split
is cut to that many rows by mteb's iterative stratification, and only those are exported; 0 scores
the whole split, as mteb's None), seed (42). Only the train sentences some experiment draws
are exported.
Figures (fractions, means over the experiments): accuracy (subset accuracy, the headline: MTEB's
main score for most multilabel tasks), lrap, f1 (macro), hamming; `scores_per_experiment` holds
each experiment's. The bootstrap resamples the test sentences, each experiment's predictions fixed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embeval.kinds.mteb_experiments import Draws, fitting, inputs, read_integers
from embeval.kinds.mteb_shared import figures_of, fractions_line, headline_column, lazy_statistic
from embeval.kinds.mteb_shared import score_fields as mteb_fields
from embeval.tasks.declaration import Declaration
from embeval.tasks.figures import Column, Figure
from embeval.tasks.groups import Group
from embeval.tasks.kind import Kind, Line
from embeval.tasks.spec import TaskSpec

SET_KIND = "mteb-multilabel"  # the prediction set's kind: test rows' label indicators, each experiment's
FIGURES = figures_of(
    [("accuracy", "subset accuracy"), ("lrap", "LRAP"), ("f1", "macro F1"), ("hamming", "Hamming score")]
)
MTEB_KEYS = ("accuracy", "lrap", "f1", "hamming", "scores_per_experiment")
GROUP = "mteb-multilabel"
DRAWS = Draws(lambda data: data.labels["train"])  # the experiments' training sets, drawn from the label lists
# mteb's task attributes (n_neighbors: its evaluator_model's) and the keys of a task file that take them.
MTEB_ATTRIBUTES = {
    "samples_per_label": "samples_per_label",
    "n_experiments": "n_experiments",
    "max_eval_samples": "max_eval_samples",
    "n_neighbors": "n_neighbors",
    "seed": "seed",
}


@dataclass(frozen=True)
class MultilabelParams:
    """MTEB's protocol, with MTEB's defaults (AbsTaskMultilabelClassification)."""

    samples_per_label: int = 8
    n_experiments: int = 10
    n_neighbors: int = 5
    max_eval_samples: int = 3000  # 0: no limit (mteb's None)
    seed: int = 42

    def training_rows(self, labels: Any) -> list[Any]:
        from embeval.evaluate import mteb_multilabel

        return mteb_multilabel.training_rows(labels, self.n_experiments, self.samples_per_label, self.seed)


@dataclass(frozen=True)
class MultilabelData:
    """Train and test: texts and label lists, in file order."""

    name: str
    splits: dict[str, Any]  # split -> embeval.tasks.samples.Split (a: texts, y: row numbers)
    labels: dict[str, list[tuple[Any, ...]]]
    files: tuple[Path, ...]
    cut: str = ""  # how the test split was cut to max_eval_samples rows, if it was

    def sentences(self) -> list[str]:
        return [s for split in self.splits.values() for s in split.a]


class MultilabelClassification(Kind):
    name = "multilabel-classification"
    summary = "sentences with lists of labels; k-nearest neighbours on a few per label, MTEB's experiments"
    statistics = {
        SET_KIND: {f.path: lazy_statistic("embeval.evaluate.mteb_multilabel", f.path, False) for f in FIGURES}
    }
    groups = {
        GROUP: Group(
            GROUP,
            "Multilabel classification (MTEB), x100",
            "Multilabel classification as MTEB scores it (mteb 2.26.24's AbsTaskMultilabelClassification, "
            "figures equal to its evaluator's under its seeds): scikit-learn's k-nearest-neighbours classifier "
            "trained on a few sentences per label drawn from the train split, tested on the test split, mean over "
            "the experiments, x100",
        )
    }

    def file_keys(self, protocol: str | None) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
        return ("train", "test"), (), False

    def column_keys(self, protocol: str | None) -> tuple[str, ...]:
        return ("text", "labels")

    def read_params(self, decl: Declaration, protocol: str | None) -> MultilabelParams:
        bounds = (
            ("samples_per_label", 1),
            ("n_experiments", 1),
            ("n_neighbors", 1),
            ("max_eval_samples", 0),
            ("seed", 0),
        )
        return MultilabelParams(**read_integers(decl, MultilabelParams, bounds))

    def load(self, spec: TaskSpec, paths: Mapping[str, Path]) -> MultilabelData:
        return read_multilabel(spec, paths)

    def sentences(self, spec: TaskSpec, data: Any) -> dict[str, list[str]]:
        return DRAWS.sentences(spec, data)

    def rows(self, spec: TaskSpec, data: Any, row_of: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
        return DRAWS.rows(spec, data, row_of)

    def sizes(self, spec: TaskSpec, data: Any) -> str:
        sizes = ", ".join(f"{name} {len(split)}" for name, split in data.splits.items())
        return f"{sizes} ({DRAWS.note(spec, data)}{'; ' + data.cut if data.cut else ''})"

    def figures(self, spec: TaskSpec) -> tuple[Figure, ...]:
        return FIGURES

    def normalizes(self, spec: TaskSpec) -> bool:
        return False

    def evaluate(self, ctx: Any) -> dict[str, Any]:
        from embeval.evaluate import mteb_multilabel
        from embeval.formats.predictions import PredictionSet

        params = ctx.task.params
        train_vectors, test_vectors = inputs(ctx)
        with fitting():
            figures, arrays = mteb_multilabel.classify(
                train_vectors,
                ctx.data.labels["train"],
                test_vectors,
                ctx.data.labels["test"],
                n_experiments=params.n_experiments,
                samples_per_label=params.samples_per_label,
                seed=params.seed,
                n_neighbors=params.n_neighbors,
            )
        ctx.keep(
            "",
            PredictionSet(
                SET_KIND,
                arrays,
                tuple(f.path for f in FIGURES),
                "test split, file order; label columns sorted; one slice per experiment",
            ),
        )
        return dict(figures, label_columns=int(arrays["gold"].shape[1]), test_items=len(ctx.data.splits["test"]))

    def lines(self, spec: TaskSpec, results: Mapping[str, Any], ci: Mapping[str, Any] | None) -> list[Line]:
        head = spec.headline.path
        return [
            fractions_line(
                f"{spec.headline.label} x100 (MTEB, {spec.params.n_experiments} experiments)", results, (head,), ci
            ),
            fractions_line("accuracy | LRAP | macro F1 | Hamming", results, ("accuracy", "lrap", "f1", "hamming")),
        ]

    def columns(self, spec: TaskSpec) -> tuple[Column, ...]:
        p = spec.params
        note = f"{spec.headline.label}, {p.n_experiments} experiments of {p.samples_per_label} sentences per label"
        return headline_column(spec, GROUP, note)

    def mteb_scores(self, spec: TaskSpec, results: Mapping[str, Any]) -> dict[str, Any] | None:
        return mteb_fields(spec, results, MTEB_KEYS)


def _label_list(value: Any, column: str, path: Path, task: str, line: int) -> tuple[Any, ...]:
    """A row's labels: a JSON array (JSONL) or a cell holding one (TSV, CSV) of strings or integers."""
    from embeval.errors import DataFileError

    raw = value
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            value = None
    if not isinstance(value, list):
        raise DataFileError(
            f'{column} must be a list of labels, a JSON array such as ["a", "b"] or [1, 2] (or []), got {raw!r}',
            file=path,
            task=task,
            line=line,
        )
    for label in value:
        if isinstance(label, bool) or not isinstance(label, (str, int)) or label == "":
            raise DataFileError(
                f"{column}: a label must be a non-empty string or an integer, got {label!r}",
                file=path,
                task=task,
                line=line,
            )
    if len(set(value)) < len(value):
        twice = next(label for label in value if value.count(label) > 1)
        raise DataFileError(f"{column} lists {twice!r} twice", file=path, task=task, line=line)
    return tuple(value)


def read_multilabel(spec: TaskSpec, paths: Mapping[str, Path]) -> MultilabelData:
    """Train and test of a multilabel task, checked: label lists of one label type, a test split with
    two labels or more (cut to max_eval_samples rows as mteb cuts it), every experiment with
    n_neighbors rows."""
    import numpy as np

    from embeval.errors import DataFileError
    from embeval.tasks import tabular
    from embeval.tasks.files import join_tokens
    from embeval.tasks.samples import Split

    names = dict(spec.column_names)
    tokenize = join_tokens if spec.tokenization == "whitespace" else (lambda text: text)
    column = names.get("labels", "labels")
    splits, labels = {}, {}
    first_type: tuple[type, Path, int] | None = None
    for key in ("train", "test"):
        path = paths[key]
        texts, lists = [], []
        for line, row in tabular.read_rows(path, spec.format, ("text", "labels"), names, spec.name):
            texts.append(tokenize(tabular.text_field(row["text"], names.get("text", "text"), path, spec.name, line)))
            found = _label_list(row["labels"], column, path, spec.name, line)
            for label in found:
                if first_type is None:
                    first_type = (type(label), path, line)
                elif type(label) is not first_type[0]:
                    raise DataFileError(
                        f"{column} mixes integer and string labels ({label!r}; line {first_type[2]} of "
                        f"{first_type[1].name} has a {first_type[0].__name__}); use one type",
                        file=path,
                        task=spec.name,
                        line=line,
                    )
            lists.append(found)
        splits[key] = Split(key, texts, np.arange(len(texts), dtype=np.int64))
        labels[key] = lists
    test_labels = {label for found in labels["test"] for label in found}
    if len(test_labels) < 2:
        raise DataFileError(
            f"the test split has {len(test_labels)} distinct label(s); MTEB's label columns come from it and "
            "need two or more",
            file=paths["test"],
            task=spec.name,
        )
    limit = spec.params.max_eval_samples
    cut = ""
    if limit and len(splits["test"]) > limit:
        from embeval.evaluate import mteb_multilabel

        gold = mteb_multilabel.indicator(labels["test"], sorted(test_labels))
        kept = mteb_multilabel.stratified_test_rows(gold, limit, spec.params.seed)
        test = splits["test"]
        cut = f"test cut to {len(kept)} of {len(test)} rows, as mteb cuts it"
        splits["test"] = Split("test", [test.a[i] for i in kept], np.arange(len(kept), dtype=np.int64))
        labels["test"] = [labels["test"][i] for i in kept]
        if len({label for found in labels["test"] for label in found}) < 2:
            raise DataFileError(
                f"the {len(kept)} test rows mteb keeps hold fewer than two labels", file=paths["test"], task=spec.name
            )
    data = MultilabelData(spec.name, splits, labels, (paths["train"], paths["test"]), cut)
    for e, rows in enumerate(spec.params.training_rows(labels["train"])):
        if len(rows) < spec.params.n_neighbors:
            raise DataFileError(
                f"experiment {e} draws {len(rows)} training rows, fewer than n_neighbors = {spec.params.n_neighbors}",
                file=paths["train"],
                task=spec.name,
            )
    return data


KIND = MultilabelClassification()
