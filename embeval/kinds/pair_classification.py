"""Classification of sentence pairs: SentEval's trained protocols (MRPC, SICK-E, SNLI, and a user's
labelled pairs) and MTEB's, which trains nothing.

SentEval's protocols, as for classification (embeval.kinds.classification): split (train, dev,
test) or kfold (train, test), on features built from the two sentence vectors u and v: `features`
"|u-v|,u*v" (SentEval's, the default) or "u,v,u*v,|u-v|" (InferSent's, SentEval's SNLI). Samples
are sorted as SentEval sorts pairs: by tokens of the first sentence, then of the second, then the
label (`sample_order = "snli"`: the second sentence first, then the first, then the raw label
string). Files: sentence1, sentence2 and label columns. Keys as for classification (labels, f1,
regularization, max_epoch, epoch_size), plus features and sample_order.

Protocol "mteb" (MTEB's AbsTaskPairClassification, embeval.evaluate.pair_scores): one file, `test`,
labels 0 or 1. Five scores of each pair (the model's similarity, cosine, Manhattan and Euclidean
distances, dot product), and per score the accuracy and F1 (with precision and recall) of the best
threshold and the average precision; `max_*` the best over the scores. Headline: max_ap (a task
may choose another with `figure`, e.g. max_accuracy for the MTEB tasks whose main score it is).
Key `similarity`: the model's own similarity, "cosine" (default) or "dot".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embeval.kinds.classification import (
    PROTOCOL_FILES,
    TRAINING_SPLIT,
    ClassifierParams,
    SentEvalClassifierKind,
    read_classifier_keys,
)
from embeval.kinds.mteb_shared import figures_of, fractions_line, headline_column, lazy_statistic
from embeval.kinds.mteb_shared import score_fields as mteb_fields
from embeval.tasks.declaration import Declaration
from embeval.tasks.figures import Column, Figure
from embeval.tasks.kind import Line
from embeval.tasks.spec import TaskSpec

FEATURES = {"|u-v|,u*v": "pair", "u,v,u*v,|u-v|": "snli"}
SAMPLE_ORDERS = {"senteval": "pair", "snli": "snli"}
MTEB = "mteb"

# MTEB's protocol: its scores (mteb's order and names) and figures.
SCORES = (
    ("similarity", "model's similarity"),
    ("cosine", "cosine"),
    ("manhattan", "Manhattan distance"),
    ("euclidean", "Euclidean distance"),
    ("dot", "dot product"),
)
METRICS = (("ap", "AP"), ("f1", "F1"), ("accuracy", "accuracy"))
MTEB_FIGURES = figures_of(
    [(f"max_{metric}", f"max {words} over the five scores") for metric, words in METRICS]
    + [(f"{score}_{metric}", f"{score_words} {words}") for score, score_words in SCORES for metric, words in METRICS]
)
MTEB_KEYS = tuple(
    [f"{score}_{metric}" for score, _ in SCORES for metric in ("accuracy", "f1", "precision", "recall", "ap")]
    + [f"max_{metric}" for metric in ("accuracy", "f1", "precision", "recall", "ap")]
)
PAIR_SET = "mteb-pairs"  # the prediction set's kind: per pair its gold label, scores and runs of tied scores


@dataclass(frozen=True)
class MtebPairParams:
    """MTEB's protocol: the model's own similarity, "cosine" or "dot"."""

    similarity: str = "cosine"


class PairClassification(SentEvalClassifierKind):
    name = "pair-classification"
    mteb_type = "PairClassification"  # MTEB's task type of its tasks (benchmark means per type)
    summary = "labelled sentence pairs; SentEval's classifier on pair features (split or kfold), or MTEB's thresholds"
    protocols = ("split", "kfold", MTEB)
    statistics = {
        PAIR_SET: {f.path: lazy_statistic("embeval.evaluate.pair_scores", f.path, False) for f in MTEB_FIGURES}
    }

    def file_keys(self, protocol: str | None) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
        if protocol == MTEB:
            return ("test",), (), False
        return PROTOCOL_FILES[protocol or "split"], (), False

    def column_keys(self, protocol: str | None) -> tuple[str, ...]:
        return ("sentence1", "sentence2", "label")

    def read_params(self, decl: Declaration, protocol: str | None) -> ClassifierParams | MtebPairParams:
        if protocol == MTEB:
            return MtebPairParams(decl.take("similarity", default="cosine", choices=("cosine", "dot")))
        keys = read_classifier_keys(decl)
        features = decl.take("features", default="|u-v|,u*v", choices=tuple(FEATURES))
        order = decl.take("sample_order", default="senteval", choices=tuple(SAMPLE_ORDERS))
        return ClassifierParams(**keys, features=FEATURES[features], sort=SAMPLE_ORDERS[order])

    def load(self, spec: TaskSpec, paths: Mapping[str, Path]) -> Any:
        from embeval.tasks.samples import read_splits

        if spec.protocol == MTEB:
            return read_binary_pairs(spec, paths["test"])
        keys = PROTOCOL_FILES[spec.protocol or "split"]
        return read_splits(
            spec, paths, keys, ("sentence1", "sentence2", "label"), "label", TRAINING_SPLIT[spec.protocol or "split"]
        )

    def figures(self, spec: TaskSpec) -> tuple[Figure, ...]:
        return MTEB_FIGURES if spec.protocol == MTEB else super().figures(spec)

    def selection(self, spec: TaskSpec) -> str | None:
        return None if spec.protocol == MTEB else "devacc"

    def normalizes(self, spec: TaskSpec) -> bool:
        return spec.protocol != MTEB

    def evaluate(self, ctx: Any) -> Any:
        if ctx.task.protocol == MTEB:
            return evaluate_mteb(ctx)
        return super().evaluate(ctx)

    def lines(self, spec: TaskSpec, results: Mapping[str, Any], ci: Mapping[str, Any] | None) -> list[Line]:
        if spec.protocol != MTEB:
            return super().lines(spec, results, ci)
        paths = [f"max_{metric}" for metric, _ in METRICS]
        lines = [fractions_line("max AP | F1 | accuracy x100 (MTEB)", results, paths, ci)]
        for score, words in SCORES:
            lines.append(fractions_line(f"{words} AP | F1 | accuracy", results, [f"{score}_{m}" for m, _ in METRICS]))
        return lines

    def columns(self, spec: TaskSpec) -> tuple[Column, ...]:
        if spec.protocol != MTEB:
            return super().columns(spec)
        return headline_column(
            spec,
            "mteb-pair-classification",
            f"{spec.headline.label}, {spec.params.similarity} as the model's similarity",
        )

    def mteb_scores(self, spec: TaskSpec, results: Mapping[str, Any]) -> dict[str, Any] | None:
        if spec.protocol != MTEB:
            return None
        fields = mteb_fields(spec, results, MTEB_KEYS)
        if fields is not None:
            fields["pairs"] = results.get("pairs")
        return fields

    def unit_bytes(self, spec: TaskSpec, count: int, dim: int, config: Any) -> int:
        if spec.protocol == MTEB:
            return 4 * count * dim
        return super().unit_bytes(spec, count, dim, config)


def read_binary_pairs(spec: TaskSpec, path: Path) -> Any:
    """The test split of MTEB's protocol: pairs with labels 0 or 1 (a JSON 0/1 or the text "0"/"1")."""
    import numpy as np

    from embeval.errors import DataFileError
    from embeval.tasks import tabular
    from embeval.tasks.files import join_tokens
    from embeval.tasks.samples import Split, TaskData

    names = dict(spec.column_names)
    tokenize = join_tokens if spec.tokenization == "whitespace" else (lambda text: text)
    a, b, y = [], [], []
    for line, row in tabular.read_rows(path, spec.format, ("sentence1", "sentence2", "label"), names, spec.name):
        first, second = (
            tokenize(tabular.text_field(row[column], names.get(column, column), path, spec.name, line))
            for column in ("sentence1", "sentence2")
        )
        label = tabular.label_field(row["label"], names.get("label", "label"), path, spec.name, line)
        if label not in ("0", "1"):
            raise DataFileError(
                f"label {label!r} is not 0 or 1 (MTEB's pair classification: 1 a similar pair, 0 not)",
                file=path,
                task=spec.name,
                line=line,
            )
        a.append(first)
        b.append(second)
        y.append(int(label))
    split = Split("test", a, np.array(y, dtype=np.int64), b=b)
    return TaskData(spec.name, {"test": split}, None, [path], spaced=spec.tokenization == "whitespace")


def evaluate_mteb(ctx: Any) -> dict[str, Any]:
    """MTEB's figures of the test pairs and their prediction set (the vectors as given: the
    float32 table, one row per distinct sentence)."""
    from embeval.evaluate import pair_scores
    from embeval.formats.predictions import PredictionSet

    table = ctx.table.cpu().numpy()
    first, second = ctx.rows["test"]
    labels = ctx.data.splits["test"].y
    figures, arrays = pair_scores.evaluate_pairs(table[first], table[second], labels, ctx.task.params.similarity)
    paths = tuple(f.path for f in MTEB_FIGURES)
    ctx.keep("", PredictionSet(PAIR_SET, arrays, paths, "test pairs, file order"))
    return dict(figures, pairs=len(labels), positives=int(labels.sum()))


KIND = PairClassification()
