"""The test suite's cost: CPU seconds and peak memory of every test, and of the whole run.

Runs pytest in this process with a small plugin, loaded by every pytest-xdist worker too (the
suite's default `-n 2`: docs/testing.md). Per test (setup, call and teardown together, so a
shared fixture's cost falls on the first test that uses it): CPU seconds of the test process and of
the children it waited for (getrusage deltas: these do not depend on how loaded the machine is,
unlike wall time), wall seconds, and the peak memory of the process tree (the test process and all
its descendants), sampled from /proc every --interval seconds while the test runs: resident
memory summed over the processes (RSS, an upper bound: pages the processes share count once per
process) and proportional set size (PSS: shared pages split between their users, what the tree
really takes). Long-lived descendants (a server kept for a module) count their CPU when reaped.
With workers, a test's figures are its worker's (the worker and its descendants), and the run's
peak is that of the whole tree (this process, the workers and theirs), sampled here.

    python bench/suite.py [--out bench/results/suite.json] [--top 25] [--interval 0.2] [-- PYTEST_ARGS]
    e.g. python bench/suite.py --out bench/results/suite_quick.json -- -q -m "not slow"

Run from anywhere (pytest runs in the checkout). Prints the tests that took the most CPU and the
most memory, and the totals; writes every test's figures to --out (JSON). Linux only (/proc).
"""

import argparse
import json
import os
import platform
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = os.sysconf("SC_PAGE_SIZE")
# Where each test process writes its tests' records, and the sampling interval it uses (set by main()).
RECORDS = "EMBEVAL_SUITE_RECORDS"
INTERVAL = "EMBEVAL_SUITE_INTERVAL"


def descendants(pid):
    """The process ids below `pid` (children of every thread, recursively)."""
    found, stack = [], [pid]
    while stack:
        parent = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{parent}/task/{tid}/children") as f:
                    kids = [int(p) for p in f.read().split()]
            except OSError:
                continue
            found.extend(kids)
            stack.extend(kids)
    return found


def rss(pid):
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def pss(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


class Sampler(threading.Thread):
    """Samples the memory of this process's tree; `window()` starts a new per-test peak. `spent`: the
    CPU seconds sampling took (subtracted from the tests' figures)."""

    def __init__(self, interval, pss_every=5):
        super().__init__(daemon=True)
        self.interval = interval
        self.pss_every = pss_every  # PSS (smaps_rollup) costs the kernel more than RSS: every 5th sample
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.peak_rss = self.peak_pss = 0  # the whole run
        self.window_rss = self.window_pss = 0  # since window()
        self.processes = 1
        self.spent = 0.0
        self.count = 0

    def sample(self, with_pss=True):
        start = time.thread_time()
        pids = [os.getpid(), *descendants(os.getpid())]
        total_rss = sum(rss(p) for p in pids)
        total_pss = sum(pss(p) for p in pids) if with_pss else 0
        with self.lock:
            self.peak_rss, self.peak_pss = max(self.peak_rss, total_rss), max(self.peak_pss, total_pss)
            self.window_rss, self.window_pss = max(self.window_rss, total_rss), max(self.window_pss, total_pss)
            self.processes = max(self.processes, len(pids))
            self.spent += time.thread_time() - start
        return total_rss, total_pss

    def run(self):
        while not self.stop.wait(self.interval):
            self.count += 1
            self.sample(with_pss=self.count % self.pss_every == 0)

    def window(self):
        """Start a new window; returns the memory now (rss, pss)."""
        now = self.sample()
        with self.lock:
            self.window_rss, self.window_pss = now
            self.processes = 1
        return now

    def close_window(self):
        self.sample()
        with self.lock:
            return self.window_rss, self.window_pss, self.processes


def cpu_seconds():
    """CPU seconds (user + system) of this process and of its reaped children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


class Measure:
    """The pytest plugin of a process that runs tests: one record per test, written at the end of
    the session to the folder $EMBEVAL_SUITE_RECORDS names."""

    def __init__(self, sampler, name):
        self.sampler = sampler
        self.name = name
        self.tests = []
        self.outcome = "passed"
        self.phases = {}

    def pytest_sessionfinish(self, session):
        self.sampler.stop.set()
        records = Path(os.environ[RECORDS]) / f"{self.name}.json"
        records.write_text(json.dumps({"tests": self.tests, "sampling_cpu_s": self.sampler.spent}))

    def phase(self, name):
        """Wraps one phase (setup, call, teardown): its CPU seconds into self.phases."""
        own0, kids0 = cpu_seconds()
        spent0 = self.sampler.spent
        yield
        own1, kids1 = cpu_seconds()
        self.phases[name] = round(own1 - own0 - (self.sampler.spent - spent0) + kids1 - kids0, 3)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item):
        yield from self.phase("setup")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        yield from self.phase("call")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item):
        yield from self.phase("teardown")

    def pytest_runtest_logreport(self, report):
        if report.failed:
            self.outcome = "failed"
        elif report.skipped and self.outcome == "passed":
            self.outcome = "skipped"

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        """Wraps pytest's own protocol (setup, call, teardown)."""
        self.outcome = "passed"
        self.phases = {}
        start_rss, start_pss = self.sampler.window()
        own0, kids0 = cpu_seconds()
        spent0 = self.sampler.spent
        wall0 = time.perf_counter()
        yield
        wall = time.perf_counter() - wall0
        own1, kids1 = cpu_seconds()
        spent = self.sampler.spent - spent0
        peak_rss, peak_pss, processes = self.sampler.close_window()
        self.tests.append(
            {
                "test": item.nodeid,
                "worker": self.name,
                "outcome": self.outcome,
                "slow": item.get_closest_marker("slow") is not None,
                "cpu_s": round(own1 - own0 - spent + kids1 - kids0, 3),
                "children_cpu_s": round(kids1 - kids0, 3),
                "setup_cpu_s": self.phases.get("setup", 0.0),
                "teardown_cpu_s": self.phases.get("teardown", 0.0),
                "wall_s": round(wall, 3),
                "peak_rss_bytes": peak_rss,
                "peak_pss_bytes": peak_pss,
                "start_rss_bytes": start_rss,
                "start_pss_bytes": start_pss,
                "processes": processes,
            }
        )


def pytest_configure(config):
    """Loaded by name (`-p suite`) in every test process: the process that runs tests (a worker, or
    pytest itself with -n 0) measures them; a controller only hands tests out."""
    if RECORDS not in os.environ or config.pluginmanager.has_plugin("suite-measure"):
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None and getattr(config.option, "numprocesses", None):
        return  # the controller: its workers run the tests
    sampler = Sampler(float(os.environ[INTERVAL]))
    sampler.start()
    config.pluginmanager.register(Measure(sampler, worker or "main"), "suite-measure")


def files(rows):
    """{test file: CPU and wall seconds of its tests}, the most CPU first."""
    totals = {}
    for row in rows:
        figures = totals.setdefault(row["test"].split("::")[0], {"cpu_s": 0.0, "wall_s": 0.0})
        figures["cpu_s"] += row["cpu_s"]
        figures["wall_s"] += row["wall_s"]
    ordered = sorted(totals.items(), key=lambda item: -item[1]["cpu_s"])
    return {name: {k: round(v, 1) for k, v in figures.items()} for name, figures in ordered}


def gib(n):
    return f"{n / 2**30:.2f}"


def table(rows, key, top):
    lines = [f"{'cpu s':>8} {'wall s':>8} {'peak GiB':>9} {'pss GiB':>8} {'procs':>5}  test"]
    for row in sorted(rows, key=lambda r: -r[key])[:top]:
        lines.append(
            f"{row['cpu_s']:8.1f} {row['wall_s']:8.1f} {gib(row['peak_rss_bytes']):>9} "
            f"{gib(row['peak_pss_bytes']):>8} {row['processes']:5d}  {row['test']}"
        )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "suite.json")
    parser.add_argument("--top", type=int, default=25, help="tests listed by CPU and by memory")
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between memory samples")
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments (default: -q)")
    args = parser.parse_args()

    os.chdir(ROOT)
    records = Path(tempfile.mkdtemp(prefix="embeval-suite-"))
    # The test processes (workers are started with this environment) load this file as plugin `suite`.
    path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(ROOT / "bench") + (os.pathsep + path if path else "")
    sys.path.insert(0, str(ROOT / "bench"))
    os.environ.update({RECORDS: str(records), INTERVAL: str(args.interval)})
    sampler = Sampler(args.interval)  # the whole tree: this process, the workers and their children
    sampler.start()
    own0, kids0 = cpu_seconds()
    wall0 = time.perf_counter()
    code = pytest.main(["-p", "suite", *(args.pytest_args or ["-q"])])
    wall = time.perf_counter() - wall0
    own1, kids1 = cpu_seconds()
    sampler.stop.set()
    sampler.sample()

    ours = (RECORDS, INTERVAL)
    rows, spent = [], sampler.spent
    for part in sorted(records.glob("*.json")):
        measured = json.loads(part.read_text())
        rows.extend(measured["tests"])
        spent += measured["sampling_cpu_s"]
        part.unlink()
    records.rmdir()
    summary = {
        "command": "python bench/suite.py -- " + " ".join(args.pytest_args or ["-q"]),
        "pytest_exit": int(code),
        "machine": {
            "cpus": os.cpu_count(),
            "affinity": len(os.sched_getaffinity(0)),
            "load_average_at_end": os.getloadavg(),
            "python": platform.python_version(),
        },
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("EMBEVAL_") and k not in ours},
        "tests_run": len(rows),
        "outcomes": {o: sum(r["outcome"] == o for r in rows) for o in ("passed", "failed", "skipped")},
        "test_processes": len({r["worker"] for r in rows}),
        "wall_s": round(wall, 1),
        "cpu_s": round(own1 - own0 - spent + kids1 - kids0, 1),
        "sampling_cpu_s": round(spent, 1),
        "children_cpu_s": round(kids1 - kids0, 1),
        "peak_rss_bytes": sampler.peak_rss,
        "peak_pss_bytes": sampler.peak_pss,
        "slow_cpu_s": round(sum(r["cpu_s"] for r in rows if r["slow"]), 1),
        "quick_cpu_s": round(sum(r["cpu_s"] for r in rows if not r["slow"]), 1),
        "files": files(rows),
        "tests": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=1) + "\n")

    print(f"\nthe {args.top} files that took the most CPU (tests/conftest.py's LONG_FILES):")
    for name, figures in list(summary["files"].items())[: args.top]:
        print(f"{figures['cpu_s']:8.1f} {figures['wall_s']:8.1f}  {name}")
    print(f"\nthe {args.top} tests that took the most CPU:\n{table(rows, 'cpu_s', args.top)}")
    print(f"\nthe {args.top} tests with the highest peak memory:\n{table(rows, 'peak_pss_bytes', args.top)}")
    print(
        f"\n{len(rows)} tests: {summary['wall_s']} s wall, {summary['cpu_s']} s CPU "
        f"({summary['children_cpu_s']} s in child processes; {summary['slow_cpu_s']} s in tests marked slow); "
        f"peak memory {gib(sampler.peak_rss)} GiB resident summed over the processes, "
        f"{gib(sampler.peak_pss)} GiB proportional (PSS); wrote {args.out}"
    )
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
