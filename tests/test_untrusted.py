"""Shared files are untrusted: task files, results files and export manifests may name paths, names and
special files chosen by someone else. Paths stay inside the folder of the file naming them (unless
--allow-paths-outside), names match one anchored pattern, every file read is a regular file of bounded
size and nesting, and an export never overwrites a file it did not write. Each case: one line, exit 2,
nothing written."""

import json
import logging
import os
import zlib
from pathlib import Path

import numpy as np
import pytest
from reliability_helpers import refused

from embeval.errors import EmbevalError
from embeval.tasks.declaration import TaskFileError
from embeval.tasks.registry import read_task_file
from embeval.tasks.spec import read_spec

SECRET = "private line one\tsecret value\t3\n"
STS = """name = "Mine"
kind = "sts"
[files]
test = "{path}"
"""
PAIRS = "sentence1\tsentence2\tscore\na b\ta c\t4.5\nx y\tx z\t1\nsun\tmoon\t0\n"


def tree(tmp_path, path="d/test.tsv"):
    """A task folder with a task file naming `path`, its data, and a private file beside the folder."""
    (tmp_path / "private.tsv").write_text("sentence1\tsentence2\tscore\n" + SECRET)
    folder = tmp_path / "tasks"
    (folder / "d").mkdir(parents=True)
    (folder / "d" / "test.tsv").write_text(PAIRS)
    task_file = folder / "mine.toml"
    task_file.write_text(STS.format(path=path))
    return folder, task_file


def listing(folder):
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*"))


# ------------------------------------------------------------------------------------------ confinement


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink"])
def test_a_task_files_paths_stay_in_its_folder(cli, tmp_path, how):
    if how == "symlink":
        folder, task_file = tree(tmp_path, "d/link.tsv")
        (folder / "d" / "link.tsv").symlink_to(tmp_path / "private.tsv")
    else:
        target = "../private.tsv" if how == "dotdot" else str(tmp_path / "private.tsv")
        folder, task_file = tree(tmp_path, target)
    before = listing(tmp_path)
    out = tmp_path / "out"
    for result in (
        cli("tasks", "--task-file", task_file),
        cli("export-sentences", "--data", tmp_path / "none", "--task-file", task_file, "--out", out),
    ):
        line = refused(result, task_file, "Mine", "files.test", "is outside", "--allow-paths-outside")
        assert "secret" not in result.stderr and "private line" not in result.stderr, line
    assert listing(tmp_path) == before  # nothing exported

    # the user's opt-in: exported, and recorded with the task
    allowed = cli(
        "export-sentences", "--data", tmp_path / "none", "--task-file", task_file, "--out", out, "--allow-paths-outside"
    )
    assert allowed.exit_code == 0, allowed.stderr
    assert "private line one" in (out / "Mine.txt").read_text()
    (spec,) = read_task_file(task_file, allow_outside=True)
    assert spec.record()["paths_outside_allowed"] is True
    (tmp_path / "ok").mkdir()
    (inside,) = read_task_file(tree(tmp_path / "ok")[1])
    assert "paths_outside_allowed" not in inside.record()


def test_names_are_anchored(tmp_path):
    """A name with a trailing newline (which `$` accepts) or a path in an MTEB name is refused."""
    base = {"kind": "sts", "files": {"test": "t.tsv"}}
    for name in ("Mine\n", "Mine/../x", "", "1abc", "a" * 200, "ALL", "all"):
        with pytest.raises(TaskFileError, match="name"):
            read_spec(dict(base, name=name), "t.toml", str(tmp_path))
    for mteb_name in ("../../evil", "STS12\n", ".hidden", "a/b"):
        with pytest.raises(TaskFileError, match="MTEB task name"):
            read_spec(dict(base, name="Mine", mteb={"name": mteb_name}), "t.toml", str(tmp_path))
    assert read_spec(dict(base, name="Mine", mteb={"name": "BUCC.v2"}), "t.toml", str(tmp_path)).mteb.name == "BUCC.v2"


def test_export_mteb_never_writes_outside_out(cli, tmp_path):
    """A results file whose recorded declaration names its MTEB task '../../x' writes nothing anywhere."""
    record = json.loads((Path(__file__).resolve().parents[1] / "docs" / "example" / "results-minilm.json").read_text())
    entry = dict(record["tasks"]["STS12"])
    declaration = {
        "name": "Mine",
        "kind": "sts",
        "format": "senteval-sts",
        "files": {"MSRpar.input": "a.txt", "MSRpar.gs": "b.txt"},
        "mteb": {"name": "../../../escaped", "revision": "r", "figures": "all.{coef}.pooled"},
    }
    entry["declaration"] = {"source": str(tmp_path / "t.toml"), "declaration": declaration}
    record["tasks"] = {"Mine": entry}
    results = tmp_path / "shared" / "r.json"
    results.parent.mkdir()
    results.write_text(json.dumps(record))
    out = tmp_path / "shared" / "cache"
    refused(cli("export-mteb", results, "--model", "org/model", "--out", out), "Mine", "not an MTEB task name")
    assert listing(tmp_path) == ["shared", "shared/r.json"]
    for revision in ("..", "v1\n"):
        refused(cli("export-mteb", results, "--model", "org/m", "--revision", revision, "--out", out), "--revision")


def _export(tmp_path):
    from embeval.formats import sentences

    out = tmp_path / "export"
    sentences.export({"Mine": {"text": ["a", "b"]}}, out)
    return out


@pytest.mark.parametrize("file", ["../secret.txt", "/etc/hostname", "sub/../../secret.txt", ".hidden"])
def test_manifest_entries_stay_in_the_export_folder(cli, tmp_path, file):
    from embeval.formats.vectors import write

    out = _export(tmp_path)
    (tmp_path / "secret.txt").write_text("a\nb\n")
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["tasks"]["Mine"]["file"] = file
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(EmbevalError, match="file"):
        write(tmp_path / "v.h5", out, lambda s: np.ones((len(s), 4), np.float32), progress=False)
    assert not (tmp_path / "v.h5").exists()
    refused(cli("vectors", "check", tmp_path / "none.h5", "--export", out), "manifest.json", "file")


def test_manifest_names_are_checked(tmp_path):
    from embeval.formats.sentences import load_manifest

    out = _export(tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["tasks"]["Mine\n"] = manifest["tasks"].pop("Mine")
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(EmbevalError, match="not a valid name"):
        load_manifest(out)


# ------------------------------------------------------------------------------------------ nothing lost


@pytest.mark.parametrize("foreign", ["Mine.txt", "manifest.json"])
def test_export_sentences_overwrites_no_file_it_did_not_write(cli, tmp_path, foreign):
    folder, task_file = tree(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / foreign).write_text("my own notes\n")
    args = ("export-sentences", "--data", tmp_path / "none", "--task-file", task_file, "--out", out)
    refused(cli(*args), out / foreign, "refusing to overwrite")
    assert listing(out) == [foreign] and (out / foreign).read_text() == "my own notes\n"


def test_export_sentences_rewrites_its_own_export(cli, tmp_path):
    folder, task_file = tree(tmp_path)
    out = tmp_path / "out"
    args = ("export-sentences", "--data", tmp_path / "none", "--task-file", task_file, "--out", out)
    assert cli(*args).exit_code == 0
    assert cli(*args).exit_code == 0  # its own files: rewritten
    (out / "Mine.txt").write_text("edited by hand\n")
    refused(cli(*args), out / "Mine.txt", "changed since embeval wrote it")
    assert (out / "Mine.txt").read_text() == "edited by hand\n"


def test_an_export_removes_the_files_its_earlier_export_wrote_and_it_does_not(tmp_path, caplog):
    """Exporting fewer tasks into the same folder: the earlier export's other list files go (as
    written), so the folder holds what its manifest lists; one edited since is kept, with a warning."""
    from embeval.formats.sentences import export

    out = tmp_path / "out"
    export({"A": {"text": ["a", "b"]}, "B": {"text": ["c"]}, "C": {"text": ["d"]}}, out)
    (out / "C.txt").write_text("edited by hand\n")
    logger = logging.getLogger("embeval")
    logger.addHandler(caplog.handler)  # the CLI's tests may have stopped its propagation
    try:
        export({"A": {"text": ["a", "b"]}}, out)
    finally:
        logger.removeHandler(caplog.handler)
    assert listing(out) == ["A.txt", "C.txt", "manifest.json"]
    assert (out / "C.txt").read_text() == "edited by hand\n" and "C.txt: kept" in caplog.text


# ------------------------------------------------------------------------------------------ bounded input


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def test_special_files_are_refused_without_blocking(cli, tmp_path, fifo):
    folder, task_file = tree(tmp_path)
    for special in (fifo, Path("/dev/zero")):
        refused(cli("tasks", "--task-file", special), special, "not a regular file")
        refused(cli("report", special), special, "not a regular file")
        refused(cli("vectors", "check", special, "--export", _export(tmp_path)), "not a regular file")
    refused(cli("compare", tmp_path, fifo), tmp_path, "not a regular file (a folder)")
    # a data file that is a FIFO: not "missing"
    (folder / "d" / "test.tsv").unlink()
    os.mkfifo(folder / "d" / "test.tsv")
    out = tmp_path / "out"
    refused(
        cli("export-sentences", "--data", tmp_path / "none", "--task-file", task_file, "--out", out),
        "test.tsv",
        "not a regular file",
    )
    assert not out.exists()


def test_out_that_is_a_fifo_is_refused(cli, tmp_path, fifo):
    from embeval.formats.sentences import export

    out = tmp_path / "export"
    export({"STS12": {"text": ["a"]}}, out)
    vectors = tmp_path / "v.h5"
    import h5py

    with h5py.File(vectors, "w") as h5:
        h5["STS12"] = np.ones((1, 4), np.float32)
    refused(cli("score", vectors, "--data", tmp_path / "none", "--out", fifo), fifo, "not a regular file")
    example = Path(__file__).resolve().parents[1] / "docs" / "example" / "results-minilm.json"
    refused(cli("report", example, "--out", fifo), fifo, "not a regular file")
    assert fifo.exists() and not fifo.is_file()


NESTED_TOML = 'name = "Mine"\nkind = "sts"\nx = ' + "[" * 3000 + "]" * 3000 + '\n[files]\ntest = "d/test.tsv"\n'


def test_deep_nesting_is_one_line(cli, tmp_path):
    folder, task_file = tree(tmp_path)
    task_file.write_text(NESTED_TOML)
    refused(cli("tasks", "--task-file", task_file), "nested deeper than 64 levels")
    deep = tmp_path / "r.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    refused(cli("report", deep), "nested deeper than 64 levels")
    jsonl = folder / "d" / "test.jsonl"
    jsonl.write_text('{"sentence1": "a", "sentence2": "b", "score": ' + "[" * 5000 + "]" * 5000 + "}\n")
    task_file.write_text(STS.format(path="d/test.jsonl"))
    refused(
        cli("export-sentences", "--data", tmp_path / "none", "--task-file", task_file, "--out", tmp_path / "o"),
        "test.jsonl:1",
        "nested deeper than 64 levels",
    )


def test_oversized_files_are_refused_with_their_size(cli, tmp_path, monkeypatch):
    import embeval.memory
    import embeval.untrusted

    folder, task_file = tree(tmp_path)
    monkeypatch.setattr(embeval.memory, "available_memory", lambda: 64)
    line = refused(
        cli("export-sentences", "--data", tmp_path / "none", "--task-file", task_file, "--out", tmp_path / "o"),
        "test.tsv",
        "file of",
        "memory available",
    )
    assert f"{len(PAIRS)} bytes" in line
    monkeypatch.setattr(embeval.untrusted, "MAX_DECLARATION_BYTES", 10)
    monkeypatch.setattr("embeval.tasks.registry.MAX_DECLARATION_BYTES", 10)
    refused(cli("tasks", "--task-file", task_file), task_file, "larger than the limit of 10 bytes")


# ------------------------------------------------------------------------------------------ validation before work

KFOLD = """name = "Few"
kind = "classification"
protocol = "kfold"
[files]
train = "train.tsv"
test = "test.tsv"
"""


def _embed(out, vectors, scale=1.0):
    from embeval.formats.vectors import write

    def encode(sentences):
        rng = [np.random.default_rng(zlib.crc32(s.encode())) for s in sentences]
        return np.stack([r.normal(size=8) for r in rng]).astype(np.float32) * scale

    write(vectors, out, encode, progress=False, overwrite=True)


@pytest.mark.slow
def test_a_class_with_fewer_samples_than_folds_is_refused_before_scoring(cli, tmp_path):
    rows = [f"text {i}\t{'pos' if i % 2 else 'neg'}" for i in range(40)] + ["lonely one\trare", "lonely two\trare"]
    (tmp_path / "train.tsv").write_text("text\tlabel\n" + "\n".join(rows) + "\n")
    (tmp_path / "test.tsv").write_text("text\tlabel\nt a\tpos\nt b\tneg\nt c\trare\n")
    task_file = tmp_path / "few.toml"
    task_file.write_text(KFOLD)
    common = ("--data", tmp_path / "none", "--task-file", task_file)
    assert cli("export-sentences", *common, "--out", tmp_path / "export").exit_code == 0
    _embed(tmp_path / "export", tmp_path / "v.h5")
    out = tmp_path / "r.json"
    refused(
        cli("score", tmp_path / "v.h5", *common, "--out", out, "--kfold", "5", "--bootstrap", "0"),
        task_file,
        "Few",
        "class 'rare' has 2 samples in the train split",
        "--kfold 5",
    )
    assert not out.exists() and not Path(f"{out}.partial").exists()
    ok = cli("score", tmp_path / "v.h5", *common, "--out", out, "--kfold", "2", "--bootstrap", "0", "--quiet")
    assert ok.exit_code == 0, ok.stderr


STS_TASK = """name = "Pairs"
kind = "sts"
[files]
test = "pairs.tsv"
"""


@pytest.fixture
def scored(cli, tmp_path):
    """A small STS task of a task file, exported, embedded and scored with 100 resamples."""
    rows = [f"left {i}\tright {i % 7}\t{i % 5}" for i in range(30)]
    (tmp_path / "pairs.tsv").write_text("sentence1\tsentence2\tscore\n" + "\n".join(rows) + "\n")
    task_file = tmp_path / "pairs.toml"
    task_file.write_text(STS_TASK)
    common = ("--data", tmp_path / "none", "--task-file", task_file)
    assert cli("export-sentences", *common, "--out", tmp_path / "export").exit_code == 0
    _embed(tmp_path / "export", tmp_path / "v.h5")
    out = tmp_path / "r.json"
    args = ("score", tmp_path / "v.h5", *common, "--out", out, "--bootstrap", "100", "--quiet")
    result = cli(*args)
    assert result.exit_code == 0, result.stderr
    return out, args


def test_a_huge_bootstrap_is_refused_before_scoring(cli, tmp_path, scored):
    out, args = scored
    before = out.read_bytes()
    refused(cli(*args[:-3], "--bootstrap", str(10**15), "--quiet"), "--bootstrap", "must be at most 100000")
    assert out.read_bytes() == before


def test_a_figure_edited_with_its_interval_is_refused_and_recomputed(cli, tmp_path, scored):
    out, args = scored
    record = json.loads(out.read_text())
    entry = record["tasks"]["Pairs"]
    (path, interval), *_ = entry["ci"]["figures"].items()
    parts = path.split(".")
    holder = entry["results"]
    for part in parts[:-1]:
        holder = holder[part]
    true = holder[parts[-1]]
    holder[parts[-1]] = interval["value"] = 0.987654  # consistent with each other, not with the vectors
    out.write_text(json.dumps(record))
    refused(cli("report", out), out, "Pairs", "figures_sha256", "edited by hand")
    resumed = cli(*args, "--resume")
    assert resumed.exit_code == 0, resumed.stderr
    assert "recomputing Pairs (the earlier result is not valid" in resumed.stderr
    again = json.loads(out.read_text())["tasks"]["Pairs"]["results"]
    for part in parts[:-1]:
        again = again[part]
    assert again[parts[-1]] == true
    assert cli("report", out).exit_code == 0


# ------------------------------------------------------------------------------------------ weak cases: warnings


def test_comparing_a_file_with_itself_warns(cli, tmp_path, scored):
    out, _ = scored
    result = cli("compare", out, out)
    assert f"warning: {out}: compared with itself" in result.stderr
    assert "Traceback" not in result.stderr
    refused(cli("compare", out, out, "--resamples", str(10**15)), "--resamples", "not in the range 100<=x<=1000000")


def test_vectors_whose_norm_overflows_or_underflows_warn(cli, tmp_path, scored):
    out, args = scored
    for scale, where in ((1e25, "overflows"), (1e-25, "underflows")):
        _embed(tmp_path / "export", tmp_path / "v.h5", scale)
        result = cli(*args[:-1])
        assert "norm that overflows or underflows float32" in result.stderr, (where, result.stderr)
        assert "act as zero vectors" in result.stderr
    _embed(tmp_path / "export", tmp_path / "v.h5", 1.0)
    assert "norm that overflows" not in cli(*args[:-1]).stderr


RETRIEVAL = """name = "Search"
kind = "retrieval"
[files]
corpus = "corpus.jsonl"
queries = "queries.jsonl"
qrels = "qrels.tsv"
"""


def test_weak_ids_texts_and_duplicate_keys_warn(cli, tmp_path):
    (tmp_path / "corpus.jsonl").write_text(
        '{"_id": "d1", "text": "one", "text": "uno"}\n{"_id": " ", "text": "two"}\n{"_id": "d\\t3", "text": "x"}\n'
    )
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "first"}\n{"_id": "q2", "text": "  "}\n')
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td1\t1\n")
    (tmp_path / "task.toml").write_text(RETRIEVAL)
    result = cli(
        "export-sentences", "--data", tmp_path / "none", "--task-file", tmp_path / "task.toml", "--out", tmp_path / "o"
    )
    assert result.exit_code == 0, result.stderr
    err = " ".join(result.stderr.split())
    assert "corpus.jsonl: Search: 1 JSON object with a duplicate key (first: key 'text' on line 1)" in err
    assert "1 line with an empty or whitespace-only _id, first line 2" in err
    assert "1 line with an _id holding a tab" in err
    assert "queries.jsonl: Search: 1 line with an empty query text" in err


def test_a_stale_lock_is_taken_over_atomically(tmp_path, monkeypatch):
    """Two writers find the same stale lock; the second to act must not remove the lock the first took."""
    from embeval.formats import atomic

    out = tmp_path / "r.json"
    lock = tmp_path / "r.json.lock"
    import socket

    lock.write_text(json.dumps({"pid": 2**22 + 12345, "host": socket.gethostname(), "started": "then"}))
    first, second = atomic.WriterLock(out), atomic.WriterLock(out)
    real = atomic.WriterLock._content

    def content_then_first_takes_over(self):
        stale = real(self)
        if self is second and not first.held:
            first.acquire()  # between the second's read of the stale owner and its takeover
        return stale

    monkeypatch.setattr(atomic.WriterLock, "_content", content_then_first_takes_over)
    with pytest.raises(EmbevalError, match="is being written by embeval process"):
        second.acquire()
    assert first.held and not second.held
    assert json.loads(lock.read_text())["pid"] == os.getpid() and lock.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json.lock"]
    first.release()
    assert not lock.exists()
