"""The `embeval` command: click commands, option types and one-line errors."""

from embeval.cli.main import cli, main

__all__ = ["cli", "main"]
