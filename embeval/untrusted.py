"""Files from other people: the one place that checks names read from a file, resolves and confines
paths read from a file, and reads a file in bounded memory.

Task files, results files and export manifests travel between people, so everything they name is
checked here before it reaches a path or a dataset name:

- a name (a task's, a dataset's, an MTEB task's) matches one anchored pattern (`NAME`, `FILE_STEM`);
- a path read from a file resolves, symlinks followed, inside the folder of the file that names it
  (`confine`), unless the user allowed it on the command line (`--allow-paths-outside`);
- every file read is a regular file (a FIFO, a device or a folder is refused before it is opened for
  reading), of bounded size; JSON and TOML are nested at most `MAX_DEPTH` levels.
"""

from __future__ import annotations

import errno
import gc
import json
import logging
import os
import re
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from embeval.errors import EmbevalError

logger = logging.getLogger("embeval")

# A task's name: a letter, then letters, digits, '-' or '_'. Checked with fullmatch (no '$', which
# accepts a trailing newline).
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,127}")
# A file name built from a name read from a file (an MTEB task's result file, a vectors dataset and
# export list "TASK.ROLE"): letters, digits, '.', '-' and '_', starting with a letter or digit (never
# '.', '..', a hidden file or a path).
FILE_STEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")

MAX_DEPTH = 64  # nesting of JSON arrays/objects and TOML arrays/tables
MAX_DECLARATION_BYTES = 16 << 20  # a task file, a manifest, a lock file
MAX_RECORD_BYTES = 512 << 20  # a results file
ALLOW_OUTSIDE_OPTION = "--allow-paths-outside"


def is_name(value: object, pattern: re.Pattern[str] = NAME) -> bool:
    """Whether value is a string the whole of which matches pattern."""
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def check_name(
    value: object,
    what: str,
    file: object = None,
    task: str | None = None,
    pattern: re.Pattern[str] = NAME,
    error: type[EmbevalError] = EmbevalError,
) -> str:
    """value, when it is a valid name; else one line saying what a name may hold (the value is shown
    escaped, never as raw text)."""
    if is_name(value, pattern):
        assert isinstance(value, str)
        return value
    shown = ascii(value)[:60] if isinstance(value, str) else type(value).__name__
    rule = (
        "a letter followed by letters, digits, '-' or '_'"
        if pattern is NAME
        else "letters, digits, '.', '-' or '_', starting with a letter or digit"
    )
    raise error(f"{what} {shown} is not a valid name ({rule}, at most 128)", file=file, task=task)


# ---------------------------------------------------------------------------------------------- paths


def confine(
    base: str | Path,
    relative: str,
    allow_outside: bool,
    what: str,
    file: object = None,
    task: str | None = None,
    error: type[EmbevalError] = EmbevalError,
) -> Path:
    """base / relative, which must resolve (symlinks followed) inside base unless allow_outside. The
    path returned is base / relative as written (for messages); its target was checked."""
    path = Path(base) / relative
    if allow_outside:
        return path
    if "\x00" in relative:
        raise error(f"{what}: a path may not hold a NUL character", file=file, task=task)
    root = Path(base).resolve()
    try:
        target = path.resolve()
    except (OSError, RuntimeError) as err:  # a symlink loop
        raise error(f"{what}: cannot resolve {relative!r} ({err})", file=file, task=task)
    if not target.is_relative_to(root):
        raise error(
            f"{what}: {ascii(relative)[1:-1]} is outside {root} (a path read from a file must stay inside its "
            f"folder; symlinks are followed); to read it anyway, give {ALLOW_OUTSIDE_OPTION} on the command line",
            file=file,
            task=task,
        )
    return path


# ---------------------------------------------------------------------------------------------- reading


def size_text(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def regular_file(path: str | Path, error: type[EmbevalError] = EmbevalError, task: str | None = None) -> int:
    """The size of path, a regular file (symlinks followed); a FIFO, a device, a socket or a folder is
    one line, "not a regular file". A missing file raises FileNotFoundError (callers say what is
    missing)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise
    except OSError as err:
        raise error(f"cannot read: {err.strerror}", file=path, task=task)
    if not stat.S_ISREG(info.st_mode):
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "a FIFO, device or socket"
        raise error(f"not a regular file ({kind})", file=path, task=task)
    return info.st_size


def read_bytes(
    path: str | Path,
    limit: int | None,
    error: type[EmbevalError] = EmbevalError,
    task: str | None = None,
    missing: str = "file not found",
) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (None: at most the memory available), each
    problem one line. Opened without blocking and checked again once open, so a FIFO swapped in
    meanwhile never blocks."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error(missing, file=path, task=task)
    except IsADirectoryError:
        raise error("not a regular file (a folder)", file=path, task=task)
    except OSError as err:
        if err.errno == errno.ENXIO:  # a FIFO without writer, opened for reading without blocking: not here
            raise error("not a regular file (a FIFO, device or socket)", file=path, task=task)
        raise error(f"cannot read: {err.strerror}", file=path, task=task)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a folder" if stat.S_ISDIR(info.st_mode) else "a FIFO, device or socket"
            raise error(f"not a regular file ({kind})", file=path, task=task)
        check_size(path, info.st_size, limit, error, task)
        chunks, total = [], 0
        while chunk := os.read(fd, 1 << 24):
            chunks.append(chunk)
            total += len(chunk)
            if limit is not None and total > limit:  # grew since it was checked
                check_size(path, total, limit, error, task)
        return b"".join(chunks)
    except OSError as err:
        raise error(f"cannot read: {err.strerror}", file=path, task=task)
    finally:
        os.close(fd)


def check_size(
    path: str | Path, size: int, limit: int | None, error: type[EmbevalError] = EmbevalError, task: str | None = None
) -> None:
    """Refuse a file larger than limit (None: than the memory available to read it into)."""
    if limit is not None:
        if size > limit:
            raise error(f"file of {size_text(size)}, larger than the limit of {size_text(limit)}", file=path, task=task)
        return
    from embeval.memory import available_memory

    free = available_memory()
    if free is not None and size > free // 2:
        raise error(
            f"file of {size_text(size)}: reading it needs more than the {size_text(free)} of memory available "
            f"(half of it at most: {size_text(free // 2)})",
            file=path,
            task=task,
        )


def check_data_file(path: str | Path, task: str | None, error: type[EmbevalError]) -> None:
    """A data file read whole must be a regular file that fits in memory (else one line with its size)."""
    try:
        size = regular_file(path, error, task)
    except FileNotFoundError:
        raise error("missing data file", file=path, task=task)
    check_size(path, size, None, error, task)


# ---------------------------------------------------------------------------------------------- parsing


def _depth_over(value: Any, limit: int) -> bool:
    """Whether value nests lists/dicts more than limit levels deep (iteratively: no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _too_deep(kind: str) -> str:
    return f"not valid {kind}: nested deeper than {MAX_DEPTH} levels (the limit)"


MAX_JSON_INT = 2**63 - 1  # the integers a results file holds (counts, seeds) are int64s


class NumberError(ValueError):
    """A JSON number embeval never writes: NaN, Infinity, a float beyond float64's range, an integer beyond
    int64's. Its message says which."""


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise NumberError(f"the number {text[:24]} is beyond float64's range")
    return value


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > 19 or abs(int(text)) > MAX_JSON_INT:
        shown = text if len(text) <= 24 else f"{text[:12]}… ({digits} digits)"
        raise NumberError(f"the integer {shown} is beyond the range embeval reads (at most {MAX_JSON_INT})")
    return int(text)


def _no_constant(name: str) -> Any:
    raise NumberError(f"{name} is not a finite number (an undefined figure is recorded as null)")


def loads_json(
    text: str | bytes,
    error: type[EmbevalError] = EmbevalError,
    file: object = None,
    task: str | None = None,
    line: int | None = None,
    duplicates: list[tuple[int | None, str]] | None = None,
    finite: bool = False,
) -> Any:
    """Parse JSON with nesting bounded by MAX_DEPTH; a duplicate key of an object is appended to
    `duplicates` as (line, key) (the last value is kept, as json does). A syntax error is raised as
    json.JSONDecodeError (callers word it). finite: every number must be finite in float64 (an integer
    in int64), NaN and Infinity are refused (NumberError)."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        result = dict(items)
        if len(result) != len(items) and duplicates is not None:
            seen: set[str] = set()
            twice = next(k for k, _ in items if k in seen or seen.add(k))  # type: ignore[func-returns-value]
            duplicates.append((line, twice))
        return result

    try:
        with collector_paused():
            hook = pairs if duplicates is not None else None
            if finite:
                value = json.loads(
                    text,
                    object_pairs_hook=hook,
                    parse_float=_finite_float,
                    parse_int=_bounded_int,
                    parse_constant=_no_constant,
                )
            else:
                value = json.loads(text, object_pairs_hook=hook)
    except RecursionError:
        raise error(_too_deep("JSON"), file=file, task=task, line=line)
    opens = text.count("[") + text.count("{") if isinstance(text, str) else text.count(b"[") + text.count(b"{")
    if opens > MAX_DEPTH and _depth_over(value, MAX_DEPTH):
        raise error(_too_deep("JSON"), file=file, task=task, line=line)
    return value


def warn_duplicates(duplicates: list[tuple[int | None, str]], file: object, task: str | None = None) -> None:
    """One warning naming the duplicate JSON keys of a file (the last value of each was used)."""
    if not duplicates:
        return
    where = f"{file}: {task + ': ' if task else ''}"
    first_line, first_key = duplicates[0]
    at = f" (first: key {ascii(first_key)[:40]}{f' on line {first_line}' if first_line else ''})"
    logger.warning(
        f"{where}{len(duplicates)} JSON object{'s' if len(duplicates) > 1 else ''} with a duplicate key{at}; "
        "the last value of each was used"
    )


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector off for the block. For a parse: its containers hold no cycles, a bulk
    parse would otherwise set off collections that traverse all of them again and again, and a
    collection deep in a nested file's recursion would run other objects' finalizers with no stack
    left for them."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def loads_toml(text: str, error: type[EmbevalError], file: object) -> dict[str, Any]:
    """Parse TOML with nesting bounded by MAX_DEPTH (a syntax error: tomllib.TOMLDecodeError)."""
    import tomllib

    try:
        with collector_paused():
            value = tomllib.loads(text)
    except RecursionError:
        raise error(_too_deep("TOML"), file=file)
    if text.count("[") + text.count("{") + text.count(".") > MAX_DEPTH and _depth_over(value, MAX_DEPTH):
        raise error(_too_deep("TOML"), file=file)
    return value


def read_json(
    path: str | Path,
    limit: int,
    error: type[EmbevalError] = EmbevalError,
    missing: str = "file not found",
    invalid: Callable[[str], EmbevalError] | None = None,
    warn: bool = True,
    finite: bool = False,
) -> Any:
    """A JSON file of at most limit bytes: regular, UTF-8, bounded nesting; duplicate keys warned about.
    invalid(reason) builds the error for text that is not JSON (default: "not valid JSON (reason)").
    finite: a number that is not finite in float64 (NaN, Infinity, 1e400, an integer beyond int64) is
    one line naming it."""
    data = read_bytes(path, limit, error, missing=missing)
    duplicates: list[tuple[int | None, str]] = []
    try:
        value = loads_json(data.decode("utf-8"), error, file=path, duplicates=duplicates, finite=finite)
    except NumberError as err:
        raise error(f"{err} (embeval never writes such a number: edited by hand?)", file=path)
    except UnicodeDecodeError as err:
        if invalid is not None:
            raise invalid(f"not UTF-8 text, byte {err.start}")
        raise error(f"not valid UTF-8 text (byte {err.start})", file=path)
    except ValueError as err:
        reason = err.msg if isinstance(err, json.JSONDecodeError) else str(err)
        if invalid is not None:
            raise invalid(f"not JSON: {reason}")
        raise error(f"not valid JSON ({reason})", file=path)
    if warn:
        warn_duplicates(duplicates, path)
    return value
