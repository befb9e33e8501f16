"""Regression of a number from a sentence, scored as MTEB scores it (embeval.evaluate.mteb_regression,
mteb 2.26.24's AbsTaskRegression): n_experiments times, scikit-learn's linear regression fitted on the
train split (all of it when it holds at most n_samples rows, else mteb's stratified subsample of
n_samples rows with seed + experiment) and tested on the whole test split.

Files: `train` and `test` with text and value columns (tsv, csv or jsonl); a value is a finite
number. Keys, with MTEB's defaults (its task attributes of the same names): n_experiments (10),
n_samples (2048), seed (42, MTEB's task seed, not the run's --seed). Only the train sentences some
experiment draws are exported.
Figures (means over the experiments): kendalltau (Kendall's tau-b, the headline: MTEB's main score),
r2, and mae, mse, rmse in the values' own units; `scores_per_experiment` holds each experiment's.
The bootstrap resamples the test sentences, each experiment's predictions fixed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embeval.kinds.mteb_experiments import Draws, fitting, inputs, read_integers
from embeval.kinds.mteb_shared import fractions_line, lazy_statistic
from embeval.kinds.mteb_shared import score_fields as mteb_fields
from embeval.tasks.declaration import Declaration
from embeval.tasks.figures import Column, Figure, lookup
from embeval.tasks.groups import Group
from embeval.tasks.kind import Kind, Line, num
from embeval.tasks.spec import TaskSpec

SET_KIND = "mteb-regression"  # the prediction set's kind: the test values, each experiment's predictions
FIGURES = (
    Figure("kendalltau", "Kendall's tau", False),
    Figure("r2", "R²", False),
    Figure("mae", "MAE (the values' units)", True),  # percent=True: shown as they are, never x100
    Figure("mse", "MSE (the values' units squared)", True),
    Figure("rmse", "RMSE (the values' units)", True),
)
MTEB_KEYS = ("mae", "mse", "rmse", "r2", "kendalltau", "scores_per_experiment")
GROUP = "mteb-regression"
DRAWS = Draws()  # the experiments' training sets, drawn from the train split's values
# mteb's task attributes and the keys of a task file that take them (for tasks made from mteb's metadata).
MTEB_ATTRIBUTES = {"n_experiments": "n_experiments", "n_samples": "n_samples", "seed": "seed"}


@dataclass(frozen=True)
class RegressionParams:
    """MTEB's protocol, with MTEB's defaults (AbsTaskRegression)."""

    n_experiments: int = 10
    n_samples: int = 2048
    seed: int = 42

    def training_rows(self, values: Any) -> list[Any]:
        """The train rows of each experiment, as mteb draws them."""
        from embeval.evaluate import mteb_regression

        return mteb_regression.training_rows(values, self.n_experiments, self.n_samples, self.seed)


class Regression(Kind):
    name = "regression"
    summary = "sentences with a number; linear regression over a subsample of train, MTEB's experiments"
    statistics = {
        SET_KIND: {f.path: lazy_statistic("embeval.evaluate.mteb_regression", f.path, False) for f in FIGURES}
    }
    groups = {
        GROUP: Group(
            GROUP,
            "Regression (MTEB), x100",
            "Regression as MTEB scores it (mteb 2.26.24's AbsTaskRegression, figures equal to its evaluator's "
            "under its seeds): scikit-learn's linear regression trained on the train split (or mteb's stratified "
            "subsample of it), tested on the test split, Kendall's tau of the predictions x100, mean over the "
            "experiments",
        )
    }

    def file_keys(self, protocol: str | None) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
        return ("train", "test"), (), False

    def column_keys(self, protocol: str | None) -> tuple[str, ...]:
        return ("text", "value")

    def read_params(self, decl: Declaration, protocol: str | None) -> RegressionParams:
        bounds = (("n_experiments", 1), ("n_samples", 2), ("seed", 0))
        return RegressionParams(**read_integers(decl, RegressionParams, bounds))

    def load(self, spec: TaskSpec, paths: Mapping[str, Path]) -> Any:
        from embeval.errors import DataFileError
        from embeval.tasks.samples import read_splits

        data = read_splits(spec, paths, ("train", "test"), ("text", "value"), "score")
        try:
            DRAWS.drawn(spec, data)
        except ValueError as err:
            raise DataFileError(f"{err}; with {spec.params.n_samples} samples", file=paths["train"], task=spec.name)
        return data

    def sentences(self, spec: TaskSpec, data: Any) -> dict[str, list[str]]:
        return DRAWS.sentences(spec, data)

    def rows(self, spec: TaskSpec, data: Any, row_of: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
        return DRAWS.rows(spec, data, row_of)

    def sizes(self, spec: TaskSpec, data: Any) -> str:
        return f"{super().sizes(spec, data)} ({DRAWS.note(spec, data)})"

    def figures(self, spec: TaskSpec) -> tuple[Figure, ...]:
        return FIGURES

    def normalizes(self, spec: TaskSpec) -> bool:
        return False

    def evaluate(self, ctx: Any) -> dict[str, Any]:
        from embeval.evaluate import mteb_regression
        from embeval.formats.predictions import PredictionSet

        params = ctx.task.params
        train, test = ctx.data.splits["train"], ctx.data.splits["test"]
        train_vectors, test_vectors = inputs(ctx)
        with fitting():
            figures, arrays = mteb_regression.regress(
                train_vectors,
                train.y,
                test_vectors,
                test.y,
                n_experiments=params.n_experiments,
                n_samples=params.n_samples,
                seed=params.seed,
            )
        ctx.keep(
            "",
            PredictionSet(
                SET_KIND, arrays, tuple(f.path for f in FIGURES), "test split, file order; one column per experiment"
            ),
        )
        return dict(figures, test_items=len(test))

    def lines(self, spec: TaskSpec, results: Mapping[str, Any], ci: Mapping[str, Any] | None) -> list[Line]:
        from embeval.tasks.kind import ci_text

        experiments = spec.params.n_experiments
        raw = " | ".join(
            num(lookup(results, path), "{:.4g}") + ci_text(ci, path, 1.0) for path in ("mae", "mse", "rmse")
        )
        return [
            fractions_line(
                f"Kendall's tau | R² x100 (MTEB, {experiments} experiments)", results, ("kendalltau", "r2"), ci
            ),
            Line("MAE | MSE | RMSE", raw),
        ]

    def columns(self, spec: TaskSpec) -> tuple[Column, ...]:
        if not spec.report.show:
            return ()
        main = spec.headline
        scaled = not main.percent
        return (
            Column(
                spec.report.group or GROUP,
                main.path,
                f"{main.label} x100" if scaled else main.label,
                scale=100.0 if scaled else 1.0,
                header=spec.report.header,
                order=spec.report.order,
                note=f"{main.label}, {spec.params.n_experiments} experiments",
            ),
        )

    def mteb_scores(self, spec: TaskSpec, results: Mapping[str, Any]) -> dict[str, Any] | None:
        return mteb_fields(spec, results, MTEB_KEYS)


KIND = Regression()
