"""What a command may write over: its own earlier output, never an input or a file it did not write.

Every command that writes names all its targets and its inputs, and calls `check` before any work.
A target is refused, in one line naming it, when it is:

- one of the command's inputs under any name (the same file through a symlink, a hard link or another
  spelling: files are compared by device and inode), or the same file as another of its targets;
- a symbolic link (embeval writes regular files only, and never replaces a link), a folder, a FIFO, a
  device or a socket;
- an existing file that is not an earlier output of the same kind. Each kind of output (`Output`) says
  how it recognizes its own: a mark its writer leaves in the file (`stamp`, a PNG's `Software` text,
  an MTEB result file's `embeval` object), or the content parsing as that output (a results file's
  `format`, an export's manifest recording the file's sha256, the CSV report's header row).

The files are then written atomically (embeval.formats.atomic): an interrupted write leaves the earlier
file as it was.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from embeval.errors import EmbevalError

HEAD_BYTES = 4096  # what a recognizer reads of a file's beginning

# The mark a report or comparison leaves as its first line (in its format's comment syntax). CSV has
# no comments: its header row is the mark (TABLE_CSV_HEADER).
STAMP = "written by embeval {command}"
TABLE_COMMANDS = ("report", "compare", "rank")
TABLE_CSV_HEADER = "table,encoder,dim,column,metric,value,ci_low,ci_high,caption,differs"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_SOFTWARE = "embeval"  # the tEXt Software entry of every PNG embeval draws
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


@dataclass(frozen=True)
class Output:
    """A kind of file a command writes: what it is, in words ("an embeval results file"), and whether an
    existing regular file is an earlier output of this kind: `own(path)` (which may read the file) is
    True, else False or why not, in words ("was changed since embeval wrote it")."""

    what: str
    own: Callable[[Path], bool | str]


@dataclass(frozen=True)
class Target:
    """A file a command is about to write, as `output`; `option` names where the user chose it."""

    path: Path
    output: Output
    option: str = "--out"


def check(targets: Iterable[Target], inputs: Iterable[str | Path | None] = ()) -> None:
    """Refuse, in one line naming the file, any target that is an input, another target, not a regular
    file, or an existing file that is not an earlier output of its kind (see the module's docstring)."""
    targets = list(targets)
    known = _identities(inputs)
    seen: dict[tuple[int, int] | Path, Target] = {}
    for target in targets:
        path = Path(target.path)
        refuse = _refusal(path, target.option)
        key: tuple[int, int] | Path = Path(os.path.abspath(path))
        try:
            info = os.stat(path)
            key = (info.st_dev, info.st_ino)
        except OSError:
            info = None
        if info is not None and key in known:
            given = known[key]
            same = "" if Path(os.path.abspath(given)) == Path(os.path.abspath(path)) else f" ({given}, the same file)"
            raise refuse(f"is an input of this command{same}")
        if key in seen:
            other = seen[key]
            raise refuse(f"is named by {other.option} and {target.option} both; give each its own file", hint=False)
        seen[key] = target
        if os.path.islink(path):
            raise refuse("is a symbolic link (embeval writes regular files and never replaces a link)")
        if info is None:
            if os.path.lexists(path):
                raise refuse("cannot be checked")
            continue
        if stat.S_ISDIR(info.st_mode):
            raise refuse("is a folder, not a file", hint=False)
        if not stat.S_ISREG(info.st_mode):
            raise refuse("is not a regular file (a FIFO, device or socket)", hint=False)
        verdict = _owns(target.output, path)
        if verdict is not True:
            why = verdict if isinstance(verdict, str) else f"is {describe(path)}, not {target.output.what}"
            raise refuse(f"exists and {why}")


def check_folder(folder: str | Path, option: str = "--out") -> None:
    """Refuse, in one line naming it, a folder a command writes its files into when it exists and is
    not a folder (its files would be written inside that path): an input or any other file."""
    path = Path(folder)
    for part in [path, *path.parents]:
        if os.path.lexists(part) and not os.path.isdir(part):
            why = "is a file, not a folder" if part == path else f"is inside {part}, which is a file, not a folder"
            raise _refusal(path, option)(f"{why} ({option} names the folder the files are written into)", hint=False)
        if os.path.isdir(part):
            return


def _refusal(path: Path, option: str) -> Callable[..., EmbevalError]:
    def refuse(why: str, hint: bool = True) -> EmbevalError:
        tail = f"; refusing to overwrite it (choose another {option}, or move the file away)" if hint else ""
        return EmbevalError(f"{why}{tail}; nothing was written", file=path)

    return refuse


def _identities(paths: Iterable[str | Path | None]) -> dict[tuple[int, int], str | Path]:
    """{(device, inode): path as given} of the inputs that exist (symlinks followed)."""
    found: dict[tuple[int, int], str | Path] = {}
    for path in paths:
        if path is None:
            continue
        try:
            info = os.stat(path)
        except (OSError, ValueError, TypeError):
            continue
        found.setdefault((info.st_dev, info.st_ino), path)
    return found


def _owns(output: Output, path: Path) -> bool | str:
    try:
        verdict = output.own(path)
    except (EmbevalError, OSError):
        return False
    return verdict if isinstance(verdict, str) and verdict else bool(verdict)


def describe(path: str | Path) -> str:
    """What an existing regular file is, in words, for a refusal: an embeval results, predictions or
    sweep file, an HDF5 file (vectors?), or "a file embeval did not write"."""
    head = read_head(path)
    if head.startswith(HDF5_SIGNATURE):
        return "an HDF5 file (a vectors file?)"
    if head.startswith(b"PK\x03\x04") and b"meta" in head:
        return "a zip archive (an embeval predictions file?)"
    text = head.lstrip()
    for name, what in (
        (b'"embeval-results"', "an embeval results file"),
        (b'"embeval-sweep"', "an embeval sweep summary"),
        (b'"embeval-sentences"', "an export's manifest"),
    ):
        if text.startswith(b"{") and name in head:
            return what
    return "a file embeval did not write (or one changed since)"


def read_head(path: str | Path, size: int = HEAD_BYTES) -> bytes:
    """The first `size` bytes of a regular file (b"" when it cannot be read); never blocks on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        return os.read(fd, size)
    except OSError:
        return b""
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------- marks


def stamp_line(command: str, fmt: str) -> str | None:
    """The first line a report or comparison of `fmt` carries when written to a file (None: CSV, whose
    header row recognizes it)."""
    mark = STAMP.format(command=command)
    return {
        "markdown": f"<!-- {mark} -->",
        "html": f"<!-- {mark} -->",
        "latex": f"% {mark}",
        "text": f"# {mark}",
    }.get(fmt)


def stamp(text: str, command: str, fmt: str) -> str:
    """`text` as written to a file: its mark as the first line (after an HTML page's DOCTYPE line)."""
    line = stamp_line(command, fmt)
    if line is None:
        return text
    if fmt == "html" and text.startswith("<!DOCTYPE"):
        first, _, rest = text.partition("\n")
        return f"{first}\n{line}\n{rest}"
    return f"{line}\n{text}"


def _table_marks() -> set[str]:
    return {
        line
        for command in TABLE_COMMANDS
        for fmt in ("markdown", "html", "latex", "text")
        if (line := stamp_line(command, fmt)) is not None
    }


def is_table(path: Path) -> bool:
    """Whether the file is a report or comparison embeval wrote: a mark line among its first lines, or
    the CSV report's header as its first line."""
    lines = read_head(path).decode("utf-8", "replace").splitlines()[:3]
    return bool(lines) and (lines[0] == TABLE_CSV_HEADER or bool(_table_marks() & {line.strip() for line in lines}))


def is_png(path: Path) -> bool:
    """Whether the file is a PNG that embeval drew (its tEXt chunk Software is `embeval`)."""
    head = read_head(path)
    return head.startswith(PNG_SIGNATURE) and b"tEXtSoftware\x00" + PNG_SOFTWARE.encode() in head


def is_hdf5(path: Path) -> bool:
    return read_head(path, len(HDF5_SIGNATURE)) == HDF5_SIGNATURE


def json_format(path: Path, name: str, limit: int) -> bool:
    """Whether the file is a JSON object whose `format` is `name` (read in bounded memory)."""
    from embeval.untrusted import read_json

    try:
        value = read_json(path, limit, warn=False)
    except EmbevalError:
        return False
    return isinstance(value, dict) and value.get("format") == name


# ---------------------------------------------------------------------------------------------- outputs

TABLE = Output("a report or comparison that embeval wrote", is_table)
PLOT = Output("a plot that embeval drew", is_png)
VECTORS = Output("a vectors file (HDF5)", is_hdf5)
ANY = Output("any file", lambda path: True)  # what an explicit overwrite allows: anything but an input


def named(paths: Sequence[tuple[str | Path | None, str]], output: Output = TABLE) -> list[Target]:
    """The targets of (path, option) pairs written as `output`, those given (path not None) only."""
    return [Target(Path(path), output, option) for path, option in paths if path is not None]
