"""The file-system writes of the data commands, kept in one place.

Every file the data commands create goes through `create`; every folder through `make_dirs`;
`describe` turns an OSError met while writing into a short phrase for a one-line error. (Tests
replace `create` and `make_dirs` to simulate a full disk or a read-only destination.)
"""

import errno
import os
from pathlib import Path

CHUNK = 1 << 20


def describe(err):
    """A short phrase for an OSError met while writing."""
    if err.errno == errno.ENOSPC:
        return "no space left on the device"
    if err.errno == getattr(errno, "EDQUOT", None):
        return "disk quota exceeded"
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "not writable (permission denied or read-only file system)"
    return err.strerror or str(err)


def create(path, append=False):
    """Open path for binary writing (appending when asked)."""
    return open(path, "ab" if append else "wb")


def make_dirs(path):
    Path(path).mkdir(parents=True, exist_ok=True)


def copy_stream(source, target_path):
    """Copy a readable binary stream into target_path."""
    with create(target_path) as out:
        while True:
            chunk = source.read(CHUNK)
            if not chunk:
                break
            out.write(chunk)


def write_bytes(path, data):
    with create(path) as out:
        out.write(data)


def remove_file(path):
    try:
        os.unlink(path)
        return True
    except OSError:
        return False
