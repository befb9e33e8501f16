"""Relatedness with SentEval's supervised regressor (SICK-R, STS-B, and a user's scored pairs with
train, dev and test splits).

The regressor (Tai et al., 2015, as SentEval trains it) learns a distribution over the scores 1..5
from the pair features [|u-v|, u*v], with early stopping on the dev Pearson; scores must lie in
0..5 (rescale other ranges). Figures: the cosine Spearman of the test split (SimCSE's unsupervised
protocol; the headline), and the regressor's test Pearson and Spearman; the dev Pearson selects.
With an [mteb] table whose pooled_splits name splits, MTEB's figure: the cosine over those splits
pooled (SICK-R). Files: train, dev and test with sentence1, sentence2 and score columns.
In `embeval report` the regressor's Pearson stands in the transfer table and the cosine Spearman
in the STS table, at the task's [report] order there.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from embeval.tasks.figures import Column, Figure, lookup
from embeval.tasks.kind import Kind, Line, ci_text, num, pct
from embeval.tasks.spec import TaskSpec

FIGURES = (
    Figure("cosine.spearman", "cosine Spearman (test)", False),
    Figure("pearson", "regressor Pearson (test)", False),
    Figure("spearman", "regressor Spearman (test)", False),
)


class Relatedness(Kind):
    name = "relatedness"
    mteb_type = "STS"  # MTEB's task type of its tasks (benchmark means per type)
    summary = "scored sentence pairs with train/dev/test; SentEval's supervised regressor, and cosine"

    def file_keys(self, protocol: str | None) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
        return ("train", "dev", "test"), (), False

    def column_keys(self, protocol: str | None) -> tuple[str, ...]:
        return ("sentence1", "sentence2", "score")

    def load(self, spec: TaskSpec, paths: Mapping[str, Path]) -> Any:
        from embeval.tasks.samples import read_splits

        return read_splits(spec, paths, ("train", "dev", "test"), ("sentence1", "sentence2", "score"), "score")

    def evaluate(self, ctx: Any) -> Any:
        from embeval.evaluate import relatedness

        return relatedness.evaluate_relatedness(ctx)

    def figures(self, spec: TaskSpec) -> tuple[Figure, ...]:
        return FIGURES

    def selection(self, spec: TaskSpec) -> str | None:
        return "devpearson"

    def lines(self, spec: TaskSpec, results: Mapping[str, Any], ci: Mapping[str, Any] | None) -> list[Line]:
        lines = []
        cosine = results.get("cosine")
        if isinstance(cosine, Mapping):
            lines.append(
                Line(
                    "cosine Spearman | Pearson x100 (test)",
                    f"{pct(cosine.get('spearman'))}{ci_text(ci, 'cosine.spearman')} | {pct(cosine.get('pearson'))}",
                )
            )
        normalized = results.get("normalized")
        if isinstance(normalized, Mapping) and isinstance(normalized.get("cosine"), Mapping):
            c = normalized["cosine"]
            lines.append(
                Line(
                    f"{normalized.get('method')} cosine Spearman | Pearson x100 (test)",
                    f"{pct(c.get('spearman'))}{ci_text(ci, 'normalized.cosine.spearman')} | {pct(c.get('pearson'))}",
                )
            )
        if "mse" in results:
            lines.append(
                Line(
                    "Spearman | Pearson x100, MSE (test)",
                    f"{pct(results.get('spearman'))} | {pct(results.get('pearson'))}"
                    f"{ci_text(ci, 'pearson')}, {num(results.get('mse'), '{:.3f}')}",
                )
            )
            lines.append(Line("dev Pearson x100", pct(results.get("devpearson"))))
        return lines

    def columns(self, spec: TaskSpec) -> tuple[Column, ...]:
        """The regressor's test Pearson (transfer table) and the cosine Spearman of the test split (STS
        table, at the task's [report] order there)."""
        if not spec.report.show:
            return ()
        regressor = (
            "test Pearson x100 of SentEval's supervised regressor on [|u-v|, u*v] (the same in every "
            "classifier's table)"
        )
        return (
            Column(
                spec.report.group or "transfer",
                "pearson",
                "Pearson x100, regressor",
                scale=100.0,
                header=spec.report.header,
                measure="pearson",
                protocol="regressor",
                split="test",
                note=regressor,
            ),
            Column(
                "sts",
                "cosine.spearman",
                "Spearman x100",
                scale=100.0,
                header=spec.report.header,
                order=spec.report.order,
                measure="spearman",
                protocol="cosine",
                split="test",
                note="the test split",
            ),
        )

    def mteb_scores(self, spec: TaskSpec, results: Mapping[str, Any]) -> dict[str, Any] | None:
        if spec.mteb is None or not spec.mteb.figures:
            return None
        spearman, pearson = (lookup(results, spec.mteb.figures.format(coef=c)) for c in ("spearman", "pearson"))
        if not isinstance(spearman, (int, float)) or not isinstance(pearson, (int, float)):
            return None
        pairs = lookup(results, spec.mteb.figures.split(".")[0] + ".nsamples")
        return {
            "cosine_spearman": spearman,
            "cosine_pearson": pearson,
            "main_score": spearman,
            "pairs": pairs if isinstance(pairs, int) else None,
        }

    def unit_bytes(self, spec: TaskSpec, count: int, dim: int, config: Any) -> int:
        return 4 * count * dim * 3


KIND = Relatedness()
