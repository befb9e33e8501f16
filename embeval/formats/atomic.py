"""Atomic file writes: a temporary file in the same folder, flushed, then renamed over the target."""

import errno
import os
import stat
import tempfile
from pathlib import Path

from embeval.errors import EmbevalError


def _describe(err):
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return "no space left on the device"
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "not writable (permission denied or read-only file system)"
    if err.errno == errno.ENOTDIR:
        return "a part of the path is a file, not a folder"
    if err.errno == errno.EISDIR:
        return "is a folder, not a file"
    return err.strerror or str(err)


def _refuse_special(path):
    if path.exists() and not path.is_file() and not path.is_dir():
        raise EmbevalError("cannot write: not a regular file (a FIFO, device or socket)", file=path)


def check_writable(path):
    """Raise EmbevalError unless path can be written atomically (probed with a temporary file).

    Run before long work, so an unwritable output is reported before anything is computed. A
    missing folder is not created here: the nearest existing one must be writable.
    """
    path = Path(path)
    if path.is_dir():
        raise EmbevalError("cannot write: is a folder, not a file", file=path)
    _refuse_special(path)
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise EmbevalError(f"cannot write: {folder} is a file, not a folder", file=path)
    if folder != path.parent:
        if not os.access(folder, os.W_OK | os.X_OK):
            raise EmbevalError(f"cannot write: cannot create folders in {folder} (permission denied)", file=path)
        return
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
        os.close(fd)
    except OSError as err:
        raise EmbevalError(f"cannot write: {_describe(err)}", file=path)
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def _mode_for(path):
    """The permissions a written file gets: those of the file it replaces, else what the umask
    allows a new file (mkstemp's own 0600 would hide results from everyone else)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        umask = os.umask(0o022)
        os.umask(umask)
        return 0o666 & ~umask


def write_bytes(path, data):
    """Write data to path atomically; on failure the previous file, if any, is untouched. A path that
    is a FIFO, a device or a socket is refused (it is never replaced by a file)."""
    path = Path(path)
    _refuse_special(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.fchmod(fd, _mode_for(path))
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as err:
        raise EmbevalError(f"cannot write: {_describe(err)}", file=path)
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def write_text(path, text):
    write_bytes(path, text.encode("utf-8"))


def temporary_sibling(path):
    """A fresh temporary path next to `path`, for writers that must create the file themselves."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.fchmod(fd, _mode_for(path))
    except OSError as err:
        raise EmbevalError(f"cannot write: {_describe(err)}", file=path)
    os.close(fd)
    return Path(tmp)


def describe_os_error(err):
    """A short phrase for an OSError raised while writing."""
    return _describe(err)


class WriterLock:
    """One writer per output file: `PATH.lock`, created exclusively, holding the owner's pid, host and
    start time. A second writer stops at once with an error naming the owner. A lock left by a process
    of this host that no longer runs is taken over. Use as a context manager."""

    def __init__(self, path):
        self.path = Path(path)
        self.lock = self.path.with_name(self.path.name + ".lock")
        self.held = False

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()

    def acquire(self):
        import json
        import socket
        import time

        me = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "token": os.urandom(8).hex(),  # tells this lock from an earlier one of the same pid
        }
        for _attempt in range(2):
            try:
                self.lock.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                content = self._content()
                owner = _parse_owner(content)
                if owner is not None and owner.get("host") == me["host"] and not _running(owner.get("pid")):
                    self._take_over(content)
                    continue
                who = (
                    "another process"
                    if owner is None
                    else f"embeval process {owner.get('pid')} on {owner.get('host')} (since {owner.get('started')})"
                )
                raise EmbevalError(
                    f"is being written by {who}; wait for it to finish or choose another "
                    f"--out (if no such process runs, delete {self.lock.name})",
                    file=self.path,
                )
            except OSError as err:
                raise EmbevalError(f"cannot write: {_describe(err)}", file=self.lock)
            self.held = True
            try:
                os.write(fd, json.dumps(me).encode())
            except OSError as err:
                self.release()
                raise EmbevalError(f"cannot write: {_describe(err)}", file=self.lock)
            finally:
                os.close(fd)
            return
        raise EmbevalError(f"cannot take the lock {self.lock.name}", file=self.path)

    def _content(self):
        """The lock file's bytes (None when unreadable); a lock is a small regular file."""
        from embeval.untrusted import MAX_DECLARATION_BYTES, read_bytes

        try:
            return read_bytes(self.lock, MAX_DECLARATION_BYTES)
        except EmbevalError:
            return None

    def _take_over(self, stale):
        """Remove the lock whose content `stale` names a process that no longer runs, atomically: the lock
        is renamed to a name of this process's own, and removed only if what was moved is that stale lock.
        If another process took the lock over meanwhile (what was moved is its live lock), the live lock is
        put back, so two writers never both hold it."""
        if stale is None:
            return
        moved = self.lock.with_name(f"{self.lock.name}.{os.getpid()}.{os.urandom(4).hex()}.stale")
        try:
            os.rename(self.lock, moved)
        except FileNotFoundError:
            return  # another process removed it first
        except OSError as err:
            raise EmbevalError(f"cannot write: {_describe(err)}", file=self.lock)
        try:
            with open(moved, "rb") as f:
                content = f.read(1 << 16)
            if content != stale:
                try:
                    os.link(moved, self.lock)  # a live lock, moved by mistake: back in place
                except FileExistsError:
                    pass
        finally:
            try:
                os.unlink(moved)
            except FileNotFoundError:
                pass

    def _remove(self):
        try:
            self.lock.unlink()
        except FileNotFoundError:
            pass

    def release(self):
        if self.held:
            self._remove()
            self.held = False


def _parse_owner(content):
    """The owner a lock file's bytes name ({pid, host, started}), or None."""
    import json

    if content is None:
        return None
    try:
        owner = json.loads(content.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    return owner if isinstance(owner, dict) else None


def _running(pid):
    """Whether a process with this pid runs on this host."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
