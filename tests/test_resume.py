"""Resume: Ctrl-C keeps what finished and says how to finish; --resume reuses a task's result only
when its vectors, its data, the configuration and the embeval code (version and fingerprint) are all
unchanged."""

import json
import shlex
import shutil

import h5py
import numpy as np
import pytest
from reliability_helpers import (
    PREVIOUS,
    comparable,
    progress_file,
    refused,
    task_file,
    untouched,
)

from embeval._version import __version__, code_fingerprint
from embeval.run import execute as execute_module
from embeval.run import score as score_module

TASKS = ["SICKEntailment", "STS12", "STS13", "STS14", "STS15", "STS16"]
OPTIONS = ["--config", "prototype", "--seed", "7"]


@pytest.fixture(scope="module")
def vectors(tmp_path_factory, data_dir):
    return task_file(tmp_path_factory.mktemp("resume") / "v.h5", data_dir, TASKS)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, vectors, data_dir):
    from click.testing import CliRunner

    from embeval.cli.main import cli

    out = tmp_path_factory.mktemp("full") / "r.json"
    result = CliRunner().invoke(
        cli,
        ["score", str(vectors), "--data", str(data_dir), "--tasks", ",".join(TASKS), "--out", str(out), *OPTIONS],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr
    return out


def counting(monkeypatch, stop_at=None):
    """Count the tasks evaluated (in order); raise KeyboardInterrupt at evaluation number stop_at."""
    calls = []
    real = execute_module.evaluate

    def wrapped(ctx):
        calls.append(ctx.task.name)
        if len(calls) == stop_at:
            raise KeyboardInterrupt
        return (yield from real(ctx))

    monkeypatch.setattr(execute_module, "evaluate", wrapped)
    return calls


def test_interrupted_run_resumes_to_identical_results(cli, data_dir, vectors, uninterrupted, tmp_path, monkeypatch):
    out = tmp_path / "r.json"
    out.write_bytes(PREVIOUS)
    calls = counting(monkeypatch, stop_at=4)
    result = cli("score", vectors, "--data", data_dir, "--tasks", ",".join(TASKS), "--out", out, *OPTIONS)
    assert result.exit_code == 130
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr
    assert lines[-1].startswith(
        f"embeval: interrupted; the results of SICKEntailment, STS12, STS13 are kept in "
        f"{out}.partial; finish the run with: embeval score "
    )
    untouched(out, PREVIOUS, progress=True)
    assert list(json.loads(progress_file(out).read_text())["tasks"]) == ["SICKEntailment", "STS12", "STS13"]
    command = shlex.split(lines[-1].split("finish the run with: ")[1])
    assert command[:2] == ["embeval", "score"] and command[-1] == "--resume"
    assert "--config" in command and "--seed" in command and "--tasks" in command

    monkeypatch.undo()
    calls = counting(monkeypatch)
    result = cli(*command[1:])
    assert result.exit_code == 0, result.stderr
    assert calls == ["STS14", "STS15", "STS16"]
    assert (
        f"resuming from {out}.partial and {out}: reused SICKEntailment, STS12, STS13; recomputing STS14, STS15, "
        "STS16 (no previous result)" in result.stderr
    )
    assert comparable(out) == comparable(uninterrupted)
    assert not progress_file(out).exists()


def test_interrupt_before_any_task_finished(cli, data_dir, vectors, tmp_path, monkeypatch):
    out = tmp_path / "r.json"
    out.write_bytes(PREVIOUS)

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(score_module.VectorsFile, "fingerprint_rows", stop)  # while the run is planned
    result = cli("score", vectors, "--data", data_dir, "--tasks", "STS12", "--out", out)
    assert result.exit_code == 130
    assert result.stderr.strip() == f"embeval: interrupted before any task finished; {out} was not changed"
    untouched(out, PREVIOUS)


def copy_data(data_dir, tmp_path):
    data = tmp_path / "data"
    for folder in ("STS/STS12-en-test", "STS/STS13-en-test", "STS/STS16-en-test"):
        shutil.copytree(data_dir / "downstream" / folder, data / "downstream" / folder)
    return data


def test_resume_recomputes_exactly_what_changed(cli, data_dir, tmp_path, monkeypatch):
    names = ["STS12", "STS13", "STS16"]
    data = copy_data(data_dir, tmp_path)
    path = task_file(tmp_path / "v.h5", data, names)
    out, fresh = tmp_path / "r.json", tmp_path / "fresh.json"
    args = ["score", path, "--data", data, "--tasks", ",".join(names)]

    def resumed(*extra):
        calls = counting(monkeypatch)
        result = cli(*args, "--out", out, "--resume", *extra)
        assert result.exit_code == 0, result.stderr
        monkeypatch.undo()
        assert cli(*args, "--out", fresh, *extra).exit_code == 0
        assert comparable(out) == comparable(fresh)
        return calls, result.stderr

    assert cli(*args, "--out", out).exit_code == 0
    calls, said = resumed()
    assert calls == [] and "reused STS12, STS13, STS16" in said

    with h5py.File(path, "r+") as f:
        f["STS13"][3] = f["STS13"][3] * 2
    calls, said = resumed()
    assert calls == ["STS13"] and "reused STS12, STS16; recomputing STS13 (vectors changed)" in said

    gold = data / "downstream/STS/STS16-en-test/STS.gs.headlines.txt"
    lines = gold.read_text().split("\n")
    scored = next(i for i, line in enumerate(lines) if line.strip())
    lines[scored] = "0.5" if lines[scored].strip() != "0.5" else "1.5"
    gold.write_text("\n".join(lines))
    calls, said = resumed()
    assert calls == ["STS16"] and "recomputing STS16 (data changed)" in said

    calls, said = resumed("--seed", "3")
    assert calls == names and "recomputing STS12, STS13, STS16 (configuration changed)" in said

    calls, said = resumed("--seed", "3")
    assert calls == [] and "reused STS12, STS13, STS16" in said  # the same code: reused

    ours = code_fingerprint()
    assert json.loads(out.read_text())["embeval_code"] == ours
    monkeypatch.setattr(score_module, "code_fingerprint", lambda: "f" * 64)  # other code, the same version
    calls = counting(monkeypatch)
    result = cli(*args, "--out", out, "--resume", "--seed", "3")
    assert calls == names, result.stderr
    assert (
        f"recomputing STS12, STS13, STS16 (computed by other embeval code ({__version__} {ours[:12]}…, "
        f"this is {__version__} ffffffffffff…))" in result.stderr
    )
    assert json.loads(out.read_text())["embeval_code"] == "f" * 64

    monkeypatch.setattr(score_module, "__version__", "9.9.9")  # another version
    calls = counting(monkeypatch)
    result = cli(*args, "--out", out, "--resume", "--seed", "3")
    assert calls == names and f"(computed by other embeval code ({__version__} ffffffffffff…, this is 9.9.9" in (
        result.stderr
    )
    assert json.loads(out.read_text())["embeval"] == "9.9.9"


def test_resume_keeps_only_the_requested_tasks_and_says_so(cli, data_dir, tmp_path):
    path = task_file(tmp_path / "v.h5", data_dir, ["STS12", "STS16"])
    out = tmp_path / "r.json"
    assert cli("score", path, "--data", data_dir, "--out", out).exit_code == 0
    result = cli("score", path, "--data", data_dir, "--out", out, "--tasks", "STS16", "--resume")
    assert result.exit_code == 0
    assert "reused STS16; not kept (not scored in this run): STS12" in result.stderr
    assert list(json.loads(out.read_text())["tasks"]) == ["STS16"]


def test_resume_without_a_previous_file_scores_everything(cli, data_dir, tmp_path):
    path = task_file(tmp_path / "v.h5", data_dir, ["STS16"])
    out = tmp_path / "r.json"
    result = cli("score", path, "--data", data_dir, "--out", out, "--resume")
    assert result.exit_code == 0 and "nothing to resume" in result.stderr
    assert list(json.loads(out.read_text())["tasks"]) == ["STS16"]


@pytest.mark.parametrize("content", [b"{not json", b'{"format": "something-else", "tasks": {}}', b"[1, 2]"])
def test_resume_from_something_else_is_refused(cli, data_dir, tmp_path, content):
    path = task_file(tmp_path / "v.h5", data_dir, ["STS16"])
    out = tmp_path / "r.json"
    out.write_bytes(content)
    refused(
        cli("score", path, "--data", data_dir, "--out", out, "--resume"),
        str(out),
        "not an embeval results file; refusing to overwrite it",
    )
    untouched(out, content)


def test_library_interrupt_names_the_saved_tasks(data_dir, tmp_path, monkeypatch):
    path = task_file(tmp_path / "v.h5", data_dir, ["STS12", "STS13"])
    counting(monkeypatch, stop_at=2)
    with pytest.raises(score_module.Interrupted) as stop:
        score_module.score(path, data_dir, out=tmp_path / "r.json", progress=False, log=lambda m: None)
    assert isinstance(stop.value, KeyboardInterrupt)
    assert stop.value.saved == ["STS12"] and stop.value.kept_in == tmp_path / "r.json.partial"
    assert not (tmp_path / "r.json").exists()
    assert np.isfinite(
        json.loads((tmp_path / "r.json.partial").read_text())["tasks"]["STS12"]["results"]["all"]["pearson"]["mean"]
    )


def test_an_unfinished_runs_partial_is_kept_unless_told(cli, data_dir, tmp_path, monkeypatch):
    """A run without --resume never discards what an interrupted run kept: it stops in one line naming
    the tasks kept and the two ways on; --restart discards them, --resume reuses them."""
    path = task_file(tmp_path / "v.h5", data_dir, ["STS15", "STS16"])
    out = tmp_path / "r.json"
    counting(monkeypatch, stop_at=2)
    assert cli("score", path, "--data", data_dir, "--out", out, "--bootstrap", "0").exit_code == 130
    monkeypatch.undo()
    kept = progress_file(out).read_bytes()
    line = refused(cli("score", path, "--data", data_dir, "--out", out, "--bootstrap", "0"), str(progress_file(out)))
    assert "STS15" in line and "--resume" in line and "--restart" in line
    assert progress_file(out).read_bytes() == kept and not out.exists()
    result = cli("score", path, "--data", data_dir, "--out", out, "--bootstrap", "0", "--restart")
    assert result.exit_code == 0, result.stderr
    assert not progress_file(out).exists() and json.loads(out.read_text())["tasks"].keys() == {"STS15", "STS16"}


def test_the_code_fingerprint_covers_every_source_and_data_file(tmp_path, monkeypatch):
    """A copy of the package has the package's fingerprint; changing a .py, the kernels' C source, a task
    declaration or the published baselines changes it, a compiled file or another file does not."""
    from embeval import _version

    copy = tmp_path / "embeval"
    shutil.copytree(_version.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))

    def fingerprint():
        _version.code_fingerprint.cache_clear()
        monkeypatch.setattr(_version, "PACKAGE", copy)
        try:
            return _version.code_fingerprint()
        finally:
            monkeypatch.undo()
            _version.code_fingerprint.cache_clear()

    _version.code_fingerprint.cache_clear()
    original = code_fingerprint()
    assert fingerprint() == original
    (copy / "__pycache__").mkdir(exist_ok=True)
    (copy / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"compiled")
    (copy / "notes.txt").write_text("not code")
    assert fingerprint() == original
    seen = {original}
    for changed in ("run/resume.py", "_kernels.c", "tasks/senteval.toml", "reports/baselines.json"):
        path = copy / changed
        path.write_bytes(path.read_bytes() + b"\n")
        seen.add(fingerprint())
    assert len(seen) == 5
