"""Probing benchmark: the ten probing tasks at full size, both classifiers.

    python bench/probing.py [--dim 768] [--mlp-max-epoch 4] [--tasks Length,...] [--mlp-tasks Tense,...]

Synthetic data in SentEval's probing format at the real sizes (100k train, 10k dev, 10k test per
task; SentEval's class counts), sentences of random words, vectors a deterministic bag of random
token vectors, labels a noisy linear function of the vectors (learnable, not trivially). Logistic
regression runs SentEval's full protocol. The MLP grid (9 settings x 4 regularizations, trained
in three batched calls) is compute-bound on a CPU (every problem does its own matrix products);
with --mlp-max-epoch it is capped at that many passes, and the table reports seconds per pass so
the full run can be estimated. Writes bench/results/probing_{dim}d.json.
"""

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import _checkout  # noqa: F401  (this clone's embeval, from any folder)
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CLASSES = {
    "Length": 6,
    "WordContent": 1000,
    "Depth": 7,
    "TopConstituents": 20,
    "BigramShift": 2,
    "Tense": 2,
    "SubjNumber": 2,
    "ObjNumber": 2,
    "OddManOut": 2,
    "CoordinationInversion": 2,
}
SIZES = {"tr": 100000, "va": 10000, "te": 10000}


def make_task(root, name, encode, rng, vocab):
    """Write DATA/probing/FILE for one task; return nothing (vectors come from `encode`)."""
    from embeval.tasks.registry import TASKS

    total = sum(SIZES.values())
    lengths = rng.integers(5, 21, total)
    sentences = [" ".join(vocab[rng.integers(0, len(vocab), n)]) + f" {name.lower()}{i}" for i, n in enumerate(lengths)]
    vectors = np.concatenate([encode(sentences[i : i + 20000]) for i in range(0, total, 20000)])
    k = CLASSES[name]
    scores = vectors @ rng.standard_normal((vectors.shape[1], k)) + rng.gumbel(size=(total, k)) * 2
    labels = scores.argmax(axis=1)
    splits = [s for s, n in SIZES.items() for _ in range(n)]
    path = root / TASKS[name].data_files()[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for split, label, sentence in zip(splits, labels, sentences):
            f.write(f"{split}\tL{label}\tsynthetic\t{sentence}\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--tasks", default=",".join(CLASSES))
    parser.add_argument("--mlp-max-epoch", type=int, default=4)
    parser.add_argument(
        "--mlp-epoch-size",
        type=int,
        default=4,
        help="passes per round of the capped MLP run (SentEval's 4; 1 with --mlp-max-epoch 0 times one pass)",
    )
    parser.add_argument("--mlp-tasks", default=None, help="tasks that also run the MLP grid (default: --tasks)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    from classifiers import encoder

    import embeval
    from embeval.formats import sentences as export
    from embeval.run.config import build
    from embeval.tasks.registry import TASKS

    tasks = args.tasks.split(",")
    mlp_tasks = set(args.mlp_tasks.split(",") if args.mlp_tasks else tasks)
    work = Path(tempfile.mkdtemp(prefix="embeval-probing-"))
    rng = np.random.default_rng(0)
    vocab = np.array([f"w{i}" for i in range(20000)])
    encode = encoder(args.dim)
    start = time.perf_counter()
    for name in tasks:
        make_task(work / "data", name, encode, rng, vocab)
    export.export([TASKS[t].load(work / "data") for t in tasks], work / "sent")
    embeval.vectors.write(work / "v.h5", work / "sent", encode, batch_size=20000, progress=False)
    print(f"data and vectors: {time.perf_counter() - start:.0f} s", flush=True)
    results = {
        "dim": args.dim,
        "sizes": SIZES,
        "mlp_max_epoch": args.mlp_max_epoch,
        "mlp_epoch_size": args.mlp_epoch_size,
        "tasks": {},
    }
    logreg = build(probing_classifier="logreg")
    mlp = build(
        probing_classifier="mlp", classifier={"max_epoch": args.mlp_max_epoch, "epoch_size": args.mlp_epoch_size}
    )
    print(
        f"{'task':24s}{'classes':>8s}{'logreg s':>10s}{'acc':>7s}{'mlp s (capped)':>16s}{'s/pass':>8s}{'acc':>7s}",
        flush=True,
    )
    for name in tasks:
        row = {}
        for label, config in (("logreg", logreg), ("mlp", mlp)):
            if label == "mlp" and (TASKS[name].params.get("logreg_only") or name not in mlp_tasks):
                continue
            record = embeval.score(
                work / "v.h5", work / "data", tasks=[name], config=config, progress=False, log=lambda m: None
            )
            entry = record["tasks"][name]
            row[label] = {"seconds": entry["seconds"], **{k: entry["results"][label][k] for k in ("devacc", "acc")}}
        if "mlp" in row:
            epoch_size = mlp.classifier.epoch_size
            passes = (args.mlp_max_epoch // epoch_size + 1) * epoch_size  # rounds run while passes <= cap
            row["mlp"]["passes_per_problem"] = passes
            row["mlp"]["seconds_per_pass"] = row["mlp"]["seconds"] / max(passes, 1)
        results["tasks"][name] = row
        m = row.get("mlp", {})
        print(
            f"{name:24s}{CLASSES[name]:8d}{row['logreg']['seconds']:10.1f}{row['logreg']['acc']:7.2f}"
            f"{m.get('seconds', float('nan')):16.1f}{m.get('seconds_per_pass', float('nan')):8.1f}"
            f"{m.get('acc', float('nan')):7.2f}",
            flush=True,
        )
    results["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out = Path(args.out or HERE / "results" / f"probing_{args.dim}d.json")
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"peak RSS {results['peak_rss_mib']:.0f} MiB; wrote {out}")


if __name__ == "__main__":
    main()
