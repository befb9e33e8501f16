"""SNLI at full size and high dimension: peak memory and time per pass of the SentEval solver.

    python bench/snli.py --data ../shared/senteval_data [--dim 4096] [--max-epoch 1]

SentEval's SNLI dev and test splits from --data, and a synthetic train split of SNLI's size
(550,152 pairs: 150,000 premises with about 3.7 hypotheses each; random words), so the sentence
table has SNLI's shape. Vectors are Gaussian (the content does not change time or memory); labels
of the synthetic train split are random. Pair features [u, v, u*v, |u-v|] (4 x dim wide) are
built batch by batch from the table, never materialized. The run is capped at --max-epoch passes
(SentEval runs up to 16 for SNLI) and reports seconds per pass and the peak resident memory of the
scoring process, next to the size of the sentence table. Writes bench/results/snli_{dim}d.json.
"""

import argparse
import dataclasses
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _checkout  # noqa: F401  (this clone's embeval, from any folder)
import numpy as np

HERE = Path(__file__).resolve().parent
PAIRS = 550152
PREMISES = 150000


def make_data(source, root, rng):
    """SentEval's SNLI folder with dev/test copied from `source` and a synthetic train split."""
    folder = root / "downstream" / "SNLI"
    folder.mkdir(parents=True)
    for split in ("dev", "test"):
        for f in ("s1", "s2", "labels"):
            shutil.copy(Path(source) / "downstream" / "SNLI" / f"{f}.{split}", folder / f"{f}.{split}")
    vocab = np.array([f"w{i}" for i in range(30000)])
    premise_of = np.sort(rng.integers(0, PREMISES, PAIRS))
    with (
        open(folder / "s1.train", "w", encoding="latin-1") as s1,
        open(folder / "s2.train", "w", encoding="latin-1") as s2,
        open(folder / "labels.train", "w", encoding="utf-8") as labels,
    ):
        for i, p in enumerate(premise_of):
            prng = np.random.default_rng(int(p))
            s1.write(" ".join(vocab[prng.integers(0, 30000, 12)]) + " .\n")
            s2.write(" ".join(vocab[rng.integers(0, 30000, 7)]) + f" h{i} .\n")
            labels.write(("entailment", "neutral", "contradiction")[int(rng.integers(3))] + "\n")


def write_vectors(root, dim, rng):
    import h5py

    from embeval.formats import sentences as export
    from embeval.tasks.registry import TASKS

    manifest = export.export([TASKS["SNLI"].load(root / "data")], root / "sent")
    entry = manifest["tasks"]["SNLI"]
    with h5py.File(root / "v.h5", "w") as f:
        ds = f.create_dataset("SNLI", (entry["count"], dim), dtype="float32")
        for start in range(0, entry["count"], 20000):
            n = min(20000, entry["count"] - start)
            ds[start : start + n] = rng.standard_normal((n, dim), dtype=np.float32)
        ds.attrs["sha256"] = entry["sha256"]
    return entry["count"]


def h5py_file(path):
    import h5py

    return h5py.File(path, "r")


def memory_sampler():
    """A thread that keeps the peak anonymous and file-backed resident memory (MiB) of this process."""
    import threading

    peak = {"anon": 0.0, "file": 0.0}

    def sample():
        while True:
            with open("/proc/self/status") as status:
                fields = dict(line.split(":", 1) for line in status)
            for key, name in (("anon", "RssAnon"), ("file", "RssFile")):
                peak[key] = max(peak[key], int(fields[name].split()[0]) / 1024)
            time.sleep(0.1)

    threading.Thread(target=sample, daemon=True).start()
    return peak


def child(args):
    import embeval
    from embeval.tasks.registry import TASKS

    peak = memory_sampler()

    snli = dataclasses.replace(
        TASKS["SNLI"], params=dataclasses.replace(TASKS["SNLI"].params, max_epoch=args.max_epoch)
    )
    start = time.perf_counter()  # SentEval's max_epoch 15, capped for the benchmark
    record = embeval.score(args.vectors, args.data, tasks=[snli], progress=False, log=lambda m: None)
    entry = record["tasks"]["SNLI"]
    print(
        json.dumps(
            {
                "seconds": time.perf_counter() - start,
                "task_seconds": entry["seconds"],
                "results": entry["results"],
                "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "peak_anon_mib": peak["anon"],
                "peak_file_mib": peak["file"],
            }
        )
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get("EMBEVAL_DATA", HERE.parent.parent / "shared/senteval_data"))
    parser.add_argument("--dim", type=int, default=4096)
    parser.add_argument("--max-epoch", type=int, default=1)
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--vectors")
    parser.add_argument("--work", help="a folder a previous run prepared (kept with --keep); skips preparation")
    parser.add_argument("--keep", action="store_true", help="keep the prepared data and vectors")
    args = parser.parse_args()
    if args.child:
        return child(args)
    start = time.perf_counter()
    if args.work:
        work = Path(args.work)
        with h5py_file(work / "v.h5") as f:
            count, dim = f["SNLI"].shape
        if dim != args.dim:
            sys.exit(f"{work / 'v.h5'}: vectors are {dim}-d, not --dim {args.dim}")
    else:
        work = Path(tempfile.mkdtemp(prefix="embeval-snli-"))
        rng = np.random.default_rng(0)
        make_data(args.data, work / "data", rng)
        count = write_vectors(work, args.dim, rng)
    prepared = time.perf_counter() - start
    table_gib = count * args.dim * 4 / 2**30
    print(
        f"{count} distinct sentences x {args.dim} = {table_gib:.1f} GiB as float32 (prepared in {prepared:.0f} s)",
        flush=True,
    )
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            "--vectors",
            str(work / "v.h5"),
            "--data",
            str(work / "data"),
            "--max-epoch",
            str(args.max_epoch),
        ],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    passes = args.max_epoch + 1  # rounds run while passes <= max_epoch (epoch_size 1 for SNLI)
    record = {
        "dim": args.dim,
        "pairs_train": PAIRS,
        "sentences": count,
        "table_gib": table_gib,
        "max_epoch": args.max_epoch,
        "passes": passes,
        "seconds": result["seconds"],
        "seconds_per_pass": result["task_seconds"] / passes,
        "peak_rss_gib": result["peak_rss_mib"] / 1024,
        "peak_anonymous_gib": result["peak_anon_mib"] / 1024,
        "peak_file_backed_gib": result["peak_file_mib"] / 1024,
        "machine_memory_gib": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30,
        "results": result["results"],
    }
    print(
        f"SNLI {args.dim}-d: {passes} passes in {result['task_seconds']:.0f} s "
        f"({record['seconds_per_pass']:.0f} s per pass), peak RSS {record['peak_rss_gib']:.1f} GiB of "
        f"{record['machine_memory_gib']:.0f} GiB: anonymous {record['peak_anonymous_gib']:.1f} GiB, "
        f"file-backed (the memory-mapped table, reclaimable page cache) {record['peak_file_backed_gib']:.1f} GiB "
        f"(table {table_gib:.1f} GiB)"
    )
    path = HERE / "results" / f"snli_{args.dim}d.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    if not args.keep:
        shutil.rmtree(work)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
