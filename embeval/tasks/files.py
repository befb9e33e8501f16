"""Reading task data files: text with a one-line error for every problem, whitespace tokens, and
where the data folder is."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

from embeval.errors import DATA_HINT, DataFileError
from embeval.untrusted import check_data_file

_ASCII_WS = re.compile(rb"[ \t\n\r\x0b\x0c]+")


def join_tokens(text: str) -> str:
    """Tokens split on whitespace (str.split), joined by single spaces."""
    return " ".join(text.split())


def join_byte_tokens(text: str) -> str:
    """Tokens of the UTF-8 bytes split on ASCII whitespace (SentEval's SNLI and COCO loaders)."""
    return b" ".join(_ASCII_WS.split(text.encode("utf-8").strip(b" \t\n\r\x0b\x0c"))).decode("utf-8")


# The largest magnitude of a number read from a task's data (a gold score, a regression value): its
# square, summed over any number of items, stays finite in float64 (1e100 squared is 1e200; float64
# reaches 1.8e308), so every kind's arithmetic on it (means, variances, least squares) stays finite.
MAX_MAGNITUDE = 1e100


def finite_number(value: object) -> float:
    """A number of a task's data (text, or a JSON number) as a float: finite and at most MAX_MAGNITUDE in
    magnitude; ValueError saying why otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number")
    try:
        number = float(value)  # type: ignore[arg-type]
    except OverflowError:
        raise ValueError(f"{str(value)[:24]}… is beyond float64's range")
    except (TypeError, ValueError):
        raise ValueError(f"{str(value)[:40]!r} is not a number")
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError(f"{str(value)[:40]!r} is not a finite number")
    if abs(number) > MAX_MAGNITUDE:
        raise ValueError(
            f"{str(value)[:40]} is larger in magnitude than {MAX_MAGNITUDE:g} (the most a score or value may be, "
            "so that its squares and sums stay within float64)"
        )
    return number


def require(path: Path, task: str, hint: str = DATA_HINT) -> Path:
    """The path of one task file, which must exist (hint: what to do about a missing one)."""
    if not path.exists():
        raise DataFileError(f"missing data file; {hint}" if hint else "missing data file", file=path, task=task)
    check_data_file(path, task, DataFileError)
    return path


def _line_at(path: Path, offset: int) -> int:
    """The line number holding byte `offset` of the file."""
    with open(path, "rb") as f:
        return f.read(offset).count(b"\n") + 1


def read_text(path: Path, encoding: str, task: str) -> str:
    """A file's text with universal newlines, or a one-line error (a regular file that fits in memory)."""
    check_data_file(path, task, DataFileError)
    try:
        with open(path, encoding=encoding) as f:
            return f.read()
    except UnicodeDecodeError as err:
        raise DataFileError(
            f"not valid {encoding} text (byte {err.start})", file=path, task=task, line=_line_at(path, err.start)
        )
    except FileNotFoundError:
        raise DataFileError("missing data file", file=path, task=task)
    except OSError as err:
        raise DataFileError(f"cannot read: {err.strerror}", file=path, task=task)


def iter_lines(path: Path, encoding: str, task: str) -> Iterator[tuple[int, str]]:
    """(line number, line) over a file as Python iterates it (breaks on newlines only)."""
    text = read_text(path, encoding, task)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return enumerate(lines, start=1)


# sha256 digests of files read once already (the MTEB cache's check reads every file it reuses), by
# the file's identity: device, inode, size, modification and change times. A file changed since has
# another change time (the system sets it; no user can), so its digest is computed afresh.
_DIGESTS: dict[tuple[int, ...], str] = {}
RACY_NS = 2_000_000_000  # a file changed this close to its reading may change again unseen (same times)


def _identity(info: os.stat_result) -> tuple[int, ...]:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def remember_digest(before: os.stat_result, after: os.stat_result, started_ns: int, digest: str) -> None:
    """Keep the sha256 of a regular file read from start to end (its status before and after the
    reading; started_ns: time.time_ns() when it began), for file_digest: unless the file changed while
    it was read, or was changed less than RACY_NS before (a change within the file system's clock tick
    may leave every time as it was)."""
    if _identity(before) == _identity(after) and after.st_ctime_ns < started_ns - RACY_NS:
        _DIGESTS[_identity(after)] = digest


def file_digest(path: str | Path, block: int = 1 << 22) -> str:
    """The sha256 of a file's content: the one remember_digest kept when the file is the same file
    with the same size and times, else read."""
    with open(path, "rb") as f:
        known = _DIGESTS.get(_identity(os.fstat(f.fileno())))
        if known is not None:
            return known
        h = hashlib.sha256()
        for chunk in iter(lambda: f.read(block), b""):
            h.update(chunk)
    return h.hexdigest()


def default_data_dir() -> Path:
    """The per-user data folder used when neither --data nor EMBEVAL_DATA is given."""
    if os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    elif os.uname().sysname == "Darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "embeval"


def resolve_data_dir(data: str | Path | None = None) -> Path:
    """--data, else EMBEVAL_DATA, else the per-user data folder."""
    if data:
        return Path(data)
    if os.environ.get("EMBEVAL_DATA"):
        return Path(os.environ["EMBEVAL_DATA"])
    return default_data_dir()
