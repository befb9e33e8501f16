"""The catalog of kinds: each kind of task and the module that declares it (one registration line a
kind), SentEval's file formats, and the lookups over them. Kind modules are imported on first use
(they are light: no torch)."""

from __future__ import annotations

import importlib
from functools import cache
from typing import TYPE_CHECKING

from embeval.stats import STATISTICS, Statistic

if TYPE_CHECKING:
    from embeval.tasks.kind import Kind

# Every kind of task: its name and the module whose KIND object declares it.
KINDS = {
    "classification": "embeval.kinds.classification",
    "pair-classification": "embeval.kinds.pair_classification",
    "sts": "embeval.kinds.sts",
    "relatedness": "embeval.kinds.relatedness",
    "caption-ranking": "embeval.kinds.caption_ranking",
    "probing": "embeval.kinds.probing",
    "retrieval": "embeval.kinds.retrieval",
    "reranking": "embeval.kinds.reranking",
    "clustering": "embeval.kinds.clustering",
    "summarization": "embeval.kinds.summarization",
    "bitext-mining": "embeval.kinds.bitext",
    "regression": "embeval.kinds.regression",
    "multilabel-classification": "embeval.kinds.multilabel_classification",
    "instruction-retrieval": "embeval.kinds.instruction_retrieval",
    "instruction-reranking": "embeval.kinds.instruction_reranking",
}

# SentEval's file formats (the built-in tasks'): name -> (loader in embeval.tasks.senteval, its
# [files] keys (None: any keys), the kinds it holds data of).
SENTEVAL_FORMATS: dict[str, tuple[str, tuple[str, ...] | None, tuple[str, ...]]] = {
    "senteval-binary": ("load_binary", ("label1", "label0"), ("classification",)),
    "senteval-sst2": ("load_sst", ("train", "dev", "test"), ("classification",)),
    "senteval-sst5": ("load_sst", ("train", "dev", "test"), ("classification",)),
    "senteval-trec": ("load_trec", ("train", "test"), ("classification",)),
    "senteval-mrpc": ("load_mrpc", ("train", "test"), ("pair-classification",)),
    "senteval-sick": ("load_sick", ("train", "dev", "test"), ("pair-classification", "relatedness")),
    "senteval-stsb": ("load_stsb", ("train", "dev", "test"), ("relatedness",)),
    "senteval-stsb-raw": ("load_stsb_raw", ("test",), ("sts",)),
    "senteval-sts": ("load_sts", None, ("sts",)),
    "senteval-snli": (
        "load_snli",
        tuple(f"{part}.{split}" for split in ("train", "dev", "test") for part in ("s1", "s2", "labels")),
        ("pair-classification",),
    ),
    "senteval-coco": ("load_coco", ("train", "dev", "test"), ("caption-ranking",)),
    "senteval-probing": ("load_probing", ("all",), ("probing",)),
}


def known_kinds() -> list[str]:
    return list(KINDS)


@cache
def kind(name: str) -> Kind:
    """The Kind named `name`. (Results files of 0.1 call COCO's kind "retrieval": their tasks are
    resolved by their built-in name, never by that kind.)"""
    module = importlib.import_module(KINDS[name])
    return module.KIND  # type: ignore[no-any-return]


def statistic(set_kind: str, figure: str) -> Statistic:
    """The Statistic of a figure of a prediction set: embeval.stats' (labels, scores) or a kind's own."""
    if set_kind in STATISTICS:
        return STATISTICS[set_kind][figure]
    for name in KINDS:
        own = kind(name).statistics
        if set_kind in own:
            return own[set_kind][figure]
    raise KeyError(f"no statistic {figure!r} of prediction sets of kind {set_kind!r}")
