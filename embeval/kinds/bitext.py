"""Bitext mining, scored as MTEB scores it (embeval.evaluate.bitext, mteb 2.26.24's BitextMiningEvaluator):
each first sentence is matched with its most similar second sentence; the gold match of the
sentence of row i is the second sentence of row i.

File: `test` with sentence1 and sentence2 columns (mteb's), one translation pair a row.
Figures (fractions, scikit-learn's over the gold and matched rows): f1 (the headline, mteb's main
score for most bitext tasks), accuracy, and precision and recall weighted by the gold rows'
support. Key `similarity`: "cosine" (the default) or "dot", the model's similarity. Similarities and
the choice among ties are mteb's (float32 torch, torch.topk(k=1, sorted=False) on mteb's chunks).
The bootstrap resamples the first sentences
and recomputes the weighted figures (a sentence's precision depends on how many others chose its
match).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from embeval.kinds.mteb_shared import figures_of, fractions_line, headline_column
from embeval.kinds.mteb_shared import score_fields as mteb_fields
from embeval.stats import Statistic
from embeval.tasks.declaration import Declaration
from embeval.tasks.figures import Column, Figure
from embeval.tasks.kind import Kind, Line
from embeval.tasks.spec import TaskSpec

SET_KIND = "mteb-bitext"  # the prediction set's kind: each first sentence's gold and matched row
FIGURES = figures_of(
    [
        ("f1", "F1 (support-weighted)"),
        ("accuracy", "accuracy"),
        ("precision", "precision (support-weighted)"),
        ("recall", "recall (support-weighted)"),
    ]
)
MTEB_KEYS = ("precision", "recall", "f1", "accuracy")


def _weighted(name: str) -> Statistic:
    def figure(W: Any, arrays: Any) -> Any:
        from embeval.evaluate import bitext

        return bitext.weighted_figures(W, arrays["gold"], arrays["pred"])[name]

    def fast(W: Any, arrays: Any) -> Any:
        from embeval import stats
        from embeval.evaluate import bitext

        derived = stats.derived(arrays, "classes", lambda a: bitext.Classes(a["gold"], a["pred"]))
        return stats.per_block(W, arrays, "figures", lambda: bitext.fast_weighted_figures(W, derived))[name]

    return Statistic(figure, False, centred=True, fast=fast)


class Bitext(Kind):
    name = "bitext-mining"
    mteb_type = "BitextMining"  # MTEB's task type of its tasks (benchmark means per type)
    summary = "translation pairs; each sentence's nearest cosine neighbour among the other side (MTEB)"
    statistics = {SET_KIND: {f.path: _weighted(f.path) for f in FIGURES}}

    def column_keys(self, protocol: str | None) -> tuple[str, ...]:
        return ("sentence1", "sentence2")

    def read_params(self, decl: Declaration, protocol: str | None) -> str:
        return str(decl.take("similarity", default="cosine", choices=("cosine", "dot")))

    def load(self, spec: TaskSpec, paths: Mapping[str, Path]) -> Any:
        return read_pairs(spec, paths["test"])

    def figures(self, spec: TaskSpec) -> tuple[Figure, ...]:
        return FIGURES

    def normalizes(self, spec: TaskSpec) -> bool:
        return False

    def evaluate(self, ctx: Any) -> dict[str, Any]:
        from embeval.evaluate import bitext
        from embeval.formats.predictions import PredictionSet

        table = ctx.table.cpu().numpy()
        first, second = ctx.rows["test"]
        predicted = bitext.nearest(table[first], table[second], ctx.task.params or "cosine")
        gold = np.arange(len(first), dtype=np.int64)
        ctx.keep("", PredictionSet(SET_KIND, {"gold": gold, "pred": predicted}, tuple(f.path for f in FIGURES)))
        figures = bitext.mteb_scores(gold, predicted)
        figures.pop("main_score")
        return dict(figures, pairs=len(gold))

    def lines(self, spec: TaskSpec, results: Mapping[str, Any], ci: Mapping[str, Any] | None) -> list[Line]:
        return [
            fractions_line("F1 | accuracy x100 (MTEB)", results, ("f1", "accuracy"), ci),
            fractions_line("precision | recall (support-weighted)", results, ("precision", "recall")),
        ]

    def columns(self, spec: TaskSpec) -> tuple[Column, ...]:
        return headline_column(spec, "mteb-bitext", spec.headline.label)

    def mteb_scores(self, spec: TaskSpec, results: Mapping[str, Any]) -> dict[str, Any] | None:
        return mteb_fields(spec, results, MTEB_KEYS)


def read_pairs(spec: TaskSpec, path: Path) -> Any:
    """The translation pairs of the file (one split, "test")."""
    from embeval.tasks import tabular
    from embeval.tasks.files import join_tokens
    from embeval.tasks.samples import Split, TaskData

    names = dict(spec.column_names)
    tokenize = join_tokens if spec.tokenization == "whitespace" else (lambda text: text)
    first: list[str] = []
    second: list[str] = []
    for line, row in tabular.read_rows(path, spec.format, ("sentence1", "sentence2"), names, spec.name):
        for column, out in (("sentence1", first), ("sentence2", second)):
            out.append(tokenize(tabular.text_field(row[column], names.get(column, column), path, spec.name, line)))
    split = Split("test", first, np.arange(len(first), dtype=np.int64), b=second)
    return TaskData(spec.name, {"test": split}, None, [path], spaced=spec.tokenization == "whitespace")


KIND = Bitext()
