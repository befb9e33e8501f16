"""MTEB's experiment protocol, shared by the kinds that fit a scikit-learn model on training sets
drawn from a train split and test it on the whole test split (classification's "mteb" protocol,
multilabel classification, regression): the protocol's integer keys (samples per label,
experiments, seeds: each kind's params class holds its defaults and draws its experiments'
`training_rows`), the train sentences exported (only those some experiment draws: mteb embeds
only those, and the draws depend on the labels and the seed only), where the samples are in the
sentence table, and the fits' inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from embeval.tasks.declaration import Declaration
from embeval.tasks.kind import TEXT
from embeval.tasks.spec import TaskSpec


def read_integers(decl: Declaration, params: type, bounds: Sequence[tuple[str, int]]) -> dict[str, int]:
    """{key: value} of the integer keys `bounds` names (key, least value), the params class's
    defaults for the keys absent."""
    return {key: decl.integer(key, getattr(params, key), least) for key, least in bounds}


def _train_y(data: Any) -> Any:
    return data.splits["train"].y


@dataclass(frozen=True)
class Draws:
    """The experiments' draws from a task's train split: `labels` gives what the draws read of the
    loaded data (default: the train split's labels or values)."""

    labels: Callable[[Any], Any] = _train_y

    def drawn(self, spec: TaskSpec, data: Any) -> list[int]:
        """The train rows some experiment draws, in file order."""
        return sorted({int(i) for rows in spec.params.training_rows(self.labels(data)) for i in rows})

    def sentences(self, spec: TaskSpec, data: Any) -> dict[str, list[str]]:
        """The drawn train sentences, then the test split's, each once."""
        train = data.splits["train"]
        return {TEXT: list(dict.fromkeys([train.a[i] for i in self.drawn(spec, data)] + data.splits["test"].a))}

    def rows(self, spec: TaskSpec, data: Any, row_of: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
        """Each train sample's row in the table (-1: never drawn, not exported), each test sample's."""
        import numpy as np

        train, test = data.splits["train"], data.splits["test"]
        train_rows = np.full(len(train), -1, dtype=np.int64)
        for i in self.drawn(spec, data):
            train_rows[i] = row_of[TEXT][train.a[i]]
        return {
            "train": (train_rows, None),
            "test": (np.array([row_of[TEXT][s] for s in test.a], dtype=np.int64), None),
        }

    def note(self, spec: TaskSpec, data: Any) -> str:
        """What `embeval tasks` adds to the sizes."""
        return f"{len(self.drawn(spec, data))} train sentences drawn"


class RowsOf:
    """Rows of a table by sample: rows_of[idx] is table[rows[idx]] (a sample without a row is an error)."""

    def __init__(self, table: Any, rows: Any):
        self.table, self.rows = table, rows

    def __getitem__(self, index: Any) -> Any:
        rows = self.rows[index]
        if (rows < 0).any():
            raise ValueError("a training sentence that was not exported was asked for")
        return self.table[rows]


def inputs(ctx: Any) -> tuple[RowsOf, Any]:
    """(the train samples' vectors by sample, the test samples' vectors) of an evaluation's table."""
    table = ctx.table.cpu().numpy()
    return RowsOf(table, ctx.rows["train"][0]), table[ctx.rows["test"][0]]


@contextmanager
def fitting() -> Iterator[None]:
    """Where the experiments' small fits run: scikit-learn on one thread (a pool of threads made them
    12x slower on a shared machine, bench/mteb_threads.py), and a label never predicted scoring 0
    (scikit-learn's and mteb's figure) without a warning."""
    import warnings

    from sklearn.exceptions import UndefinedMetricWarning
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        yield
