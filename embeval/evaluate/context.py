"""What every evaluator receives: the task, its data, the sentence table and the run settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from embeval.settings import RunConfig
from embeval.tasks.spec import TaskSpec

if TYPE_CHECKING:  # the annotations only: the run's progress lines import this module without torch
    import numpy as np
    import torch


class Progress:
    """Where an evaluator reports the stages of a long task. This one reports nothing; the runner
    passes one that prints (embeval.run.progress)."""

    def stage(self, label, total=None, unit="round"):
        """A new stage: what it does, and its number of steps when known (an upper bound for early
        stopping)."""

    def step(self, done, detail="", total=None):
        """`done` steps of the current stage are finished; detail: what is going on, in words; total: the
        stage's number of steps, when it has become known or grown since the stage began."""


QUIET = Progress()


@dataclass
class Context:
    """What an evaluator receives. `task` is the TaskSpec (its kind's typed parameters in
    task.params); `data` its data. `table` is the task's per-sentence float32 table on `device`;
    `rows[split]` maps each sample of a split (file order) to its rows in that table: (first
    sentences, second or None). A kind whose sentences have several roles (queries and documents)
    reads them from `sources[role]` (rows read on demand: embeval.run.execute.RoleSource).

    `progress` receives the stages of long steps (folds, rounds, epochs).
    `normalize` is the normalization method to apply (embeval.evaluate.normalize); `reference` is the
    Context of the task that lends its train split for the statistics (and its dev split for
    tuning) of tasks without one (STSBenchmark for STS12-16). Evaluators put their per-test-item
    predictions in `predictions` with `keep` (embeval.formats.predictions). Evaluations that fit
    classifiers are generators yielding embeval.evaluate.classify.FitRequest."""

    task: TaskSpec
    data: Any
    table: torch.Tensor | None
    rows: dict[str, tuple[np.ndarray, np.ndarray | None]]
    device: torch.device
    config: RunConfig = field(default_factory=RunConfig)
    seed: int = 1111
    progress: Progress = QUIET
    normalize: str = "none"
    reference: Context | None = None
    predictions: dict = field(default_factory=dict)
    sources: dict = field(default_factory=dict)

    def keep(self, name, prediction_set):
        """Record the prediction set whose figures sit at path `name` of the results."""
        self.predictions[name] = prediction_set
