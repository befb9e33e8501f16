"""`embeval sweep --ray`: a local Ray with two workers scores as the in-process sweep; a unit whose
worker is killed is retried and the sweep completes."""

import functools
import json
import os
import sys

import pytest
from reliability_helpers import task_file

from embeval.run.config import build
from embeval.run.sweep import sweep

# CI sets EMBEVAL_REQUIRE_RAY=1: there a missing Ray fails instead of skipping.
ray = __import__("ray") if os.environ.get("EMBEVAL_REQUIRE_RAY") else pytest.importorskip("ray")

TASKS = ["TREC", "CR"]


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray for the module: two worker CPUs, no dashboard; stopped at the end."""
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=100 << 20, log_to_driver=False)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def swept(tmp_path_factory, data_dir):
    """Three small files and their in-process sweep: (paths, results folder)."""
    root = tmp_path_factory.mktemp("ray")
    paths = [str(task_file(root / f"enc{i}.h5", data_dir, TASKS, dim=8, seed=7 * i)) for i in range(3)]
    sweep(paths, data_dir, TASKS, root / "local", "cpu", config(), dims=[4, 8], log=quiet)
    return paths, root / "local"


def config():
    return build("prototype", kfold=3, bootstrap=100)


def quiet(message):
    pass


def results(folder):
    """Every results file of a sweep folder, without timing and device."""
    out = {}
    for path in sorted(folder.glob("*.results.json")):
        record = json.loads(path.read_text())
        out[path.name] = {
            t: {k: v for k, v in e.items() if k not in ("seconds", "device")} for t, e in record["tasks"].items()
        }
    return out


def test_ray_sweep_equals_the_in_process_sweep(local_ray, swept, data_dir, tmp_path):
    from embeval.run.sweep_ray import RayRunner

    paths, local = swept
    pids = tmp_path / "pids"
    pids.mkdir()
    summary = sweep(
        paths,
        data_dir,
        TASKS,
        tmp_path / "ray",
        "cpu",
        config(),
        dims=[4, 8],
        log=quiet,
        runner=RayRunner(None, "cpu", wrap=functools.partial(note_worker, folder=str(pids))),
    )
    assert all(s["complete"] for s in summary["sources"]) and len(summary["sources"]) == 6
    assert results(tmp_path / "ray") == results(local) and len(results(local)) == 6
    workers = {int(p.name) for p in pids.iterdir()}
    assert len(workers) == 2 and os.getpid() not in workers


def note_worker(units, device, run, folder):
    """Leaves the worker's process id in `folder`, then executes the group."""
    open(os.path.join(folder, str(os.getpid())), "w").close()
    return run(units, device)


def kill_first_attempt(units, device, run, marker):
    """Kills its worker process the first time a TREC group of four-dimensional sources runs."""
    if units[0].task == "TREC" and units[0].source.dims == 4 and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)
    return run(units, device)


def test_a_unit_whose_worker_is_killed_is_retried(local_ray, swept, data_dir, tmp_path):
    from embeval.run.sweep_ray import RayRunner

    paths, local = swept
    marker = tmp_path / "killed"
    lines = []
    runner = RayRunner(None, "cpu", wrap=functools.partial(kill_first_attempt, marker=str(marker)))
    summary = sweep(
        paths, data_dir, TASKS, tmp_path / "ray", "cpu", config(), dims=[4, 8], log=lines.append, runner=runner
    )
    assert marker.exists()
    assert [line for line in lines if "retrying once" in line and "TREC" in line]
    assert all(s["complete"] for s in summary["sources"])
    assert results(tmp_path / "ray") == results(local)


def test_the_command_runs_with_ray(local_ray, swept, data_dir, tmp_path, cli):
    paths, local = swept
    result = cli(
        "sweep",
        *paths,
        "--data",
        data_dir,
        "--tasks",
        "TREC,CR",
        "--config",
        "prototype",
        "--kfold",
        "3",
        "--bootstrap",
        "100",
        "--device",
        "cpu",
        "--dims",
        "4,8",
        "--out-dir",
        tmp_path / "cli",
        "--quiet",
        "--ray",
    )
    assert result.exit_code == 0, result.stderr
    assert results(tmp_path / "cli") == results(local)
    assert ray.is_initialized()  # the command used the Ray already running here and left it running


def note_limits(units, device, run, folder):
    """Leaves the worker's memory budget and torch threads in `folder`, then executes the group."""
    import torch

    from embeval.memory import memory_limit

    name = f"{os.getpid()}-{units[0].task}-{units[0].source.dims}"
    with open(os.path.join(folder, name), "w") as out:
        json.dump({"budget": memory_limit(), "threads": torch.get_num_threads()}, out)
    return run(units, device)


def test_workers_keep_to_the_memory_budget_and_the_threads_asked(local_ray, swept, data_dir, tmp_path):
    from embeval.run.sweep_ray import RayRunner

    paths, local = swept
    seen = tmp_path / "seen"
    seen.mkdir()
    runner = RayRunner(None, "cpu", wrap=functools.partial(note_limits, folder=str(seen)), budget=300 << 20, threads=2)
    summary = sweep(paths, data_dir, TASKS, tmp_path / "ray", "cpu", config(), dims=[4, 8], log=quiet, runner=runner)
    assert all(s["complete"] for s in summary["sources"])
    assert results(tmp_path / "ray") == results(local)
    notes = [json.loads(p.read_text()) for p in seen.iterdir()]
    assert len(notes) >= 2 and all(n == {"budget": 300 << 20, "threads": 2} for n in notes)

    runner = RayRunner(None, "cpu", wrap=functools.partial(note_limits, folder=str(seen)))
    for p in seen.iterdir():
        p.unlink()
    sweep(paths[:1], data_dir, ["TREC"], tmp_path / "default", "cpu", config(), log=quiet, runner=runner)
    notes = [json.loads(p.read_text()) for p in seen.iterdir()]
    assert notes and all(n == {"budget": None, "threads": 1} for n in notes)


def test_more_threads_than_any_node_has_cpus_is_refused(local_ray):
    from embeval.errors import EmbevalError
    from embeval.run.sweep_ray import RayRunner

    with pytest.raises(EmbevalError, match=r"3 threads per task, but the largest node of the Ray cluster has 2 CPUs"):
        RayRunner(None, "cpu", threads=3)
    with pytest.raises(EmbevalError, match=r"must be an integer >= 1, got 0"):
        RayRunner(None, "cpu", threads=0)
    assert ray.is_initialized()  # the Ray it joined is left running


def test_the_command_refuses_more_threads_than_the_cluster_has(local_ray, swept, data_dir, tmp_path, cli):
    paths, _ = swept
    result = cli(
        "sweep",
        paths[0],
        "--data",
        data_dir,
        "--tasks",
        "TREC",
        "--out-dir",
        tmp_path / "out",
        "--threads",
        "3",
        "--ray",
    )
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "embeval: error: --threads: 3 threads per task, but the largest node of the Ray cluster has 2 CPUs"
    ]
    assert not (tmp_path / "out").exists()


def test_a_local_ray_is_not_started_for_more_threads_than_the_machine_has(swept, data_dir, tmp_path):
    """Checked before Ray starts: one line on stderr, nothing of Ray's before it."""
    import subprocess

    paths, _ = swept
    command = [sys.executable, "-m", "embeval", "sweep", paths[0], "--data", str(data_dir), "--tasks", "TREC"]
    command += ["--out-dir", str(tmp_path / "out"), "--threads", "100000", "--ray"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"embeval: error: --threads: 100000 threads per task, but this machine has {os.cpu_count()} CPUs"
    ]
    assert not (tmp_path / "out").exists()


def test_a_ray_task_runs_torch_on_the_cpus_it_was_granted():
    from types import SimpleNamespace

    from embeval.run import sweep_ray

    def fake(resources):
        return SimpleNamespace(get_runtime_context=lambda: SimpleNamespace(get_assigned_resources=lambda: resources))

    assert sweep_ray._granted_cpus(fake({"CPU": 1.0})) == 1
    assert sweep_ray._granted_cpus(fake({"CPU": 4.0, "GPU": 0.25})) == 4
    assert sweep_ray._granted_cpus(fake({"GPU": 0.5})) == 1

    def outside():
        raise RuntimeError("not in a Ray task")

    assert sweep_ray._granted_cpus(SimpleNamespace(get_runtime_context=outside)) == 1
