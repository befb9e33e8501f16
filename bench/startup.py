"""How fast `embeval` answers: every --help, --version and every error found before scoring (the
cases of tests/startup_cases.py, which tests/test_startup.py checks import no heavy library), and
the time `embeval score` takes before its first task starts, with the share that is `import torch`.

Each case runs as `python -m embeval ARGS` in a fresh interpreter (wall time, several repeats, every
case once per round so that load on the machine spreads over all of them); `python -c pass` (the
interpreter alone) is measured in the same rounds. The score run embeds STS16's sentences as random
vectors and times from process start to its "scoring STS16 (1 of 1)" line; a second set of runs
under `python -X importtime` gives torch's cumulative import time within the same run.

With --against TREE (another checkout, e.g. `git archive main embeval | tar -x -C /tmp/before`), every
case also runs on that tree's code in the same rounds, for a ratio measured under the same load.

    python bench/startup.py [--data DIR] [--repeats 7] [--against TREE]
    (default data: $EMBEVAL_TEST_DATA or ../shared/senteval_data)
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from startup_cases import all_cases, make_files  # noqa: E402

LIMIT_S = 0.5


def wall(args, env, cwd=ROOT):
    """Seconds `python ARGS` takes, run in `cwd` (`-m` puts it first on sys.path) with `env`."""
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, check=False)
    return time.perf_counter() - start


def until_first_task(args, env):
    """(seconds from the process's start to its first `scoring ...` line, stderr)."""
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    first, lines = None, []
    for line in process.stderr:
        lines.append(line)
        if first is None and line.startswith("scoring "):
            first = time.perf_counter() - start
    process.wait()
    if first is None or process.returncode != 0:
        raise SystemExit(f"the score run failed:\n{''.join(lines)}")
    return first, "".join(lines)


def torch_import_s(importtime):
    """torch's cumulative import time (s) in a -X importtime log: its top-level `torch` line."""
    for line in importtime.splitlines():
        parts = line.split("|")
        if line.startswith("import time:") and len(parts) == 3 and parts[2].strip() == "torch":
            return int(parts[1]) / 1e6
    raise SystemExit("torch was not imported by the score run")


def small_vectors(folder, data):
    """STS16's sentences exported and embedded as random 64-d vectors (with their fingerprint)."""
    from embeval.formats.sentences import export_sentences
    from embeval.formats.vectors import write

    export_sentences(data, folder / "sentences", ["STS16"])
    rng = np.random.default_rng(0)
    write(folder / "v.h5", folder / "sentences", lambda batch: rng.standard_normal((len(batch), 64)), progress=False)
    return folder / "v.h5"


def summary(times):
    return {"best_s": round(min(times), 3), "median_s": round(statistics.median(times), 3)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    shared = os.environ.get("EMBEVAL_TEST_DATA", str(ROOT.parent / "shared" / "senteval_data"))
    parser.add_argument("--data", default=shared)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--against", default=None, help="another checkout to time the same cases on")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "startup.json"))
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    against = Path(args.against).resolve() if args.against else None
    other_env = dict(os.environ, PYTHONPATH=str(against)) if against else None
    work = Path(tempfile.mkdtemp())
    cases = all_cases(make_files(work))
    vectors = small_vectors(work, args.data)
    score = ["-m", "embeval", "score", str(vectors), "--data", args.data, "--tasks", "STS16", "--bootstrap", "0"]
    score += ["--out", str(work / "r.json")]

    times = {name: [] for name, _, _ in cases}
    other = {name: [] for name, _, _ in cases}
    interpreter, first_task, first_task_traced, torch_s = [], [], [], []
    load = os.getloadavg()[0]
    for _ in range(args.repeats):
        interpreter.append(wall(["-c", "pass"], env))
        for name, case_args, _ in cases:
            times[name].append(wall(["-m", "embeval", *case_args], env))
            if other_env is not None:
                other[name].append(wall(["-m", "embeval", *case_args], other_env, against))
        first_task.append(until_first_task(score, env)[0])
        seconds, log = until_first_task(["-X", "importtime", *score], env)
        first_task_traced.append(seconds)
        torch_s.append(torch_import_s(log))
    load = max(load, os.getloadavg()[0])

    shares = [t / s for t, s in zip(torch_s, first_task_traced)]
    results = {
        "limit_s": LIMIT_S,
        "repeats": args.repeats,
        "interpreter_alone": summary(interpreter),
        "cases": {name: summary(values) for name, values in times.items()},
        "against": None
        if other_env is None
        else {"tree": args.against, "cases": {name: summary(values) for name, values in other.items()}},
        "score_until_first_task": {
            **summary(first_task),
            "torch_import_s": summary(torch_s),
            "torch_share_median": round(statistics.median(shares), 2),
        },
        "machine": {
            "cpu": platform.machine(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "load_average_1min": round(load, 1),
            "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE", ""),
        },
    }
    width = max(len(name) for name in times)
    before = results["against"]["cases"] if results["against"] else {}
    print(f"{'case':{width}s}  best s  median s" + ("  before: best s  median s" if before else ""))
    alone = results["interpreter_alone"]
    print(f"{'(python -c pass)':{width}s}  {alone['best_s']:6.3f}  {alone['median_s']:8.3f}")
    for name, row in results["cases"].items():
        line = f"{name:{width}s}  {row['best_s']:6.3f}  {row['median_s']:8.3f}"
        if before:
            line += f"          {before[name]['best_s']:6.3f}  {before[name]['median_s']:8.3f}"
        print(line + ("" if row["best_s"] < LIMIT_S else "  over the limit"))
    first = results["score_until_first_task"]
    print(
        f"\nembeval score until its first task: best {first['best_s']:.2f} s, median {first['median_s']:.2f} s; "
        f"import torch {first['torch_import_s']['median_s']:.2f} s, {first['torch_share_median']:.0%} of it"
    )
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
