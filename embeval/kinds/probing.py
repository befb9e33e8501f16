"""The probing tasks (Conneau et al., 2018): linguistic properties of single sentences, scored
with SentEval's split protocol (train, dev, test) and the probing classifier of the run
(--probing-classifier: the configured classifier, as SentEval's probing code; logistic regression;
the MLP grid the probing paper reports; or both).

Files: SentEval's probing file (`SPLIT<TAB>LABEL<TAB>...<TAB>SENTENCE`, format senteval-probing,
key `all`), or train, dev and test files with text and label columns. Label ids follow the train
labels sorted as strings, integers too (SentEval's rule: "10" before "9"). Key `logreg_only`: always
logistic regression (SentEval's WordContent). Figure: test accuracy (%); the dev accuracy selects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embeval.kinds.classification import ACCURACY, SentEvalClassifierKind, accuracy_lines
from embeval.tasks.declaration import Declaration
from embeval.tasks.figures import Column, Figure
from embeval.tasks.kind import Line
from embeval.tasks.spec import TaskSpec


@dataclass(frozen=True)
class ProbingParams:
    logreg_only: bool = False
    labels: tuple[str, ...] | None = None
    f1: bool = False
    regularization: str = "grid"
    max_epoch: int | None = None
    epoch_size: int | None = None
    features: str = "single"
    sort: str = "single"


class Probing(SentEvalClassifierKind):
    name = "probing"
    summary = "a property of single sentences; SentEval's split protocol with the probing classifier"
    protocols = ()

    def file_keys(self, protocol: str | None) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
        return ("train", "dev", "test"), (), False

    def column_keys(self, protocol: str | None) -> tuple[str, ...]:
        return ("text", "label")

    def read_params(self, decl: Declaration, protocol: str | None) -> ProbingParams:
        return ProbingParams(logreg_only=decl.take("logreg_only", (bool,), False))

    def load(self, spec: TaskSpec, paths: Mapping[str, Path]) -> Any:
        from embeval.tasks.samples import read_splits

        return read_splits(
            spec, paths, ("train", "dev", "test"), ("text", "label"), "label", "train", labels_as_text=True
        )

    def figures(self, spec: TaskSpec) -> tuple[Figure, ...]:
        return (ACCURACY,)

    def runs_classifiers(self, spec: TaskSpec) -> bool:
        return False  # its classifiers are --probing-classifier's

    def evaluate(self, ctx: Any) -> Any:
        from embeval.evaluate import probing

        return probing.evaluate_probing(ctx)

    def lines(self, spec: TaskSpec, results: Mapping[str, Any], ci: Mapping[str, Any] | None) -> list[Line]:
        return accuracy_lines(results, ci)

    def columns(self, spec: TaskSpec) -> tuple[Column, ...]:
        if not spec.report.show:
            return ()
        note = "always logistic regression" if spec.params.logreg_only else ""
        return (
            Column(
                spec.report.group or "probing",
                "acc",
                "accuracy %",
                header=spec.report.header,
                per_classifier=True,
                order=spec.report.order,
                note=note,
            ),
        )


KIND = Probing()
