"""The package's version, and a fingerprint of its code (what --resume checks before reusing a result)."""

import hashlib
from functools import cache
from pathlib import Path

__version__ = "0.2.0"

PACKAGE = Path(__file__).resolve().parent
# the sources (the bootstrap kernels' C too), the task declarations, the published baselines
CODE_SUFFIXES = (".py", ".c", ".toml", ".json")


@cache
def code_fingerprint() -> str:
    """sha256 over the package's own files (every .py, the bootstrap kernels' _kernels.c, and its data
    files: tasks/*.toml, reports/baselines.json), in order of their paths: equal only when the code
    that scores is the same. Computed once per process (a few milliseconds)."""
    files = sorted(
        path
        for path in PACKAGE.rglob("*")
        if path.suffix in CODE_SUFFIXES and path.is_file() and "__pycache__" not in path.parts
    )
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()
