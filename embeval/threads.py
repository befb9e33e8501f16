"""The CPU threads embeval's torch work uses, and how it shares a busy CPU.

The thread count is what the process may actually run on: the CPUs of its affinity mask
(`os.sched_getaffinity`, e.g. `taskset`, a Slurm or Kubernetes cpuset), lowered to a container's CPU
quota (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`), not the machine's core
count. `--threads N` or OMP_NUM_THREADS / MKL_NUM_THREADS set it instead.

Sharing a busy CPU. A parallel region ends when its slowest thread does, so a thread the kernel
has descheduled (another process runs on its core) stalls the others, and threads that spin while
they wait take the CPU from the one they wait for. So the threads follow what the machine leaves
free, measured while running (`FairShare`, between the steps of the trainers and L-BFGS): the CPUs
other runnable tasks leave idle, at least one, at most the run's count. Alone, every thread works;
beside other work, fewer, down to one whose regions wait for no one. Idle OpenMP threads spin only
briefly before they sleep (GOMP_SPINCOUNT, set before torch loads its OpenMP runtime unless the user
chose a wait policy): long enough to catch the next of a step's back-to-back small operations, short
enough not to hold a core through the gaps between steps. Products split their outputs between
threads, never a sum, so the figures do not depend on the thread count (tests/test_threads.py): on
CPUs where MKL would split a product's sums between threads (seen on an Intel Xeon with AVX-512 at
two threads), its strict reproducible mode (MKL_CBWR=AUTO,STRICT, set unless the user set
MKL_CBWR; MKL reads it at its first product) keeps every product's bits whatever the thread count."""

from __future__ import annotations

import contextlib
import math
import operator
import os
import sys
import time
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Spins of an idle OpenMP thread before it sleeps (libgomp's default is 300,000 unless a wait policy
# is set; PASSIVE is 0): a short spin, which keeps a step's small operations as fast as with the
# default alone and lets the threads sleep between steps (bench/contention.py).
SPIN = {"GOMP_SPINCOUNT": "20000"}
# MKL's products give the same bits for any number of threads (strict conditional numerical
# reproducibility; its fastest code path for the CPU otherwise).
REPRODUCIBLE = {"MKL_CBWR": "AUTO,STRICT"}
WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
CGROUP_ROOT = Path("/sys/fs/cgroup")


def prepare_environment(environ: MutableMapping[str, str] | None = None) -> bool:
    """Let idle OpenMP threads spin only briefly (SPIN), unless the user chose a wait policy or a
    spin count, and MKL's products keep their bits whatever the thread count (REPRODUCIBLE), unless
    the user set MKL_CBWR. OpenMP reads its variables once, when torch loads it: they are not set
    (returns False) once torch is imported; MKL reads its own at its first product."""
    environ = os.environ if environ is None else environ
    for name, value in REPRODUCIBLE.items():
        environ.setdefault(name, value)
    if "torch" in sys.modules:
        return False
    if not any(name in environ for name in WAIT_VARIABLES):
        environ.update(SPIN)
    return True


def affinity_cpus() -> int:
    """CPUs this process may run on (its affinity mask), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _own_cgroup_dirs(root: Path, controller: str | None) -> list[Path]:
    """Where this process's cgroup files may be: its own cgroup (/proc/self/cgroup), then the root
    (inside a container the root is the container's cgroup)."""
    base = root if controller is None else root / controller
    dirs = []
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            if (controller is None and names == "") or (controller is not None and controller in names.split(",")):
                dirs.append(base / path.lstrip("/"))
    except (OSError, ValueError):
        pass
    return dirs + [base]


def quota_cpus(root: Path = CGROUP_ROOT) -> float | None:
    """The container's CPU quota in CPUs (quota / period), or None when there is none."""
    for where in _own_cgroup_dirs(root, None):  # cgroup v2: "max 100000" or "150000 100000"
        try:
            fields = (where / "cpu.max").read_text().split()
            if fields[0] == "max":
                return None
            share = int(fields[0]) / int(fields[1])
        except (OSError, ValueError, IndexError, ZeroDivisionError):
            continue
        return share if share > 0 else None
    for controller in ("cpu", "cpu,cpuacct"):  # cgroup v1: a quota of -1 is none
        for where in _own_cgroup_dirs(root, controller):
            try:
                quota = int((where / "cpu.cfs_quota_us").read_text())
                period = int((where / "cpu.cfs_period_us").read_text())
            except (OSError, ValueError):
                continue
            return None if quota <= 0 or period <= 0 else quota / period
    return None


@dataclass(frozen=True)
class Threads:
    """The threads a run uses, where the count came from, and the CPUs the process may use."""

    count: int
    source: str  # "--threads", an environment variable, "CPU affinity" or "CPU quota"
    available: int

    def to_record(self) -> dict[str, Any]:
        return {"count": self.count, "from": self.source, "available_cpus": self.available}


def available(root: Path = CGROUP_ROOT) -> tuple[int, str]:
    """(CPUs the process may use, what limits them): the affinity mask, lowered to the CPU quota
    rounded down (a thread beyond the quota is throttled, and stalls its region)."""
    cpus, source = affinity_cpus(), "CPU affinity"
    quota = quota_cpus(root)
    if quota is not None and max(1, math.floor(quota)) < cpus:
        cpus, source = max(1, math.floor(quota)), "CPU quota"
    return cpus, source


def _index(value: Any) -> int | None:
    try:
        return operator.index(value)
    except TypeError:
        return None


PER_CPU = 4  # --threads may ask for at most this many threads per CPU the process may use


def choose(
    requested: int | None = None,
    environ: Mapping[str, str] | None = None,
    root: Path = CGROUP_ROOT,
    capped: bool = True,
) -> Threads:
    """The run's threads: `requested` (--threads, at most PER_CPU per CPU the process may use), else
    OMP_NUM_THREADS or MKL_NUM_THREADS (a positive integer; anything else is ignored, as OpenMP ignores
    it), else the CPUs the process may use. capped=False: `requested` runs elsewhere (a Ray cluster's
    nodes), not bounded by this machine's CPUs."""
    from embeval.errors import EmbevalError

    environ = os.environ if environ is None else environ
    cpus, source = available(root)
    if requested is not None:
        whole = None if isinstance(requested, bool) else _index(requested)  # numpy's integers too
        if whole is None or whole < 1:
            raise EmbevalError(f"must be an integer >= 1, got {requested!r}", file="--threads")
        requested = whole
        most = PER_CPU * cpus
        if capped and requested > most:
            raise EmbevalError(
                f"{requested} threads on the {cpus} CPU{'s' if cpus > 1 else ''} this process may use ({source}): "
                f"at most {most} ({PER_CPU} per CPU); threads beyond the CPUs wait for each other and only slow "
                "the run",
                file="--threads",
            )
        return Threads(requested, "--threads", cpus)
    for name in THREAD_VARIABLES:
        value = environ.get(name, "").strip()
        if value.isdigit() and int(value) >= 1:
            return Threads(int(value), name, cpus)
    return Threads(cpus, source, cpus)


@contextlib.contextmanager
def using(threads: Threads) -> Iterator[Threads]:
    """torch's intra-op threads set to `threads.count` for the block (restored after)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads.count)
    try:
        yield threads
    finally:
        torch.set_num_threads(before)


def _running(path: str) -> bool:
    """Whether the task whose stat file is `path` is running or ready to run."""
    try:
        with open(path) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "R"
    except (OSError, IndexError):
        return False


def _own_running(tasks: str = "/proc/self/task") -> int:
    """This process's threads, and its child processes (the HDF5 guard's child still exiting), that
    are running or ready to run now (at least the caller): its own work, not other work."""
    running = 0
    try:
        names = os.listdir(tasks)
    except OSError:
        return 1
    for name in names:
        running += _running(f"{tasks}/{name}/stat")
        try:
            with open(f"{tasks}/{name}/children") as f:
                children = f.read().split()
        except OSError:
            continue
        running += sum(_running(f"/proc/{child}/stat") for child in children)
    return max(1, running)


def others_runnable(samples: int = 3, gap: float = 0.001, path: str = "/proc/loadavg") -> float | None:
    """Tasks running or ready to run on the machine besides this process's own, now: the median of a
    few readings of /proc/loadavg's count of runnable tasks, less this process's running threads (the
    reader, and OpenMP threads still spinning after the last step). None where there is no such file."""
    counts = []
    for i in range(samples):
        try:
            with open(path) as f:
                counts.append(int(f.read().split()[3].split("/")[0]))
        except (OSError, ValueError, IndexError):
            return None
        if i + 1 < samples:
            time.sleep(gap)
    return float(max(0, sorted(counts)[len(counts) // 2] - _own_running()))


RECENT_S = 0.25  # a reading of the machine's other work this recent is reused (each reading sleeps ~2 ms)
_recent: tuple[Any, float, float | None] = (None, 0.0, None)  # (the probe read, when, its reading)


def recent_others_runnable() -> float | None:
    """others_runnable(), a reading under RECENT_S (and FairShare.CHECK_EVERY_S) old reused: a run's
    many short sections (each task's intervals, ...) measure the machine once, not each."""
    global _recent
    probe, now = others_runnable, time.monotonic()
    last_probe, when, reading = _recent
    if last_probe is probe and now - when < min(RECENT_S, FairShare.CHECK_EVERY_S):
        return reading
    reading = probe()
    _recent = (probe, time.monotonic(), reading)
    return reading


class FairShare:
    """torch's threads adapted while running to the CPUs other work leaves idle: at most `most` (the
    run's count), at least one. `check()` between steps measures at most every CHECK_EVERY_S; a
    machine whose other work fills every CPU gets one thread, whose regions wait for no one."""

    CHECK_EVERY_S = 1.0

    def __init__(self, most: int, probe: Any = None, clock: Any = time.monotonic) -> None:
        self.most, self.clock = most, clock
        self.probe = probe or recent_others_runnable
        self.cpus = os.cpu_count() or most
        self.next_check = clock()  # the first check measures
        self.counts: list[int] = []  # the counts chosen, in order (a record for benches and tests)

    def wanted(self) -> int | None:
        others = self.probe()
        if others is None:
            return None
        return max(1, min(self.most, self.cpus - int(round(others))))

    def share(self) -> int | None:
        """The count other work leaves this process now, measured at most every CHECK_EVERY_S (the
        last one meanwhile; None where it cannot be measured). It sets nothing."""
        now = self.clock()
        if now < self.next_check:
            return self.counts[-1] if self.counts else None
        self.next_check = now + self.CHECK_EVERY_S
        count = self.wanted()
        if count is not None and (not self.counts or self.counts[-1] != count):
            self.counts.append(count)
        return count

    def check(self) -> None:
        count = self.share()
        if count is None:
            return
        import torch

        if count != torch.get_num_threads():
            torch.set_num_threads(count)


def _no_check() -> None:
    return None


@contextlib.contextmanager
def one_thread(device: Any = None) -> Iterator[None]:
    """torch's CPU work on one thread inside (many small operations: none waits for another thread);
    the count as before after. On a GPU nothing changes."""
    import torch

    if device is not None and torch.device(device).type != "cpu":
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def fair_share(device: Any = None) -> Iterator[Any]:
    """The block's threads follow a FairShare of the run's count (restored after); yields its check,
    to call between steps. On a GPU, or with one thread, nothing changes."""
    import torch

    before = torch.get_num_threads()
    if (device is not None and torch.device(device).type != "cpu") or before == 1:
        yield _no_check
        return
    share = FairShare(before)
    try:
        share.check()
        yield share.check
    finally:
        torch.set_num_threads(before)
