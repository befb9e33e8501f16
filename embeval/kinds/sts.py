"""Semantic textual similarity without training: the cosine of the two sentence vectors against the
gold score (STS12-16, STSBenchmarkRaw, and a user's scored pairs).

Files: one or more subsets, each a file with sentence1, sentence2 and score columns; the [files]
keys name the subsets (a single file: `test`). Figures per subset (Pearson, Spearman, n) and over
all subsets: SentEval's `mean` and `wmean` (weighted by n) and `pooled` (one correlation over all
pairs: SimCSE's and MTEB's "all"); the headline is the pooled Spearman (a task's `figure` may
choose another aggregation). Cosines are float64 sums that do not depend on the BLAS build
(identical vectors give exactly 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embeval.tasks.declaration import Declaration
from embeval.tasks.figures import Column, Figure, lookup
from embeval.tasks.kind import Kind, Line, ci_text, pct
from embeval.tasks.spec import TaskSpec

FIGURES = (
    Figure("all.spearman.pooled", "cosine Spearman, all pairs pooled", False),
    Figure("all.spearman.wmean", "cosine Spearman, n-weighted mean over subsets", False),
    Figure("all.spearman.mean", "cosine Spearman, mean over subsets", False),
    Figure("all.pearson.pooled", "cosine Pearson, all pairs pooled", False),
)
AGGREGATIONS = (("mean", "mean"), ("wmean", "wmean"), ("pooled", 'pooled ("all")'))


def correlation_lines(
    results: Mapping[str, Any], ci: Mapping[str, Any] | None, prefix: str = "", label: str = "cosine"
) -> list[Line]:
    """The pooled correlation (the headline) with its interval, then SentEval's mean and weighted mean over
    the subsets; a task with one subset has one figure (the three are equal)."""
    subsets = [k for k, v in results.items() if k != "all" and isinstance(v, Mapping) and "nsamples" in v]
    lines = []
    for coef in ("spearman", "pearson"):
        a = (results.get("all") or {}).get(coef) or {}
        pooled = pct(a.get("pooled")) + ci_text(ci, f"{prefix}all.{coef}.pooled")
        if len(subsets) == 1:
            lines.append(Line(f"{label} {coef.capitalize()} x100", pooled))
            continue
        lines.append(
            Line(
                f"{label} {coef.capitalize()} x100 pooled | mean | wmean",
                f"{pooled} | {pct(a.get('mean'))} | {pct(a.get('wmean'))}",
            )
        )
    return lines


@dataclass(frozen=True)
class StsParams:
    cosine: str = "exact"


class Sts(Kind):
    name = "sts"
    mteb_type = "STS"  # MTEB's task type of its tasks (benchmark means per type)
    summary = "scored sentence pairs; cosine similarity, no training"
    aggregations = AGGREGATIONS
    aggregation_path = "all.{coef}.{aggregation}"

    def file_keys(self, protocol: str | None) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
        return (), (), True

    def column_keys(self, protocol: str | None) -> tuple[str, ...]:
        return ("sentence1", "sentence2", "score")

    def read_params(self, decl: Declaration, protocol: str | None) -> Any:
        """`cosine`: "exact" (float64 sums, identical vectors exactly 1) or "mteb" (mteb's STS
        evaluator: 1 - scikit-learn's paired cosine distance of the vectors as stored)."""
        return StsParams(cosine=decl.take("cosine", default="exact", choices=("exact", "mteb")))

    def load(self, spec: TaskSpec, paths: Mapping[str, Path]) -> Any:
        from embeval.tasks.samples import read_splits

        return read_splits(spec, paths, tuple(paths), ("sentence1", "sentence2", "score"), "score")

    def evaluate(self, ctx: Any) -> Any:
        from embeval.evaluate import sts

        return sts.evaluate_cosine_sts(ctx)

    def figures(self, spec: TaskSpec) -> tuple[Figure, ...]:
        return FIGURES

    def lines(self, spec: TaskSpec, results: Mapping[str, Any], ci: Mapping[str, Any] | None) -> list[Line]:
        lines = correlation_lines(results, ci)
        normalized = results.get("normalized")
        if isinstance(normalized, Mapping):
            lines += correlation_lines(normalized, ci, "normalized.", f"{normalized.get('method')} cosine")
        return lines

    def columns(self, spec: TaskSpec) -> tuple[Column, ...]:
        if not spec.report.show:
            return ()
        note = (
            "all pairs of the subsets pooled into one correlation (SimCSE's \"all\"; not SentEval's mean or "
            "weighted mean over subsets)"
        )
        return (
            Column(
                spec.report.group or "sts",
                "all.spearman.pooled",
                "Spearman x100",
                scale=100.0,
                header=spec.report.header,
                order=spec.report.order,
                measure="spearman",
                protocol="cosine",
                aggregation="pooled",
                note=note,
            ),
        )

    def mteb_scores(self, spec: TaskSpec, results: Mapping[str, Any]) -> dict[str, Any] | None:
        path = spec.mteb.figures if spec.mteb is not None and spec.mteb.figures else "all.{coef}.pooled"
        spearman, pearson = (lookup(results, path.format(coef=c)) for c in ("spearman", "pearson"))
        if not isinstance(spearman, (int, float)) or not isinstance(pearson, (int, float)):
            return None
        counts = [v.get("nsamples") for k, v in results.items() if isinstance(v, Mapping) and "nsamples" in v]
        pairs = (
            sum(c for c in counts if isinstance(c, int)) if counts and all(isinstance(c, int) for c in counts) else None
        )
        model = results.get("model_similarity")  # mteb's float32 pairwise cosine (`cosine = "mteb"`)
        model_spearman, model_pearson = (
            (model["spearman"], model["pearson"]) if isinstance(model, Mapping) else (spearman, pearson)
        )
        return {
            "cosine_spearman": spearman,
            "cosine_pearson": pearson,
            "spearman": model_spearman,  # the model's similarity: cosine (model_meta.json's similarity_fn_name)
            "pearson": model_pearson,
            "main_score": spearman,
            "pairs": pairs,
        }


KIND = Sts()
