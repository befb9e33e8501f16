"""The MTEB cache's check and the data's fingerprint on a reused cache: every cached file is hashed
(sha256) by the check; the fingerprint (`data_sha256`, embeval.run.plan.data_fingerprint) takes the
digests the check computed ("shared") or hashes the files again ("separate", what embeval did before).
The arms alternate in one run on the same files (in the page cache for both: the cost measured is
hashing, about MSMARCO's 3.5 GB at full size); both must give the same fingerprint, equal to one
computed with hashlib alone.

  python bench/mteb_cache_digest.py [--mib 64] [--repeats 3] [--out bench/results/mteb_cache_digest.json]
"""

import argparse
import hashlib
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from embeval.run.plan import data_fingerprint  # noqa: E402
from embeval.tasks import files, mteb_cache  # noqa: E402

FILES = (("corpus", "corpus.jsonl", 0.9), ("queries", "queries.jsonl", 0.05), ("qrels", "qrels.tsv", 0.05))


def build(mib: int) -> tuple[mteb_cache.Slot, SimpleNamespace]:
    """A cached (subset, split) of `mib` MiB in EMBEVAL_CACHE, and a spec naming its files."""
    slot = mteb_cache.Slot(("Bench", "revision", "default", "test"), "0" * 64, "Bench")

    def write(folder: Path) -> dict:
        line = b'{"_id": "d0", "text": "' + b"word " * 40 + b'"}\n'
        for _, name, share in FILES:
            with open(folder / name, "wb") as f:
                for _ in range(max(1, int(mib * share * (1 << 20)) // len(line))):
                    f.write(line)
        return {"kind": "retrieval", "files": {key: name for key, name, _ in FILES}}

    slot.store(write)
    return slot, SimpleNamespace(files=tuple((key, name) for key, name, _ in FILES))


def run(slot: mteb_cache.Slot, spec: SimpleNamespace, shared: bool) -> tuple[float, float, str]:
    """(seconds of the check, seconds of the fingerprint, the fingerprint) of one reuse."""
    files._DIGESTS.clear()
    start = time.perf_counter()
    found = slot.reuse()
    checked = time.perf_counter()
    assert found is not None, "the cache was not reused"
    if not shared:
        files._DIGESTS.clear()  # the fingerprint reads the files again, as before
    folder = found[0]
    fingerprint = data_fingerprint(spec, {key: folder / name for key, name in spec.files})
    return checked - start, time.perf_counter() - checked, fingerprint


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=64, help="size of the cached files (MSMARCO's: 3500)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "mteb_cache_digest.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="embeval-bench-") as temp:
        os.environ[mteb_cache.CACHE] = temp
        slot, spec = build(args.mib)
        folder = slot.version
        size = sum((folder / name).stat().st_size for _, name, _ in FILES)
        time.sleep(files.RACY_NS / 1e9 + 0.1)  # files written just now are hashed again (racy): wait
        lines = "".join(f"{name}\0{hashlib.sha256((folder / name).read_bytes()).hexdigest()}\n" for _, name, _ in FILES)
        expected = hashlib.sha256(lines.encode()).hexdigest()
        seconds = {arm: [0.0, 0.0] for arm in ("separate", "shared")}
        for _ in range(args.repeats):
            for arm in seconds:
                check, fingerprint, digest = run(slot, spec, arm == "shared")
                assert digest == expected, f"{arm}: the fingerprint differs"
                seconds[arm][0] += check
                seconds[arm][1] += fingerprint
    mib = size / (1 << 20)
    print(f"{mib:.0f} MiB cached; load average {os.getloadavg()[0]:.1f}")
    print(f"{'arm':<10} {'check s':>8} {'fingerprint s':>14} {'total s':>8} {'MiB/s hashed':>13}")
    rows = {}
    for arm, (check, fingerprint) in seconds.items():
        check, fingerprint = check / args.repeats, fingerprint / args.repeats
        rows[arm] = {
            "check_seconds": round(check, 3),
            "fingerprint_seconds": round(fingerprint, 3),
            "total_seconds": round(check + fingerprint, 3),
        }
        print(f"{arm:<10} {check:>8.2f} {fingerprint:>14.3f} {check + fingerprint:>8.2f} {mib / check:>13.0f}")
    result = {
        "machine": {
            "python": platform.python_version(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "load_average": round(os.getloadavg()[0], 1),
        },
        "cached_mib": round(mib, 1),
        "repeats": args.repeats,
        "same_fingerprint": True,
        "arms": rows,
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
