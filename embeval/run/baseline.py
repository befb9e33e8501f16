"""`--baseline-bow-dim D`: the hashing bag of words of exporters/bow_numpy.py, computed by embeval.

The rule is the exporter's own code (exporters/bow_numpy.py, shipped with embeval), loaded from
the file, so the baseline's vectors are bit-identical to what that exporter writes at dimension D.
It is embeval's code, not the user's: no user code runs while scoring.
"""

import importlib.util
import sys
from pathlib import Path

from embeval.errors import EmbevalError

NAME = "hashing bag of words"
_MODULE = None


def exporters_dir():
    """The folder holding the Python exporters (installed package data, else the source checkout)."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "exporters", package.parent / "exporters"):
        if (candidate / "bow_numpy.py").is_file():
            return candidate
    raise EmbevalError(
        "the exporters are missing (expected exporters/bow_numpy.py next to the embeval package; reinstall embeval)",
        file=package,
    )


def _bow_module():
    """exporters/bow_numpy.py as a module (sys.path restored after its import)."""
    global _MODULE
    if _MODULE is None:
        path = exporters_dir() / "bow_numpy.py"
        spec = importlib.util.spec_from_file_location("embeval_exporters_bow_numpy", path)
        module = importlib.util.module_from_spec(spec)
        saved = list(sys.path)
        try:
            spec.loader.exec_module(module)
        finally:
            sys.path[:] = saved
        _MODULE = module
    return _MODULE


def encode(sentences, dim, batch=65536):
    """float32 (len(sentences), dim): the hashing bag of words of every sentence."""
    import numpy as np

    encoder = _bow_module().HashingBagOfWords(dim)
    if not sentences:
        return np.zeros((0, dim), dtype=np.float32)
    return np.concatenate([encoder.encode(sentences[i : i + batch]) for i in range(0, len(sentences), batch)])


def label(dim):
    return f"{NAME} ({dim}-d)"
