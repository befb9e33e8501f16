"""What `--classifiers logreg,mlp` costs: one classification task scored with logistic regression alone,
then with both classifiers, each `embeval score` in a fresh process of its own (wall and CPU seconds).

The vectors are the mean of random token vectors (devbow's construction, bench/classifiers.py) at
--dim dimensions. The MLP's early stopping runs many more passes than logistic regression's, and each
pass trains a hidden layer: the ratio is what a user pays for the second classifier.

    python bench/mlp_cost.py --data DATA [--task CR] [--dim 384] [--config literature] [--out FILE]

Prints a table and writes bench/results/mlp_cost.json.
"""

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _checkout  # noqa: F401  (this clone's embeval, from any folder)
from classifiers import encoder

HERE = Path(__file__).resolve().parent


def timed_score(vectors, data, task, classifiers, config, out):
    """(wall seconds, CPU seconds of the child, the task's results) of one `embeval score` run."""
    command = [
        sys.executable, "-m", "embeval", "score", str(vectors), "--data", str(data), "--tasks", task,
        "--classifiers", classifiers, "--config", config, "--bootstrap", "0", "--no-save-predictions",
        "--device", "cpu", "--out", str(out), "--quiet",
    ]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    env = dict(os.environ, PYTHONPATH=str(_checkout.ROOT))
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, json.loads(Path(out).read_text())["tasks"][task]["results"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="a folder with SentEval's data (the task's files)")
    parser.add_argument("--task", default="CR", help="a classification task (default CR)")
    parser.add_argument("--dim", type=int, default=384, help="dimension of the vectors (default 384)")
    parser.add_argument("--config", default="literature", help="--config of both runs (default literature)")
    parser.add_argument("--out", default=str(HERE / "results" / "mlp_cost.json"))
    args = parser.parse_args()

    import embeval
    from embeval.formats.vectors import write

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        embeval.export_sentences(args.data, work / "sentences", tasks=[args.task])
        write(work / "v.h5", work / "sentences", encoder(args.dim), progress=False)
        runs = {}
        for classifiers in ("logreg", "logreg,mlp"):
            wall, cpu, results = timed_score(
                work / "v.h5", args.data, args.task, classifiers, args.config, work / f"{classifiers}.json"
            )
            runs[classifiers] = {"wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1), "acc": results["acc"]}
            if "mlp" in results:
                runs[classifiers]["mlp_acc"] = results["mlp"]["acc"]
    ratio = runs["logreg,mlp"]["wall_seconds"] / max(runs["logreg"]["wall_seconds"], 1e-9)
    record = {
        "task": args.task,
        "dim": args.dim,
        "config": args.config,
        "runs": runs,
        "wall_ratio": round(ratio, 1),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load_average": os.getloadavg()},
    }
    print(f"{'--classifiers':14s} {'wall s':>8s} {'CPU s':>8s}  accuracy")
    for name, run in runs.items():
        print(f"{name:14s} {run['wall_seconds']:8.1f} {run['cpu_seconds']:8.1f}  {run['acc']}")
    print(f"logreg,mlp takes {ratio:.1f} times as long as logreg alone ({args.task}, {args.dim}-d)")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
