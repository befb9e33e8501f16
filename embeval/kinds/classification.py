"""Classification of single sentences with SentEval's protocols (MR, CR, SUBJ, MPQA, SST2, SST5,
TREC, and a user's labelled sentences).

Protocols (a task's `protocol`), each with SentEval's sample order (sorted by tokens, then label),
folds and regularization grids, and either solver (--solver):
- split: files train, dev, test; the regularization chosen on dev, the chosen model tested;
- kfold: files train, test; the regularization chosen by k-fold cross-validation on train, the
  model retrained on all of train and tested;
- nested-kfold: one file `all`; k outer folds, the regularization chosen by an inner k-fold within
  each outer training fold; the mean of the outer test accuracies.
Files: text and label columns (tsv, csv or jsonl). Keys: `labels` (the label values in class-id
order; default: the training split's labels, numerically when all are integers, else as strings),
`f1` (also report F1 of class 1, as MRPC), `regularization` (grid, or none: SNLI's single 1e-9
weight decay / C = 1e9), `max_epoch` and `epoch_size` (override the configured classifier's).
Figures: test accuracy (%), F1 of class 1 with `f1`; the dev accuracy selects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from embeval.tasks.declaration import Declaration
from embeval.tasks.figures import Column, Figure
from embeval.tasks.kind import Kind, Line, ci_text, num
from embeval.tasks.spec import TaskSpec

ACCURACY = Figure("acc", "test accuracy %", True)
F1 = Figure("f1", "test F1 of class 1 %", True)
CLASSIFIERS = ("logreg", "mlp")  # --classifiers: each classifier's results sit under its name
PROTOCOL_FILES = {"split": ("train", "dev", "test"), "kfold": ("train", "test"), "nested-kfold": ("all",)}
TRAINING_SPLIT = {"split": "train", "kfold": "train", "nested-kfold": "all"}
PROTOCOL_NOTES = {
    "nested-kfold": "nested k-fold, mean of the outer folds",
    "kfold": "k-fold on train",
    "split": "dev split",
}


@dataclass(frozen=True)
class ClassifierParams:
    """The parameters of a task scored by SentEval's classifier. `features` and `sort` are the
    trainer's names of its inputs and its sample order (single sentences: "single")."""

    labels: tuple[str, ...] | None = None
    f1: bool = False
    regularization: str = "grid"
    max_epoch: int | None = None
    epoch_size: int | None = None
    logreg_only: bool = False
    features: str = "single"
    sort: str = "single"


def read_classifier_keys(decl: Declaration) -> dict[str, Any]:
    """The keys every kind trained with SentEval's classifier shares."""
    labels = decl.strings("labels", None)
    keys: dict[str, Any] = {
        "labels": labels,
        "f1": decl.take("f1", (bool,), False),
        "regularization": decl.take("regularization", default="grid", choices=("grid", "none")),
        "max_epoch": decl.take("max_epoch", (int,), None),
        "epoch_size": decl.take("epoch_size", (int,), None),
    }
    for key in ("max_epoch", "epoch_size"):
        if keys[key] is not None and keys[key] < 1:
            raise decl.error(f"must be an integer >= 1, got {keys[key]}", key)
    if labels is not None and len(labels) < 2:
        raise decl.error("a classification task needs two or more labels", "labels")
    if keys["f1"] and labels is not None and len(labels) != 2:
        raise decl.error("F1 of class 1 needs exactly two labels", "f1")
    return keys


def accuracy_lines(results: Mapping[str, Any], ci: Mapping[str, Any] | None) -> list[Line]:
    """`accuracy % dev / test` (and F1), per classifier when several ran."""

    def line(r: Mapping[str, Any], prefix: str, label: str) -> Line:
        text = f"{num(r.get('devacc'))} / {num(r.get('acc'))}" + ci_text(ci, f"{prefix}acc", 1.0)
        if "f1" in r:
            text += f"  (F1 {num(r['f1'])}{ci_text(ci, prefix + 'f1', 1.0)})"
        return Line(label, text)

    ran = [c for c in CLASSIFIERS if isinstance(results.get(c), Mapping)]
    if ran:
        return [line(results[c], f"{c}.", f"{c} accuracy % dev / test") for c in ran]
    return [line(results, "", "accuracy % dev / test")]


class SentEvalClassifierKind(Kind):
    """What the kinds scored by SentEval's classifier share: protocols, figures, evaluation, lines."""

    protocols: ClassVar[tuple[str, ...]] = ("split", "kfold", "nested-kfold")
    stacks = True

    def file_keys(self, protocol: str | None) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
        return PROTOCOL_FILES[protocol or "split"], (), False

    def figures(self, spec: TaskSpec) -> tuple[Figure, ...]:
        return (ACCURACY, F1) if spec.params.f1 else (ACCURACY,)

    def selection(self, spec: TaskSpec) -> str | None:
        return "devacc"

    def evaluate(self, ctx: Any) -> Any:
        from embeval.evaluate import classify

        return classify.evaluate(ctx)

    def lines(self, spec: TaskSpec, results: Mapping[str, Any], ci: Mapping[str, Any] | None) -> list[Line]:
        return accuracy_lines(results, ci)

    def columns(self, spec: TaskSpec) -> tuple[Column, ...]:
        if not spec.report.show:
            return ()
        group = spec.report.group or "transfer"
        accuracy = Column(
            group,
            "acc",
            "accuracy %",
            header=spec.report.header,
            per_classifier=True,
            order=spec.report.order,
            measure="accuracy",
            protocol="classifier",
            note=PROTOCOL_NOTES.get(spec.protocol or "split", ""),
        )
        if not spec.params.f1:
            return (accuracy,)
        positive = spec.params.labels[1] if spec.params.labels else "1"
        f1 = Column(
            group,
            "f1",
            "F1 %",
            header=f"{spec.label} F1",
            per_classifier=True,
            order=spec.report.order,
            measure="f1",
            protocol="classifier",
            note=f"F1 (%) of the class {positive}",
        )
        return accuracy, f1

    def unit_bytes(self, spec: TaskSpec, count: int, dim: int, config: Any) -> int:
        from embeval.train.features import feature_dim

        copies = 1
        if spec.protocol == "nested-kfold" and config.normalize.startswith("zscore"):
            copies = config.kfold
        return 4 * count * (dim + 2 * copies * feature_dim(dim, spec.params.features))


class Classification(SentEvalClassifierKind):
    name = "classification"
    summary = "labelled sentences; SentEval's classifier (split, kfold or nested-kfold)"

    def column_keys(self, protocol: str | None) -> tuple[str, ...]:
        return ("text", "label")

    def read_params(self, decl: Declaration, protocol: str | None) -> ClassifierParams:
        return ClassifierParams(**read_classifier_keys(decl))

    def load(self, spec: TaskSpec, paths: Mapping[str, Path]) -> Any:
        from embeval.tasks.samples import read_splits

        keys = PROTOCOL_FILES[spec.protocol or "split"]
        return read_splits(spec, paths, keys, ("text", "label"), "label", TRAINING_SPLIT[spec.protocol or "split"])


KIND = Classification()
