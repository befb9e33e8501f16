"""The threads embeval uses (affinity, CPU quota, --threads, the environment), that the figures do
not depend on them, and the progress line's time bound under a changing rate."""

import functools
import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from reliability_helpers import task_file

from embeval import threads
from embeval.run.progress import RATE_WINDOW_S, TaskProgress
from embeval.settings import ClassifierSettings
from embeval.train import batched
from embeval.train.features import DenseFeatures


def cgroup_v1(root, quota, period=100000):
    for where in (root / "cpu", root / "cpu,cpuacct"):
        where.mkdir(parents=True, exist_ok=True)
        (where / "cpu.cfs_quota_us").write_text(f"{quota}\n")
        (where / "cpu.cfs_period_us").write_text(f"{period}\n")
    return root


def test_threads_default_to_the_affinity_mask(tmp_path):
    chosen = threads.choose(environ={}, root=tmp_path)  # no cgroup files: no quota
    assert chosen == threads.Threads(len(os.sched_getaffinity(0)), "CPU affinity", len(os.sched_getaffinity(0)))


def test_a_cpu_quota_lowers_the_threads_rounded_down(tmp_path):
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert threads.quota_cpus(tmp_path) == 1.5
    chosen = threads.choose(environ={}, root=tmp_path)
    assert (chosen.count, chosen.source) == (1, "CPU quota") or len(os.sched_getaffinity(0)) == 1
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert threads.quota_cpus(tmp_path) is None


def test_cgroup_v1_quota(tmp_path):
    assert threads.quota_cpus(cgroup_v1(tmp_path, 50000)) == 0.5
    assert threads.choose(environ={}, root=tmp_path).count == 1
    assert threads.quota_cpus(cgroup_v1(tmp_path, -1)) is None


def test_threads_option_and_environment_override(tmp_path):
    assert threads.choose(3, environ={"OMP_NUM_THREADS": "2"}, root=tmp_path).to_record()["from"] == "--threads"
    chosen = threads.choose(environ={"OMP_NUM_THREADS": "5"}, root=tmp_path)
    assert (chosen.count, chosen.source) == (5, "OMP_NUM_THREADS")
    assert threads.choose(environ={"MKL_NUM_THREADS": "3"}, root=tmp_path).count == 3
    assert threads.choose(environ={"OMP_NUM_THREADS": "four"}, root=tmp_path).source == "CPU affinity"


def test_the_steps_follow_a_fair_share_and_the_count_is_restored(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.setattr(threads, "others_runnable", lambda: 50.0)  # every CPU busy with other work
    with threads.fair_share("cpu") as check:
        check()
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_the_spin_count_is_set_before_torch_only_and_never_over_the_users_choice():
    env = {}
    assert threads.prepare_environment(env) is False and env == threads.REPRODUCIBLE  # torch is loaded here
    code = "import os, embeval; print(os.environ.get('GOMP_SPINCOUNT'))"
    clean = {k: v for k, v in os.environ.items() if k not in threads.WAIT_VARIABLES}
    run = functools.partial(subprocess.run, [sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run(env=clean).stdout.strip() == threads.SPIN["GOMP_SPINCOUNT"]
    assert run(env={**clean, "OMP_WAIT_POLICY": "PASSIVE"}).stdout.strip() == "None"
    assert run(env={**clean, "GOMP_SPINCOUNT": "7"}).stdout.strip() == "7"


def test_mkl_keeps_its_products_bits_whatever_the_thread_count_unless_the_user_chose():
    """Products whose sums MKL splits between threads by default on some CPUs (a one-row product
    with 768 x 300, two threads, on an Intel Xeon with AVX-512): with embeval imported first, one
    thread and two give the same bits; a user's own MKL_CBWR is kept."""
    code = (
        "import embeval, torch; g = torch.Generator().manual_seed(0); "
        "a = torch.randn(1, 768, generator=g); b = torch.randn(768, 300, generator=g); "
        "torch.set_num_threads(1); one = a @ b; torch.set_num_threads(2); "
        "import os; print(torch.equal(one, a @ b), os.environ['MKL_CBWR'])"
    )
    clean = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}
    run = functools.partial(subprocess.run, [sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run(env=clean).stdout.split() == ["True", threads.REPRODUCIBLE["MKL_CBWR"]]
    assert run(env={**clean, "MKL_CBWR": "COMPATIBLE"}).stdout.split()[1] == "COMPATIBLE"


def test_others_runnable_leaves_out_this_process_own_threads(tmp_path, monkeypatch):
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("0.50 0.40 0.30 5/312 4242\n")
    monkeypatch.setattr(threads, "_own_running", lambda: 2)  # the reader and a spinning OpenMP thread
    assert threads.others_runnable(path=str(loadavg)) == 3.0
    monkeypatch.setattr(threads, "_own_running", lambda: 9)
    assert threads.others_runnable(path=str(loadavg)) == 0.0
    monkeypatch.undo()
    assert threads._own_running() >= 1  # this thread is running
    assert threads._own_running(str(tmp_path / "none")) == 1


def train(nhid, seed=3):
    rng = np.random.default_rng(seed)
    x = torch.from_numpy(rng.standard_normal((600, 24)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 3, 600))
    groups = [batched.Group(np.arange(0, 400)), batched.Group(np.arange(200, 600), np.arange(0, 100))]
    settings = ClassifierSettings(nhid=nhid, batch_size=32, tenacity=1, epoch_size=1, max_epoch=4, dropout=0.1)
    return batched.train(DenseFeatures(x), y, 3, groups, [1e-4, 1e-3], settings, 1111, torch.device("cpu"))


@pytest.mark.parametrize("nhid", [0, 8])
def test_the_trainer_gives_the_same_bits_on_one_thread_and_on_several(monkeypatch, nhid):
    """Steps on several threads give the same weights as on one (the products split their outputs
    between threads, not their sums)."""
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        alone = train(nhid)
        monkeypatch.setattr(threads, "others_runnable", lambda: 0.0)  # an idle machine: every thread works
        torch.set_num_threads(max(2, before))
        several = train(nhid)
    finally:
        torch.set_num_threads(before)
    for a, b in zip(alone.params, several.params):
        assert torch.equal(a, b)
    assert np.array_equal(alone.best_accuracy, several.best_accuracy)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_the_time_left_follows_the_recent_rate():
    """60 passes at 1 s, then the machine gets busy: 10 s a pass. The bound follows within a window
    (the stage's average would still say about 2.4 s a pass), and recovers when it gets quiet."""
    clock = Clock()
    progress = TaskProgress("MR", stream=io.StringIO(), tty=False, clock=clock)
    progress.stage("training", total=200, unit="pass")
    for done in range(1, 61):
        clock.now += 1
        progress.step(done)
    assert progress.seconds_left(clock.now, 60) == pytest.approx(140 * 1.0)
    done = 60
    while clock.now < 60 + RATE_WINDOW_S + 10:
        clock.now += 10
        done += 1
        progress.step(done)
    assert progress.seconds_left(clock.now, done) == pytest.approx((200 - done) * 10, rel=0.2)
    clock.now += 35  # a pass that is taking long already counts
    assert progress.seconds_left(clock.now, done) > (200 - done) * 10
    for _ in range(int(RATE_WINDOW_S) + 30):
        clock.now += 1
        done += 1
        progress.step(done)
    assert progress.seconds_left(clock.now, done) == pytest.approx((200 - done) * 1.0, rel=0.1)


def figures(path):
    record = json.loads(path.read_text())
    return {task: entry["results"] for task, entry in record["tasks"].items()}, record["threads"]


@pytest.mark.slow
def test_threads_option_is_recorded_and_leaves_the_figures(cli, data_dir, tmp_path):
    vectors = task_file(tmp_path / "v.h5", data_dir, ["SICKEntailment"], dim=16)
    runs = {}
    for n in (1, 2):
        out = tmp_path / f"r{n}.json"
        done = cli("score", vectors, "--data", data_dir, "--out", out, "--bootstrap", "0", "--threads", n, "--quiet")
        assert done.exit_code == 0, done.output
        runs[n] = figures(out)
    assert runs[1][0] == runs[2][0]
    assert runs[1][1]["count"] == 1 and runs[2][1]["from"] == "--threads"
    bad = cli("score", vectors, "--data", data_dir, "--out", tmp_path / "x.json", "--threads", "0")
    assert bad.exit_code == 2 and "--threads" in bad.output and len(bad.output.strip().splitlines()) == 1
    assert not (tmp_path / "x.json").exists()


def test_a_fair_share_follows_the_idle_cpus(monkeypatch):
    readings = iter([0.0, 4.0, 1.0])
    clock = Clock()
    share = threads.FairShare(4, probe=lambda: next(readings), clock=clock)
    monkeypatch.setattr(share, "cpus", 4)
    before = torch.get_num_threads()
    try:
        share.check()
        assert torch.get_num_threads() == 4
        share.check()  # within CHECK_EVERY_S: not measured again
        clock.now += threads.FairShare.CHECK_EVERY_S
        share.check()
        assert torch.get_num_threads() == 1  # every CPU busy with other work
        clock.now += threads.FairShare.CHECK_EVERY_S
        share.check()
        assert share.counts == [4, 1, 3]
    finally:
        torch.set_num_threads(before)
    assert threads.others_runnable(path="/nonexistent") is None


def test_lbfgs_gives_the_same_bits_whatever_its_threads_do_while_it_runs(monkeypatch):
    """One thread, two, and a count that changes at every iteration (measured others: 0, 1, 0, ...)."""
    from embeval.train import lbfgs

    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((900, 16)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 3, 900))
    folds = [np.setdiff1d(np.arange(900), np.arange(i, 900, 3)) for i in range(3)]
    C = np.array([[0.5, 4.0]] * 3)
    monkeypatch.setattr(threads.FairShare, "CHECK_EVERY_S", 0.0)
    before = torch.get_num_threads()
    runs = []
    try:
        for most, readings in ((1, None), (2, [0.0]), (2, [0.0, 1.0])):
            torch.set_num_threads(most)
            if readings is not None:
                calls = iter(range(10**9))
                monkeypatch.setattr(threads, "others_runnable", lambda r=readings, c=calls: r[next(c) % len(r)])
            runs.append(lbfgs.fit(DenseFeatures(x), y, 3, folds, C, torch.device("cpu"))[0])
    finally:
        torch.set_num_threads(before)
    assert all(torch.equal(runs[0], other) for other in runs[1:])


def test_own_running_counts_this_process_running_children():
    """A child process of this one that runs (the HDF5 guard's child tearing down its copy of the
    process) is this process's own work, not other work that FairShare leaves CPUs to."""
    import time

    alone = threads._own_running()
    pid = os.fork()
    if pid == 0:
        end = time.monotonic() + 3
        while time.monotonic() < end:  # runs, never sleeps
            pass
        os._exit(0)
    try:
        deadline, counted = time.monotonic() + 2.5, 0
        while time.monotonic() < deadline and counted <= alone:
            counted = threads._own_running()
        assert counted > alone
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
