"""SentEval's optimizer string, checked without torch: the table of torch.optim's optimizers.

The string is SentEval's (`get_optimizer`): `name` or `name,key=value,...` with one of adadelta,
adagrad, adam, adamax, asgd, rmsprop, rprop, sgd (sgd needs lr), torch.optim's keyword names, plain
decimal values (no exponent) and torch's defaults for the rest. OPTIMIZERS declares, once, each
optimizer's torch.optim class, its keywords with torch's defaults (in its signature's order) and the
values its constructor refuses; `parse` reads a string against it. The trainer
(embeval.train.optimizers) takes its classes and settings from this table, and a test checks the
table against torch.optim itself (signatures, defaults, what each constructor accepts).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Rule = Callable[[Mapping[str, Any]], "str | None"]  # the values -> why torch refuses them, or None

PAIRS = ("betas", "etas", "step_sizes")  # torch takes a pair; the string gives one number
IMPLEMENTATION = ("foreach", "fused", "capturable", "differentiable")  # torch's code path, not its arithmetic
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)$")  # SentEval's


def _at_least_zero(key: str, label: str) -> Rule:
    """torch's `if not 0.0 <= value: raise ValueError(f"Invalid {label}: {value}")`."""
    return lambda v: None if v[key] >= 0.0 else f"Invalid {label}: {v[key]}"


def _rho(v: Mapping[str, Any]) -> str | None:
    return None if 0.0 <= v["rho"] <= 1.0 else f"Invalid rho value: {v['rho']}"


def _nesterov(v: Mapping[str, Any]) -> str | None:
    if v["nesterov"] and (v["momentum"] <= 0 or v["dampening"] != 0):
        return "Nesterov momentum requires a momentum and zero dampening"
    return None


def _fused(v: Mapping[str, Any]) -> str | None:
    if v["fused"] and v["differentiable"]:
        return "`fused` does not support `differentiable`"
    if v["fused"] and v["foreach"]:
        return "`fused` and `foreach` cannot be `True` together."
    return None


LR = _at_least_zero("lr", "learning rate")
EPS = _at_least_zero("eps", "epsilon value")
DECAY = _at_least_zero("weight_decay", "weight_decay value")


@dataclass(frozen=True)
class Optimizer:
    """One torch.optim optimizer: its class name, its keywords with torch's defaults (signature order)
    and the checks its constructor makes, in its order."""

    torch_class: str
    defaults: tuple[tuple[str, Any], ...]
    rules: tuple[Rule, ...]

    @property
    def keywords(self) -> list[str]:
        return [key for key, _ in self.defaults]


_FLAGS = (("maximize", False), ("differentiable", False))
OPTIMIZERS: dict[str, Optimizer] = {
    "adadelta": Optimizer(
        "Adadelta",
        (("lr", 1.0), ("rho", 0.9), ("eps", 1e-6), ("weight_decay", 0), ("foreach", None), ("capturable", False))
        + _FLAGS,
        (LR, _rho, EPS, DECAY),
    ),
    "adagrad": Optimizer(
        "Adagrad",
        (
            ("lr", 1e-2),
            ("lr_decay", 0),
            ("weight_decay", 0),
            ("initial_accumulator_value", 0),
            ("eps", 1e-10),
            ("foreach", None),
        )
        + _FLAGS
        + (("fused", None),),
        (
            LR,
            _at_least_zero("lr_decay", "lr_decay value"),
            DECAY,
            _at_least_zero("initial_accumulator_value", "initial_accumulator_value value"),
            EPS,
            _fused,
        ),
    ),
    "adam": Optimizer(
        "Adam",
        (
            ("lr", 1e-3),
            ("betas", (0.9, 0.999)),
            ("eps", 1e-8),
            ("weight_decay", 0),
            ("amsgrad", False),
            ("foreach", None),
            ("maximize", False),
            ("capturable", False),
            ("differentiable", False),
            ("fused", None),
            ("decoupled_weight_decay", False),
        ),
        (LR, EPS, DECAY, _fused),
    ),
    "adamax": Optimizer(
        "Adamax",
        (("lr", 2e-3), ("betas", (0.9, 0.999)), ("eps", 1e-8), ("weight_decay", 0), ("foreach", None))
        + _FLAGS
        + (("capturable", False),),
        (LR, EPS, DECAY),
    ),
    "asgd": Optimizer(
        "ASGD",
        (
            ("lr", 1e-2),
            ("lambd", 1e-4),
            ("alpha", 0.75),
            ("t0", 1e6),
            ("weight_decay", 0),
            ("foreach", None),
        )
        + _FLAGS
        + (("capturable", False),),
        (LR, DECAY),
    ),
    "rmsprop": Optimizer(
        "RMSprop",
        (
            ("lr", 1e-2),
            ("alpha", 0.99),
            ("eps", 1e-8),
            ("weight_decay", 0),
            ("momentum", 0),
            ("centered", False),
            ("capturable", False),
            ("foreach", None),
        )
        + _FLAGS,
        (LR, EPS, _at_least_zero("momentum", "momentum value"), DECAY, _at_least_zero("alpha", "alpha value")),
    ),
    "rprop": Optimizer(
        "Rprop",
        (("lr", 1e-2), ("etas", (0.5, 1.2)), ("step_sizes", (1e-6, 50)), ("capturable", False), ("foreach", None))
        + _FLAGS,
        (LR,),
    ),
    "sgd": Optimizer(
        "SGD",
        (
            ("lr", 1e-3),
            ("momentum", 0),
            ("dampening", 0),
            ("weight_decay", 0),
            ("nesterov", False),
            ("maximize", False),
            ("foreach", None),
            ("differentiable", False),
            ("fused", None),
        ),
        (LR, _at_least_zero("momentum", "momentum value"), DECAY, _nesterov, _fused),
    ),
}


def given_settings(text: str) -> tuple[str, dict[str, float]]:
    """'sgd,lr=0.1' -> ("sgd", {"lr": 0.1}): the name and the keywords the string gives, as SentEval
    splits them (a ValueError with a one-line message where SentEval fails)."""
    name, _, rest = text.partition(",")
    given = {}
    if rest or text.endswith(","):
        for part in rest.split(","):
            pieces = part.split("=")
            if len(pieces) != 2:
                raise ValueError(f"optimizer setting {part!r} is not key=value (in {text!r})")
            if not _NUMBER.match(pieces[1]):
                raise ValueError(
                    f"value {pieces[1]!r} of {pieces[0]} is not a plain decimal number such as 0.01 (in {text!r})"
                )
            given[pieces[0]] = float(pieces[1])
    return name, given


def parse(text: object) -> tuple[str, dict[str, Any]]:
    """'adam' or 'sgd,lr=0.1,momentum=0.9' -> (name, settings): every keyword of the torch.optim class
    that shapes the arithmetic, at the string's value or torch's default (flags as bools).

    Refused with a one-line ValueError, as SentEval and torch.optim refuse them: an unknown name, a
    part that is not key=value, a value that is not a plain decimal, a keyword the class does not
    take, sgd without lr, a pair-valued keyword (betas, etas, step_sizes) given as one number, and the
    values the class's constructor refuses (negative lr, Nesterov without momentum...)."""
    text = str(text)
    name, given = given_settings(text)
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}; use one of {', '.join(OPTIMIZERS)}")
    if name == "sgd" and "lr" not in given:
        raise ValueError("optimizer sgd needs a learning rate, e.g. sgd,lr=0.1")
    optimizer = OPTIMIZERS[name]
    unexpected = [k for k in given if k not in optimizer.keywords]
    if unexpected:
        raise ValueError(
            f"torch.optim.{optimizer.torch_class} takes no {', '.join(map(repr, unexpected))}; its settings are "
            f"{', '.join(optimizer.keywords)}"
        )
    pairs = [k for k in given if k in PAIRS]
    if pairs:
        raise ValueError(f"{pairs[0]} of {name} is a pair of numbers, which the optimizer string cannot give")
    values = dict(optimizer.defaults)
    values.update(given)
    for rule in optimizer.rules:
        problem = rule(values)
        if problem is not None:
            raise ValueError(f"torch.optim.{optimizer.torch_class} refuses {text!r}: {problem}")
    flags = {key for key, default in optimizer.defaults if isinstance(default, bool)}
    return name, {
        key: bool(value) if key in flags else value
        for key, value in values.items()
        if key not in IMPLEMENTATION and key != "weight_decay"
    }


def problem(text: object) -> str | None:
    """Why the optimizer string is refused (one line), or None when it is accepted."""
    try:
        parse(text)
    except ValueError as err:
        return str(err)
    return None
