"""What --normalize costs on the cross-validated tasks, whose z-score statistics are per outer fold.

    python bench/normalize.py --data ../shared/senteval_data [--dim 768] [--tasks MR,CR,SUBJ,MPQA]

For every task, solver (senteval, lbfgs) and method (none, zscore, zscore+l2): the task's seconds
and accuracies, each in a fresh process. Vectors: bench/classifiers.py's deterministic bag of
random token vectors at --dim. Writes bench/results/normalize_{dim}d.json and prints a table.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import _checkout  # noqa: F401  (this clone's embeval, from any folder)

HERE = Path(__file__).resolve().parent
TASKS = ["MR", "CR", "SUBJ", "MPQA"]
SOLVERS = ["senteval", "lbfgs"]
METHODS = ["none", "zscore", "zscore+l2"]


def child(vectors, data, task, solver, method):
    import embeval
    from embeval.run.config import build

    record = embeval.score(
        vectors, data, tasks=[task], config=build(solver=solver, normalize=method), progress=False, log=lambda m: None
    )
    entry = record["tasks"][task]
    print(
        json.dumps({"seconds": entry["seconds"], "devacc": entry["results"]["devacc"], "acc": entry["results"]["acc"]})
    )


def measure(vectors, data, task, solver, method):
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(vectors), str(data), task, solver, method],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get("EMBEVAL_DATA", HERE.parent.parent / "shared/senteval_data"))
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--out")
    parser.add_argument("--child", nargs=5, metavar=("VECTORS", "DATA", "TASK", "SOLVER", "METHOD"))
    args = parser.parse_args()
    if args.child:
        return child(*args.child)
    sys.path.insert(0, str(HERE))
    from classifiers import make_vectors

    tasks = args.tasks.split(",")
    vectors = make_vectors(args.data, tasks, args.dim, Path(tempfile.mkdtemp(prefix="embeval-bench-")))
    results = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
        },
        "dim": args.dim,
        "runs": [],
    }
    print(f"{'task':8s}{'solver':10s}" + "".join(f"{m:>22s}" for m in METHODS) + "   (seconds, test acc)")
    for task in tasks:
        for solver in SOLVERS:
            row = {m: measure(vectors, args.data, task, solver, m) for m in METHODS}
            results["runs"].append({"task": task, "solver": solver, **row})
            print(
                f"{task:8s}{solver:10s}"
                + "".join(f"{row[m]['seconds']:13.1f} s {row[m]['acc']:6.2f}" for m in METHODS),
                flush=True,
            )
    out = Path(args.out or HERE / "results" / f"normalize_{args.dim}d.json")
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
