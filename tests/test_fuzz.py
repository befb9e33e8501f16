"""Fuzzing: damaged vectors files and task data files never crash embeval.

Each example mutates a valid input (random bytes at random offsets, truncation, attribute, shape,
dtype and link rewrites for HDF5; random bytes, truncation, dropped, duplicated and foreign lines
and other encodings for task files and COCO pickles) and runs the command in-process. The
outcome must be a clean success or the error contract: exit code 2, one to three lines on stderr
ending with `embeval: error: ...`, no traceback, and no results file (or the previous one
untouched). Any other exception fails the test with its traceback.

CI runs a small, fixed (derandomized) budget. By hand, a larger random one:
    EMBEVAL_FUZZ_EXAMPLES=2000 python -m pytest tests/test_fuzz.py
"""

import contextlib
import json
import math
import os
import pickle
import shutil
import tempfile
from pathlib import Path

import h5py
import numpy as np
import pytest
from coco_helpers import write_coco
from hostile_helpers import (
    INTEGERS,
    NAMINGS,
    ONTO,
    RESCORE,
    build,
    copy_of,
    declaration,
    invoke,
    one_line,
    spelled,
    state,
)
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from reliability_helpers import (
    PREVIOUS,
    error_line,
    progress_file,
    snapshot,
    untouched,
    vectors_for,
    write_h5,
)

from embeval.formats import sentences as export
from embeval.tasks.registry import TASKS

EXAMPLES = int(os.environ.get("EMBEVAL_FUZZ_EXAMPLES", "25"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize="EMBEVAL_FUZZ_EXAMPLES" not in os.environ,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)

TEXT_TASKS = ["MR", "SST2", "SST5", "TREC", "MRPC", "SICKEntailment", "STSBenchmark", "STS13", "STS16", "SNLI", "Tense"]
SCORED = ["STS13", "STS16"]
LINES = 30


def outcome(result, out=None, before=None):
    """A clean success, or the error contract with the results path untouched."""
    assert "Traceback" not in result.stderr, result.stderr
    if result.exit_code == 0:
        if out is not None:
            assert json.loads(out.read_text())["format"] == "embeval-results"
        return "ok"
    error_line(result)
    if out is not None:
        progress = progress_file(out)
        if progress.exists():  # tasks finished before a check that only an evaluator makes
            assert json.loads(progress.read_text())["format"] == "embeval-results"
        untouched(out, before, progress=progress.exists())
    return "refused"


def run_score(cli, folder, vectors, data, tasks, previous):
    out = folder / "results.json"
    if previous:
        out.write_bytes(PREVIOUS)
    before = snapshot(out)
    return outcome(cli("score", vectors, "--data", data, "--tasks", tasks, "--out", out), out, before)


def write_synthetic(root):
    """Tasks the test data leaves out: SNLI (its train split), a probing task, COCO."""
    snli = root / "downstream" / "SNLI"
    snli.mkdir(parents=True, exist_ok=True)
    labels = ["entailment", "neutral", "contradiction"]
    for split in ("train", "dev", "test"):
        (snli / f"s1.{split}").write_text("".join(f"a man plays {i} times\n" for i in range(9)))
        (snli / f"s2.{split}").write_text("".join(f"someone plays {i % 4}\n" for i in range(9)))
        (snli / f"labels.{split}").write_text("".join(f"{labels[i % 3]}\n" for i in range(9)))
    (root / "probing").mkdir()
    (root / "probing" / "past_present.txt").write_text(
        "".join(
            f"{s}\t{t}\t{i}\tshe walk{'ed' if t == 'PAST' else 's'} home {i}\n"
            for i, (s, t) in enumerate([(s, t) for s in ("tr", "va", "te") for t in ("PAST", "PRES")] * 3)
        )
    )
    write_coco(root, (3, 2, 2), feat_dim=4)


@pytest.fixture(scope="module")
def mini(tmp_path_factory, data_dir):
    """A data folder with the first lines of each task's files, plus vectors files built from it."""
    root = tmp_path_factory.mktemp("mini")
    data = root / "data"
    for name in TEXT_TASKS:
        for rel in TASKS[name].data_files():
            if (data_dir / rel).is_file() and name != "SNLI":
                (data / rel).parent.mkdir(parents=True, exist_ok=True)
                (data / rel).write_bytes(b"\n".join((data_dir / rel).read_bytes().split(b"\n")[:LINES]) + b"\n")
    write_synthetic(data)
    texts = {name: export.task_sentences(TASKS[name].load(data)) for name in TEXT_TASKS + ["ImageCaptionRetrieval"]}
    sts16 = texts["STS16"]
    files = {
        "per-task": write_h5(
            root / "per-task.h5", {"STS16": (vectors_for(sts16), {"sha256": export.fingerprint(sts16)})}
        )
    }
    with h5py.File(root / "chunked.h5", "w") as f:
        f.create_dataset(
            "STS16", data=vectors_for(sts16, seed=1).astype("f2"), chunks=(16, 8), compression="gzip", shuffle=True
        )
        f["STS16"].attrs["sha256"] = export.fingerprint(sts16)
    files["chunked"] = root / "chunked.h5"
    union = export.union_sentences([texts["STS13"], texts["STS16"]])
    files["union"] = write_h5(
        root / "union.h5",
        {"ALL": (vectors_for(union, seed=2), {"sha256": export.fingerprint(union), "tasks": "STS13,STS16"})},
    )
    vectors = {
        name: write_h5(
            root / f"{name}.h5", {name: (vectors_for(texts[name]), {"sha256": export.fingerprint(texts[name])})}
        )
        for name in SCORED
    }
    return data, files, vectors


# Vectors files.

ATTR_VALUES = st.one_of(
    st.text(max_size=80),
    st.binary(max_size=80),
    st.integers(-(2**63), 2**63 - 1),
    st.lists(st.floats(allow_nan=True), max_size=4),
    st.just("0" * 64),
)
DTYPES = ["f2", "f4", "f8", "i4", "u1", "c8", "bool", "S4", "i8"]


def rewrites(name):
    """h5py-level damage to dataset `name`: (description, function(h5 file, draw))."""

    def drop_attribute(f, draw):
        key = draw(st.sampled_from(["sha256", "tasks"]))
        if key in f[name].attrs:
            del f[name].attrs[key]

    def set_attribute(f, draw):
        value = draw(ATTR_VALUES)
        if isinstance(value, list):
            value = np.asarray(value, dtype="f8")
        f[name].attrs[draw(st.sampled_from(["sha256", "tasks"]))] = value

    def reshape(f, draw):
        values, attrs = f[name][()], dict(f[name].attrs)
        shape = tuple(draw(st.lists(st.integers(0, 200), min_size=0, max_size=3)))
        dtype = draw(st.sampled_from(DTYPES))
        del f[name]
        data = np.resize(values, shape).astype(dtype) if shape else values.ravel()[:1].astype(dtype)[0]
        f.create_dataset(name, data=data)
        f[name].attrs.update(attrs)

    def nonfinite(f, draw):
        if f[name].ndim != 2 or f[name].shape[0] == 0:
            return
        rows = draw(st.lists(st.integers(0, f[name].shape[0] - 1), min_size=1, max_size=5))
        values = f[name][()]
        values[rows, 0] = draw(st.sampled_from([np.nan, np.inf, -np.inf, 65504.0]))
        f[name][...] = values

    def relink(f, draw):
        attrs = dict(f[name].attrs)
        values = f[name][()]
        del f[name]
        kind = draw(st.sampled_from(["soft", "dangling", "external", "group", "cycle"]))
        if kind == "soft":
            f["hidden/inner"] = values
            f["hidden/inner"].attrs.update(attrs)
            f[name] = h5py.SoftLink("/hidden/inner")
        elif kind == "dangling":
            f[name] = h5py.SoftLink(draw(st.text(min_size=1, max_size=12)))
        elif kind == "external":
            f[name] = h5py.ExternalLink(draw(st.sampled_from(["other.h5", "/etc/passwd"])), "/x")
        elif kind == "group":
            f.create_group(name)["v"] = values
        else:
            f[name] = h5py.SoftLink("/loop")
            f["loop"] = h5py.SoftLink(f"/{name}")

    def restore(f, draw):
        values, attrs = f[name][()], dict(f[name].attrs)
        del f[name]
        options = draw(
            st.sampled_from(
                [
                    {"chunks": True},
                    {"compression": "gzip"},
                    {"compression": "lzf"},
                    {"fletcher32": True},
                    {"shuffle": True, "compression": "gzip"},
                    {"scaleoffset": 3},
                ]
            )
        )
        f.create_dataset(name, data=values, **options)
        f[name].attrs.update(attrs)

    return [drop_attribute, set_attribute, reshape, nonfinite, relink, restore]


@given(st.data())
@FUZZ
def test_fuzz_vectors_files(cli, mini, data):
    data_root, files, _ = mini
    base = data.draw(st.sampled_from(sorted(files)), label="base file")
    name, tasks = ("ALL", "STS13,STS16") if base == "union" else ("STS16", "STS16")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / "v.h5"
        shutil.copy(files[base], path)
        for _ in range(data.draw(st.integers(0, 2), label="rewrites")):
            rewrite = data.draw(st.sampled_from(rewrites(name)), label="rewrite")
            with h5py.File(path, "r+") as f:
                if (
                    name in f
                    and isinstance(f.get(name, getlink=True), h5py.HardLink)
                    and isinstance(f[name], h5py.Dataset)
                ):
                    try:
                        rewrite(f, data.draw)
                    except (ValueError, TypeError, OSError, IndexError):
                        pass  # h5py cannot write this combination: the file keeps what was written
        raw = bytearray(path.read_bytes())
        for _ in range(data.draw(st.integers(0, 12), label="byte changes")):
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
        if data.draw(st.booleans(), label="truncate"):
            raw = raw[: data.draw(st.integers(0, len(raw)))]
        path.write_bytes(bytes(raw))
        run_score(cli, folder, path, data_root, tasks, data.draw(st.booleans(), label="previous results"))


# Task data files.


def mutate_text(raw, draw):
    """One damage to a text file's bytes."""
    kind = draw(
        st.sampled_from(
            [
                "bytes",
                "truncate",
                "drop line",
                "duplicate line",
                "foreign line",
                "tabs",
                "encoding",
                "empty",
                "blank lines",
            ]
        ),
        label="mutation",
    )
    lines = raw.split(b"\n")
    pick = st.integers(0, max(len(lines) - 1, 0))
    if kind == "bytes" and raw:
        data = bytearray(raw)
        for _ in range(draw(st.integers(1, 8))):
            data[draw(st.integers(0, len(data) - 1))] = draw(
                st.sampled_from([0, 9, 10, 13, 32, 0x80, 0xC3, 0xFF, draw(st.integers(0, 255))])
            )
        return bytes(data)
    if kind == "truncate":
        return raw[: draw(st.integers(0, len(raw)))]
    if kind == "drop line":
        del lines[draw(pick)]
    elif kind == "duplicate line":
        i = draw(pick)
        lines.insert(i, lines[i])
    elif kind == "foreign line":
        lines.insert(draw(pick), draw(st.one_of(st.binary(max_size=60), st.text(max_size=60).map(str.encode))))
    elif kind == "tabs":
        i = draw(pick)
        lines[i] = (
            lines[i].replace(b"\t", draw(st.sampled_from([b" ", b"\t\t", b""])))
            if b"\t" in lines[i]
            else lines[i] + b"\tx"
        )
    elif kind == "encoding":
        text = raw.decode("latin-1")
        return text.encode(draw(st.sampled_from(["utf-16", "utf-32", "cp1252"])), "replace")
    elif kind == "empty":
        return b""
    else:
        lines.insert(draw(pick), b"")
    return b"\n".join(lines)


def copy_task(data_root, folder, task):
    for rel in TASKS[task].data_files():
        (folder / "data" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(data_root / rel, folder / "data" / rel)
    return folder / "data"


@given(st.data())
@FUZZ
def test_fuzz_task_files(cli, mini, data):
    data_root, _, vectors = mini
    task = data.draw(st.sampled_from(TEXT_TASKS), label="task")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        root = copy_task(data_root, folder, task)
        target = root / data.draw(st.sampled_from(TASKS[task].data_files()), label="file")
        for _ in range(data.draw(st.integers(1, 3), label="mutations")):
            target.write_bytes(mutate_text(target.read_bytes(), data.draw))
        result = cli("export-sentences", "--data", root, "--out", folder / "sentences", "--tasks", task)
        if outcome(result) == "refused":
            assert not (folder / "sentences").exists()
        if task in SCORED:
            run_score(cli, folder, vectors[task], root, task, data.draw(st.booleans(), label="previous results"))


PLAIN = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10), st.binary(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


def coco_damage(raw, draw):
    """Damage to one COCO pickle: its bytes, or its plain content."""
    kind = draw(st.sampled_from(["bytes", "truncate", "content", "features", "links", "captions"]), label="damage")
    if kind == "bytes":
        data = bytearray(raw)
        for _ in range(draw(st.integers(1, 6))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        return bytes(data)
    if kind == "truncate":
        return raw[: draw(st.integers(0, len(raw)))]
    if kind == "content":
        return pickle.dumps(draw(PLAIN), protocol=draw(st.integers(0, 5)))
    content = pickle.loads(raw)
    if kind == "features":
        shape = tuple(draw(st.lists(st.integers(0, 4), max_size=3)))
        content["features"] = np.zeros(shape, dtype=draw(st.sampled_from(["f4", "i8", "U3", "c8", "O"])))
    elif kind == "links":
        content["image_to_caption_ids"] = draw(PLAIN)
    else:
        key = draw(st.sampled_from(sorted(content["captions"])))
        content["captions"][key] = draw(PLAIN)
    return pickle.dumps(content, protocol=2)


@given(st.data())
@FUZZ
def test_fuzz_coco_pickles(cli, mini, data):
    data_root, _, _ = mini
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        root = copy_task(data_root, folder, "ImageCaptionRetrieval")
        target = root / data.draw(st.sampled_from(TASKS["ImageCaptionRetrieval"].data_files()), label="file")
        target.write_bytes(coco_damage(target.read_bytes(), data.draw))
        result = cli(
            "export-sentences", "--data", root, "--out", folder / "sentences", "--tasks", "ImageCaptionRetrieval"
        )
        if outcome(result) == "refused":
            assert not (folder / "sentences").exists()


def test_mini_data_is_valid(cli, mini, tmp_path):
    """The unmutated inputs succeed, so a refusal in the fuzz tests comes from the mutation."""
    data_root, files, vectors = mini
    result = cli(
        "export-sentences",
        "--data",
        data_root,
        "--out",
        tmp_path / "s",
        "--tasks",
        ",".join(TEXT_TASKS + ["ImageCaptionRetrieval"]),
    )
    assert result.exit_code == 0, result.stderr
    for base, path in files.items():
        tasks = "STS13,STS16" if base == "union" else "STS16"
        result = cli("score", path, "--data", data_root, "--tasks", tasks, "--out", tmp_path / f"{base}.json")
        assert result.exit_code == 0, result.stderr


# Shared files: task files of one's own (and their TSV or BEIR data), results files and export manifests,
# random and mutated. Besides the error contract, nothing may be written outside the output folder, and
# the content of a file outside the task's folder never shows in an output or a message.

OUTSIDE = b"sentence1\tsentence2\tscore\nSENTINEL private a\tSENTINEL private b\t1\n"
HOSTILE_PATHS = [
    "../outside.tsv",
    "../../outside.tsv",
    "/etc/hostname",
    "link.tsv",  # a symlink to ../outside.tsv
    "fifo.tsv",  # a FIFO
    "d/../../outside.tsv",
    "",
    "d",
    "/dev/zero",
]
HOSTILE_NAMES = ["../../escaped", "Mine\n", ".hidden", "a/b", "x" * 300, "Mine\x00", " ", "ALL", "manifest"]
DEEP = "[" * 3000 + "]" * 3000
SHARED_TASKS = {
    "sts": (
        'name = "Mine"\nkind = "sts"\n[files]\ntest = "d/test.tsv"\n',
        {"d/test.tsv": b"sentence1\tsentence2\tscore\na b\ta c\t4.5\nx y\tx z\t1\nsun\tmoon\t0\n"},
    ),
    "retrieval": (
        'name = "Mine"\nkind = "retrieval"\n[files]\ncorpus = "d/corpus.jsonl"\nqueries = "d/queries.jsonl"\n'
        'qrels = "d/qrels.tsv"\n',
        {
            "d/corpus.jsonl": b'{"_id": "d1", "title": "t", "text": "one"}\n{"_id": "d2", "text": "two"}\n',
            "d/queries.jsonl": b'{"_id": "q1", "text": "first"}\n{"_id": "q2", "text": "second"}\n',
            "d/qrels.tsv": b"query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n",
        },
    ),
}


def tree_state(folder, skip):
    """{path: (kind, bytes)} of everything under folder except under `skip` (FIFOs are never read)."""
    state = {}
    for path in sorted(Path(folder).rglob("*")):
        if skip in path.parents or path == skip:
            continue
        if path.is_symlink():
            state[str(path)] = ("link", os.readlink(path))
        elif path.is_file():
            state[str(path)] = ("file", path.read_bytes())
        else:
            state[str(path)] = ("other", None)
    return state


def shared_outcome(result, folder, out, before):
    """The error contract, nothing changed outside `out`, and no outside content anywhere."""
    outcome(result)
    assert tree_state(folder, out) == before
    assert b"SENTINEL" not in (result.stdout + result.stderr).encode()
    for path in Path(out).rglob("*") if Path(out).is_dir() else ():
        if path.is_file() and not path.is_symlink():
            assert b"SENTINEL" not in path.read_bytes(), path


def mutate_toml(text, draw):
    """A task file's text, damaged: a path or a name replaced by a hostile one, deep nesting, a key
    added or dropped, or its bytes (as any text file)."""
    kind = draw(st.sampled_from(["path", "name", "deep", "key", "bytes"]), label="toml damage")
    if kind == "path":
        old = draw(st.sampled_from([line.split('"')[1] for line in text.splitlines() if line.count('"') == 2]))
        return text.replace(f'"{old}"', json.dumps(draw(st.sampled_from(HOSTILE_PATHS)))).encode()
    if kind == "name":
        return text.replace('"Mine"', json.dumps(draw(st.sampled_from(HOSTILE_NAMES))), 1).encode()
    if kind == "deep":
        return (text.split("[files]")[0] + f"extra = {DEEP}\n[files]" + text.split("[files]")[1]).encode()
    if kind == "key":
        name = json.dumps(draw(st.sampled_from(HOSTILE_NAMES)))
        key = draw(st.sampled_from([f"mteb = {{name = {name}}}", ""]))
        return (key + "\n" + text).encode()
    return mutate_text(text.encode(), draw)


def mutate_jsonl(raw, draw):
    """A JSON lines file, damaged: a line replaced by deep nesting, a duplicate key, random JSON, or as text."""
    kind = draw(st.sampled_from(["deep", "duplicate", "random", "text"]), label="jsonl damage")
    lines = raw.split(b"\n")
    i = draw(st.integers(0, max(len(lines) - 2, 0)))
    if kind == "deep":
        lines[i] = ('{"_id": "z", "text": ' + DEEP + "}").encode()
    elif kind == "duplicate":
        lines[i] = b'{"_id": "d1", "_id": " ", "text": "\\t", "text": ""}'
    elif kind == "random":
        lines[i] = json.dumps(draw(PLAIN_JSON)).encode()
    else:
        return mutate_text(raw, draw)
    return b"\n".join(lines)


PLAIN_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


def write_shared_task(folder, kind):
    text, files = SHARED_TASKS[kind]
    tasks = folder / "tasks"
    for rel, content in files.items():
        (tasks / rel).parent.mkdir(parents=True, exist_ok=True)
        (tasks / rel).write_bytes(content)
    (folder / "outside.tsv").write_bytes(OUTSIDE)
    (tasks / "link.tsv").symlink_to(folder / "outside.tsv")
    os.mkfifo(tasks / "fifo.tsv")
    (tasks / "task.toml").write_text(text)
    return tasks / "task.toml", text


@given(st.data())
@FUZZ
def test_fuzz_shared_task_files(cli, data):
    kind = data.draw(st.sampled_from(sorted(SHARED_TASKS)), label="kind")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        task_file, text = write_shared_task(folder, kind)
        for _ in range(data.draw(st.integers(1, 2), label="mutations")):
            target = data.draw(st.sampled_from(["task file"] + sorted(SHARED_TASKS[kind][1])), label="file")
            if target == "task file":
                task_file.write_bytes(mutate_toml(text, data.draw))
            else:
                path = task_file.parent / target
                damage = mutate_jsonl if target.endswith(".jsonl") else mutate_text
                path.write_bytes(damage(path.read_bytes(), data.draw))
        out = folder / "a" / "b" / "out"
        out.parent.mkdir(parents=True)
        before = tree_state(folder, out)
        result = cli("export-sentences", "--data", folder / "none", "--task-file", task_file, "--out", out)
        shared_outcome(result, folder, out, before)
        if result.exit_code != 0:
            assert not out.exists()


def mutate_json(value, draw, hostile):
    """A JSON document with one part replaced (by random JSON, a hostile name or path, deep nesting) or
    removed."""
    paths = []

    def walk(node, at):
        paths.append(at)
        if isinstance(node, dict):
            for key, child in node.items():
                walk(child, at + [key])
        elif isinstance(node, list):
            for i, child in enumerate(node):
                walk(child, at + [i])

    walk(value, [])
    at = draw(st.sampled_from(paths[1:] or [[]]), label="where")
    new = draw(
        st.one_of(PLAIN_JSON, st.sampled_from(hostile), st.just(json.loads("[" * 60 + "]" * 60)), st.just("DROP")),
        label="value",
    )
    if not at:
        return new
    parent = value
    for key in at[:-1]:
        parent = parent[key]
    if new == "DROP":
        del parent[at[-1]]
    else:
        parent[at[-1]] = new
    return value


@given(st.data())
@FUZZ
def test_fuzz_results_files(cli, data):
    example = Path(__file__).resolve().parents[1] / "docs" / "example" / "results-minilm.json"
    record = json.loads(example.read_text())
    declared = dict(record["tasks"]["STS12"])
    declared["declaration"] = {
        "source": "tasks/t.toml",
        "declaration": {
            "name": "Mine",
            "kind": "sts",
            "format": "senteval-sts",
            "files": {"MSRpar.input": "a.txt", "MSRpar.gs": "b.txt"},
            "mteb": {"name": "Mine", "revision": "r", "figures": "all.{coef}.pooled"},
        },
    }
    record["tasks"]["Mine"] = declared
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / "shared" / "r.json"
        path.parent.mkdir()
        if data.draw(st.booleans(), label="as bytes"):
            path.write_bytes(mutate_text(json.dumps(record, indent=1).encode(), data.draw))
        else:
            for _ in range(data.draw(st.integers(1, 3), label="mutations")):
                record = mutate_json(record, data.draw, HOSTILE_NAMES + HOSTILE_PATHS)
            path.write_text(json.dumps(record))
        out = folder / "a" / "b" / "out"
        out.parent.mkdir(parents=True)
        before = tree_state(folder, out)
        command = data.draw(st.sampled_from(["report", "export-mteb", "compare", "rank"]), label="command")
        args = {
            "report": ("report", path, "--out", out / "report.md"),
            "export-mteb": ("export-mteb", path, "--model", "org/model", "--out", out),
            "compare": ("compare", path, path, "--out", out / "compare.md"),
            "rank": ("rank", path, path, "--out", out / "rank.txt"),
        }[command]
        shared_outcome(cli(*args), folder, out, before)


@given(st.data())
@FUZZ
def test_fuzz_manifests(cli, data):
    from embeval.errors import EmbevalError
    from embeval.formats.vectors import write

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "outside.tsv").write_bytes(OUTSIDE)
        exported = folder / "export"
        export.export({"Mine": {"text": ["a", "b"]}, "Other": {"query": ["q"], "document": ["d", "e"]}}, exported)
        manifest = exported / "manifest.json"
        if data.draw(st.booleans(), label="as bytes"):
            manifest.write_bytes(mutate_text(manifest.read_bytes(), data.draw))
        else:
            value = json.loads(manifest.read_text())
            for _ in range(data.draw(st.integers(1, 3), label="mutations")):
                value = mutate_json(value, data.draw, HOSTILE_NAMES + HOSTILE_PATHS)
            manifest.write_text(json.dumps(value))
        out = folder / "a" / "b" / "out"
        out.mkdir(parents=True)
        before = tree_state(folder, out)
        try:
            write(out / "v.h5", exported, lambda s: np.ones((len(s), 4), np.float32), progress=False)
        except EmbevalError as err:
            assert "\n" not in str(err) and "SENTINEL" not in str(err)
        assert tree_state(folder, out) == before
        if (out / "v.h5").exists():
            shared_outcome(cli("vectors", "check", out / "v.h5", "--export", exported), folder, out, before)


# Hostile inputs drawn at random (tests/test_hostile.py takes each class case by case): an output drawn
# onto one of the command's inputs, a number at the edges of float64 drawn into a results file, an
# integer setting of a task file drawn around its bound.


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    return build(tmp_path_factory.mktemp("hostile"))


@contextlib.contextmanager
def hostile_copy(hostile):
    with tempfile.TemporaryDirectory() as tmp:
        folder = copy_of(hostile, Path(tmp) / "w")
        with contextlib.chdir(folder):
            yield folder


@given(st.data())
@FUZZ
def test_fuzz_outputs_onto_inputs(hostile, data):
    """Any writing command, any of its inputs, any spelling: refused in one line, nothing changed."""
    command, source, target = data.draw(st.sampled_from(ONTO), label="command, input, output")
    namings = NAMINGS if "OUT" in command else ("symlink", "hardlink")
    naming = data.draw(st.sampled_from(namings), label="naming")
    with hostile_copy(hostile) as folder:
        out = spelled(folder, source, naming, target)
        before = state(folder)
        one_line(invoke(*(out if a == "OUT" else a for a in command)), "is an input of this command")
        assert state(folder) == before


EDGE_TEXTS = ["1e308", "-1e308", "5e-324", "-5e-324", "-0.0", "0", "Infinity", "-Infinity", "NaN", "1e400"]
EDGE_TEXTS += ["1" + "0" * 400, "-" + "9" * 30, str(2**63), str(2**63 - 1)]
EDGE_NUMBERS = st.one_of(
    st.sampled_from(EDGE_TEXTS),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(-(2**70), 2**70).map(str),
)
MARK = 123.456789012345


def finite_json_number(text):
    """Whether embeval may read this JSON number: finite in float64, an integer within int64."""
    if text in ("Infinity", "-Infinity", "NaN"):
        return False
    if text.lstrip("-").isdigit():
        return abs(int(text)) <= 2**63 - 1
    return math.isfinite(float(text))


def numbers_in(value, at=()):
    """The paths of every number in a JSON document."""
    if isinstance(value, dict):
        return [p for key, child in value.items() for p in numbers_in(child, at + (key,))]
    if isinstance(value, list):
        return [p for i, child in enumerate(value) for p in numbers_in(child, at + (i,))]
    return [at] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


@given(st.data())
@FUZZ
def test_fuzz_numbers_at_the_edges_in_a_results_file(hostile, data):
    """Any number of a results file made an edge of float64, its entries' digests recomputed or not: each
    reader succeeds cleanly or refuses in one line; a number embeval never writes is always refused;
    --resume writes the vectors' figure, never the file's, unless the entry was signed anew."""
    from embeval.formats.results import figures_digest

    record = json.loads((hostile / "a.json").read_text())
    at = data.draw(st.sampled_from(numbers_in(record)), label="where")
    text = data.draw(EDGE_NUMBERS, label="number")
    signed = data.draw(st.booleans(), label="digests recomputed")
    command = data.draw(
        st.sampled_from(
            [
                ("report", "a.json"),
                ("export-mteb", "a.json", "--model", "o/m", "--out", "mt"),
                ("compare", "b.json", "a.json", "--resamples", 100),
                RESCORE + ("--out", "a.json", "--resume"),
            ]
        ),
        label="reader",
    )
    truth = record["tasks"]["Mine"]["results"]["all"]["spearman"]["pooled"]
    parent = record
    for key in at[:-1]:
        parent = parent[key]
    parent[at[-1]] = MARK
    written = json.dumps(record, indent=1).replace(repr(MARK), text)
    if signed:
        record = json.loads(written)
        for entry in record.get("tasks", {}).values():
            if isinstance(entry, dict):
                entry["figures_sha256"] = figures_digest(entry)
        written = json.dumps(record, indent=1)
    with hostile_copy(hostile) as folder:
        (folder / "a.json").write_text(written)
        before = state(folder)
        result = invoke(*command)
        event(f"{command[0]}: exit code {result.exit_code}")
        assert "Traceback" not in result.stdout + result.stderr, result.stderr
        if not finite_json_number(text):
            one_line(result, "a.json", "edited by hand?")
        if result.exit_code != 0:
            error_line(result)
            assert state(folder) == before
        elif command[0] == "score":
            mean = json.loads((folder / "a.json").read_text())["tasks"]["Mine"]["results"]["all"]["spearman"]
            assert signed or mean["pooled"] == truth
        else:
            assert {k: v for k, v in state(folder).items() if k in before} == before


LEAST = {"seed": 0, "max_eval_samples": 0, "n_samples": 2, "depth": 10}


@given(st.data())
@FUZZ
def test_fuzz_integer_settings_of_a_task_file(data):
    """Any integer setting, any int64 value: accepted within its bounds, else one line naming it."""
    from embeval.tasks.declaration import MOST

    kind, key = data.draw(st.sampled_from(INTEGERS), label="setting")
    most = MOST[key][0]
    value = data.draw(
        st.one_of(st.integers(most - 2, most + 2), st.integers(-2, 12), st.integers(-(2**63), 2**63 - 1)), label="value"
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "b.toml"
        path.write_text(declaration(kind, f"{key} = {value}"))
        result = invoke("tasks", "--no-load", "--task-file", path)
        if LEAST.get(key, 1) <= value <= most:
            assert result.exit_code == 0, result.stderr
        else:
            one_line(result, "b.toml", key)


def _read_both(path, fmt, columns):
    """(read_columns' outcome, read_rows' outcome by column): values, or the error's text."""
    from embeval.errors import DataFileError
    from embeval.tasks import tabular

    def columnar():
        lines, found = tabular.read_columns(path, fmt, columns, {}, "T")
        return list(lines), found

    def by_rows():
        rows = tabular.read_rows(path, fmt, columns, {}, "T")
        return [line for line, _ in rows], {c: [row[c] for _, row in rows] for c in columns}

    outcomes = []
    for read in (columnar, by_rows):
        try:
            outcomes.append(read())
        except DataFileError as err:
            outcomes.append(str(err))
    return outcomes


@FUZZ
@given(st.data())
def test_fuzz_columns_read_at_once_equal_the_rows(tmp_path_factory, data):
    """A task file read by column (a TSV file split at once) gives read_rows' values, line numbers
    and errors; numbers and labels parsed at once give number_field's and label_field's."""
    from embeval.errors import DataFileError
    from embeval.tasks import tabular

    path = tmp_path_factory.mktemp("columns") / "data.tsv"
    field = st.text(alphabet="ab1.-e\t\r \u00e9", max_size=6)
    header = data.draw(st.sampled_from(["a\tb", "b\ta\tc", "a\r", "x\ta", "a\tb\ta"]))
    rows = data.draw(st.lists(field, max_size=8))
    ending = data.draw(st.sampled_from(["", "\n", "\r\n", "\n\n"]))
    text = "\n".join([header, *rows]) + ending
    path.write_text(text, encoding="utf-8")
    for columns in (("a",), ("a", "b")):
        columnar, by_rows = _read_both(path, "tsv", columns)
        assert columnar == by_rows
        if isinstance(columnar, str):
            continue
        lines, found = columnar
        for read, one in ((tabular.number_column, tabular.number_field), (tabular.label_column, tabular.label_field)):
            expected = []
            for value, line in zip(found["a"], lines):
                try:
                    expected.append(one(value, "a", path, "T", line))
                except DataFileError as err:
                    expected = str(err)
                    break
            try:
                got = read(found["a"], "a", path, "T", lines)
            except DataFileError as err:
                got = str(err)
            assert got == expected
