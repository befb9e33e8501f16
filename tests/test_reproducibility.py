"""Two runs on the same inputs and configuration: byte-identical JSON apart from the timing fields
(every key named `seconds`) on the CPU; within the stated tolerance on a GPU."""

import json
import math

import pytest
import torch
from reliability_helpers import comparable, task_file

import embeval
from embeval.formats.results import TIMING_KEYS, dumps, without_timing

TASKS = "SICKEntailment,STS12,STS16"


@pytest.fixture(scope="module")
def vectors(tmp_path_factory, data_dir):
    return task_file(tmp_path_factory.mktemp("repro") / "v.h5", data_dir, TASKS.split(","))


def two_runs(cli, vectors, data_dir, folder, *options):
    outs = [folder / "a.json", folder / "b.json"]
    for out in outs:
        result = cli("score", vectors, "--data", data_dir, "--tasks", TASKS, "--out", out, *options)
        assert result.exit_code == 0, result.stderr
    return outs


@pytest.fixture(scope="module")
def prototype_runs(tmp_path_factory, data_dir, vectors):
    from click.testing import CliRunner

    from embeval.cli.main import cli

    def run(*args):
        return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)

    return two_runs(
        run,
        vectors,
        data_dir,
        tmp_path_factory.mktemp("runs"),
        "--device",
        "cpu",
        "--config",
        "prototype",
        "--seed",
        "5",
    )


def assert_identical_apart_from_timing(a, b):
    assert comparable(a) == comparable(b)
    ra, rb = json.loads(a.read_text()), json.loads(b.read_text())
    assert ra["predictions"]["sha256"] == rb["predictions"]["sha256"]
    for record in (ra, rb):
        del record["predictions"]["file"]  # each run's own name
    assert dumps(without_timing(ra)) == dumps(without_timing(rb))
    assert ra["tasks"]["SICKEntailment"]["results"]["acc"] > 0


def test_cpu_runs_are_byte_identical_apart_from_timing(prototype_runs):
    assert_identical_apart_from_timing(*prototype_runs)


def test_lbfgs_runs_are_byte_identical_apart_from_timing(cli, data_dir, vectors, tmp_path):
    assert_identical_apart_from_timing(*two_runs(cli, vectors, data_dir, tmp_path, "--solver", "lbfgs"))


def test_the_record_says_how_it_was_computed(prototype_runs):
    record = json.loads(prototype_runs[0].read_text())
    assert record["embeval"] == embeval.__version__ and record["seed"] == 5 and record["config"]["seed"] == 5
    assert record["config"]["preset"] == "prototype" and record["config"]["classifier"]["optim"] == "rmsprop"
    assert record["device"].startswith("cpu (") and record["tasks"]["STS12"]["device"] == record["device"]
    assert {"python", "numpy", "scipy", "torch", "scikit-learn", "h5py"} <= set(record["versions"])
    for entry in record["tasks"].values():
        assert len(entry["vectors"]["vectors_sha256"]) == 64 and len(entry["data_sha256"]) == 64


def timing_values(value, found):
    if isinstance(value, dict):
        for key, item in value.items():
            if key in TIMING_KEYS:
                found.append(item)
            else:
                timing_values(item, found)
    elif isinstance(value, list):
        for item in value:
            timing_values(item, found)
    return found


def test_timing_lives_only_under_seconds_keys(prototype_runs):
    record = json.loads(prototype_runs[0].read_text())
    found = timing_values(record, [])
    assert len(found) == 1 + 3 and all(isinstance(x, (int, float)) and x >= 0 for x in found)
    stripped = without_timing(record)
    assert timing_values(stripped, []) == [] and stripped["tasks"].keys() == record["tasks"].keys()
    assert without_timing({"a": [{"seconds": 1, "b": 2}], "seconds": 3}) == {"a": [{"b": 2}]}


def close(x, y, tol):
    if isinstance(x, dict):
        return x.keys() == y.keys() and all(close(x[k], y[k], tol) for k in x)
    if isinstance(x, list):
        return len(x) == len(y) and all(close(u, v, tol) for u, v in zip(x, y))
    if isinstance(x, float) and isinstance(y, float):
        return math.isclose(x, y, rel_tol=tol, abs_tol=tol)
    return x == y


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_runs_agree_within_tolerance(cli, data_dir, vectors, tmp_path):
    """On a GPU: every figure within 1e-3 (relative or absolute; accuracies are in percent)."""
    a, b = two_runs(cli, vectors, data_dir, tmp_path, "--device", "cuda", "--config", "prototype")
    ra, rb = (without_timing(json.loads(p.read_text())) for p in (a, b))
    assert close(ra, rb, 1e-3)
