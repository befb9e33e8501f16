"""What every command shares: one-line errors, warnings on stderr, progress lines, common options."""

import contextlib
import functools
import logging
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Any

import click

from embeval.errors import EXIT_BAD_INPUT, EmbevalError, Terminated


class _StderrHandler(logging.Handler):
    """Warnings as `embeval: warning: ...` lines on the current stderr."""

    def emit(self, record):
        click.echo(f"embeval: {record.levelname.lower()}: {record.getMessage()}", err=True)


def setup_logging():
    log = logging.getLogger("embeval")
    if not any(isinstance(h, _StderrHandler) for h in log.handlers):
        log.addHandler(_StderrHandler())
        log.setLevel(logging.INFO)
        log.propagate = False


def fails_cleanly(command):
    """Report EmbevalError as one line on stderr with exit code 2, never a traceback."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        setup_logging()
        try:
            return command(*args, **kwargs)
        except EmbevalError as err:
            click.echo(f"embeval: error: {err}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except Terminated:
            click.echo("embeval: terminated", err=True)
            sys.exit(EXIT_TERMINATED)
        except KeyboardInterrupt:
            click.echo("embeval: interrupted", err=True)
            sys.exit(130)

    return wrapper


EXIT_TERMINATED = 128 + signal.SIGTERM


@contextlib.contextmanager
def sigterm_stops_like_ctrl_c():
    """Within the block, SIGTERM raises Terminated (a KeyboardInterrupt) in the main thread, once; a second
    SIGTERM while the run cleans up is ignored. Outside the main thread, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def status(message):
    """Progress lines, shown only on an interactive terminal (stderr stays clean for errors)."""
    if sys.stderr.isatty():
        click.echo(message, err=True)


def say(message):
    """A line on stderr, terminal or not (a log of a long run shows it is alive)."""
    click.echo(message, err=True)


data_option = click.option(
    "--data",
    "data",
    metavar="DIR",
    default=None,
    help="SentEval data folder (with downstream/ and probing/). Default: $EMBEVAL_DATA, "
    "else the per-user data folder (see `embeval data list`).",
)
_task_file = click.option(
    "--task-file",
    "task_files",
    multiple=True,
    metavar="PATH",
    help="A task file (TOML) or a folder of task files declaring your own tasks (embeval docs tasks); repeatable. "
    "EMBEVAL_TASKS names more (files or folders, separated as in PATH).",
)
_allow_outside = click.option(
    "--allow-paths-outside",
    "allow_paths_outside",
    is_flag=True,
    help="Let a task file's [files] name data outside the task file's folder, and an --mteb dataset copy's "
    "files lead outside --mteb-data (by default a path, symlinks followed, must stay inside it). Recorded in "
    "the results for a task file's tasks.",
)


def task_file_option(command):
    """--task-file (parameter task_files), and --allow-paths-outside (allow_paths_outside) for the files
    its task files and --mteb's dataset copies name."""
    return _task_file(_allow_outside(command))


@dataclass(frozen=True)
class MtebOptions:
    """--mteb NAMES and its options, as a command received them."""

    names: str
    data: str | None = None  # --mteb-data
    allow_revision_mismatch: bool = False
    skip_unsupported: bool = False


_MTEB_OPTIONS = (
    click.option(
        "--mteb",
        "mteb",
        metavar="NAMES",
        default=None,
        help="MTEB's tasks and benchmarks by name, comma-separated (commas inside parentheses belong to "
        'the name: --mteb "MTEB(eng, v2),STS12"); needs the [mteb] extra and the datasets on disk '
        "(embeval docs mteb-by-name).",
    ),
    click.option(
        "--mteb-data",
        "mteb_data",
        metavar="DIR",
        default=None,
        help="Folder of dataset copies, DIR/ORG/NAME as `hf download ORG/NAME --repo-type "
        "dataset --local-dir DIR/ORG/NAME` leaves them. Default: the Hugging Face cache.",
    ),
    click.option(
        "--allow-revision-mismatch",
        "allow_revision_mismatch",
        is_flag=True,
        help="Score a dataset copy whose recorded revision is not mteb's (recorded in the results).",
    ),
    click.option(
        "--skip-unsupported",
        "skip_unsupported",
        is_flag=True,
        help="Leave out a benchmark's tasks embeval cannot score (listed in the results) instead of refusing.",
    ),
)


def mteb_options(command):
    """--mteb NAMES and its options, given to the command as one parameter `mteb`: an MtebOptions, or
    None without --mteb (its options are then unused)."""

    @functools.wraps(command)
    def with_mteb(*args, mteb, mteb_data, allow_revision_mismatch, skip_unsupported, **kwargs):
        chosen = None if mteb is None else MtebOptions(mteb, mteb_data, allow_revision_mismatch, skip_unsupported)
        return command(*args, mteb=chosen, **kwargs)

    for option in reversed(_MTEB_OPTIONS):
        with_mteb = option(with_mteb)
    return with_mteb


def task_registry(task_files, allow_outside=False, mteb=None):
    """The tasks a command knows: the built-ins, EMBEVAL_TASKS's and those of task_files (their data
    inside each task file's folder unless allow_outside), and the MTEB tasks of `mteb`, an
    MtebOptions (a built-in of the same name gives way; a task file's is an error). SIGTERM while
    mteb loads stops as Ctrl-C does (what was being written is removed)."""
    from embeval.tasks.registry import registry

    known = registry(task_files, allow_outside=allow_outside)
    if mteb is None:
        return known
    from embeval.tasks.mteb_source import specs_by_name

    with sigterm_stops_like_ctrl_c():
        specs, unsupported = specs_by_name(
            mteb.names, mteb.data, mteb.allow_revision_mismatch, mteb.skip_unsupported, allow_outside=allow_outside
        )
    return known.with_mteb(specs, unsupported)


def task_names(registry, tasks):
    """The tasks a command runs: those of --tasks (which may name --mteb's), else the MTEB tasks of
    --mteb, else None (all)."""
    if tasks is not None:
        return registry.parse(tasks)
    return list(registry.mteb_names) or None


tasks_option = click.option(
    "--tasks",
    metavar="A,B,...",
    default=None,
    help="Comma-separated task names, in the order given (SentEval's names, any case, or the short names "
    "STS-B, SICK-E, SICK-R, COCO). Default: all.",
)


# The options of the commands that read many results files (compare, rank).
MAX_COMPARE_RESAMPLES = 1_000_000  # paired resamples (Holm over many comparisons may need more than 100,000)

labels_option = click.option(
    "--label",
    "labels",
    multiple=True,
    metavar="NAME",
    help="A name for each results file, in order (default: the vectors file's `model` attribute, else its name).",
)
seed_option = click.option(
    "--seed",
    type=click.IntRange(min=0, max=2**32 - 1),
    default=None,
    help="Seed of the resamples (default: the first file's run seed).",
)


def resamples_option(help: str) -> Any:
    """--resamples N: 100 to MAX_COMPARE_RESAMPLES bootstrap resamples."""
    return click.option(
        "--resamples",
        type=click.IntRange(min=100, max=MAX_COMPARE_RESAMPLES),
        default=None,
        metavar="N",
        help=f"{help}; at most {MAX_COMPARE_RESAMPLES:,}).",
    )


class OneLineErrorsGroup(click.Group):
    """A click group whose usage errors (unknown option, bad value) are one line with exit code 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as err:
            where = f" (see `{err.ctx.command_path} --help`)" if err.ctx is not None else ""
            click.echo(f"embeval: error: {err.format_message()}{where}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except click.ClickException as err:
            click.echo(f"embeval: error: {err.format_message()}", err=True)
            sys.exit(err.exit_code)
        except click.Abort:
            click.echo("embeval: interrupted", err=True)
            sys.exit(130)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)
