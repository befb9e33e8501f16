"""What the reliability checks cost before scoring starts.

Writes a vectors file for every task whose data is present (random float32 vectors, --dim wide;
contiguous, and gzip-chunked), then times, per layout:
  guard      the HDF5 guard process (h5guard.check: fork, read every dataset's metadata)
  plan+data  plan() and loading every task's data, structure and fingerprint checks
  values     the pre-flight values pass: every task's table read, checked finite, hashed
  read       one plain read of every task's table (what scoring itself reads anyway)
The pre-flight's extra cost over an unchecked run is about guard + values.

    python bench/preflight.py [--data DIR] [--dim 768]   (default data: $EMBEVAL_SHARED or ../shared)
"""

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("EMBEVAL_SHARED", ROOT.parent / "shared"))
sys.path[:0] = [str(ROOT)]

from embeval.formats import h5guard  # noqa: E402
from embeval.formats import sentences as export  # noqa: E402
from embeval.formats.vectors import VectorsFile, inspect_metadata  # noqa: E402
from embeval.run.plan import (  # noqa: E402
    Located,
    TaskDataCache,
    UnionRows,
    select,
)
from embeval.tasks.registry import TASKS, builtin  # noqa: E402


def write_file(path, texts, dim, compression):
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        for name, sentences in texts.items():
            values = rng.standard_normal((len(sentences), dim), dtype=np.float32)
            if compression:
                f.create_dataset(
                    name, data=values, chunks=(min(len(values), 1024), dim), compression="gzip", compression_opts=1
                )
            else:
                f.create_dataset(name, data=values)
            f[name].attrs["sha256"] = export.fingerprint(sentences)


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def measure(path, data_dir, names):
    guard, _ = timed(lambda: h5guard.check(path, list(names) + ["ALL"], inspect_metadata))
    with VectorsFile(path, guard=False) as vf:
        cache = TaskDataCache(data_dir)

        def locate():
            union = UnionRows(vf, cache, builtin())
            todo, _ = select([TASKS[n] for n in names], True, vf, data_dir, union.tasks() or [])
            return [Located(spec, vf, union, cache) for spec in todo]

        located_s, located = timed(locate)
        values_s, _ = timed(lambda: [vf.fingerprint_rows(loc.roles["text"].dataset, loc.name) for loc in located])
        read_s, _ = timed(lambda: [loc.read(vf) for loc in located])
    return {
        "guard_s": round(guard, 3),
        "plan_and_data_s": round(located_s, 3),
        "values_s": round(values_s, 3),
        "read_s": round(read_s, 3),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(SHARED / "senteval_data"))
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "preflight_cpu.json"))
    args = parser.parse_args()
    data_dir = Path(args.data)
    names = [n for n in TASKS if not TASKS[n].missing_files(data_dir)]
    texts = {n: export.task_sentences(TASKS[n].load(data_dir)) for n in names}
    rows = sum(len(t) for t in texts.values())
    results = {
        "tasks": len(names),
        "sentences": rows,
        "dim": args.dim,
        "table_gib": round(rows * args.dim * 4 / 2**30, 3),
        "layouts": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for layout, compression in (("contiguous", None), ("gzip", "gzip")):
            path = Path(tmp) / f"{layout}.h5"
            write_file(path, texts, args.dim, compression)
            measure(path, data_dir, names)  # warm the page cache: figures are for a file read before
            results["layouts"][layout] = measure(path, data_dir, names)
            results["layouts"][layout]["file_mib"] = round(path.stat().st_size / 2**20, 1)
            path.unlink()
    results["machine"] = {
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "h5py": h5py.__version__,
        "hdf5": h5py.version.hdf5_version,
    }
    print(f"{len(names)} tasks, {rows} sentences x {args.dim} float32 ({results['table_gib']} GiB)")
    print(f"{'layout':12s}{'guard s':>10s}{'plan+data s':>13s}{'values s':>10s}{'read s':>10s}")
    for layout, r in results["layouts"].items():
        figures = (r["guard_s"], r["plan_and_data_s"], r["values_s"], r["read_s"])
        print(f"{layout:12s}" + "".join(f"{x:>{w}.3f}" for x, w in zip(figures, (10, 13, 10, 10))))
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
