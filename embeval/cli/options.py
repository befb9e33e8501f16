"""Command-line options generated from embeval.settings' declarations: each option's type, choices,
default, metavar and help are declared once there, and every command (score, sweep, quickstart)
takes its options from here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from embeval.settings import DEVICE, MEMORY_BUDGET, SAVE_PREDICTIONS, RunConfig, Setting, declared

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def setting_option(setting: Setting, name: str, help: str | None = None) -> Decorator:
    """The click option of a declared setting; `name` is the command function's parameter. `help`
    replaces the declared help text where a command words it for its own use."""
    text = setting.help if help is None else help
    if setting.kind is bool:
        return click.option(setting.option, name, default=setting.default, show_default=True, help=text)
    default = None if setting.from_config or callable(setting.default) else setting.default
    kind: Any = click.Choice(setting.choices) if setting.choices else (int if setting.kind is int else str)
    return click.option(
        setting.option,
        name,
        type=kind,
        default=default,
        show_default=default is not None,
        metavar=setting.metavar,
        help=text,
    )


def config_option(name: str, help: str | None = None) -> Decorator:
    """The option of the RunConfig field `name` (its parameter has the field's name)."""
    return setting_option(declared(RunConfig)[name], name, help)


def device_option(help: str | None = None) -> Decorator:
    return setting_option(DEVICE, "device", help)


def memory_budget_option() -> Decorator:
    return setting_option(MEMORY_BUDGET, "memory_budget")


def options(*decorators: Decorator) -> Decorator:
    """Several options as one decorator, listed in --help in the order given."""

    def apply(command: Callable[..., Any]) -> Callable[..., Any]:
        for decorator in reversed(decorators):
            command = decorator(command)
        return command

    return apply


def comparison_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options of a fair comparison (docs/comparison.md), shared by score and quickstart."""
    return options(
        config_option("classifiers"),
        config_option("normalize"),
        config_option("bootstrap"),
        config_option("baseline_bow_dim"),
        setting_option(SAVE_PREDICTIONS, "save_predictions"),
    )(command)


def threads_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """--threads N: torch's CPU threads for the run (embeval.threads.choose checks it)."""
    return click.option(
        "--threads",
        "threads",
        type=int,
        default=None,
        metavar="N",
        help="CPU threads for the run (default: OMP_NUM_THREADS, else the CPUs this process may use: its "
        "affinity and container quota). Figures do not depend on it.",
    )(command)
