"""SICK-R and STS-B supervised regression on devbow vectors: embeval's evaluator against the
regressor as SentEval runs it (nn modules, autograd, torch.optim.Adam, global seeds), same features.

Loads the two tasks from SentEval's data, embeds their sentences with the reference devbow encoder,
then times, per task, (a) embeval's evaluate_relatedness (features, training, prediction, cosine) and
(b) the SentEval-style loop of tests/relatedness_helpers.py on the same features, and prints both
results next to the figures recorded from SentEval itself.

    python bench/relatedness.py [--data DIR] [--reference DIR]   (default: $EMBEVAL_SHARED or ../shared)
"""

import argparse
import importlib.util
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("EMBEVAL_SHARED", ROOT.parent / "shared"))
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from relatedness_helpers import senteval_style_fit  # noqa: E402

from embeval.evaluate.context import Context  # noqa: E402
from embeval.evaluate.relatedness import (  # noqa: E402
    SPLITS,
    evaluate_relatedness,
    split_features,
)
from embeval.formats.sentences import task_sentences  # noqa: E402
from embeval.tasks.registry import TASKS  # noqa: E402
from embeval.tasks.samples import split_rows  # noqa: E402
from embeval.threads import one_thread  # noqa: E402

TASK_NAMES = ("SICKRelatedness", "STSBenchmark")


def load_devbow(reference):
    spec = importlib.util.spec_from_file_location("devbow", Path(reference) / "devbow.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def context(name, data_dir, encode):
    data = TASKS[name].load(data_dir)
    sentences = task_sentences(data)
    table = torch.from_numpy(encode(sentences))
    row_of = {s: i for i, s in enumerate(sentences)}
    return Context(
        TASKS[name], data, table, {k: split_rows(s, row_of) for k, s in data.splits.items()}, torch.device("cpu")
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(SHARED / "senteval_data"))
    parser.add_argument("--reference", default=str(SHARED / "reference"))
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "relatedness_cpu.json"))
    args = parser.parse_args()
    devbow = load_devbow(args.reference)
    recorded = json.loads((Path(args.reference) / "senteval_devbow_sklearn.json").read_text())["tasks"]
    record = {
        "benchmark": "relatedness",
        "device": "cpu",
        "cpu": platform.processor() or platform.machine(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "tasks": {},
    }
    for name in TASK_NAMES:
        ctx = context(name, args.data, devbow.encode)
        start = time.perf_counter()
        ours = evaluate_relatedness(ctx)
        ours_seconds = time.perf_counter() - start
        (train_x, train_y, _), (dev_x, dev_y, _), (test_x, test_y, _) = (split_features(ctx, s) for s in SPLITS)
        start = time.perf_counter()
        with one_thread(ctx.device):  # as embeval's regressor runs, and as SentEval's figures were recorded
            dev, yhat, passes = senteval_style_fit(
                train_x.numpy(), train_y, dev_x.numpy(), dev_y, test_x.numpy(), seed=ctx.seed
            )
        loop_seconds = time.perf_counter() - start
        reference = recorded[name]["results"]
        record["tasks"][name] = {
            "embeval_seconds": round(ours_seconds, 2),
            "senteval_style_loop_seconds": round(loop_seconds, 2),
            "speedup": round(loop_seconds / ours_seconds, 2),
            "senteval_recorded_seconds": recorded[name]["seconds"],
            "passes": passes,
            "embeval": {k: ours[k] for k in ("devpearson", "pearson", "spearman", "mse")},
            "senteval_style_loop": {
                "devpearson": float(dev),
                "pearson": float(np.corrcoef(yhat, test_y)[0, 1]),
                "mse": float(np.mean((yhat - test_y) ** 2)),
            },
            "senteval_recorded": {k: reference[k] for k in ("devpearson", "pearson", "spearman", "mse")},
            "max_abs_diff_vs_recorded": max(
                abs(ours[k] - reference[k]) for k in ("devpearson", "pearson", "spearman", "mse")
            ),
        }
    print(
        f"{'task':17s}{'embeval s':>10s}{'loop s':>9s}{'SentEval s':>11s}  {'test Pearson':>12s}  "
        "max |diff| vs SentEval"
    )
    for name, r in record["tasks"].items():
        print(
            f"{name:17s}{r['embeval_seconds']:10.2f}{r['senteval_style_loop_seconds']:9.2f}"
            f"{r['senteval_recorded_seconds']:11.2f}  {r['embeval']['pearson']:12.6f}  "
            f"{r['max_abs_diff_vs_recorded']:.2e}"
        )
    print(
        "(embeval s includes feature building, training, prediction and the cosine figures; loop s is the "
        "training and prediction of the SentEval-style loop alone; both run on one CPU thread, as SentEval's "
        "own figures (SentEval s) were recorded)"
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
