"""Summarization, scored as MTEB scores SummEval (embeval.evaluate.summarization, mteb 2.26.24): each
machine summary's largest cosine (and dot product) with the human summaries of its text, correlated
with the human relevance grades per text, and averaged over the texts.

File: `test`, JSON lines (mteb's columns), one text a line:
    {"text": "...", "human_summaries": ["...", ...], "machine_summaries": ["...", ...], "relevance": [4.5, ...]}
`relevance` holds one grade per machine summary; `text` is not embedded (mteb does not embed it) and
may be left out. mteb rescales the grades to [0, 1] first, which changes no correlation. A text is
left out of the means when its grades are all equal, or its machine summaries' best cosines or best
dot products are all equal (mteb's rule).

Protocols: "mteb" (mteb's SummarizationEvaluator: SummEvalSummarization.v2) and "summeval" (mteb's
DeprecatedSummarizationEvaluator, which SummEval keeps: each text's value is the mean of the
correlation and its p-value, mteb issue 1156).

Figures (mteb's names): cosine_spearman (the headline), cosine_pearson, dot_spearman, dot_pearson;
spearman and pearson: the model's similarity (key `similarity`: "cosine", the default, or "dot"), as
in MTEB's result files. The bootstrap resamples the texts kept. The similarities are computed as mteb
computes them (float32 torch; identical summaries tie).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from embeval.kinds.mteb_shared import figures_of, fractions_line, headline_column
from embeval.kinds.mteb_shared import score_fields as mteb_fields
from embeval.stats import Statistic, mean_of
from embeval.tasks.declaration import Declaration
from embeval.tasks.figures import Column, Figure
from embeval.tasks.kind import TEXT, Kind, Line
from embeval.tasks.spec import TaskSpec

MTEB, SUMMEVAL = "mteb", "summeval"
SET_KIND = "mteb-summarization"  # the prediction set's kind: each kept text's value of every figure
FIGURES = figures_of(
    [
        ("cosine_spearman", "cosine Spearman, mean over texts"),
        ("cosine_pearson", "cosine Pearson, mean over texts"),
        ("dot_spearman", "dot-product Spearman, mean over texts"),
        ("dot_pearson", "dot-product Pearson, mean over texts"),
    ]
)
MTEB_KEYS = ("pearson", "spearman", "cosine_spearman", "cosine_pearson", "dot_spearman", "dot_pearson")


def _mean_of(name: str) -> Statistic:
    """The mean over the resampled texts of their value of figure `name`."""
    return mean_of(name)


@dataclass
class Summaries:
    """Human and machine summaries in file order, the text (line) index of each, and each machine
    summary's grade."""

    human: list[str]
    machine: list[str]
    human_text: np.ndarray
    machine_text: np.ndarray
    relevance: np.ndarray
    texts: int
    files: list[Path] = field(default_factory=list)

    def sentences(self) -> list[str]:
        return self.human + self.machine


class Summarization(Kind):
    name = "summarization"
    mteb_type = "Summarization"  # MTEB's task type of its tasks (benchmark means per type)
    summary = "human and graded machine summaries of texts; MTEB's best-cosine correlation per text"
    protocols = (MTEB, SUMMEVAL)
    formats = ("jsonl",)
    statistics = {SET_KIND: {f.path: _mean_of(f.path) for f in FIGURES}}

    def column_keys(self, protocol: str | None) -> tuple[str, ...]:
        return ("human_summaries", "machine_summaries", "relevance")

    def read_params(self, decl: Declaration, protocol: str | None) -> str:
        return str(decl.take("similarity", default="cosine", choices=("cosine", "dot")))

    def load(self, spec: TaskSpec, paths: Mapping[str, Path]) -> Summaries:
        return read_summaries(spec, paths["test"])

    def rows(self, spec: TaskSpec, data: Summaries, row_of: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
        rows = row_of[TEXT]
        return {
            "human": (np.array([rows[s] for s in data.human], dtype=np.int64), None),
            "machine": (np.array([rows[s] for s in data.machine], dtype=np.int64), None),
        }

    def sizes(self, spec: TaskSpec, data: Summaries) -> str:
        return f"{data.texts} texts, {len(data.human)} human and {len(data.machine)} machine summaries"

    def figures(self, spec: TaskSpec) -> tuple[Figure, ...]:
        return FIGURES

    def normalizes(self, spec: TaskSpec) -> bool:
        return False

    def evaluate(self, ctx: Any) -> dict[str, Any]:
        from embeval.evaluate import summarization
        from embeval.formats.predictions import PredictionSet

        data, table = ctx.data, ctx.table.cpu().numpy()
        scores = summarization.best_scores(
            table[ctx.rows["machine"][0]],
            table[ctx.rows["human"][0]],
            data.machine_text,
            data.human_text,
            ctx.task.params or "cosine",
        )
        values = summarization.per_text(scores, data.relevance, data.machine_text)
        deprecated = ctx.task.protocol == SUMMEVAL
        kept = int(values["kept"].sum())
        if kept:
            figures = summarization.mteb_scores(values, deprecated)
            items = summarization.item_values(values, deprecated)
            order = "texts kept, file order"
            names = tuple(f.path for f in FIGURES)
            ctx.keep("", PredictionSet(SET_KIND, {name: items[name] for name in names}, names, order))
        else:
            figures = dict.fromkeys(MTEB_KEYS + ("main_score",), float("nan"))
        figures.pop("main_score")
        return dict(figures, texts=data.texts, texts_kept=kept)

    def lines(self, spec: TaskSpec, results: Mapping[str, Any], ci: Mapping[str, Any] | None) -> list[Line]:
        kept = f"{results.get('texts_kept')} of {results.get('texts')} texts"
        label = "cosine Spearman | Pearson x100 (MTEB" + (
            ", SummEval's (r + p) / 2" if spec.protocol == SUMMEVAL else ""
        )
        return [
            fractions_line(f"{label}; {kept})", results, ("cosine_spearman", "cosine_pearson"), ci),
            fractions_line("dot-product Spearman | Pearson", results, ("dot_spearman", "dot_pearson")),
        ]

    def columns(self, spec: TaskSpec) -> tuple[Column, ...]:
        words = "mean over the texts of (r + p) / 2 (SummEval's evaluator)" if spec.protocol == SUMMEVAL else ""
        return headline_column(spec, "mteb-summarization", words or f"{spec.headline.label}")

    def mteb_scores(self, spec: TaskSpec, results: Mapping[str, Any]) -> dict[str, Any] | None:
        return mteb_fields(spec, results, MTEB_KEYS)


def read_summaries(spec: TaskSpec, path: Path) -> Summaries:
    """The texts' summaries and grades, each line checked: lists of strings, at least one human and
    one machine summary, a number per machine summary."""
    from embeval.errors import DataFileError
    from embeval.tasks import tabular
    from embeval.tasks.files import join_tokens

    names = dict(spec.column_names)
    tokenize = join_tokens if spec.tokenization == "whitespace" else (lambda text: text)
    human: list[str] = []
    machine: list[str] = []
    relevance: list[float] = []
    human_text: list[int] = []
    machine_text: list[int] = []
    columns = ("human_summaries", "machine_summaries", "relevance")
    rows = tabular.read_rows(path, spec.format, columns, names, spec.name)
    for index, (line, row) in enumerate(rows):
        for column in columns:
            if not isinstance(row[column], list) or not row[column]:
                raise DataFileError(
                    f"{names.get(column, column)} must be a non-empty list", file=path, task=spec.name, line=line
                )
        line_human, line_machine = (
            [tokenize(tabular.text_field(v, names.get(c, c), path, spec.name, line)) for v in row[c]]
            for c in ("human_summaries", "machine_summaries")
        )
        grade_name = names.get("relevance", "relevance")
        grades = [tabular.number_field(v, grade_name, path, spec.name, line) for v in row["relevance"]]
        if len(grades) != len(line_machine):
            raise DataFileError(
                f"{len(grades)} relevance grades for {len(line_machine)} machine summaries",
                file=path,
                task=spec.name,
                line=line,
            )
        human += line_human
        machine += line_machine
        relevance += grades
        human_text += [index] * len(line_human)
        machine_text += [index] * len(line_machine)
    return Summaries(
        human,
        machine,
        np.array(human_text, dtype=np.int64),
        np.array(machine_text, dtype=np.int64),
        np.array(relevance, dtype=np.float64),
        len(rows),
        [path],
    )


KIND = Summarization()
