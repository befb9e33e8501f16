"""Reading a task's declaration: a TOML table (a task file, or an entry of the built-in tasks),
with every key checked once, at the boundary, and every problem one line naming the file, the task
and the key."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from embeval.errors import EmbevalError

MISSING: Any = object()

# The largest value of each integer setting of a task file, and why: beyond it the work a task asks for
# (experiments x fits, samples drawn, iterations, neighbours, documents) has no use and no bound. Every
# other integer a declaration holds is at most ANY_INTEGER in magnitude (take checks both).
EXPERIMENTS = (1_000, "experiments repeat the whole fit; MTEB uses 10")
MOST: dict[str, tuple[int, str]] = {
    "n_experiments": EXPERIMENTS,
    "samples_per_label": (1_000_000, "a training sample larger than any train split"),
    "n_samples": (10_000_000, "a training sample larger than any train split"),
    "max_iter": (100_000, "the solver's iterations; MTEB uses 100"),
    "max_epoch": (100_000, "the classifier's epochs; SentEval stops at 200"),
    "epoch_size": (1_000, "passes over the train split per epoch; SentEval uses 4"),
    "n_neighbors": (10_000, "neighbours of each test item; MTEB uses 5"),
    "max_eval_samples": (100_000_000, "test items"),
    "documents_per_experiment": (100_000_000, "documents clustered at once"),
    "max_documents": (1_000_000_000, "documents embedded"),
    "batch_size": (1_000_000, "items of one k-means batch"),
    "max_depth": (1_000, "levels of a hierarchy"),
    "depth": (1_000_000, "documents ranked per query; MTEB uses 1000"),
    "seed": (2**32 - 1, "numpy's seeds are 32-bit"),
}
MOST_SEEDS = 100  # entries of a `seeds` list (each a run of the whole task)
ANY_INTEGER = 2**31 - 1


class TaskFileError(EmbevalError):
    """A task declaration that cannot be used: malformed, an unknown kind or key, a bad value."""


def _type_name(types: tuple[type, ...]) -> str:
    names = {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "true or false",
        list: "a list",
        dict: "a table",
    }
    return " or ".join(names.get(t, t.__name__) for t in types)


@dataclass
class Declaration:
    """One task's table. `take` reads a key (recording that it was read); `finish` refuses the keys
    nobody read, so a misspelt key is an error, never silently ignored."""

    table: Mapping[str, Any]
    source: str  # the task file, or "built-in"
    name: str = "?"
    prefix: str = ""  # "files." for a sub-table, for messages
    _read: set[str] = field(default_factory=set)

    def error(self, message: str, key: str | None = None) -> TaskFileError:
        where = f"{self.prefix}{key}: " if key else ""
        return TaskFileError(f"{where}{message}", file=self.source, task=self.name)

    def has(self, key: str) -> bool:
        return key in self.table

    def take(
        self, key: str, types: tuple[type, ...] = (str,), default: Any = MISSING, choices: Sequence[Any] | None = None
    ) -> Any:
        """The value of `key`, checked to be of `types` (and one of `choices`); `default` when absent
        (an error when there is none)."""
        self._read.add(key)
        if key not in self.table:
            if default is MISSING:
                raise self.error("is required", key)
            return default
        value = self.table[key]
        if isinstance(value, int) and not isinstance(value, bool):
            most, why = MOST.get(key, (ANY_INTEGER, ""))
            if abs(value) > most:
                raise self.error(f"must be at most {most:,}, got {value:,}" + (f" ({why})" if why else ""), key)
        if float in types and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise self.error(f"must be {_type_name(types)}, got {value!r}", key)
        if isinstance(value, float) and not math.isfinite(value):
            raise self.error(f"must be a finite number, got {value}", key)
        if choices is not None and value not in choices:
            raise self.error(f"{value!r} is not one of {', '.join(map(str, choices))}", key)
        return value

    def integer(self, key: str, default: Any = MISSING, least: int | None = None) -> Any:
        """An integer of at least `least` (and, as every integer, at most its bound in MOST) (`default`,
        which may be None, when absent)."""
        value = self.take(key, (int,), default)
        if least is not None and value is not None and value < least:
            raise self.error(f"must be an integer >= {least}, got {value}", key)
        return value

    def strings(self, key: str, default: Any = MISSING) -> tuple[str, ...]:
        """A list of strings (a tuple), each non-empty and listed once."""
        values = self.take(key, (list,), default)
        if values is default:
            return default
        if not all(isinstance(v, str) and v for v in values):
            raise self.error("must be a list of non-empty strings", key)
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:
            raise self.error(f"lists {', '.join(twice)} twice", key)
        return tuple(values)

    def sub(self, key: str, default: Any = MISSING) -> Declaration | None:
        """A sub-table as a Declaration of its own (None when absent and default is None)."""
        value = self.take(key, (dict,), default)
        if value is None:
            return None
        return Declaration(value, self.source, self.name, f"{self.prefix}{key}.")

    def finish(self, allowed_elsewhere: Sequence[str] = ()) -> None:
        unknown = [k for k in self.table if k not in self._read and k not in allowed_elsewhere]
        if unknown:
            raise TaskFileError(self._unknown_message(unknown), file=self.source, task=self.name)

    def misspelt(self) -> TaskFileError | None:
        """The error naming the keys not read so far that are close to a key that was read (a misspelt
        `protocl` leaves `protocol` at its default: report the key, not what the default caused)."""
        from difflib import get_close_matches

        close = [k for k in self.table if k not in self._read and get_close_matches(k, self._read, n=1, cutoff=0.8)]
        return TaskFileError(self._unknown_message(close), file=self.source, task=self.name) if close else None

    def _unknown_message(self, unknown: Sequence[str]) -> str:
        from difflib import get_close_matches

        named = []
        for key in unknown:
            close = get_close_matches(key, sorted(self._read), n=1, cutoff=0.8)
            named.append(f"{self.prefix}{key}" + (f" (did you mean {self.prefix}{close[0]}?)" if close else ""))
        return f"unknown key{'s' if len(named) > 1 else ''} {', '.join(named)}"
