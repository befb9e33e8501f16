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

Protocol "parallel" (mteb's parallel_subsets: FloresBitextMining, IN22Conv/IN22Gen, NTREX): file `test`
holds a column per language, row i of each the same sentence; key `pairs`, mteb's subsets "A-B"
(every ordered pair of distinct columns when absent), each matching column A's sentences among column
B's. Figures: each pair's under `subsets` (mteb reports each as a subset), and their means over the
pairs (the headline: mteb's task score). The bootstrap resamples the rows, the same rows in every pair.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from embeval.kinds.mteb_shared import figures_of, fractions_line, headline_column
from embeval.kinds.mteb_shared import score_fields as mteb_fields
from embeval.stats import Statistic
from embeval.tasks.declaration import Declaration
from embeval.tasks.figures import Column, Figure
from embeval.tasks.kind import TEXT, Kind, Line
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
PAIRS, PARALLEL = "pairs", "parallel"
PARALLEL_SET = "mteb-bitext-parallel"  # the prediction set's kind: each row's matched row in each pair


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


def _parallel(name: str) -> Statistic:
    def figure(W: Any, arrays: Any) -> Any:
        from embeval.evaluate import bitext

        return bitext.parallel_resampled(W, arrays["pred"])[name]

    return Statistic(figure, False, centred=True)


@dataclass(frozen=True)
class ParallelParams:
    """A parallel task's similarity and language pairs (None: every ordered pair of its columns)."""

    similarity: str = "cosine"
    pairs: tuple[tuple[str, str], ...] | None = None


@dataclass(frozen=True)
class ParallelData:
    """The sentences of each language (row i of each: the same sentence) and the pairs matched."""

    name: str
    languages: dict[str, list[str]]
    pairs: tuple[tuple[str, str], ...]

    def sentences(self) -> list[str]:
        return [text for texts in self.languages.values() for text in texts]


class Bitext(Kind):
    name = "bitext-mining"
    mteb_type = "BitextMining"  # MTEB's task type of its tasks (benchmark means per type)
    summary = "translation pairs (or parallel languages); each sentence's nearest neighbour on the other side (MTEB)"
    protocols = (PAIRS, PARALLEL)
    statistics = {
        SET_KIND: {f.path: _weighted(f.path) for f in FIGURES},
        PARALLEL_SET: {f.path: _parallel(f.path) for f in FIGURES},
    }

    def column_keys(self, protocol: str | None) -> tuple[str, ...]:
        return () if protocol == PARALLEL else ("sentence1", "sentence2")

    def read_params(self, decl: Declaration, protocol: str | None) -> Any:
        similarity = str(decl.take("similarity", default="cosine", choices=("cosine", "dot")))
        if protocol != PARALLEL:
            return similarity
        names = decl.take("pairs", (list,), None)  # FloresBitextMining's 41,412: checked in linear time
        if names is None:
            return ParallelParams(similarity)
        split = [tuple(name.split("-")) if isinstance(name, str) else () for name in names]
        bad = [name for name, pair in zip(names, split, strict=True) if len(pair) != 2 or pair[0] == pair[1]]
        if bad or not split:
            got = f", got {bad[0]!r}" if bad else ""
            raise decl.error(f"must name language pairs 'A-B' of two distinct columns{got}", "pairs")
        if len(set(names)) < len(names):
            raise decl.error("names a language pair twice", "pairs")
        return ParallelParams(similarity, tuple((a, b) for a, b in split))

    def load(self, spec: TaskSpec, paths: Mapping[str, Path]) -> Any:
        return read_parallel(spec, paths["test"]) if spec.protocol == PARALLEL else read_pairs(spec, paths["test"])

    def rows(self, spec: TaskSpec, data: Any, row_of: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
        if spec.protocol != PARALLEL:
            return super().rows(spec, data, row_of)
        return {
            language: np.array([row_of[TEXT][t] for t in texts], dtype=np.int64)
            for language, texts in data.languages.items()
        }

    def sizes(self, spec: TaskSpec, data: Any) -> str:
        if spec.protocol != PARALLEL:
            return super().sizes(spec, data)
        rows = len(next(iter(data.languages.values())))
        return f"{rows} rows in {len(data.languages)} languages, {len(data.pairs)} language pairs"

    def figures(self, spec: TaskSpec) -> tuple[Figure, ...]:
        return FIGURES

    def normalizes(self, spec: TaskSpec) -> bool:
        return False

    def evaluate(self, ctx: Any) -> dict[str, Any]:
        from embeval.evaluate import bitext
        from embeval.formats.predictions import PredictionSet

        if ctx.task.protocol == PARALLEL:
            return evaluate_parallel(ctx)
        table = ctx.table.cpu().numpy()
        first, second = ctx.rows["test"]
        predicted = bitext.nearest(table[first], table[second], ctx.task.params or "cosine")
        gold = np.arange(len(first), dtype=np.int64)
        ctx.keep("", PredictionSet(SET_KIND, {"gold": gold, "pred": predicted}, tuple(f.path for f in FIGURES)))
        figures = bitext.mteb_scores(gold, predicted)
        figures.pop("main_score")
        return dict(figures, pairs=len(gold))

    def lines(self, spec: TaskSpec, results: Mapping[str, Any], ci: Mapping[str, Any] | None) -> list[Line]:
        if spec.protocol != PARALLEL:
            return [
                fractions_line("F1 | accuracy x100 (MTEB)", results, ("f1", "accuracy"), ci),
                fractions_line("precision | recall (support-weighted)", results, ("precision", "recall")),
            ]
        pairs = results.get("subsets") or {}
        main = spec.headline.path
        lowest = min(pairs, key=lambda pair: pairs[pair][main], default=None)
        out = [
            fractions_line(
                f"F1 | accuracy x100 (MTEB, mean of {len(pairs)} language pairs)", results, ("f1", "accuracy"), ci
            ),
            fractions_line("precision | recall (support-weighted)", results, ("precision", "recall")),
        ]
        if lowest is not None:
            out.append(fractions_line(f"lowest pair {lowest}: {spec.headline.label}", pairs[lowest], (main,)))
        return out

    def columns(self, spec: TaskSpec) -> tuple[Column, ...]:
        note = spec.headline.label + (", mean over language pairs" if spec.protocol == PARALLEL else "")
        return headline_column(spec, "mteb-bitext", note)

    def mteb_scores(self, spec: TaskSpec, results: Mapping[str, Any]) -> dict[str, Any] | None:
        fields = mteb_fields(spec, results, MTEB_KEYS)
        if fields is None or spec.protocol != PARALLEL:
            return fields
        pairs = results.get("subsets")
        if not isinstance(pairs, Mapping):
            return None
        main = spec.headline.path
        fields["hf_subsets"] = {  # mteb reports each pair as a subset of its own
            pair: {**{key: figures[key] for key in MTEB_KEYS}, "main_score": figures[main]}
            for pair, figures in pairs.items()
        }
        return fields


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


def read_parallel(spec: TaskSpec, path: Path) -> ParallelData:
    """The columns of the languages the pairs match (all columns and all their ordered pairs when the
    task names no pairs), each row a sentence in every language."""
    import json

    from embeval.errors import DataFileError
    from embeval.tasks import tabular
    from embeval.tasks.files import join_tokens

    pairs = spec.params.pairs
    if pairs is None:  # every column of the file, in its order
        if spec.format == "jsonl":
            first = next((line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()), "{}")
            try:
                columns = list(json.loads(first))
            except (json.JSONDecodeError, TypeError):
                columns = []  # read_rows says what is wrong with the line
        else:
            header = path.read_text(encoding="utf-8").split("\n", 1)[0]
            columns = [c.strip() for c in header.split("\t" if spec.format == "tsv" else ",")]
        pairs = tuple((a, b) for a in columns for b in columns if a != b)
        if not pairs:
            raise DataFileError("a parallel file needs two language columns or more", file=path, task=spec.name)
    languages = list(dict.fromkeys(language for pair in pairs for language in pair))
    tokenize = join_tokens if spec.tokenization == "whitespace" else (lambda text: text)
    texts: dict[str, list[str]] = {language: [] for language in languages}
    for line, row in tabular.read_rows(path, spec.format, languages, {}, spec.name):
        for language in languages:
            texts[language].append(tokenize(tabular.text_field(row[language], language, path, spec.name, line)))
    return ParallelData(spec.name, texts, pairs)


def evaluate_parallel(ctx: Any) -> dict[str, Any]:
    """Every language pair's figures (under `subsets`) and their means; the prediction set: each row's
    matched row in each pair (rows, pairs)."""
    from embeval.evaluate import bitext
    from embeval.formats.predictions import PredictionSet

    data = ctx.data
    ctx.progress.stage(f"matching {len(data.pairs)} language pairs")
    predicted = bitext.parallel_nearest(ctx.table.cpu(), ctx.rows, data.pairs, ctx.task.params.similarity)
    each = bitext.parallel_figures(np.ones((1, len(predicted))), predicted, per_pair=True)
    names = [f"{a}-{b}" for a, b in data.pairs]
    subsets = {name: {key: float(each[key][p]) for key in MTEB_KEYS} for p, name in enumerate(names)}
    ctx.keep(
        "",
        PredictionSet(
            PARALLEL_SET,
            {"pred": predicted},
            tuple(f.path for f in FIGURES),
            "rows in file order; one column per language pair, in the pairs' order: the matched row",
        ),
    )
    means = {key: float(np.mean([pair[key] for pair in subsets.values()])) for key in MTEB_KEYS}
    return dict(means, subsets=subsets, rows=len(predicted), language_pairs=len(names))


KIND = Bitext()
