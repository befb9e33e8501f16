"""The MTEB cache is used only when its files are what embeval wrote, and the dataset copies `--mteb`
reads are checked before mteb reads them.

- Each way of tampering with the cache (a judgment or a score edited, a file truncated, deleted,
  added, replaced by a link pointing outside, by a FIFO or by a folder, a folder of the cache replaced
  by a link, declaration.json edited) gives the clean run's figures, rebuilt from the dataset copy,
  with one warning line; a tampered cache that cannot be rebuilt is one line, exit code 2.
- SIGTERM while a run writes the cache leaves no temporary folder (datasets' or the cache's).
- An unusable EMBEVAL_CACHE (a file, /dev/null, a dangling link, a read-only folder), special files
  and links leaving --mteb-data in a dataset copy (its data files and its revision record), a
  truncated parquet file and an empty --mteb are each one line, exit code 2, never a hang.
- Runs sharing a cache: the first to place a stamp wins, the other uses its files; older stamps are
  removed only when no other run uses the cache; a write that stops leaves nothing.
- The --mteb options and --allow-paths-outside are the commands' parameters: the command that finishes
  an interrupted run repeats them.

Every refusal: exit code 2, one line on stderr, no traceback, the inputs byte for byte unchanged."""

import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from mteb_helpers import mteb_client
from mteb_snapshots import encode, words, write_snapshot

from embeval.formats.vectors import write

CHECKOUT = Path(__file__).resolve().parents[1]
NAMES = "STSBenchmark,SciFact"
STS_DATASET = "mteb/stsbenchmark-sts"
SCIFACT_DATASET = "mteb/scifact"


def run(*args):
    from embeval.cli.main import cli

    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def refused(result, *fragments):
    """Exit code 2 and one line on stderr, holding every fragment; no traceback."""
    assert result.exit_code == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("embeval: error: "), result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def tree(path):
    """Everything under path as it is on disk, links not followed: {relative path: what it is}."""
    path = Path(path)
    found = {}
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            item = Path(folder) / name
            info = item.lstat()
            if item.is_symlink():
                found[str(item.relative_to(path))] = ("link", os.readlink(item))
            elif item.is_dir():
                found[str(item.relative_to(path))] = ("folder",)
            elif item.is_file():
                found[str(item.relative_to(path))] = ("file", hashlib.sha256(item.read_bytes()).hexdigest())
            else:
                found[str(item.relative_to(path))] = ("special", info.st_mode)
    return found


def rows(cache):
    """The cache's folders and links, and each file's lines in sorted order (a judgments file is written
    in the order mteb's dict gives, which may vary) but declaration.json's (its digests follow)."""
    return {
        path: (what[0], sorted((cache / path).read_text().splitlines()) if what[0] == "file" else what)
        for path, what in tree(cache).items()
        if not path.endswith("declaration.json")
    }


def copies(root, rng, form="jsonl"):
    """Small copies of STSBenchmark and SciFact in Hugging Face's layout, at mteb's revisions."""
    mteb = mteb_client()
    pairs = [
        {"sentence1": a, "sentence2": b, "score": float(rng.integers(0, 6))}
        for a, b in zip(words(rng, 40), words(rng, 40), strict=True)
    ]
    sts = mteb.get_task("STSBenchmark").metadata.dataset["revision"]
    write_snapshot(root, STS_DATASET, sts, {"default": {"test": pairs}}, form)
    corpus = [{"_id": f"d{i}", "title": "", "text": t} for i, t in enumerate(words(rng, 30))]
    queries = [{"_id": f"q{i}", "text": t} for i, t in enumerate(words(rng, 8))]
    qrels = [
        {"query-id": f"q{q}", "corpus-id": f"d{d}", "score": 1}
        for q in range(8)
        for d in rng.choice(30, size=2, replace=False)
    ]
    configs = {"corpus": {"corpus": corpus}, "queries": {"queries": queries}, "default": {"test": qrels}}
    write_snapshot(root, SCIFACT_DATASET, mteb.get_task("SciFact").metadata.dataset["revision"], configs, form)


@dataclass
class Clean:
    root: Path  # the dataset copies
    cache: Path  # the cache a clean run wrote
    vectors: Path
    record: dict  # the clean run's results


def score(vectors, root, out, names=NAMES, *options):
    return run(
        "score", vectors, "--mteb", names, "--mteb-data", root, "--out", out, "--bootstrap", "100", "--quiet", *options
    )


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """A clean run: the copies exported, embedded (hashed word counts) and scored."""
    base = tmp_path_factory.mktemp("clean")
    copies(base / "datasets", np.random.default_rng(11))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EMBEVAL_CACHE", str(base / "cache"))
        done = run("export-sentences", "--mteb", NAMES, "--mteb-data", base / "datasets", "--out", base / "export")
        assert done.exit_code == 0, done.stderr
        write(base / "v.h5", base / "export", encode, progress=False)
        done = score(base / "v.h5", base / "datasets", base / "clean.json")
        assert done.exit_code == 0 and done.stderr == "", done.stderr
    record = json.loads((base / "clean.json").read_text())
    assert set(record["tasks"]) == {"STSBenchmark", "SciFact"}
    return Clean(base / "datasets", base / "cache", base / "v.h5", record)


@pytest.fixture
def cache(clean, tmp_path, monkeypatch):
    """A copy of the clean run's cache, as EMBEVAL_CACHE."""
    folder = tmp_path / "cache"
    shutil.copytree(clean.cache, folder, symlinks=True)
    monkeypatch.setenv("EMBEVAL_CACHE", str(folder))
    return folder


def version(cache, task):
    """The one folder the cache holds a task's files in (TASK/REVISION/SUBSET/SPLIT/STAMP)."""
    (found,) = [p for p in (cache / "mteb" / task).glob("*/*/*/*") if not p.name.startswith(".")]
    return found


def figures(record, task):
    entry = record["tasks"][task]
    return entry["results"], record["mteb"][task]["value"]


# Tampering: (task, what is done to its folder in the cache, a fragment of the warning).


def edit_judgments(folder, outside):
    lines = (folder / "qrels.tsv").read_text().splitlines()
    (folder / "qrels.tsv").write_text("\n".join([lines[0]] + [f"{ln.split()[0]}\td0\t1" for ln in lines[1:]]) + "\n")


def edit_scores(folder, outside):
    rows = [json.loads(line) for line in (folder / "pairs.jsonl").read_text().splitlines()]
    text = "".join(json.dumps(dict(r, score=5.0 - r["score"])) + "\n" for r in rows)  # the order reversed
    (folder / "pairs.jsonl").write_text(text)


def truncate(folder, outside):
    data = (folder / "corpus.jsonl").read_bytes()
    (folder / "corpus.jsonl").write_bytes(data[: len(data) // 2])


def delete(folder, outside):
    (folder / "queries.jsonl").unlink()


def add(folder, outside):
    (folder / "extra.jsonl").write_text('{"sentence1": "a", "sentence2": "b", "score": 1.0}\n')


def link_outside(folder, outside):
    target = outside / "pairs.jsonl"
    shutil.copy(folder / "pairs.jsonl", target)
    edit_scores(outside, None)
    (folder / "pairs.jsonl").unlink()
    (folder / "pairs.jsonl").symlink_to(target)


def link_folder(folder, outside):
    """The task's whole folder in the cache replaced by a link to an edited copy outside it."""
    task_folder = folder.parents[3]
    moved = outside / "STSBenchmark"
    shutil.copytree(task_folder, moved)
    edit_scores(moved / folder.relative_to(task_folder), None)
    shutil.rmtree(task_folder)
    task_folder.symlink_to(moved, target_is_directory=True)


def fifo(folder, outside):
    (folder / "pairs.jsonl").unlink()
    os.mkfifo(folder / "pairs.jsonl")


def folder_instead(folder, outside):
    (folder / "qrels.tsv").unlink()
    (folder / "qrels.tsv").mkdir()
    (folder / "qrels.tsv" / "x").write_text("q0\td0\t1\n")


def edit_declaration(folder, outside):
    saved = json.loads((folder / "declaration.json").read_text())
    saved["declaration"]["depth"] = 1
    (folder / "declaration.json").write_text(json.dumps(saved))


TAMPERS = {
    "edited judgment": ("SciFact", edit_judgments, "qrels.tsv was changed"),
    "edited score column": ("STSBenchmark", edit_scores, "pairs.jsonl was changed"),
    "truncated file": ("SciFact", truncate, "corpus.jsonl was changed"),
    "deleted file": ("SciFact", delete, "queries.jsonl is missing"),
    "extra file": ("STSBenchmark", add, "extra.jsonl (a file) was not written by embeval"),
    "link to a file outside": ("STSBenchmark", link_outside, "pairs.jsonl is a symbolic link"),
    "link to a folder outside": ("STSBenchmark", link_folder, "mteb/STSBenchmark is a symbolic link"),
    "FIFO": ("STSBenchmark", fifo, "pairs.jsonl is a FIFO, device or socket"),
    "folder instead of a file": ("SciFact", folder_instead, "qrels.tsv is a folder"),
    "edited declaration": ("SciFact", edit_declaration, "declaration.json was changed"),
}


@pytest.mark.parametrize("tamper", TAMPERS)
def test_a_tampered_cache_is_rebuilt_with_one_warning(clean, cache, tmp_path, tamper):
    task, change, why = TAMPERS[tamper]
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = version(cache, task)
    change(folder, outside)
    inputs, around = tree(clean.vectors.parent), tree(outside)  # the copies, the export, the vectors
    done = score(clean.vectors, clean.root, tmp_path / "r.json")
    assert done.exit_code == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    (line,) = lines
    assert line.startswith("embeval: warning: ") and f"{task}: the cached files are not what embeval wrote" in line
    assert why in line and line.endswith("rebuilt from the dataset copy"), line
    record = json.loads((tmp_path / "r.json").read_text())
    for name in ("STSBenchmark", "SciFact"):  # the clean run's figures, never the tampered data's
        assert figures(record, name) == figures(clean.record, name)
    assert tree(clean.vectors.parent) == inputs and tree(outside) == around  # nothing written through a link
    assert rows(cache) == rows(clean.cache)  # rebuilt as the clean run wrote it
    again = score(clean.vectors, clean.root, tmp_path / "again.json")
    assert again.exit_code == 0 and again.stderr == "", again.stderr  # now trusted


class CountingSha256:
    """hashlib for embeval.tasks.files: its sha256 objects count the bytes they hash."""

    def __init__(self):
        self.hashed = 0

    def sha256(self, data=b""):
        outer, inner = self, hashlib.sha256(data)

        class Counted:
            def update(self, chunk):
                outer.hashed += len(chunk)
                inner.update(chunk)

            def hexdigest(self):
                return inner.hexdigest()

        return Counted()


def data_sha256(folder, declared):
    """A task's data fingerprint computed afresh: sha256 over each declared file's name and sha256."""
    lines = "".join(f"{rel}\0{hashlib.sha256((folder / rel).read_bytes()).hexdigest()}\n" for rel in declared.values())
    return hashlib.sha256(lines.encode()).hexdigest()


@pytest.mark.parametrize("shared", [True, False])
def test_a_reused_cache_is_read_once_and_fingerprinted_as_before(clean, cache, tmp_path, monkeypatch, shared):
    """The cache's check hands each file's sha256 to the data's fingerprint, which then reads nothing;
    the fingerprints (and figures) are those of a run whose fingerprint reads the files again."""
    import time

    from embeval.tasks import files

    newest = max(p.lstat().st_ctime_ns for p in cache.rglob("*"))  # copied just now: wait until not racy
    time.sleep(max(0.0, (newest + files.RACY_NS - time.time_ns()) / 1e9) + 0.05)
    counting = CountingSha256()
    monkeypatch.setattr(files, "hashlib", counting)
    if not shared:
        monkeypatch.setattr("embeval.tasks.mteb_cache.remember_digest", lambda *args: None)
    done = score(clean.vectors, clean.root, tmp_path / "r.json")
    assert done.exit_code == 0 and done.stderr == "", done.stderr
    record = json.loads((tmp_path / "r.json").read_text())
    cached = sum(p.stat().st_size for p in (cache / "mteb").rglob("*") if p.is_file() and p.suffix != ".json")
    assert counting.hashed == (0 if shared else cached) and cached > 0
    for name in ("STSBenchmark", "SciFact"):
        entry = record["tasks"][name]
        assert entry["data_sha256"] == clean.record["tasks"][name]["data_sha256"], name
        assert entry["data_sha256"] == data_sha256(version(cache, name), entry["declaration"]["declaration"]["files"])
        assert figures(record, name) == figures(clean.record, name)


def read_only(folder, monkeypatch):
    """Make folder read-only. A process that permissions do not stop (root) gets the refusals of a
    read-only file system instead, for every write under folder."""
    for path in [folder, *folder.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o555)
    try:
        (folder / "probe").mkdir()
    except PermissionError:
        return
    (folder / "probe").rmdir()

    def refusing(real):
        def call(path, *args, **kwargs):
            if Path(os.path.abspath(path)).is_relative_to(folder):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
            return real(path, *args, **kwargs)

        return call

    for name in ("mkdir", "rename", "replace", "unlink", "rmdir"):
        monkeypatch.setattr(os, name, refusing(getattr(os, name)))


def test_a_tampered_cache_that_cannot_be_rebuilt_is_one_line(clean, cache, tmp_path, monkeypatch):
    edit_scores(version(cache, "STSBenchmark"), None)
    before = tree(cache)
    read_only(cache, monkeypatch)
    line = refused(
        score(clean.vectors, clean.root, tmp_path / "r.json"),
        f"EMBEVAL_CACHE={cache}: STSBenchmark: the cached files are not what embeval wrote (pairs.jsonl was changed)",
        "cannot be removed",
    )
    assert "read-only" in line or "permission denied" in line
    monkeypatch.undo()
    assert tree(cache) == before and not (tmp_path / "r.json").exists()


def test_a_file_or_link_where_the_cache_folder_goes_is_the_users_and_kept(clean, tmp_path, monkeypatch):
    """EMBEVAL_CACHE is the user's folder: a file or a link named mteb in it is not embeval's to remove."""
    monkeypatch.setenv("EMBEVAL_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    (tmp_path / "elsewhere").mkdir()
    for make in (lambda p: p.write_text("mine\n"), lambda p: p.symlink_to(tmp_path / "elsewhere")):
        make(tmp_path / "cache" / "mteb")
        before = tree(tmp_path)
        refused(export(clean.root, tmp_path), f"EMBEVAL_CACHE={tmp_path / 'cache'}: STSBenchmark: ", "move it")
        assert tree(tmp_path) == before
        (tmp_path / "cache" / "mteb").unlink()


@pytest.mark.parametrize("kind", ["regular file", "/dev/null", "dangling link", "read-only folder"])
def test_an_unusable_embeval_cache_is_one_line(clean, tmp_path, monkeypatch, kind):
    if kind == "regular file":
        path = tmp_path / "cache.txt"
        path.write_text("mine\n")
        why = "not a folder (a file)"
    elif kind == "/dev/null":
        path, why = Path("/dev/null"), "not a folder (a FIFO, device or socket)"
    elif kind == "dangling link":
        path = tmp_path / "cache"
        path.symlink_to(tmp_path / "nowhere")
        why = f"a symbolic link to {tmp_path / 'nowhere'}, which does not exist"
    else:
        path = tmp_path / "cache"
        path.mkdir()
        read_only(path, monkeypatch)
        why = "cannot write the cache"
    monkeypatch.setenv("EMBEVAL_CACHE", str(path))
    before = tree(tmp_path)
    out = tmp_path / "export"
    refused(
        run("export-sentences", "--mteb", "STSBenchmark", "--mteb-data", clean.root, "--out", out),
        f"EMBEVAL_CACHE={path}: ",
        why,
    )
    monkeypatch.undo()
    assert tree(tmp_path) == before and not out.exists()
    if kind == "regular file":
        assert path.read_text() == "mine\n"


# SIGTERM while the cache is written: a process of its own, stopped at a known point by a hook.

STOP_WHILE_WRITING = """
import os, pathlib, runpy, sys, time
import embeval.tasks.mteb_source as source

real = source._jsonl

def writing(path, rows):
    real(path, rows)
    pathlib.Path(os.environ["EMBEVAL_TEST_MARK"]).write_text(str(path))
    while True:  # until SIGTERM
        time.sleep(60)

source._jsonl = writing
sys.argv = ["embeval", *sys.argv[1:]]
runpy.run_module("embeval", run_name="__main__")
"""


def test_sigterm_while_the_cache_is_written_leaves_no_temporary_folder(clean, tmp_path):
    import time

    temp, mark, cache, out = tmp_path / "tmp", tmp_path / "mark", tmp_path / "cache", tmp_path / "export"
    temp.mkdir()
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(CHECKOUT), os.environ.get("PYTHONPATH", "")]),
        TMPDIR=str(temp),
        EMBEVAL_CACHE=str(cache),
        EMBEVAL_TEST_MARK=str(mark),
    )
    inputs = tree(clean.root)
    args = ["export-sentences", "--mteb", "STSBenchmark", "--mteb-data", str(clean.root), "--out", str(out)]
    child = subprocess.Popen(
        [sys.executable, "-c", STOP_WHILE_WRITING, *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 600
        while not mark.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)  # the child waits at the hook until signalled: no race
        assert mark.exists(), child.communicate(timeout=60)
        # the window: datasets' scratch folder and the cache's folder being written both exist
        assert list(temp.glob("embeval-mteb-*")) and list(cache.rglob(".building-*")), tree(tmp_path)
        child.send_signal(signal.SIGTERM)
        stdout, stderr = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 128 + signal.SIGTERM, stderr
    assert stderr.strip().splitlines() == ["embeval: terminated"], stderr
    assert list(temp.iterdir()) == [] and not list(cache.rglob(".building-*")), tree(tmp_path)
    assert [p for p in cache.rglob("*") if p.is_file()] == [cache / "mteb" / ".lock"]  # nothing half-written
    assert tree(clean.root) == inputs and not out.exists()


# Dataset copies: special files, links out of --mteb-data, truncated data, the revision record.


@pytest.fixture
def hang_guard():
    """A hang is a failure (after 120 s), not a stuck suite."""

    def expired(signum, frame):
        raise TimeoutError("did not finish within 120 s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(120)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def root(clean, tmp_path, monkeypatch):
    """A copy of the dataset copies, to be damaged, with a cache of its own."""
    shutil.copytree(clean.root, tmp_path / "datasets", symlinks=True)
    monkeypatch.setenv("EMBEVAL_CACHE", str(tmp_path / "cache"))
    return tmp_path / "datasets"


STS_DATA = f"{STS_DATASET}/data/default/test.jsonl"
RECORD = f"{STS_DATASET}/.cache/huggingface/download/README.md.metadata"


def export(root, tmp_path, *options, names="STSBenchmark"):
    return run("export-sentences", "--mteb", names, "--mteb-data", root, "--out", tmp_path / "export", *options)


def replace(path, how, target=None):
    path.unlink()
    if how == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(target)


SPECIAL = {  # (the file, how it is replaced, options, fragments of the line)
    "data file as a FIFO": (STS_DATA, "fifo", (), "not a regular file (a FIFO, device or socket)"),
    "data file linked to /dev/zero": (STS_DATA, "/dev/zero", (), "leads outside", "--allow-paths-outside"),
    "data file linked to /dev/zero, links allowed out": (
        STS_DATA,
        "/dev/zero",
        ("--allow-paths-outside",),
        "not a regular file (a FIFO, device or socket)",
    ),
    "data file as a dangling link": (STS_DATA, "missing.jsonl", (), "a symbolic link to a file that does not exist"),
    "revision record as a FIFO": (RECORD, "fifo", (), "not a regular file (a FIFO, device or socket)"),
    "revision record linked to /dev/zero": (RECORD, "/dev/zero", (), "leads outside"),
    "revision record linked to /dev/zero, links allowed out": (
        RECORD,
        "/dev/zero",
        ("--allow-paths-outside",),
        "not a regular file (a FIFO, device or socket)",
    ),
}


@pytest.mark.parametrize("case", SPECIAL)
def test_special_files_in_a_dataset_copy_are_one_line(root, tmp_path, hang_guard, case):
    relative, how, options, *fragments = SPECIAL[case]
    path = root / relative
    replace(path, how, how)
    before = tree(root)
    refused(export(root, tmp_path, *options), f"{path}: STSBenchmark: ", *fragments)
    assert tree(root) == before and not (tmp_path / "export").exists()
    if relative == RECORD:  # the listing reads the record too: the same line
        refused(run("tasks", "--mteb", "STSBenchmark", "--mteb-data", root, "--no-load", *options), *fragments)


@pytest.mark.parametrize("what", ["data file", "data folder", "whole copy"])
def test_a_copy_leading_out_of_mteb_data_is_refused_unless_allowed(clean, root, tmp_path, what):
    outside = tmp_path / "elsewhere"
    if what == "data file":
        moved = root / STS_DATA
    elif what == "data folder":
        moved = root / STS_DATASET / "data"
    else:
        moved = root / STS_DATASET
    shutil.move(moved, outside)
    moved.symlink_to(outside, target_is_directory=outside.is_dir())
    before, around = tree(root), tree(outside)
    refused(export(root, tmp_path), f"{moved}: STSBenchmark: leads outside {root}", "--allow-paths-outside")
    assert not (tmp_path / "export").exists()
    done = export(root, tmp_path, "--allow-paths-outside")  # the user's choice: read as it is
    assert done.exit_code == 0, done.stderr
    clean_list = (clean.vectors.parent / "export" / "STSBenchmark.txt").read_text()
    assert (tmp_path / "export" / "STSBenchmark.txt").read_text() == clean_list
    assert tree(root) == before and tree(outside) == around


def test_a_copy_read_with_paths_outside_allowed_says_so_in_its_results(clean, root, tmp_path):
    """As for a task file: each task's entry records `"paths_outside_allowed": true`, and is shown again."""
    outside = tmp_path / "elsewhere"
    shutil.move(root / STS_DATASET / "data", outside)
    (root / STS_DATASET / "data").symlink_to(outside, target_is_directory=True)
    done = score(clean.vectors, root, tmp_path / "r.json", NAMES, "--allow-paths-outside")
    assert done.exit_code == 0, done.stderr
    record = json.loads((tmp_path / "r.json").read_text())
    for name in ("STSBenchmark", "SciFact"):
        assert record["tasks"][name]["declaration"]["paths_outside_allowed"] is True, name
        assert "paths_outside_allowed" not in clean.record["tasks"][name]["declaration"]
        assert figures(record, name) == figures(clean.record, name)
    shown = run("report", tmp_path / "r.json", "--format", "markdown")
    assert shown.exit_code == 0 and "STSBenchmark" in shown.stdout, shown.stderr


@pytest.mark.parametrize("form", ["parquet", "jsonl"])
def test_a_data_file_datasets_cannot_read_is_one_line_naming_it(tmp_path, monkeypatch, form):
    """A truncated parquet file, a JSON lines file with a broken last line: datasets' error (and its
    log, which named the file on a line of its own) becomes one line naming the file and the task."""
    root = tmp_path / "datasets"
    copies(root, np.random.default_rng(11), form=form)
    monkeypatch.setenv("EMBEVAL_CACHE", str(tmp_path / "cache"))
    data = root / STS_DATASET / "data" / "default" / f"test.{form}"
    if form == "parquet":
        data.write_bytes(data.read_bytes()[:300])
        why = "ArrowInvalid: Parquet magic bytes not found"
    else:
        data.write_text(data.read_text() + '{"sentence1": "a", "sente\n')
        why = "DatasetGenerationError"
    before = tree(root)
    refused(export(root, tmp_path), f"{data}: STSBenchmark: mteb could not load its data: {why}")
    assert tree(root) == before and not (tmp_path / "export").exists()
    assert not list((tmp_path / "cache").rglob("*.jsonl"))


@pytest.mark.parametrize("value", ["", " ", ",", " , ,"])
def test_an_empty_mteb_is_refused(clean, tmp_path, value):
    out = tmp_path / "out"
    refused(run("export-sentences", "--mteb", value, "--out", out), "--mteb: names no task or benchmark")
    refused(run("score", clean.vectors, "--mteb", value, "--out", out), "--mteb: names no task or benchmark")
    refused(run("sweep", clean.vectors, "--mteb", value, "--out-dir", out), "--mteb: names no task or benchmark")
    refused(run("tasks", "--mteb", value), "--mteb: names no task or benchmark")
    refused(run("tasks", "--mteb", value, "--no-load"), "--mteb: names no task or benchmark")
    assert not out.exists()


# Runs sharing a cache (the cache's own API: two runs interleaved at the point that matters).


def written(text):
    def write_files(folder):
        (folder / "pairs.jsonl").write_text(text)
        return {"kind": "sts", "files": {"test": "pairs.jsonl"}}

    return write_files


def test_the_first_run_to_place_a_stamp_wins_and_the_other_uses_its_files(tmp_path, monkeypatch):
    from embeval.tasks.mteb_cache import Slot

    monkeypatch.setenv("EMBEVAL_CACHE", str(tmp_path / "cache"))
    relative, stamp = ("T", "rev", "default", "test"), "a" * 64
    placed = []

    def slow(folder):
        placed.append(Slot(relative, stamp, "T").store(written("theirs\n")))  # another run finishes first
        return written("ours\n")(folder)

    folder, declaration = Slot(relative, stamp, "T").store(slow)
    assert (folder, declaration) == placed[0] and (folder / "pairs.jsonl").read_text() == "theirs\n"
    assert sorted(p.name for p in folder.parent.iterdir()) == [stamp]  # no folder of the loser left
    assert Slot(relative, stamp, "T").reuse() == placed[0]


def test_older_stamps_are_removed_only_when_no_other_run_uses_the_cache(tmp_path, monkeypatch):
    import fcntl

    from embeval.tasks.mteb_cache import Slot

    monkeypatch.setenv("EMBEVAL_CACHE", str(tmp_path / "cache"))
    relative = ("T", "rev", "default", "test")
    first, _ = Slot(relative, "1" * 64, "T").store(written("one\n"))
    other_run = os.open(tmp_path / "cache" / "mteb" / ".lock", os.O_RDONLY)  # another run, using the cache
    fcntl.flock(other_run, fcntl.LOCK_SH)
    try:
        second, _ = Slot(relative, "2" * 64, "T").store(written("two\n"))
        assert first.is_dir() and second.is_dir()  # the other run may be reading the first: kept
    finally:
        os.close(other_run)
    (first.parent / ".building-x").mkdir()  # left by a run that was killed
    third, _ = Slot(relative, "3" * 64, "T").store(written("three\n"))
    assert [p.name for p in third.parent.iterdir()] == ["3" * 64]
    assert (third / "pairs.jsonl").read_text() == "three\n"


@pytest.mark.parametrize("stop", [ValueError("a writer's error"), KeyboardInterrupt()])
def test_a_write_that_stops_leaves_nothing(tmp_path, monkeypatch, stop):
    from embeval.tasks.mteb_cache import Slot

    monkeypatch.setenv("EMBEVAL_CACHE", str(tmp_path / "cache"))

    def failing(folder):
        (folder / "pairs.jsonl").write_text("half")
        raise stop

    with pytest.raises(type(stop)):
        Slot(("T", "rev", "default", "test"), "a" * 64, "T").store(failing)
    assert [p for p in (tmp_path / "cache").rglob("*") if not p.is_dir()] == [tmp_path / "cache" / "mteb" / ".lock"]
    assert not list((tmp_path / "cache").rglob(".building-*"))


def test_the_commands_take_the_mteb_options_as_parameters():
    """--mteb and its options, and --allow-paths-outside, are parameters of the commands that use them
    (no command reads them from click's context)."""
    import inspect

    import embeval.cli.common
    from embeval.cli.main import cli
    from embeval.cli.sweep import sweep

    for command in (cli.commands["export-sentences"], cli.commands["score"], sweep, cli.commands["tasks"]):
        parameters = inspect.signature(command.callback).parameters
        assert {"mteb", "allow_paths_outside", "task_files"} <= set(parameters), command.name
        options = {p.name for p in command.params}
        assert {"mteb", "mteb_data", "allow_revision_mismatch", "skip_unsupported"} <= options
    for name in ("vectors", "compare", "report", "export-mteb"):
        command = cli.commands[name]
        command = command.commands["check"] if name == "vectors" else command
        assert "allow_paths_outside" in inspect.signature(command.callback).parameters, name
    assert "ctx.meta" not in Path(embeval.cli.common.__file__).read_text()


def test_an_interrupted_mteb_run_says_the_whole_command_that_finishes_it(clean, cache, tmp_path, monkeypatch):
    """The --mteb options are the command's parameters, so the command that finishes an interrupted
    run repeats them; it finishes with the clean run's figures."""
    import shlex

    from embeval.run import execute as execute_module

    real, calls = execute_module.evaluate, []

    def stopping(ctx):
        calls.append(ctx.task.name)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return (yield from real(ctx))

    monkeypatch.setattr(execute_module, "evaluate", stopping)
    out = tmp_path / "r.json"
    result = score(clean.vectors, clean.root, out, NAMES, "--allow-paths-outside")
    assert result.exit_code == 130, result.stderr
    command = shlex.split(result.stderr.strip().splitlines()[-1].split("finish the run with: ")[1])
    assert command[command.index("--mteb") + 1] == NAMES
    assert command[command.index("--mteb-data") + 1] == str(clean.root)
    assert "--allow-paths-outside" in command and command[-1] == "--resume"
    monkeypatch.setattr(execute_module, "evaluate", real)
    done = run(*command[1:])
    assert done.exit_code == 0, done.stderr
    record = json.loads(out.read_text())
    for name in ("STSBenchmark", "SciFact"):
        assert figures(record, name) == figures(clean.record, name)


def test_a_second_run_in_the_same_process_reuses_the_cache_and_leaves_the_task_as_it_was(clean, tmp_path, monkeypatch):
    """mteb's task objects live as long as the process (a benchmark's are shared by every run in it):
    loading from the copy points the object's metadata at it and holds its data; both are undone once
    the files are written, so a second run with the same object (the Python API, a sweep) finds the
    cache by the same stamp and loads nothing."""
    from embeval.tasks import mteb_source

    monkeypatch.setenv("EMBEVAL_CACHE", str(tmp_path / "empty-cache"))  # the first run loads the copy
    task = mteb_client().get_task("SciFact")
    published = dict(task.metadata.dataset)
    first, _ = mteb_source.task_specs([mteb_source.Requested(task, [])], clean.root)
    assert dict(task.metadata.dataset) == published and not task.data_loaded

    def no_load(*args):
        raise AssertionError("loaded again")

    monkeypatch.setattr(mteb_source, "load", no_load)
    second, _ = mteb_source.task_specs([mteb_source.Requested(task, [])], clean.root)
    assert [s.name for s in second] == [s.name for s in first] == ["SciFact"]
    assert dict(task.metadata.dataset) == published
