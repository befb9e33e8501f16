"""A guard process for HDF5 metadata: a damaged vectors file must not crash or hang embeval.

The HDF5 library parses a file's metadata in C. Bytes damaged in the wrong place can make it
crash (segmentation fault) or loop forever, and no Python error handling catches either. So
before the scorer opens a vectors file, a child process reads the same metadata the scorer will
read (the same code: VectorsFile.dataset and .inspect); when the child dies on a signal or does
not finish in time, the file is refused with a one-line error. Python-level errors are left to
the scorer, which meets them again and reports them itself. On Linux the child is forked
(milliseconds); elsewhere it is a fresh interpreter. A file whose datasets a child read unharmed is
not read in a child again by the same process while it stays the same file (device, inode, size,
modification and change times).

Before any of that, `check_file` refuses what cannot be an HDF5 file at all without loading HDF5 (or
numpy): so a wrong path is answered at once.
"""

import os
import select
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

from embeval.errors import VectorsError
from embeval.untrusted import regular_file

SECONDS = 120
MEMORY_MARGIN = 4 << 30
# The forked child's last line: its reading ended unharmed. HDF5 names hold no NUL byte, so no name
# reported before it can be taken for it. The parent goes on at once; the child's exit (tearing down a
# copy of a large process's address space takes longer than the reading) is waited for aside; the
# CPU it takes meanwhile is this process's own work to threads.FairShare (a child of the process).
DONE = b"\0\n"


# An HDF5 file starts with this signature at offset 0, 512, 1024, 2048, ... (after a user block).
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def check_file(path):
    """Refuse, without loading HDF5, what cannot be a vectors file: a missing path, a folder, an empty
    or unreadable file, a file without HDF5's signature. Returns the path."""
    path = Path(path)
    try:
        size = regular_file(path, VectorsError)
    except FileNotFoundError:
        raise VectorsError("vectors file not found", file=path)
    if size == 0:
        raise VectorsError("empty file, not an HDF5 vectors file", file=path)
    try:
        with open(path, "rb") as stream:
            offset = 0
            while offset + len(HDF5_SIGNATURE) <= size:
                stream.seek(offset)
                if stream.read(len(HDF5_SIGNATURE)) == HDF5_SIGNATURE:
                    return path
                offset = 512 if offset == 0 else 2 * offset
    except OSError as err:
        raise VectorsError(f"cannot read: {err.strerror}", file=path)
    raise VectorsError("not an HDF5 file", file=path)


# What this process's guards read without a failure: (the file's identity, inspect) -> the names read.
# The same file (device, inode, size, modification and change times unchanged) holds the same bytes, so
# its metadata, read unharmed once, is not read in a child again (a scorer called task by task).
_CHECKED: dict[tuple[tuple[int, ...], object], set[str]] = {}
CHECKED_FILES = 1024  # files remembered at most (then forgotten all at once)


def check(path, names, inspect, seconds=None):
    """Run inspect(path, names, report) in a child process; raise VectorsError if the child crashes or
    hangs. `inspect` reads the metadata and calls report(name) before each dataset; it must be a
    module-level function (a fresh interpreter imports it where fork is not available). Names this
    process's guard already read unharmed in the same file are not read again."""
    guard = start(path, names, inspect, seconds)
    guard.wait()
    guard.exited()


def start(path, names, inspect, seconds=None):
    """check(), its child started: the caller may do other work (never reading the file) before the
    Guard's wait(), which raises check()'s error; cancel() ends the child instead."""
    return Guard(Path(path), list(names), inspect, SECONDS if seconds is None else seconds)


class Guard:
    """A guard process reading a file's metadata (see check)."""

    def __init__(self, path, names, inspect, seconds):
        self.path, self.names, self.inspect, self.seconds = path, names, inspect, seconds
        self.identity = identity(path)
        self.outcome = self.finish = None
        if self.identity is not None and set(names) <= _CHECKED.get((self.identity, inspect), set()):
            self.outcome = (None, None)
        elif sys.platform.startswith("linux"):
            self.finish = _start_forked(path, names, inspect)
        else:
            self.outcome = _spawned(path, names, seconds, inspect)

    def wait(self):
        if self.outcome is None:
            self.outcome = self.finish(self.seconds)
        failure, last = self.outcome
        if failure is None:
            if self.identity is not None and identity(self.path) == self.identity:  # unchanged while read
                if len(_CHECKED) >= CHECKED_FILES:
                    _CHECKED.clear()
                _CHECKED.setdefault((self.identity, self.inspect), set()).update(self.names)
            return
        where = f"reading /{last}" if last else "opening the file"
        raise VectorsError(
            f"corrupted HDF5 file: the HDF5 library {failure} while {where}; write the file again",
            file=self.path,
            task=last,
        )

    def cancel(self):
        if self.outcome is None:
            self.outcome = self.finish(None)

    def exited(self):
        """Wait for the child's exit when its reading ended before it (DONE)."""
        join = getattr(self.finish, "exited", None)
        if join is not None:
            join()


def identity(path):
    """(device, inode, size, modification and change times in ns) of the file at path; None if it cannot be read."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns)


def _failure(kind, value, seconds):
    if kind == "signal":
        try:
            name = signal.Signals(value).name
        except ValueError:
            name = f"signal {value}"
        return f"crashed ({name})"
    if kind == "timeout":
        return f"did not finish within {seconds:g} s"
    if kind == "exit" and value not in (0, 1):
        return f"crashed (exit code {value})"
    return None


def _forked(path, names, seconds, inspect):
    return _start_forked(path, names, inspect)(seconds)


def _start_forked(path, names, inspect):
    """Fork the child reading the file; returns finish(seconds): (failure or None, the last name the
    child reported) once it ended (seconds None: kill it now)."""
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read_end)
            _quiet()
            _limit_memory()
            inspect(path, names, lambda name: os.write(write_end, name.encode("utf-8") + b"\n"))
            os.write(write_end, DONE)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    reapers = []  # the thread reaping the child once its reading ended (DONE)

    def finish(seconds):
        try:
            if seconds is None:
                _kill(pid)
                return "was stopped", None
            (kind, value), reported = _wait(pid, seconds, read_end, reapers)
        finally:
            os.close(read_end)
        return _failure(kind, value, seconds), _last(reported)

    def exited():
        for reaper in reapers:
            reaper.join()

    finish.exited = exited  # type: ignore[attr-defined]
    return finish


def _wait(pid, seconds, fd, reapers=None):
    """(('exit', code), ('signal', number) or ('timeout', None), what the child wrote to `fd`): the
    pipe is read as the child writes; its DONE line (the reading ended unharmed: ('exit', 0), the
    child reaped on a thread appended to `reapers`) or its end (the child exited) ends the wait at
    once; the child is killed on timeout or Ctrl-C."""
    deadline, chunks = time.monotonic() + seconds, []
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                _kill(pid)
                return ("timeout", None), b"".join(chunks)
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            if DONE[:1] in chunk:  # only DONE holds a NUL byte
                reaper = threading.Thread(target=_reap, args=(pid,), daemon=True)
                reaper.start()
                if reapers is not None:
                    reapers.append(reaper)
                written = b"".join(chunks)
                return ("exit", 0), written[: written.index(DONE[:1])]
        _, status = os.waitpid(pid, 0)
    except BaseException:
        _kill(pid)
        raise
    if os.WIFSIGNALED(status):
        return ("signal", os.WTERMSIG(status)), b"".join(chunks)
    return ("exit", os.WEXITSTATUS(status)), b"".join(chunks)


def _reap(pid):
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ChildProcessError, ProcessLookupError):
        pass


def _last(reported):
    lines = reported.decode("utf-8", "replace").splitlines()
    return lines[-1] if lines else None


def _quiet():
    """No output from the child: its crash is reported by the parent, in one line."""
    import faulthandler

    faulthandler.disable()
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)
    os.dup2(null, 2)


def _limit_memory():
    """Cap the child's address space: a damaged size field must not make it exhaust the machine."""
    try:
        import resource

        with open("/proc/self/statm") as f:
            size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = size + MEMORY_MARGIN
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ImportError, OSError, ValueError):
        pass


def _spawned(path, names, seconds, inspect):
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
        PYTHONPATH=os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p),
    )
    command = [
        sys.executable,
        "-c",
        "import sys; from embeval.formats.h5guard import main; main(sys.argv[1:])",
        f"{inspect.__module__}:{inspect.__name__}",
        str(path),
        *names,
    ]
    try:
        child = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=seconds, env=env)
    except subprocess.TimeoutExpired as err:
        return _failure("timeout", None, seconds), _last(err.stdout or b"")
    code = child.returncode
    kind, value = ("signal", -code) if code < 0 else ("exit", code)
    return _failure(kind, value, seconds), _last(child.stdout)


def main(argv):
    """Entry point of the spawned child: MODULE:FUNCTION PATH NAME..."""
    import importlib

    _limit_memory()
    module, _, function = argv[0].partition(":")
    inspect = getattr(importlib.import_module(module), function)

    def report(name):
        sys.stdout.write(name + "\n")
        sys.stdout.flush()

    inspect(argv[1], argv[2:], report)
