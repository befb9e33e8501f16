"""Benchmark of `embeval data fetch`'s Python preprocessing, and the STS Benchmark fidelity count.

Builds a file:// mirror of upstream-layout archives from the shared SentEval data (as the tests
do), fetches every data set it can rebuild into a fresh folder, one data set at a time, and
records the wall time of each, plus the number of STS Benchmark lines that the Moses rules alone
(without the recorded erratum) produce differently from SentEval's files.

    PYTHONPATH=. python bench/data_fetch.py [SHARED_DATA]   (default ../shared/senteval_data)

Prints a table and writes bench/results/data_fetch.json.
"""

import json
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from embeval.datasets.fetch import fetch  # noqa: E402
from embeval.datasets.preprocess import tokenize_columns  # noqa: E402
from tests.data_helpers import build_mirror  # noqa: E402

TASKS = ["CR", "MR", "MPQA", "SUBJ", "SST2", "SST5", "TREC", "STSBenchmark", "SNLI", "ImageCaptionRetrieval", "Tense"]
COLUMNS = [{"cut": "1-5"}, {"cut": "6", "tokenize": True}, {"cut": "7", "tokenize": True}]


def main():
    shared = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared/senteval_data"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        mirror = build_mirror(shared, Path(tmp) / "mirror")
        dest = Path(tmp) / "data"
        for task in TASKS:
            start = time.perf_counter()
            report = fetch(dest, [task], mirror=str(mirror))
            elapsed = time.perf_counter() - start
            assert not report.failed, report.failed
            rows.append({"task": task, "seconds": round(elapsed, 3)})
    start = time.perf_counter()
    differing, lines = 0, 0
    for split in ("train", "dev", "test"):
        raw = (shared / "raw/STSBenchmark" / f"sts-{split}.csv").read_bytes()
        ours = tokenize_columns(raw, COLUMNS, "senteval-stsb", lower=True).split(b"\n")
        theirs = (shared / "downstream/STS/STSBenchmark" / f"sts-{split}.csv").read_bytes().split(b"\n")
        differing += sum(a != b for a, b in zip(ours, theirs))
        lines += len(theirs) - 1
    tokenize_s = time.perf_counter() - start
    result = {
        "machine": platform.machine(),
        "python": platform.python_version(),
        "fetch": rows,
        "stsb_lines": lines,
        "stsb_differing_lines_without_erratum": differing,
        "stsb_tokenize_seconds": round(tokenize_s, 3),
    }
    print(f"{'task':24s} {'fetch s':>8s}")
    for row in rows:
        print(f"{row['task']:24s} {row['seconds']:8.2f}")
    print(
        f"STS Benchmark: {differing} of {lines} lines differ from SentEval's (Moses rules alone), "
        f"tokenized in {tokenize_s:.2f} s"
    )
    out = Path(__file__).resolve().parent / "results" / "data_fetch.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
