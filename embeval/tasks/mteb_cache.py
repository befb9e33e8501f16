"""embeval's cache of MTEB's tasks: the files each (subset, split) of an `--mteb` task is scored
from, as written from a dataset copy, and reused only when they are exactly what was written.

Layout: ROOT/mteb/TASK/REVISION/SUBSET/SPLIT/STAMP/, ROOT being EMBEVAL_CACHE (else
$XDG_CACHE_HOME/embeval, else ~/.cache/embeval) and STAMP the fingerprint of what the files were
written from (mteb's version, the task, the copy's files). A STAMP folder holds the kind's files and
`declaration.json`: the stamp, the task's declaration and each file's size and sha256, sealed by a
digest of them all. It is built in a temporary folder beside it and renamed into place, whole or not
at all, and never changed afterwards.

On reuse every file is checked against its digest, without following a link: a folder that is not
exactly what embeval wrote (a file edited, truncated, missing, added, replaced by a link, a FIFO or a
folder, a link anywhere on the way from ROOT) is removed and rebuilt, with one warning. ROOT itself
is the user's: a link there is followed.

Runs sharing a cache: every run holds a shared lock (flock) on ROOT/mteb/.lock for the life of its
process. A run that wrote a newer STAMP of a (subset, split) removes the older ones only when it can
take that lock exclusively, that is when no other run is using the cache (else a later run will).
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from embeval.errors import EmbevalError
from embeval.tasks.files import remember_digest
from embeval.untrusted import MAX_DECLARATION_BYTES, loads_json, read_bytes

CACHE = "EMBEVAL_CACHE"
MANIFEST = "declaration.json"
FORMAT = 1  # of declaration.json
BUILDING = ".building-"  # a folder being written
REMOVED = ".removed-"  # a folder moved aside to be removed
UNSTAMPED = "unstamped-"  # files written from data that has no stamp (tasks that load themselves)

logger = logging.getLogger("embeval")


class CacheError(EmbevalError):
    """The cache folder cannot be used."""


def cache_root() -> Path:
    """EMBEVAL_CACHE, else $XDG_CACHE_HOME/embeval, else ~/.cache/embeval."""
    value = os.environ.get(CACHE)
    if value:
        return Path(value)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "embeval"


def _named(root: Path) -> str:
    """The cache root as messages name it: with the variable that chose it."""
    return f"{CACHE}={root}" if os.environ.get(CACHE) else f"{root} (the cache folder; {CACHE} chooses another)"


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISREG(mode):
        return "a file"
    return "a FIFO, device or socket"


def _reason(err: OSError) -> str:
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "not writable (permission denied or read-only file system)"
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return "no space left on the device"
    return err.strerror or str(err)


def checked_root() -> Path:
    """The cache root: a folder, or a path where one can be made (one line naming EMBEVAL_CACHE and
    the path otherwise: a file, a device, a dangling link)."""
    root = cache_root()
    try:
        info = os.stat(root)
    except FileNotFoundError:
        if os.path.islink(root):
            raise CacheError(f"a symbolic link to {os.readlink(root)}, which does not exist", file=_named(root))
        return root
    except OSError as err:
        raise CacheError(f"cannot be used: {_reason(err)}", file=_named(root))
    if not stat.S_ISDIR(info.st_mode):
        raise CacheError(f"not a folder ({_kind(info.st_mode)}); the MTEB cache needs one", file=_named(root))
    return root


# Runs: each holds ROOT/mteb/.lock shared for the life of its process (one descriptor per cache);
# older folders are removed only under the exclusive lock, which no other run lets through. Without
# flock (not POSIX), nothing is removed.
try:
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

LOCK = ".lock"
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_RUNS: dict[str, int | None] = {}  # cache root -> this process's descriptor of its lock (None: no lock)
_WRITING: set[str] = set()  # the folders this process is writing


def _join(mteb: Path) -> int | None:
    """This process's shared lock on the cache at `mteb` (ROOT/mteb), taken once; None when it cannot be
    (a read-only cache without a lock file: nothing is removed from it either)."""
    if str(mteb) in _RUNS or fcntl is None:
        return _RUNS.get(str(mteb))
    try:
        fd = _open_lock(mteb / LOCK)
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_SH)
    except OSError:
        fd = None
    _RUNS[str(mteb)] = fd
    return fd


def _open_lock(path: Path) -> int | None:
    """The lock file, a regular file (a link or a FIFO planted there is removed first)."""
    for _ in range(2):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | NOFOLLOW | getattr(os, "O_NONBLOCK", 0), 0o666)
        except OSError as err:
            if err.errno == errno.ELOOP:
                os.unlink(path)
                continue
            if err.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            fd = os.open(path, os.O_RDONLY | NOFOLLOW | getattr(os, "O_NONBLOCK", 0))  # a read-only cache
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
        os.close(fd)
        os.unlink(path)
    return None


def _prune(mteb: Path, folder: Path, keep: Path) -> None:
    """Remove what else is in a (subset, split)'s folder (older STAMP folders, folders a run that no
    longer runs was writing, anything not embeval's), when no other run holds the cache."""
    fd = _RUNS.get(str(mteb))
    if fd is None or fcntl is None:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # another run is using the cache: leave it to a later run
        fcntl.flock(fd, fcntl.LOCK_SH)  # a failed conversion may have dropped the shared lock
        return
    aside = None  # no other run is alive: what is not this run's is moved here, then deleted
    try:
        for entry in list(os.scandir(folder)):
            path = Path(entry.path)
            if path == keep or str(path) in _WRITING or (aside is not None and path == aside):
                continue
            if entry.is_dir(follow_symlinks=False):
                aside = aside or Path(tempfile.mkdtemp(prefix=REMOVED, dir=folder))
                os.rename(path, aside / entry.name)
            else:
                os.unlink(path)
    except OSError:
        pass
    finally:
        fcntl.flock(fd, fcntl.LOCK_SH)
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)  # under the shared lock: other runs go on meanwhile


def _remove(path: Path) -> None:
    """Remove what is at path, never following a link: a link or a file is unlinked, a folder moved
    aside (renamed) then deleted. OSError when it cannot be."""
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(path)
        return
    aside = Path(tempfile.mkdtemp(prefix=REMOVED, dir=path.parent))
    os.rename(path, aside / "folder")
    shutil.rmtree(aside, ignore_errors=True)


# The manifest.


def _seal(saved: dict[str, Any]) -> str:
    body = {k: v for k, v in saved.items() if k != "seal"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=True).encode()).hexdigest()


def _digest(fd: int) -> str:
    h = hashlib.sha256()
    while chunk := os.read(fd, 1 << 22):
        h.update(chunk)
    return h.hexdigest()


def _file_digest(path: Path, size: object = None) -> tuple[int, str] | str:
    """(size, sha256) of path, a regular file (not a link); else what it is instead. With `size`, a
    file of another size is "was changed" without being read."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "is missing"
    except OSError as err:
        return f"cannot be read ({err.strerror})"
    if not stat.S_ISREG(info.st_mode):
        return f"is {_kind(info.st_mode)}"
    if size is not None and info.st_size != size:
        return "was changed"
    try:
        fd = os.open(path, os.O_RDONLY | NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError as err:
        return f"cannot be read ({err.strerror})"
    try:
        before, started = os.fstat(fd), time.time_ns()
        if not stat.S_ISREG(before.st_mode):
            return "is not a regular file"
        digest = _digest(fd)
        after = os.fstat(fd)
    finally:
        os.close(fd)
    remember_digest(before, after, started, digest)  # the data's fingerprint takes it: read once
    return after.st_size, digest


def _verify(version: Path, stamp: str | None) -> dict[str, Any] | str:
    """The declaration saved in a STAMP folder when every file is what was written; else why not."""
    try:
        info = os.lstat(version / MANIFEST)
    except FileNotFoundError:
        return f"{MANIFEST} is missing"
    except OSError as err:
        return f"{MANIFEST} cannot be read ({err.strerror})"
    if not stat.S_ISREG(info.st_mode):
        return f"{MANIFEST} is {_kind(info.st_mode)}"
    try:
        saved = loads_json(read_bytes(version / MANIFEST, MAX_DECLARATION_BYTES).decode("utf-8"))
    except (EmbevalError, ValueError):
        return f"{MANIFEST} is not what embeval wrote"
    files = saved.get("files") if isinstance(saved, dict) else None
    if (
        not isinstance(saved, dict)
        or saved.get("format") != FORMAT
        or saved.get("seal") != _seal(saved)
        or not isinstance(files, dict)
        or not isinstance(saved.get("declaration"), dict)
    ):
        return f"{MANIFEST} was changed"
    if stamp is not None and saved.get("stamp") != stamp:
        return f"{MANIFEST} records another copy of the data"
    try:
        present = sorted(os.listdir(version))
    except OSError as err:
        return f"cannot be listed ({err.strerror})"
    for name in present:
        if name != MANIFEST and name not in files:
            try:
                what = _kind(os.lstat(version / name).st_mode)
            except OSError:
                what = "a file"
            return f"{name} ({what}) was not written by embeval"
    for name, record in files.items():
        if not isinstance(name, str) or "/" in name or name in (".", "..", MANIFEST) or not isinstance(record, dict):
            return f"{MANIFEST} was changed"
        got = _file_digest(version / name, record.get("size"))
        if isinstance(got, str):
            return f"{name} {got}"
        if list(got) != [record.get("size"), record.get("sha256")]:
            return f"{name} was changed"
    return dict(saved["declaration"])


def _chain(root: Path, relative: tuple[str, ...]) -> list[Path]:
    """The folders from ROOT/mteb down to ROOT/mteb/relative..."""
    paths, current = [], root / "mteb"
    paths.append(current)
    for name in relative:
        current = current / name
        paths.append(current)
    return paths


class Slot:
    """Where one (subset, split)'s files are cached: ROOT/mteb/RELATIVE/STAMP."""

    def __init__(self, relative: tuple[str, ...], stamp: str | None, name: str) -> None:
        self.root = checked_root()
        self.relative = relative
        self.stamp = stamp
        self.name = name  # the part's name, for messages
        self.folder = _chain(self.root, relative)[-1]

    @property
    def version(self) -> Path | None:
        return None if self.stamp is None else self.folder / self.stamp

    def reuse(self) -> tuple[Path, dict[str, Any]] | None:
        """(folder, declaration) of the files written for this stamp, when exactly what was written;
        None when none were (or they are being removed). Files that are not what was written are
        removed, with one warning (one line, exit code 2, when they cannot be)."""
        if self.version is None:
            return None
        mteb = self.root / "mteb"
        if os.path.isdir(mteb) and not os.path.islink(mteb):
            _join(mteb)  # before anything is checked: no other run removes what this one reads
        for path in (*_chain(self.root, self.relative), self.version):
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                return None
            except OSError:
                return None
            if not stat.S_ISDIR(info.st_mode):
                self._foreign(path, info.st_mode)
                self._discard(path, f"{path} is {_kind(info.st_mode)}")
                return None
        found = _verify(self.version, self.stamp)
        if isinstance(found, str):
            self._discard(self.version, found)
            return None
        return self.version, found

    def _foreign(self, path: Path, mode: int) -> None:
        """ROOT/mteb that is not a folder is not embeval's to remove (ROOT is the user's folder): one line."""
        if path == self.root / "mteb":
            raise CacheError(
                f"{path} is {_kind(mode)}, not the folder of the MTEB cache (links inside the cache are not "
                f"followed); move it, or set {CACHE} to the folder the cache should be in",
                file=_named(self.root),
                task=self.name,
            )

    def _discard(self, path: Path, why: str) -> None:
        try:
            _remove(path)
        except FileNotFoundError:
            pass
        except OSError as err:
            raise CacheError(
                f"the cached files are not what embeval wrote ({why}) and cannot be removed: {_reason(err)}; "
                f"remove {path}, or set {CACHE} to another folder",
                file=_named(self.root),
                task=self.name,
            )
        logger.warning(
            f"{self.folder}: {self.name}: the cached files are not what embeval wrote ({why}); "
            "rebuilt from the dataset copy"
        )

    def prepare(self) -> None:
        """Make the folders down to this (subset, split)'s, each a real folder (a link or a file in the
        way is removed): done before the data is loaded, so an unusable cache is said at once."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            for path in _chain(self.root, self.relative):
                try:
                    info = os.lstat(path)
                except FileNotFoundError:
                    try:
                        os.mkdir(path)
                    except FileExistsError:  # made by a concurrent run meanwhile
                        info = os.lstat(path)
                    else:
                        continue
                if not stat.S_ISDIR(info.st_mode):
                    self._foreign(path, info.st_mode)
                    os.unlink(path)
                    os.mkdir(path)
            _join(self.root / "mteb")
        except OSError as err:
            raise CacheError(f"cannot write the cache: {_reason(err)}", file=_named(self.root), task=self.name)

    def store(self, write: Callable[[Path], dict[str, Any]]) -> tuple[Path, dict[str, Any]]:
        """Write the files with write(folder) -> declaration in a folder of this run's own, record
        their digests, and rename it into place; (its folder, the declaration). A concurrent run that
        placed the same stamp first wins (its files are checked and used)."""
        self.prepare()
        building = self._building()
        try:
            declaration = write(building)
            files: dict[str, Any] = {}
            for entry in sorted(os.scandir(building), key=lambda e: e.name):
                got = _file_digest(Path(entry.path))
                if isinstance(got, str) or entry.name == MANIFEST:
                    raise CacheError(f"{entry.name} {got} in the folder being written", file=building, task=self.name)
                files[entry.name] = {"size": got[0], "sha256": got[1]}
            saved = {"format": FORMAT, "stamp": self.stamp, "declaration": declaration, "files": files}
            saved["seal"] = _seal(saved)
            with open(building / MANIFEST, "x", encoding="utf-8") as f:
                json.dump(saved, f)
            target = self.folder / (self.stamp or f"{UNSTAMPED}{building.name[len(BUILDING) :]}")
            placed = self._place(building, target, declaration)
        except OSError as err:
            shutil.rmtree(building, ignore_errors=True)
            raise CacheError(f"cannot write the cache: {_reason(err)}", file=_named(self.root), task=self.name)
        except BaseException:  # an error, Ctrl-C or SIGTERM: nothing half-written is left
            shutil.rmtree(building, ignore_errors=True)
            raise
        finally:
            _WRITING.discard(str(building))
        _prune(self.root / "mteb", self.folder, keep=placed[0])
        return placed

    def _building(self) -> Path:
        """A new folder to write in (a run that removes older folders leaves it alone)."""
        try:
            path = Path(tempfile.mkdtemp(prefix=BUILDING, dir=self.folder))
            umask = os.umask(0o022)
            os.umask(umask)
            os.chmod(path, 0o777 & ~umask)  # as a folder made by mkdir (mkdtemp's is private)
        except OSError as err:
            raise CacheError(f"cannot write the cache: {_reason(err)}", file=_named(self.root), task=self.name)
        _WRITING.add(str(path))
        return path

    def _place(self, building: Path, target: Path, declaration: dict[str, Any]) -> tuple[Path, dict[str, Any]]:
        for _ in range(3):
            try:
                os.rename(building, target)
            except OSError as err:
                if err.errno == errno.ENOTDIR:  # a file or a link where the folder goes: not ours
                    os.unlink(target)
                    continue
                if err.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise
                theirs = self.reuse() if self.stamp is not None else None  # a concurrent run placed it first
                if theirs is not None:
                    shutil.rmtree(building, ignore_errors=True)
                    return theirs
                continue
            return target, declaration
        raise CacheError("cannot place the files written", file=target, task=self.name)
