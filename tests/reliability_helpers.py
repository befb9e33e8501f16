"""The error contract for bad input, small vectors files, and results files to compare.

The contract: exit code 2; one error line on stderr, `embeval: error: ...`, the last line (warnings
and progress lines may precede it), naming the file, the task and what is wrong; no traceback; and
no results file, or the previous one byte for byte as it was.
"""

import json
import re

import h5py
import numpy as np

from embeval.formats import sentences as export
from embeval.tasks.registry import TASKS

STS = ("STS12", "STS13", "STS14", "STS15", "STS16")

# A results file from an earlier run: it must survive every refused run unchanged.
PREVIOUS = (
    json.dumps(
        {
            "format": "embeval-results",
            "format_version": 1,
            "embeval": "0.0.0",
            "config": {},
            "tasks": {},
            "note": "an earlier run",
        },
        indent=1,
    )
    + "\n"
).encode()


def error_line(result):
    """The error line of a refused run, after checking the contract's stderr shape."""
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout, result.stderr
    lines = result.stderr.strip().splitlines()
    assert [line for line in lines if line.startswith("embeval: error: ")] == lines[-1:], result.stderr
    return lines[-1]


def refused(result, *fragments):
    """Assert the error contract; every fragment (file, task, problem) appears in the error line."""
    line = error_line(result)
    for fragment in fragments:
        assert str(fragment) in line, (fragment, line)
    return line


def snapshot(path):
    return path.read_bytes() if path.exists() else None


def progress_file(out):
    return out.with_name(out.name + ".partial")


def untouched(path, before, progress=False):
    """The results path holds what it held before (nothing, or the same bytes); no temporary files;
    a progress file (PATH.partial) only when the run had finished some task (progress=True)."""
    assert snapshot(path) == before, f"{path} changed"
    if path.parent.is_dir():
        assert not [p.name for p in path.parent.iterdir() if p.name.startswith(f".{path.name}.")]
    assert progress_file(path).exists() == progress


def sentences(data_dir, name):
    return export.task_sentences(TASKS[name].load(data_dir))


def vectors_for(texts, dim=8, seed=0):
    """Deterministic float32 vectors, one row per sentence."""
    return np.random.default_rng(seed).standard_normal((len(texts), dim)).astype(np.float32)


def write_h5(path, datasets):
    """datasets: {name: (values, attributes)} -> an HDF5 file at path."""
    with h5py.File(path, "w") as f:
        for name, (values, attrs) in datasets.items():
            f.create_dataset(name, data=values)
            for key, value in attrs.items():
                f[name].attrs[key] = value
    return path


def task_file(path, data_dir, names, dim=8, seed=0):
    """A valid vectors file for `names` (one dataset per task, with fingerprints)."""
    datasets = {}
    for i, name in enumerate(names):
        texts = sentences(data_dir, name)
        datasets[name] = (vectors_for(texts, dim, seed + i), {"sha256": export.fingerprint(texts)})
    return write_h5(path, datasets)


def comparable(path):
    """A results file as text with every timing value and the name of its predictions file blanked: equal
    texts = byte-identical apart from timing."""
    text = re.sub(r'("seconds": )[0-9.eE+-]+', r"\1T", path.read_text())
    return re.sub(r'("file": )"[^"]*\.predictions\.npz"', r'\1"P"', text)
