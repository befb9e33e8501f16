"""Image-caption ranking, SentEval's COCO task (ImageCaptionRetrieval): a ranking model projects
captions and images (ResNet features) to a common space, trained with a margin loss; dev and test
are ranked in 5 folds of 1,000 images (SPEC §4 "COCO retrieval"). Earlier versions called this
kind `retrieval`; their results files still read.

Files: SentEval's COCO pickles (format senteval-coco: train, dev, test), read with a restricted
unpickler. Figures: R@1, R@5, R@10 both ways and their mean (the headline, %), the median ranks;
the dev score (R@K summed both ways over the folds) selects. Prediction set `ranks`: per test image
its rank image->text and its 5 captions' ranks text->image, with its fold; the bootstrap resamples
images within folds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from embeval.stats import Statistic
from embeval.tasks.figures import Column, Figure
from embeval.tasks.kind import Kind, Line, ci_text, num
from embeval.tasks.spec import TaskSpec

FIGURES = (Figure("acc.mean_recall", "mean of R@1, R@5, R@10 both ways %", True),)
RECALLS = (1, 5, 10)
DIRECTIONS = (("i2t", "image->text"), ("t2i", "text->image"))


def recall(W: np.ndarray, a: Mapping[str, np.ndarray], direction: str, k: int) -> np.ndarray:
    """R@k (%) of a direction with image weights W (b, n); text->image counts each image's 5 captions."""
    hits = (a[direction] < k).astype(np.float64)
    if hits.ndim == 2:
        hits = hits.mean(1)
    return 100.0 * (W @ hits) / W.sum(1)


def mean_recall(W: np.ndarray, a: Mapping[str, np.ndarray]) -> np.ndarray:
    """Mean of R@1, R@5, R@10 (%) image->text and text->image."""
    return np.mean([recall(W, a, d, k) for d, _ in DIRECTIONS for k in RECALLS], axis=0)


def _recall(direction: str, k: int) -> Any:
    return lambda W, a: recall(W, a, direction, k)


def _recalls_fast(W: np.ndarray, a: Mapping[str, np.ndarray]) -> np.ndarray:
    """(b, 6) every R@k of both directions, from one product per block of resamples."""
    from embeval import stats

    def columns(a: Mapping[str, np.ndarray]) -> np.ndarray:
        hits = []
        for d, _ in DIRECTIONS:
            for k in RECALLS:
                hit = (a[d] < k).astype(np.float64)
                hits.append(hit.mean(1) if hit.ndim == 2 else hit)
        return np.column_stack(hits + [np.ones(len(hits[0]))])

    def build() -> np.ndarray:
        sums = stats.product(W, stats.derived(a, "recalls", columns))
        return 100.0 * sums[:, :-1] / sums[:, -1:]

    return stats.per_block(W, a, "recalls", build)  # type: ignore[no-any-return]


def _recall_fast(direction: str, k: int) -> Any:
    column = [(d, r) for d, _ in DIRECTIONS for r in RECALLS].index((direction, k))
    return lambda W, a: _recalls_fast(W, a)[:, column]


class CaptionRanking(Kind):
    name = "caption-ranking"
    summary = "captions and image features; SentEval's ranking model, R@K both ways (COCO)"
    formats = ()
    statistics = {
        "ranks": dict(
            {"mean_recall": Statistic(mean_recall, True, fast=lambda W, a: _recalls_fast(W, a).mean(1))},
            **{
                f"{d}.r{k}": Statistic(_recall(d, k), True, fast=_recall_fast(d, k))
                for d, _ in DIRECTIONS
                for k in RECALLS
            },
        )
    }

    def file_keys(self, protocol: str | None) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
        return ("train", "dev", "test"), (), False

    def evaluate(self, ctx: Any) -> Any:
        from embeval.evaluate import ranking

        return ranking.evaluate_ranking(ctx)

    def figures(self, spec: TaskSpec) -> tuple[Figure, ...]:
        return FIGURES

    def selection(self, spec: TaskSpec) -> str | None:
        return "devacc"

    def lines(self, spec: TaskSpec, results: Mapping[str, Any], ci: Mapping[str, Any] | None) -> list[Line]:
        lines: list[Line] = []
        acc = results.get("acc")
        if not isinstance(acc, Mapping):
            return lines
        for direction, label in DIRECTIONS:
            m = acc.get(direction) or {}
            lines.append(
                Line(
                    f"{label} R@1 | R@5 | R@10, medr",
                    f"{num(m.get('r1'))} | {num(m.get('r5'))} | {num(m.get('r10'))}, {num(m.get('medr'), '{:.1f}')}",
                )
            )
        lines.append(Line("mean of the six R@K %", num(acc.get("mean_recall")) + ci_text(ci, "acc.mean_recall", 1.0)))
        lines.append(Line("dev score (R@1+5+10 both ways, max 600)", num(results.get("devacc"))))
        return lines

    def columns(self, spec: TaskSpec) -> tuple[Column, ...]:
        if not spec.report.show:
            return ()
        return (
            Column(
                spec.report.group or "transfer",
                "acc.mean_recall",
                "mean of R@1/5/10 both ways %",
                header=spec.report.header,
                order=spec.report.order,
                note="mean of R@1, R@5, R@10 (%) image->text and text->image, 5 folds of 1k images",
            ),
        )

    def unit_bytes(self, spec: TaskSpec, count: int, dim: int, config: Any) -> int:
        return 4 * count * dim * 3


KIND = CaptionRanking()
