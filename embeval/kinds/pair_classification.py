"""Classification of sentence pairs with SentEval's protocols (MRPC, SICK-E, SNLI, and a user's
labelled pairs).

Protocols as for classification (embeval.kinds.classification): split (train, dev, test) or kfold
(train, test), on features built from the two sentence vectors u and v: `features` "|u-v|,u*v"
(SentEval's, the default) or "u,v,u*v,|u-v|" (InferSent's, SentEval's SNLI). Samples are sorted as
SentEval sorts pairs: by tokens of the first sentence, then of the second, then the label
(`sample_order = "snli"`: the second sentence first, then the first, then the raw label string).
Files: sentence1, sentence2 and label columns. Keys as for classification (labels, f1,
regularization, max_epoch, epoch_size), plus features and sample_order.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from embeval.kinds.classification import (
    PROTOCOL_FILES,
    TRAINING_SPLIT,
    ClassifierParams,
    SentEvalClassifierKind,
    read_classifier_keys,
)
from embeval.tasks.declaration import Declaration
from embeval.tasks.spec import TaskSpec

FEATURES = {"|u-v|,u*v": "pair", "u,v,u*v,|u-v|": "snli"}
SAMPLE_ORDERS = {"senteval": "pair", "snli": "snli"}


class PairClassification(SentEvalClassifierKind):
    name = "pair-classification"
    summary = "labelled sentence pairs; SentEval's classifier on pair features (split or kfold)"
    protocols = ("split", "kfold")

    def file_keys(self, protocol: str | None) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
        return PROTOCOL_FILES[protocol or "split"], (), False

    def column_keys(self, protocol: str | None) -> tuple[str, ...]:
        return ("sentence1", "sentence2", "label")

    def read_params(self, decl: Declaration, protocol: str | None) -> ClassifierParams:
        keys = read_classifier_keys(decl)
        features = decl.take("features", default="|u-v|,u*v", choices=tuple(FEATURES))
        order = decl.take("sample_order", default="senteval", choices=tuple(SAMPLE_ORDERS))
        return ClassifierParams(**keys, features=FEATURES[features], sort=SAMPLE_ORDERS[order])

    def load(self, spec: TaskSpec, paths: Mapping[str, Path]) -> Any:
        from embeval.tasks.samples import read_splits

        keys = PROTOCOL_FILES[spec.protocol or "split"]
        return read_splits(
            spec, paths, keys, ("sentence1", "sentence2", "label"), "label", TRAINING_SPLIT[spec.protocol or "split"]
        )


KIND = PairClassification()
