"""The bad-input matrix (README "What embeval checks"): every row refused with exit code 2, one
error line naming the file, the task and the problem, no traceback, and no results file (or the
previous one byte for byte unchanged). Rows test_cli.py covers without a previous results file
(dtypes, rows, NaN, fingerprint, unreadable files) are run here again with one.
"""

import errno
import json
import os
import pickle
import shutil
import stat
import time

import h5py
import numpy as np
import pytest
from reliability_helpers import (
    PREVIOUS,
    progress_file,
    refused,
    sentences,
    task_file,
    untouched,
    vectors_for,
    write_h5,
)

from embeval import errors
from embeval.formats import h5guard
from embeval.formats import sentences as export
from embeval.formats.results import UNDEFINED_NOTE

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def sts16(data_dir):
    texts = sentences(data_dir, "STS16")
    return texts, vectors_for(texts), export.fingerprint(texts)


def refused_twice(cli, tmp_path, args, *fragments, command="score"):
    """Run the command without a results file (none appears) and over a previous one (unchanged)."""
    out = tmp_path / "results.json"
    for previous in (None, PREVIOUS):
        if out.exists():
            out.unlink()
        if previous is not None:
            out.write_bytes(previous)
        line = refused(cli(command, *args, "--out", out), *fragments)
        untouched(out, previous)
    return line


def lazily_huge(path, texts, sha):
    """A dataset declared (count, 10**9) float32 (7 TB) but never written: the file stays small."""
    with h5py.File(path, "w") as f:
        f.create_dataset("STS16", shape=(len(texts), 10**9), dtype="f4")
        f["STS16"].attrs["sha256"] = sha
    assert path.stat().st_size < 1 << 20


def damaged(signature):
    def build(path, texts, values, sha):
        write_h5(path, {"STS16": (values, {"sha256": sha})})
        raw = path.read_bytes()
        assert signature in raw
        path.write_bytes(raw.replace(signature, b"XXXX", 1))

    return build


def plain(values, **attrs):
    def build(path, texts, _values, sha):
        write_h5(path, {"STS16": (values(_values) if callable(values) else values, {"sha256": sha, **attrs})})

    return build


def with_dtype(dtype, convert=None):
    def build(path, texts, values, sha):
        with h5py.File(path, "w") as f:
            data = convert(values) if convert else values.astype(dtype)
            f.create_dataset("STS16", data=data, dtype=dtype)
            f["STS16"].attrs["sha256"] = sha

    return build


def array_elements(path, texts, values, sha):
    with h5py.File(path, "w") as f:
        f.create_dataset("STS16", shape=values.shape, dtype=np.dtype(("f4", (2,))))
        f["STS16"].attrs["sha256"] = sha


def raw_bytes(content):
    def build(path, texts, values, sha):
        path.write_bytes(content(path, values, sha) if callable(content) else content)

    return build


def good_bytes(path, values, sha):
    write_h5(path, {"STS16": (values, {"sha256": sha})})
    return path.read_bytes()


def external_link(path, texts, values, sha):
    write_h5(path.with_name("other.h5"), {"STS16": (values, {"sha256": sha})})
    with h5py.File(path, "w") as f:
        f["STS16"] = h5py.ExternalLink("other.h5", "/STS16")


def soft_to_external(path, texts, values, sha):
    write_h5(path.with_name("other.h5"), {"v": (values, {"sha256": sha})})
    with h5py.File(path, "w") as f:
        f["outside"] = h5py.ExternalLink("other.h5", "/")
        f["STS16"] = h5py.SoftLink("/outside/v")


def external_storage(path, texts, values, sha):
    values.tofile(path.with_name("raw.bin"))
    with h5py.File(path, "w") as f:
        f.create_dataset(
            "STS16", shape=values.shape, dtype="f4", external=[(str(path.with_name("raw.bin")), 0, h5py.h5f.UNLIMITED)]
        )
        f["STS16"].attrs["sha256"] = sha


def virtual(path, texts, values, sha):
    write_h5(path.with_name("source.h5"), {"x": (values, {})})
    layout = h5py.VirtualLayout(shape=values.shape, dtype="f4")
    layout[:] = h5py.VirtualSource(str(path.with_name("source.h5")), "x", shape=values.shape)
    with h5py.File(path, "w") as f:
        f.create_virtual_dataset("STS16", layout)
        f["STS16"].attrs["sha256"] = sha


def plugin_filter(path, texts, values, sha):
    """Chunks filtered by an (optional) filter 32001 that only a plugin could provide."""
    with h5py.File(path, "w") as f:
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((64, values.shape[1]))
        dcpl.set_filter(32001, h5py.h5z.FLAG_OPTIONAL, (0,))
        space = h5py.h5s.create_simple(values.shape)
        ds = h5py.Dataset(h5py.h5d.create(f.id, b"STS16", h5py.h5t.IEEE_F32LE, space, dcpl=dcpl))
        ds[:] = values
        ds.attrs["sha256"] = sha


def group_not_dataset(path, texts, values, sha):
    with h5py.File(path, "w") as f:
        f.create_group("STS16")["v"] = values


def dangling(path, texts, values, sha):
    with h5py.File(path, "w") as f:
        f["STS16"] = h5py.SoftLink("/nowhere")


def soft_link_inside(path, texts, values, sha):
    """Allowed: a soft link to a dataset elsewhere in the same file (NaN in it proves it is followed)."""
    with h5py.File(path, "w") as f:
        f.create_group("g")["v"] = np.where(np.arange(len(values))[:, None] == 5, np.nan, values)
        f["g"]["v"].attrs["sha256"] = sha
        f["STS16"] = h5py.SoftLink("/g/v")


def nan_rows(value, every):
    return lambda v: np.where(np.arange(len(v))[:, None] % every == 3, value, v).astype(np.float32)


VECTORS_ROWS = {
    "not an HDF5 file": (raw_bytes(b"sentence,vector\nhello,0.1 0.2\n" * 20), ["not an HDF5 file"]),
    "empty file": (raw_bytes(b""), ["empty file"]),
    "truncated HDF5 file": (raw_bytes(lambda p, v, s: good_bytes(p, v, s)[:3000]), ["truncated HDF5 file"]),
    "damaged B-tree": (damaged(b"TREE"), ["corrupted HDF5 file", "wrong B-tree signature"]),
    "damaged local heap": (damaged(b"HEAP"), ["corrupted HDF5 file", "local heap"]),
    "damaged attribute heap": (damaged(b"GCOL"), ["STS16", "corrupted HDF5 file", "`sha256` attribute"]),
    "too few rows": (plain(lambda v: v[:-1]), ["STS16", "1866 rows, the task has 1867 sentences"]),
    "too many rows": (plain(lambda v: np.vstack([v, v[:2]])), ["STS16", "1869 rows, the task has 1867"]),
    "1-D": (plain(lambda v: v[:, 0]), ["STS16", "shape (1867,); expected 2-D"]),
    "3-D": (plain(lambda v: v[:, :, None]), ["STS16", "shape (1867, 8, 1); expected 2-D"]),
    "scalar": (plain(np.float32(1.0)), ["STS16", "shape (); expected 2-D"]),
    "no dataspace": (plain(h5py.Empty("f4")), ["STS16", "shape None; expected 2-D"]),
    "int32": (with_dtype("i4"), ["STS16", "dtype int32; expected float16, float32 or float64"]),
    "bool": (with_dtype("bool", lambda v: v > 0), ["STS16", "dtype bool"]),
    "enum": (
        with_dtype(h5py.enum_dtype({"a": 0, "b": 1}, basetype="i1"), lambda v: (v > 0).astype("i1")),
        ["STS16", "dtype enum (int8)"],
    ),
    "strings": (with_dtype(h5py.string_dtype(), lambda v: v.astype(str).astype(object)), ["STS16", "dtype strings"]),
    "fixed-length bytes": (with_dtype("S12", lambda v: v.astype("S12")), ["STS16", "dtype strings"]),
    "complex": (with_dtype("c8"), ["STS16", "dtype complex64"]),
    "compound": (
        with_dtype(
            np.dtype([("x", "f4"), ("y", "f4")]),
            lambda v: np.rec.fromarrays([v, v], names="x,y").astype([("x", "f4"), ("y", "f4")]),
        ),
        ["STS16", "dtype compound (x, y)"],
    ),
    "array elements": (array_elements, ["STS16", "dtype array of float32 (2,) per element"]),
    "NaN": (plain(nan_rows(np.nan, 10)), ["STS16", "187 of 1867 vectors contain NaN or Inf (first at row 3)"]),
    "+Inf": (plain(nan_rows(np.inf, 1000)), ["STS16", "2 of 1867 vectors contain NaN or Inf (first at row 3)"]),
    "-Inf": (plain(nan_rows(-np.inf, 2000)), ["STS16", "1 of 1867 vectors contain NaN or Inf (first at row 3)"]),
    "NaN through a soft link": (soft_link_inside, ["STS16", "1 of 1867 vectors contain NaN"]),
    "fingerprint mismatch": (
        plain(lambda v: v, sha256="0" * 64),
        ["STS16", "fingerprint 000000000000… does not match"],
    ),
    "fingerprint not text": (plain(lambda v: v, sha256=np.arange(3)), ["STS16", "fingerprint 0,1,2… does not match"]),
    "external link": (external_link, ["STS16", "external link to other.h5"]),
    "soft link to an external link": (soft_to_external, ["STS16", "external link to other.h5"]),
    "external storage": (external_storage, ["STS16", "external storage"]),
    "virtual dataset": (virtual, ["STS16", "virtual dataset"]),
    "plugin filter": (plugin_filter, ["STS16", "HDF5 filter 32001", "would load a plugin"]),
    "group, not a dataset": (group_not_dataset, ["STS16", "/STS16 is a group, not a dataset"]),
    "dangling soft link": (dangling, ["STS16", "no entry 'nowhere'"]),
    "dimension too large": (
        lambda p, t, v, s: lazily_huge(p, t, s),
        ["STS16", "1867 x 1000000000 vectors need 6955.1 GiB as float32, more than"],
    ),
}


@pytest.mark.parametrize("row", list(VECTORS_ROWS))
def test_bad_vectors_file(cli, data_dir, sts16, tmp_path, row):
    texts, values, sha = sts16
    build, fragments = VECTORS_ROWS[row]
    path = tmp_path / "vectors.h5"
    build(path, texts, values.copy(), sha)
    refused_twice(cli, tmp_path, [path, "--data", data_dir, "--tasks", "STS16"], str(path), *fragments)


def test_a_table_too_large_for_memory_is_refused_before_any_read(cli, data_dir, sts16, tmp_path, monkeypatch):
    """The dimension-too-large row reads none of the table first (not even ahead, in the background):
    each of its rows alone takes 4 GB."""
    from embeval.formats.vectors import VectorsFile

    texts, _, sha = sts16
    path = tmp_path / "vectors.h5"
    lazily_huge(path, texts, sha)
    read = []
    real_blocks = VectorsFile.blocks

    def blocks(self, ds, *args, **kwargs):
        read.append(ds.name)
        return real_blocks(self, ds, *args, **kwargs)

    monkeypatch.setattr(VectorsFile, "blocks", blocks)
    refused(cli("score", path, "--data", data_dir, "--tasks", "STS16", "--out", tmp_path / "r.json"), "GiB as float32")
    assert read == []


@pytest.mark.skipif(os.environ.get("HDF5_USE_FILE_LOCKING", "").upper() == "FALSE", reason="HDF5 locking is off")
def test_file_still_being_written(cli, data_dir, tmp_path):
    import subprocess
    import sys

    path = tmp_path / "v.h5"
    script = (
        "import h5py, sys, time; f = h5py.File(sys.argv[1], 'w'); f['STS16'] = [[0.0]]; f.flush(); "
        "print('ready', flush=True); time.sleep(60)"
    )
    writer = subprocess.Popen([sys.executable, "-c", script, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "ready"
        refused_twice(
            cli,
            tmp_path,
            [path, "--data", data_dir, "--tasks", "STS16"],
            str(path),
            "cannot lock the file",
            "is another program still writing it?",
        )
    finally:
        writer.kill()
        writer.wait()


@pytest.mark.parametrize("writer_locks", [True, False], ids=["writer-locks", "writer-locking-off"])
def test_file_still_being_written_with_locking_off(data_dir, tmp_path, writer_locks):
    """The scorer runs with HDF5_USE_FILE_LOCKING=FALSE (what the lock error above suggests) while a writer
    process is filling the file (its root group not yet flushed): HDF5 then fails as on a damaged file.
    While the writer holds its lock the error says the file is still being written; a writer with locking
    off too leaves no trace, so the error says it may be."""
    import subprocess
    import sys

    path = tmp_path / "v.h5"
    script = (
        "import h5py, sys, time; f = h5py.File(sys.argv[1], 'w'); "
        "d = f.create_dataset('STS16', shape=(20000, 64), dtype='f4'); d[:1000] = 1; "
        "print('ready', flush=True); time.sleep(60)"
    )
    locking = "TRUE" if writer_locks else "FALSE"
    writer = subprocess.Popen(
        [sys.executable, "-c", script, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, HDF5_USE_FILE_LOCKING=locking),
    )
    out = tmp_path / "r.json"
    out.write_bytes(PREVIOUS)
    try:
        assert writer.stdout.readline().strip() == "ready"
        written = path.read_bytes()
        scored = subprocess.run(
            [sys.executable, "-m", "embeval", "score", str(path), "--data", str(data_dir), "--tasks", "STS16"]
            + ["--out", str(out)],
            cwd=REPO,
            env=dict(os.environ, PYTHONPATH=str(REPO), HDF5_USE_FILE_LOCKING="FALSE"),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert path.read_bytes() == written
    finally:
        writer.kill()
        writer.wait()
    assert scored.returncode == 2 and "Traceback" not in scored.stderr, scored.stderr
    (line,) = scored.stderr.strip().splitlines()
    assert line.startswith(f"embeval: error: {path}: "), line
    if writer_locks:
        assert "still being written: another program holds the file's write lock" in line
        assert "corrupted" not in line
    else:
        assert "corrupted HDF5 file, or one still being written" in line
    untouched(out, PREVIOUS)


def test_external_targets_are_never_opened(cli, data_dir, sts16, tmp_path, monkeypatch):
    """Refused before h5py is asked to follow the link or read the external or virtual source."""
    texts, values, sha = sts16
    opened = []
    real_file = h5py.File

    def watch(name, *args, **kwargs):
        opened.append(os.path.basename(str(name)))
        return real_file(name, *args, **kwargs)

    for build in (external_link, soft_to_external, virtual):
        build(tmp_path / "v.h5", texts, values, sha)
        monkeypatch.setattr(h5py, "File", watch)  # embeval imports h5py where it opens a file: this is its File
        refused(cli("score", tmp_path / "v.h5", "--data", data_dir, "--tasks", "STS16", "--out", tmp_path / "r.json"))
        monkeypatch.undo()
        assert set(opened) == {"v.h5"}, opened


def test_dimension_checked_for_every_task_before_any_read(cli, data_dir, tmp_path, monkeypatch):
    from embeval.formats import vectors

    path = task_file(tmp_path / "v.h5", data_dir, ["STS12", "STS16"])
    reads = []
    monkeypatch.setattr(vectors.VectorsFile, "read_rows", lambda self, *a, **k: reads.append(a) or 1 / 0)
    monkeypatch.setattr(vectors, "available_memory", lambda: 4 * 8 * 3000)
    refused_twice(
        cli,
        tmp_path,
        [path, "--data", data_dir, "--tasks", "STS12,STS16"],
        str(path),
        "STS12",
        "4946 x 8 vectors need 0.0 GiB as float32, more than the 0.0 GiB of memory available",
    )
    assert reads == []


def test_nan_in_a_later_task_leaves_no_results(cli, data_dir, tmp_path):
    """Values of every requested task are checked before the first result is written."""
    names = ["STS12", "STS13", "STS16"]
    path = task_file(tmp_path / "v.h5", data_dir, names)
    with h5py.File(path, "r+") as f:
        f["STS16"][7, 2] = np.nan
    refused_twice(
        cli,
        tmp_path,
        [path, "--data", data_dir, "--tasks", ",".join(names)],
        str(path),
        "STS16",
        "1 of 1867 vectors contain NaN or Inf (first at row 7)",
    )


def test_absent_task_is_skipped_by_default_and_refused_with_strict(cli, data_dir, tmp_path):
    path = task_file(tmp_path / "v.h5", data_dir, ["STS16"])
    out = tmp_path / "r.json"
    result = cli("score", path, "--data", data_dir, "--tasks", "STS12,STS16", "--out", out)
    assert result.exit_code == 0, result.stderr
    assert "skipped (absent from the vectors file): STS12" in result.stdout
    assert '"absent_from_file": [\n   "STS12"' in out.read_text()
    out.unlink()
    refused_twice(
        cli,
        tmp_path,
        [path, "--data", data_dir, "--tasks", "STS12,STS16", "--strict"],
        str(path),
        "STS12: absent from the file (it holds /STS16); --strict requires every requested task",
    )


def test_strict_without_tasks_requires_every_task(cli, data_dir, tmp_path):
    path = task_file(tmp_path / "v.h5", data_dir, ["STS16"])
    line = refused_twice(cli, tmp_path, [path, "--data", data_dir, "--strict"], str(path), "absent from the file")
    assert "CR, MR, MPQA" in line and "more" in line


def constant_warnings(result):
    return [line for line in result.stderr.splitlines() if "scores computed on them mean nothing" in line]


def test_constant_vectors_are_warned_about_before_scoring(cli, data_dir, tmp_path):
    """All-zero or all-identical vectors: one warning per task naming the file and the task, before
    anything is scored; the run still scores (exit 0), and its undefined correlations are n/a with one
    note saying why. Vectors that differ in one row only get no warning."""
    datasets = {}
    for name, fill in (("STS12", 0.0), ("STS13", 0.25), ("STS16", None)):
        texts = sentences(data_dir, name)
        values = np.full((len(texts), 8), fill, np.float32) if fill is not None else vectors_for(texts)
        datasets[name] = (values, {"sha256": export.fingerprint(texts)})
    texts = sentences(data_dir, "STS15")
    almost = np.ones((len(texts), 8), np.float32)
    almost[-1, 3] = 2.0
    datasets["STS15"] = (almost, {"sha256": export.fingerprint(texts)})
    path = write_h5(tmp_path / "v.h5", datasets)
    out = tmp_path / "r.json"
    result = cli("score", path, "--data", data_dir, "--tasks", "STS12,STS13,STS15,STS16", "--out", out)
    assert result.exit_code == 0, result.stderr
    assert constant_warnings(result) == [
        f"embeval: warning: {path}: STS12: all 4946 vectors are zero: scores computed on them mean nothing",
        f"embeval: warning: {path}: STS13: all 2638 vectors are identical: scores computed on them mean nothing",
    ]
    assert result.stderr.index("mean nothing") < result.stderr.index("scoring STS12")
    lines = result.stdout.splitlines()
    sts12 = next(line for line in lines if line.startswith("STS12"))
    assert sts12.split()[-5:] == ["n/a", "|", "n/a", "|", "n/a"] and "nan" not in result.stdout
    assert lines.count(UNDEFINED_NOTE) == 1
    assert json.loads(out.read_text())["tasks"]["STS12"]["results"]["all"]["spearman"]["pooled"] is None


def test_constant_rows_of_a_union_are_found_in_the_tasks_own_rows(cli, data_dir, tmp_path):
    """In a union /ALL only the task's rows count: STS13's rows all identical while the other rows differ."""
    path, texts = union_file(tmp_path / "u.h5", data_dir, ["STS12", "STS13"])
    own = set(sentences(data_dir, "STS13"))
    with h5py.File(path, "a") as f:
        values = f["ALL"][...]
        values[[i for i, t in enumerate(texts) if t in own]] = 1.5
        f["ALL"][...] = values
    result = cli("score", path, "--data", data_dir, "--tasks", "STS12,STS13", "--out", tmp_path / "r.json")
    assert result.exit_code == 0, result.stderr
    assert constant_warnings(result) == [
        f"embeval: warning: {path}: STS13: all 2638 vectors (the task's rows of /ALL) are identical: scores "
        "computed on them mean nothing"
    ]


@pytest.mark.parametrize("rows", [None, [5, 1, 3, 0]])
@pytest.mark.parametrize("differing", [None, 0, 3, 7])
def test_constant_rows_are_found_across_blocks(tmp_path, rows, differing):
    """fingerprint_rows compares each block with the first row: a row that differs in any block (the
    first, a middle one, the last) is seen, over all rows or over a union's rows; the fingerprint is the
    same as without the check (the table's)."""
    from embeval.formats.vectors import VectorsFile
    from embeval.run.plan import table_fingerprint

    values = np.zeros((8, 4), np.float32) if differing != 0 else np.ones((8, 4), np.float32)
    if differing:
        values[differing, 2] = 1.0
    write_h5(tmp_path / "v.h5", {"X": (values, {})})
    with VectorsFile(tmp_path / "v.h5", guard=False) as vf:
        sha, count, dim, constant = vf.fingerprint_rows(vf.dataset("X", "X"), "X", rows, block_bytes=32)
    table = values if rows is None else values[rows]
    assert (sha, count, dim) == (table_fingerprint(table), len(table), 4)
    expected = "zero" if (table == 0).all() else "identical" if (table == table[0]).all() else None
    assert constant == expected


def union_file(path, data_dir, tasks, attr=None, sha=None, nan_row=None):
    texts = export.union_sentences(sentences(data_dir, t) for t in tasks)
    values = vectors_for(texts)
    if nan_row is not None:
        values[nan_row] = np.nan
    attrs = {"sha256": sha or export.fingerprint(texts)}
    if attr is not False:
        attrs["tasks"] = attr if attr is not None else ",".join(tasks)
    return write_h5(path, {"ALL": (values, attrs)}), texts


def test_union_tasks_differ_from_the_request(cli, data_dir, tmp_path):
    path, _ = union_file(tmp_path / "u.h5", data_dir, ["STS12", "STS13"])
    out = tmp_path / "r.json"
    result = cli("score", path, "--data", data_dir, "--tasks", "STS12,STS16", "--out", out)
    assert result.exit_code == 0, result.stderr
    assert "skipped (absent from the vectors file): STS16" in result.stdout and "STS12" in result.stdout
    out.unlink()
    refused_twice(
        cli,
        tmp_path,
        [path, "--data", data_dir, "--tasks", "STS12,STS16", "--strict"],
        str(path),
        "STS16: absent from the file",
        "/ALL was built from STS12, STS13",
    )


@pytest.mark.parametrize(
    "case,fragments",
    [
        ("unknown task", ["ALL", "names unknown tasks STS99"]),
        ("no tasks attribute", ["ALL", "has no `tasks` attribute"]),
        ("task twice", ["ALL", "names STS12 twice"]),
        ("empty tasks", ["ALL", "names no task"]),
        ("fingerprint", ["STS12", "/ALL fingerprint"]),
        ("NaN in a task's rows", ["STS13", "1 of 2638 vectors contain NaN or Inf"]),
    ],
)
def test_bad_union(cli, data_dir, tmp_path, case, fragments):
    tasks = ["STS12", "STS13"]
    kwargs = {
        "unknown task": {"attr": "STS12,STS13,STS99"},
        "no tasks attribute": {"attr": False},
        "task twice": {"attr": "STS12,STS12,STS13"},
        "empty tasks": {"attr": " , "},
        "fingerprint": {"sha": "1" * 64},
        "NaN in a task's rows": {"nan_row": 4946 + 10},
    }[case]
    path, _ = union_file(tmp_path / "u.h5", data_dir, tasks, **kwargs)
    refused_twice(cli, tmp_path, [path, "--data", data_dir, "--tasks", "STS12,STS13"], str(path), *fragments)


def test_union_nan_outside_the_requested_rows_is_allowed(cli, data_dir, tmp_path):
    path, texts = union_file(tmp_path / "u.h5", data_dir, ["STS12", "STS13"], nan_row=4946 + 10)
    assert texts[4946 + 10] not in set(sentences(data_dir, "STS12"))
    result = cli("score", path, "--data", data_dir, "--tasks", "STS12", "--out", tmp_path / "r.json")
    assert result.exit_code == 0, result.stderr


def sts16_data(data_dir, tmp_path):
    data = tmp_path / "data"
    rel = "downstream/STS/STS16-en-test"
    shutil.copytree(data_dir / rel, data / rel)
    return data, data / rel


@pytest.mark.parametrize(
    "name, line, damage, problem",
    [
        ("STS.input.headlines.txt", 42, lambda raw: raw.replace(b"\t", b" "), "expected two tab-separated sentences"),
        ("STS.gs.plagiarism.txt", 10, lambda raw: b"\xff\xfe" + raw, "not valid utf-8 text"),
        ("STS.gs.postediting.txt", 3, lambda raw: b"four", "gold score 'four' is not a number"),
    ],
)
def test_damaged_data_line(cli, data_dir, sts16, tmp_path, name, line, damage, problem):
    """A malformed line, bad bytes or a gold score that is not a number: FILE:LINE: TASK: what."""
    texts, values, sha = sts16
    path = write_h5(tmp_path / "v.h5", {"STS16": (values, {"sha256": sha})})
    data, folder = sts16_data(data_dir, tmp_path)
    raw = (folder / name).read_bytes().split(b"\n")
    raw[line - 1] = damage(raw[line - 1])
    (folder / name).write_bytes(b"\n".join(raw))
    refused_twice(
        cli, tmp_path, [path, "--data", data, "--tasks", "STS16"], f"{folder / name}:{line}: STS16: {problem}"
    )


class _RunsCode:
    def __reduce__(self):
        return (os.system, ("echo pwned > pwned.txt",))


def test_coco_pickle_with_code(cli, tmp_path, monkeypatch):
    """Refused by the restricted unpickler when score loads the task's data; nothing runs."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "data" / "downstream" / "COCO"
    folder.mkdir(parents=True)
    for split in ("train", "valid", "test"):
        (folder / f"{split}.pkl").write_bytes(pickle.dumps({"features": _RunsCode()}, protocol=2))
    path = write_h5(tmp_path / "v.h5", {"ImageCaptionRetrieval": (np.zeros((10, 4), "f4"), {})})
    refused_twice(
        cli,
        tmp_path,
        [path, "--data", tmp_path / "data", "--tasks", "ImageCaptionRetrieval"],
        folder / "train.pkl",
        "ImageCaptionRetrieval",
        "refused to build posix.system",
    )
    refused(
        cli(
            "export-sentences",
            "--data",
            tmp_path / "data",
            "--out",
            tmp_path / "sent",
            "--tasks",
            "ImageCaptionRetrieval",
        ),
        "refused to build posix.system",
    )
    assert not (tmp_path / "pwned.txt").exists()


class _Python2Array:
    """Pickles like an array pickled by Python 2: its bytes as a (latin-1) str."""

    def __init__(self, array):
        self.array = array

    def __reduce__(self):
        a = self.array
        return (
            a.__reduce__()[0],
            (np.ndarray, (0,), b"b"),
            (1, a.shape, a.dtype, False, a.tobytes().decode("latin-1")),
        )


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_plain_pickles_round_trip(tmp_path, protocol):
    from embeval.tasks.pickles import load_plain_pickle

    features = np.arange(12, dtype="f4").reshape(3, 4)
    content = {
        "features": features,
        "big_endian": np.ones((2, 2), ">f8"),
        "fortran": np.asfortranarray(features),
        "empty": np.zeros((0, 3), "f4"),
        "scalar": np.float32(2.5),
        "ids": [[1, 2], (3,)],
        "set": {1, 2},
        "same": features,
    }
    (tmp_path / "p.pkl").write_bytes(pickle.dumps(content, protocol=protocol))
    got = load_plain_pickle(tmp_path / "p.pkl", "T")
    for key, value in content.items():
        if isinstance(value, np.ndarray):
            assert got[key].dtype == value.dtype and got[key].shape == value.shape
            assert np.array_equal(got[key], value)
        else:
            assert got[key] == value
    assert got["fortran"].flags.f_contiguous and got["same"] is got["features"]
    (tmp_path / "p2.pkl").write_bytes(pickle.dumps({"features": _Python2Array(features)}, protocol=2))
    assert np.array_equal(load_plain_pickle(tmp_path / "p2.pkl", "T")["features"], features)


@pytest.mark.parametrize(
    "content,message",
    [
        (np.array(["a", 1], dtype=object), "refused to build arrays of dtype 'O8'"),
        (np.array(["ab"]), "refused to build arrays of dtype 'U2'"),
        (np.zeros(2, dtype=[("x", "f4")]), "refused to build arrays of dtype 'V4'"),
    ],
)
def test_pickled_arrays_of_non_numbers_are_refused(tmp_path, content, message):
    from embeval.errors import DataFileError
    from embeval.tasks.pickles import load_plain_pickle

    (tmp_path / "p.pkl").write_bytes(pickle.dumps({"features": content}, protocol=2))
    with pytest.raises(DataFileError, match=message):
        load_plain_pickle(tmp_path / "p.pkl", "T")


class _BadState:
    """Pickles as numpy.dtype('f4') with a 6-item state (numpy's is 8 or 9 items)."""

    def __reduce__(self):
        return (np.dtype, ("f4", False, True), (3, "<", None, -1, -1, 0))


def test_damaged_numpy_state_never_reaches_numpy(tmp_path):
    """tests/fixtures/numpy_dtype_crash.pkl (a COCO pickle with a few damaged bytes) gives numpy.dtype a
    6-item state; numpy's own __setstate__ crashed the interpreter on it (SIGSEGV). Now the opcode
    pre-scan refuses that file, and a well-formed stream with the same bad state is refused by the
    stand-in before numpy sees it."""
    from embeval.errors import DataFileError
    from embeval.tasks.pickles import load_plain_pickle

    with pytest.raises(DataFileError, match="numpy_dtype_crash.pkl: ImageCaptionRetrieval: corrupt pickle"):
        load_plain_pickle(os.path.join(FIXTURES, "numpy_dtype_crash.pkl"), "ImageCaptionRetrieval")
    (tmp_path / "p.pkl").write_bytes(pickle.dumps({"features": _BadState()}, protocol=2))
    with pytest.raises(DataFileError, match="corrupt pickle .*damaged numpy dtype"):
        load_plain_pickle(tmp_path / "p.pkl", "T")


def test_missing_data_file(cli, data_dir, sts16, tmp_path):
    texts, values, sha = sts16
    path = write_h5(tmp_path / "v.h5", {"STS16": (values, {"sha256": sha})})
    data, folder = sts16_data(data_dir, tmp_path)
    (folder / "STS.input.plagiarism.txt").unlink()
    refused_twice(
        cli,
        tmp_path,
        [path, "--data", data, "--tasks", "STS16"],
        "STS.input.plagiarism.txt",
        "STS16",
        "missing data file",
    )


# The output: checked before anything is computed, and every write is atomic.


def test_output_under_a_file(cli, data_dir, tmp_path):
    path = task_file(tmp_path / "v.h5", data_dir, ["STS16"])
    (tmp_path / "notes.txt").write_text("mine")
    out = tmp_path / "notes.txt" / "r.json"
    refused(cli("score", path, "--data", data_dir, "--out", out), str(out), "notes.txt is a file, not a folder")
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_output_is_a_folder(cli, data_dir, tmp_path):
    path = task_file(tmp_path / "v.h5", data_dir, ["STS16"])
    (tmp_path / "r.json").mkdir()
    refused(cli("score", path, "--data", data_dir, "--out", tmp_path / "r.json"), "is a folder")


@pytest.mark.parametrize("target", ["vectors", "other"])
def test_output_is_not_a_results_file(cli, data_dir, tmp_path, target):
    """Never overwrite a file that is not an embeval results file (such as the vectors file itself)."""
    path = task_file(tmp_path / "v.h5", data_dir, ["STS16"])
    out = path if target == "vectors" else tmp_path / "table.json"
    if target == "other":
        out.write_text('{"my": "data"}')
    before = out.read_bytes()
    why = "is an input of this command" if target == "vectors" else "not an embeval results file"
    refused(cli("score", path, "--data", data_dir, "--out", out), str(out), why)
    assert out.read_bytes() == before


@pytest.mark.parametrize("name", ["r.predictions.npz", "r.predictions.npz.partial"])
def test_users_file_named_like_the_predictions_is_never_replaced(cli, data_dir, tmp_path, name):
    """A file of the user's where the predictions would go is refused in one line and left as it was;
    --no-save-predictions leaves it alone and scores."""
    path = task_file(tmp_path / "v.h5", data_dir, ["STS16"])
    mine = tmp_path / name
    mine.write_bytes(b"my own archive")
    out = tmp_path / "r.json"
    refused(cli("score", path, "--data", data_dir, "--out", out), str(mine), "not an embeval predictions file")
    assert mine.read_bytes() == b"my own archive" and not out.exists()
    assert cli("score", path, "--data", data_dir, "--out", out, "--no-save-predictions").exit_code == 0
    assert mine.read_bytes() == b"my own archive"


def test_an_earlier_runs_predictions_are_replaced(cli, data_dir, tmp_path):
    path = task_file(tmp_path / "v.h5", data_dir, ["STS16"])
    out = tmp_path / "r.json"
    for _ in range(2):
        result = cli("score", path, "--data", data_dir, "--out", out, "--bootstrap", "0")
        assert result.exit_code == 0, result.stderr
    assert (tmp_path / "r.predictions.npz").is_file()


def test_output_permission_denied(cli, data_dir, tmp_path, monkeypatch):
    from embeval.formats import atomic

    path = task_file(tmp_path / "v.h5", data_dir, ["STS16"])

    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(atomic.tempfile, "mkstemp", denied)
    refused_twice(
        cli,
        tmp_path,
        [path, "--data", data_dir],
        "results.json",
        "cannot write: not writable (permission denied or read-only file system)",
    )


def disk_full_after(monkeypatch, writes):
    """Results writes succeed `writes` times, then fail with ENOSPC (as a full disk does)."""
    from embeval.formats import atomic

    real = os.fdopen
    done = []

    class Full:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            self.f.write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")

    def fdopen(fd, *args, **kwargs):
        f = real(fd, *args, **kwargs)
        done.append(1)
        return f if len(done) <= writes else Full(f)

    monkeypatch.setattr(atomic.os, "fdopen", fdopen)


def test_disk_full_on_the_first_write(cli, data_dir, tmp_path, monkeypatch):
    path = task_file(tmp_path / "v.h5", data_dir, ["STS16"])
    disk_full_after(monkeypatch, 0)
    refused_twice(
        cli,
        tmp_path,
        [path, "--data", data_dir, "--no-save-predictions"],
        f"results.json.partial: cannot write: no space left on the device; {tmp_path / 'results.json'} was not changed",
    )


def test_disk_full_later_keeps_the_finished_tasks(cli, data_dir, tmp_path, monkeypatch):
    import json

    path = task_file(tmp_path / "v.h5", data_dir, ["STS12", "STS13", "STS16"])
    out = tmp_path / "r.json"
    out.write_bytes(PREVIOUS)
    disk_full_after(monkeypatch, 2)
    refused(
        cli("score", path, "--data", data_dir, "--out", out, "--no-save-predictions"),
        f"{out}.partial",
        "no space left on the device",
        f"{out} was not changed; the results of STS12, STS13 are kept in {out}.partial; rerun with --resume",
    )
    untouched(out, PREVIOUS, progress=True)
    assert list(json.loads(progress_file(out).read_text())["tasks"]) == ["STS12", "STS13"]
    monkeypatch.undo()
    result = cli("score", path, "--data", data_dir, "--out", out, "--resume", "--no-save-predictions")
    assert result.exit_code == 0, result.stderr
    assert (
        f"resuming from {out}.partial and {out}: reused STS12, STS13; recomputing STS16 (no previous result)"
        in result.stderr
    )
    assert list(json.loads(out.read_text())["tasks"]) == ["STS12", "STS13", "STS16"]
    assert not progress_file(out).exists()


def test_disk_full_on_the_final_write(cli, data_dir, tmp_path, monkeypatch):
    path = task_file(tmp_path / "v.h5", data_dir, ["STS12", "STS16"])
    out = tmp_path / "r.json"
    disk_full_after(monkeypatch, 2)
    refused(
        cli("score", path, "--data", data_dir, "--out", out, "--no-save-predictions"),
        str(out),
        "no space left on the device",
        f"the results of STS12, STS16 are kept in {out}.partial",
    )
    untouched(out, None, progress=True)


def test_bad_input_found_by_an_evaluator_mid_run(cli, data_dir, tmp_path, monkeypatch):
    """A check only an evaluator makes (after other tasks finished) leaves the results file alone too."""
    from embeval.errors import DataFileError
    from embeval.run import execute as execute_module

    path = task_file(tmp_path / "v.h5", data_dir, ["STS12", "STS16"])
    real = execute_module.evaluate

    def picky(ctx):
        if ctx.task.name == "STS16":
            raise DataFileError("test split: something only the evaluator sees", file="gold.txt", task="STS16")
        return (yield from real(ctx))

    monkeypatch.setattr(execute_module, "evaluate", picky)
    out = tmp_path / "r.json"
    for previous in (None, PREVIOUS):
        if previous:
            out.write_bytes(previous)
        result = cli("score", path, "--data", data_dir, "--out", out, "--restart")
        refused(result, "gold.txt: STS16: test split: something only the evaluator sees")
        assert (
            f"embeval: info: {out} was not changed; the results of STS12 are kept in {out}.partial; rerun "
            "with --resume to reuse them"
        ) in result.stderr.splitlines()
        untouched(out, previous, progress=True)


# The HDF5 guard: a file that crashes or hangs the HDF5 library is refused, not fatal.


def test_file_that_crashes_hdf5_is_refused(cli, data_dir, tmp_path):
    """tests/fixtures/hdf5_segfault.h5 made libhdf5 2.0 crash (SIGSEGV) reading an attribute of /MR."""
    path = tmp_path / "v.h5"
    shutil.copy(os.path.join(FIXTURES, "hdf5_segfault.h5"), path)
    refused_twice(cli, tmp_path, [path, "--data", data_dir, "--tasks", "MR"], str(path), "MR")


def test_a_file_that_crashes_hdf5_is_refused_before_the_task_datas_problems(cli, tmp_path):
    """The task data loads while the guard reads the file: the file's crash is still what is said
    (as when the data was loaded after it), a task without data no other line."""
    path = tmp_path / "v.h5"
    shutil.copy(os.path.join(FIXTURES, "hdf5_segfault.h5"), path)
    (tmp_path / "empty").mkdir()
    result = cli("score", path, "--data", tmp_path / "empty", "--tasks", "MR")
    refused(result, str(path), "MR", "corrupted HDF5 file: the HDF5 library crashed")


def test_file_that_hangs_hdf5_is_refused(cli, data_dir, tmp_path, monkeypatch):
    """tests/fixtures/hdf5_hang.h5 made libhdf5 2.0 loop forever reading an attribute of /MR."""
    monkeypatch.setattr(h5guard, "SECONDS", 1)
    path = tmp_path / "v.h5"
    shutil.copy(os.path.join(FIXTURES, "hdf5_hang.h5"), path)
    refused(cli("score", path, "--data", data_dir, "--tasks", "MR", "--out", tmp_path / "r.json"), str(path), "MR")
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize(
    "failure,message",
    [
        ("crash", "the HDF5 library crashed (SIGSEGV) while reading /STS16; write the file again"),
        ("hang", "the HDF5 library did not finish within 0.5 s while reading /STS16"),
        ("python error", None),
    ],
)
def test_guard_reports_crashes_and_hangs(cli, data_dir, tmp_path, monkeypatch, failure, message):
    import signal
    import time

    path = task_file(tmp_path / "v.h5", data_dir, ["STS16"])
    from embeval.formats import vectors

    real = vectors.inspect_metadata

    def failing(p, names, report):
        report("STS16")
        if failure == "crash":
            os.kill(os.getpid(), signal.SIGSEGV)
        elif failure == "hang":
            time.sleep(60)
        raise RuntimeError("a bug in the guarded code is left to the scorer")

    monkeypatch.setattr(h5guard, "SECONDS", 0.5)
    monkeypatch.setattr(vectors, "inspect_metadata", failing)
    result = cli("score", path, "--data", data_dir, "--out", tmp_path / "r.json")
    if message is None:
        assert result.exit_code == 0, result.stderr
    else:
        refused(result, str(path), "STS16", "corrupted HDF5 file", message)
    monkeypatch.setattr(vectors, "inspect_metadata", real)


def test_guard_in_a_fresh_interpreter(data_dir, tmp_path):
    """The guard used where fork is not (macOS, Windows): same verdicts."""
    from pathlib import Path

    from embeval.formats.vectors import inspect_metadata

    good = task_file(tmp_path / "v.h5", data_dir, ["STS16"])
    assert h5guard._spawned(good, ["STS16", "ALL"], 60, inspect_metadata) == (None, "STS16")
    crash = Path(FIXTURES) / "hdf5_segfault.h5"
    failure, last = h5guard._spawned(crash, ["MR"], 60, inspect_metadata)
    assert last == "MR" and failure in (None, "crashed (SIGSEGV)")


def _slow_exit(path, names, report):
    """A guard's reading (of nothing) whose child then exits slowly, as a large process's copy does."""
    for name in names:
        report(name)
    write = os.write

    def linger(fd, data):
        written = write(fd, data)
        if data == h5guard.DONE:
            time.sleep(2)  # the child's "teardown" after its reading ended
        return written

    os.write = linger  # in the forked child only


def test_guard_goes_on_when_the_reading_ended_and_reaps_the_child_aside(tmp_path, monkeypatch):
    """The child's DONE line ends the wait (its exit, slow for a large process, is not waited for),
    the names reported before it are the child's, and the child is reaped aside, not left a zombie."""
    reaped, reap = [], h5guard._reap
    monkeypatch.setattr(h5guard, "_reap", lambda pid: (reap(pid), reaped.append(pid)))
    path = tmp_path / "v.h5"
    path.write_bytes(b"x")
    start = time.monotonic()
    finish = h5guard._start_forked(path, ["A", "B"], _slow_exit)
    assert finish(30) == (None, "B")
    assert time.monotonic() - start < 2  # it did not wait for the child's exit
    assert not reaped
    finish.exited()  # joins the reaper: the child is gone (the plan's end, before the scoring)
    (pid,) = reaped
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped already


def test_guard_reads_a_file_once_per_process_while_it_stays_the_same(tmp_path, monkeypatch):
    """A file read unharmed is not read in a child again for the names already read; other names, a
    rewritten file, another inspect function and a failed read are."""
    runs = []

    def forked(path, names, seconds, inspect):
        runs.append(list(names))
        return ("crashed (SIGSEGV)", names[-1]) if "bad" in names else (None, names[-1])

    def inspect(path, names, report):  # never run: the child is replaced
        raise AssertionError

    monkeypatch.setattr(h5guard, "_start_forked", lambda path, names, fn: lambda s: forked(path, names, s, fn))
    monkeypatch.setattr(h5guard, "_spawned", forked)
    monkeypatch.setattr(h5guard, "_CHECKED", {})
    path = tmp_path / "v.h5"
    path.write_bytes(b"one")
    h5guard.check(path, ["A", "B"], inspect)
    h5guard.check(path, ["B"], inspect)
    assert runs == [["A", "B"]]
    h5guard.check(path, ["C"], inspect)
    assert runs[-1] == ["C"]
    h5guard.check(path, ["A"], lambda p, n, r: None)
    assert len(runs) == 3
    for _ in range(2):
        with pytest.raises(errors.VectorsError):
            h5guard.check(path, ["bad"], inspect)
    assert len(runs) == 5
    path.write_bytes(b"rewritten")
    h5guard.check(path, ["A"], inspect)
    assert len(runs) == 6


def test_written_files_get_ordinary_permissions(tmp_path):
    """A new file gets what the umask allows (not mkstemp's private 0600); a replaced file keeps its mode."""
    from embeval.formats import atomic

    umask = os.umask(0o022)
    try:
        atomic.write_text(tmp_path / "new.json", "{}")
        assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o644
        target = tmp_path / "kept.json"
        target.write_text("old")
        target.chmod(0o640)
        atomic.write_text(target, "new")
        assert stat.S_IMODE(target.stat().st_mode) == 0o640 and target.read_text() == "new"
        assert stat.S_IMODE(atomic.temporary_sibling(tmp_path / "v.h5").stat().st_mode) == 0o644
    finally:
        os.umask(umask)
