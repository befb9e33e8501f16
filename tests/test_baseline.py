"""--baseline-bow-dim D: embeval's hashing bag of words is the exporter's, bit for bit, and is scored
beside the encoder with the same protocol."""

import json
import sys

import h5py
import numpy as np
from exporter_helpers import run_exporter
from reliability_helpers import task_file

from embeval.formats import sentences as export
from embeval.run import baseline
from embeval.tasks.registry import TASKS

TASKS_ = ["SICKEntailment", "STS15", "STS16"]


def test_baseline_vectors_are_the_exporters(tmp_path, data_dir):
    export.export([TASKS[n].load(data_dir) for n in ["STS16"]], tmp_path / "s")
    result = run_exporter(
        "bow_numpy.py", "--export", tmp_path / "s", "--out", tmp_path / "bow.h5", "--dim", "48", "--quiet"
    )
    assert result.returncode == 0, result.stderr
    texts = export.task_sentences(TASKS["STS16"].load(data_dir))
    path_before = list(sys.path)
    ours = baseline.encode(texts + ["", "  MiXeD  case\tand ünïcode "], 48)
    assert sys.path == path_before
    with h5py.File(tmp_path / "bow.h5") as f:
        theirs = f["STS16"][()]
    assert ours.dtype == np.float32 and np.array_equal(ours[: len(texts)], theirs)
    assert not ours[len(texts)].any() and abs(float(np.linalg.norm(ours[-1])) - 1) < 1e-6


def test_baseline_scores_like_a_bow_vectors_file(cli, tmp_path, data_dir):
    """The baseline's results equal those of scoring exporters/bow_numpy.py's vectors at dimension D."""
    vectors = task_file(tmp_path / "v.h5", data_dir, TASKS_, dim=6)
    out = tmp_path / "r.json"
    result = cli(
        "score",
        vectors,
        "--data",
        data_dir,
        "--tasks",
        ",".join(TASKS_),
        "--out",
        out,
        "--baseline-bow-dim",
        "64",
        "--save-predictions",
        "--bootstrap",
        "200",
        "--config",
        "prototype",
    )
    assert result.exit_code == 0, result.stderr
    assert "baseline: hashing bag of words (64-d), for context" in result.stdout
    record = json.loads(out.read_text())
    assert record["baseline"]["dim"] == 64 and record["config"]["baseline_bow_dim"] == 64
    export.export([TASKS[n].load(data_dir) for n in TASKS_], tmp_path / "s")
    assert (
        run_exporter(
            "bow_numpy.py", "--export", tmp_path / "s", "--out", tmp_path / "bow.h5", "--dim", "64", "--quiet"
        ).returncode
        == 0
    )
    bow_out = tmp_path / "bow.json"
    assert (
        cli(
            "score",
            tmp_path / "bow.h5",
            "--data",
            data_dir,
            "--tasks",
            ",".join(TASKS_),
            "--out",
            bow_out,
            "--bootstrap",
            "200",
            "--config",
            "prototype",
        ).exit_code
        == 0
    )
    direct = json.loads(bow_out.read_text())["tasks"]
    for task in TASKS_:
        ours, theirs = record["baseline"]["tasks"][task], direct[task]
        assert ours["results"] == theirs["results"] and ours["ci"] == theirs["ci"]
        assert ours["vectors"]["vectors_sha256"] == theirs["vectors"]["vectors_sha256"]
        assert ours["vectors"]["dim"] == 64 and record["tasks"][task]["vectors"]["dim"] == 6


def test_baseline_is_reused_on_resume(cli, tmp_path, data_dir):
    vectors = task_file(tmp_path / "v.h5", data_dir, ["STS16"], dim=6)
    out = tmp_path / "r.json"
    args = ["score", vectors, "--data", data_dir, "--tasks", "STS16", "--out", out, "--baseline-bow-dim", "32"]
    assert cli(*args).exit_code == 0
    first = json.loads(out.read_text())
    again = cli(*args, "--resume")
    assert again.exit_code == 0 and "reused STS16" in again.stderr
    assert (
        json.loads(out.read_text())["baseline"]["tasks"]["STS16"]["results"]
        == first["baseline"]["tasks"]["STS16"]["results"]
    )
    other = cli(*args[:-1], "48", "--resume")
    assert other.exit_code == 0 and "configuration changed" in other.stderr
