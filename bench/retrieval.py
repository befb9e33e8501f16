"""Exact retrieval search: embeval's top_k against mteb's own search, FAISS's flat index and the GEMM floor.

    python bench/retrieval.py [--sizes 100000,1000000] [--queries 10000] [--dim 384] [--k 1000,10]
                              [--budget-mib 1024] [--repeats 2] [--arms embeval,faiss,mteb] [--tmp DIR]

A synthetic corpus (clustered float32 vectors, 0.5% of its rows exact copies of others) and its
queries are written to an HDF5 file (contiguous datasets /corpus and /queries) in a temporary folder.
Every arm runs in a process of its own (so ru_maxrss is that arm's peak), reads the same file, and
searches the top k by cosine similarity:

- embeval: embeval.train.search.top_k under --budget-mib, reading the corpus from the HDF5 file
  piece by piece through h5py (as the scorer will);
- embeval-grouped: the same with the CPU's filter off (the selection a GPU runs), largest k only;
- matmul: embeval's blocks (its plan) without the selection: reading, normalizing and the matmuls
  only, the floor of its loop, largest k only;
- mteb: mteb's SearchEncoderWrapper (the search MTEB's retrieval evaluator runs for an encoder: the
  corpus in chunks of 50,000, a torch matmul and torch.topk per chunk, a Python heap per query)
  through index() and search() over datasets.Dataset corpus and queries, with an encoder that returns
  the file's rows for the ids it is given (no model). Its own log splits its time into "encoding"
  (its per-chunk dataset preparation and our encoder's reads) and "computing similarity" (scores,
  top-k, heaps): the latter is its search time;
- faiss: faiss.IndexFlatIP over L2-normalized rows (add piece by piece, then one search);
- gemm: the machine's float32 matmul rate (torch.mm of 4096 x 4096 matrices, best of 5), measured
  before every arm; the floor is the search's 2 * q * n * d FLOPs at the best rate seen.

Arms are interleaved and repeated (--repeats; mteb once per size and k, being slow) and the best time
kept, because the machine is shared. Then the top-10 lists of embeval and FAISS (and of mteb) are
compared: for every query whose lists differ, each differing position is an exact tie (the two rows'
float64 cosines are equal: copies), a near tie (float64 cosines within 1e-6, under float32 rounding),
or a disagreement. Writes bench/results/retrieval.json and prints a table.
"""

import argparse
import json
import logging
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _checkout  # noqa: F401  (this clone's embeval, from any folder)
import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CLUSTERS = 2000
DUPLICATES = 0.005
NEAR = 1e-6
MTEB_CHUNK = 50_000
ARMS = ("embeval", "embeval-grouped", "matmul", "faiss", "mteb")


# ---------------------------------------------------------------------------------------------
# Data


def make_file(path, n, q, d, seed=0):
    """Clustered vectors: a center per cluster plus as much noise; queries drawn the same way."""
    import h5py

    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((CLUSTERS, d), dtype=np.float32)
    step = 50_000
    with h5py.File(path, "w") as f:
        corpus = f.create_dataset("corpus", shape=(n, d), dtype=np.float32)
        for a in range(0, n, step):
            b = min(a + step, n)
            rows = centers[rng.integers(0, CLUSTERS, b - a)] + rng.standard_normal((b - a, d), dtype=np.float32)
            copies = np.flatnonzero(rng.random(b - a) < DUPLICATES)
            copies = copies[a + copies > 0]
            sources = rng.integers(0, a + copies)
            for i, src in zip(copies, sources):
                rows[i] = rows[src - a] if src >= a else corpus[src]
            corpus[a:b] = rows
        queries = centers[rng.integers(0, CLUSTERS, q)] + rng.standard_normal((q, d), dtype=np.float32)
        f.create_dataset("queries", data=queries)


# ---------------------------------------------------------------------------------------------
# Arms (each in its own process)


def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def save_top(out, scores, rows):
    np.savez(out, scores=np.asarray(scores[:, :10], np.float32), rows=np.asarray(rows[:, :10], np.int64))


def arm_gemm():
    import torch

    a, b = torch.randn(4096, 4096), torch.randn(4096, 4096)
    torch.mm(a, b)
    best = min(_timed(lambda: torch.mm(a, b)) for _ in range(5))
    return {"gflops": 2 * 4096**3 / best / 1e9, "threads": torch.get_num_threads()}


def _timed(f):
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def arm_embeval(path, k, budget, out, filtered=True):
    import h5py

    from embeval.train.search import plan_search, top_k

    with h5py.File(path, "r") as f:
        corpus, queries = f["corpus"], f["queries"][:]
        n, d = corpus.shape
        baseline = rss_mib()
        start = time.perf_counter()
        scores, rows = top_k(queries, lambda a, b: corpus[a:b], n, k, "cosine", budget, "cpu", filtered=filtered)
        seconds = time.perf_counter() - start
    plan = plan_search(len(queries), d, k, n, budget)
    save_top(out, scores, rows)
    return {
        "seconds": seconds,
        "baseline_rss_mib": baseline,
        "peak_rss_mib": peak_mib(),
        "plan": {**plan.__dict__, "mib": plan.bytes / 2**20},
    }


def arm_matmul(path, k, budget):
    """embeval's blocks without the selection: read, normalize and multiply only (its loop's floor)."""
    import h5py
    import torch

    from embeval.train.search import plan_search

    with h5py.File(path, "r") as f:
        corpus, queries = f["corpus"], torch.from_numpy(f["queries"][:])
        n, d = corpus.shape
        plan = plan_search(len(queries), d, k, n, budget)
        baseline = rss_mib()
        start = time.perf_counter()
        queries = torch.nn.functional.normalize(queries)
        scores = torch.empty(plan.query_block, plan.corpus_block)
        for b0 in range(0, n, plan.corpus_block):
            block = torch.cat(
                [
                    torch.from_numpy(corpus[c0 : min(c0 + plan.read_rows, b0 + plan.corpus_block, n)])
                    for c0 in range(b0, min(b0 + plan.corpus_block, n), plan.read_rows)
                ]
            )
            block = torch.nn.functional.normalize(block)
            for a in range(0, len(queries), plan.query_block):
                part = queries[a : a + plan.query_block]
                torch.mm(part, block.T, out=scores[: len(part), : len(block)])
        seconds = time.perf_counter() - start
    return {"seconds": seconds, "baseline_rss_mib": baseline, "peak_rss_mib": peak_mib()}


def arm_faiss(path, k, out):
    import faiss
    import h5py

    with h5py.File(path, "r") as f:
        corpus, queries = f["corpus"], f["queries"][:]
        n, d = corpus.shape
        baseline = rss_mib()
        start = time.perf_counter()
        index = faiss.IndexFlatIP(d)
        for a in range(0, n, 65536):
            piece = corpus[a : a + 65536]
            faiss.normalize_L2(piece)
            index.add(piece)
        built = time.perf_counter()
        faiss.normalize_L2(queries)
        scores, rows = index.search(queries, k)
        done = time.perf_counter()
    save_top(out, scores, rows)
    return {
        "seconds": done - start,
        "build_seconds": built - start,
        "search_seconds": done - built,
        "baseline_rss_mib": baseline,
        "peak_rss_mib": peak_mib(),
        "threads": faiss.omp_get_max_threads(),
    }


class _SplitLog(logging.Handler):
    """mteb's own split of its search time, from its log line after the last chunk."""

    PATTERN = re.compile(r"encoding took ([\d.]+)s, computing similarity took ([\d.]+)s")

    def __init__(self):
        super().__init__(logging.INFO)
        self.split = None

    def emit(self, record):
        message = record.getMessage()
        if message.startswith("Searched "):
            found = self.PATTERN.search(message)
            self.split = tuple(float(x) for x in found.groups())


def arm_mteb(path, k, out):
    import datasets
    import h5py
    import mteb
    from mteb.models.search_wrappers import SearchEncoderWrapper
    from mteb.similarity_functions import cos_sim

    datasets.disable_progress_bars()
    log = _SplitLog()
    logger = logging.getLogger("mteb.models.search_wrappers")
    logger.setLevel(logging.INFO)
    logger.addHandler(log)
    metadata = mteb.get_task("SciFact").metadata  # a text retrieval task: only its modalities are used

    with h5py.File(path, "r") as f:
        corpus_vectors, query_vectors = f["corpus"], f["queries"][:]
        n, q = len(corpus_vectors), len(query_vectors)

        class FileEncoder:
            """The vectors of the ids it is given: d<row> from /corpus, q<row> from /queries."""

            mteb_model_meta = None
            seconds = 0.0

            def encode(self, inputs, **kwargs):
                start = time.perf_counter()
                ids = inputs.dataset["id"]
                rows = np.array([int(i[1:]) for i in ids])
                assert len(rows) and (np.diff(rows) == 1).all()  # mteb hands over contiguous chunks
                source = corpus_vectors if ids[0][0] == "d" else query_vectors
                vectors = source[rows[0] : rows[-1] + 1]
                FileEncoder.seconds += time.perf_counter() - start
                return vectors

            def similarity(self, a, b):
                return cos_sim(a, b)

        corpus = datasets.Dataset.from_dict({"id": [f"d{i}" for i in range(n)], "text": [f"d{i}" for i in range(n)]})
        queries = datasets.Dataset.from_dict({"id": [f"q{i}" for i in range(q)], "text": [f"q{i}" for i in range(q)]})
        wrapper = SearchEncoderWrapper(FileEncoder(), corpus_chunk_size=MTEB_CHUNK)
        kwargs = {"task_metadata": metadata, "hf_split": "test", "hf_subset": "default"}
        encode_kwargs = {"batch_size": 32, "show_progress_bar": False}
        baseline = rss_mib()
        start = time.perf_counter()
        wrapper.index(corpus, encode_kwargs=encode_kwargs, **kwargs)
        results = wrapper.search(queries, top_k=k, encode_kwargs=encode_kwargs, **kwargs)
        seconds = time.perf_counter() - start
    peak = peak_mib()
    scores = np.zeros((q, 10), np.float32)
    rows = np.zeros((q, 10), np.int64)
    for i in range(q):
        ranked = sorted(((-s, int(doc[1:])) for doc, s in results[f"q{i}"].items()))[:10]
        scores[i] = [-s for s, _ in ranked]
        rows[i] = [r for _, r in ranked]
    save_top(out, scores, rows)
    encoding, similarity = log.split
    return {
        "seconds": seconds,
        "search_seconds": similarity,
        "encoding_seconds": encoding,
        "encoder_read_seconds": FileEncoder.seconds,
        "baseline_rss_mib": baseline,
        "peak_rss_mib": peak,
        "corpus_chunk_size": MTEB_CHUNK,
    }


def child(arm, path, k, budget, out):
    if arm == "gemm":
        result = arm_gemm()
    elif arm == "embeval":
        result = arm_embeval(path, k, budget, out)
    elif arm == "embeval-grouped":
        result = arm_embeval(path, k, budget, out, filtered=False)
    elif arm == "matmul":
        result = arm_matmul(path, k, budget)
    elif arm == "faiss":
        result = arm_faiss(path, k, out)
    else:
        result = arm_mteb(path, k, out)
    print(json.dumps(result))


def run(arm, path="-", k=0, budget=0, out="-"):
    load = os.getloadavg()[0]
    done = subprocess.run(
        [sys.executable, __file__, "--child", arm, str(path), str(k), str(budget), str(out)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["load_before"] = load
    return result


# ---------------------------------------------------------------------------------------------
# Agreement


def compare(path, mine, theirs):
    """Queries whose top-10 rows differ, split by what the differing positions are."""
    import h5py

    a, b = np.load(mine), np.load(theirs)
    differ = np.flatnonzero((a["rows"] != b["rows"]).any(axis=1))
    counts = {"queries": len(a["rows"]), "lists_differ": len(differ), "exact_ties": 0, "near_ties": 0}
    counts["disagreements"] = 0
    counts["equal_float32_scores"] = 0
    if not len(differ):
        return counts
    with h5py.File(path, "r") as f:
        queries = f["queries"][:][differ].astype(np.float64)
        needed = np.unique(np.concatenate([a["rows"][differ].ravel(), b["rows"][differ].ravel()]))
        vectors = f["corpus"][needed].astype(np.float64)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    where = {row: i for i, row in enumerate(needed)}
    kinds = ["exact_ties", "near_ties", "disagreements"]
    for j, i in enumerate(differ):
        positions = np.flatnonzero(a["rows"][i] != b["rows"][i])
        if (a["scores"][i][positions] == b["scores"][i][positions]).all():
            counts["equal_float32_scores"] += 1
        worst = 0
        for p in positions:
            mine, theirs = (float(vectors[where[r]] @ queries[j]) for r in (a["rows"][i][p], b["rows"][i][p]))
            gap = abs(mine - theirs)
            worst = max(worst, 0 if gap == 0 else 1 if gap <= NEAR else 2)
        counts[kinds[worst]] += 1
    return counts


# ---------------------------------------------------------------------------------------------
# Main


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--k", default="1000,10")
    parser.add_argument("--budget-mib", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--tmp", default=None, help="folder for the HDF5 files (default: a temporary one)")
    parser.add_argument("--out", default=str(HERE / "results" / "retrieval.json"))
    parser.add_argument("--child", nargs=5, metavar=("ARM", "FILE", "K", "BUDGET", "OUT"))
    args = parser.parse_args()
    if args.child:
        arm, path, k, budget, out = args.child
        return child(arm, path, int(k), int(budget), out)

    sizes = [int(s) for s in args.sizes.split(",")]
    ks = [int(k) for k in args.k.split(",")]
    arms = args.arms.split(",")
    budget = args.budget_mib << 20
    record = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "queries": args.queries,
        "dim": args.dim,
        "budget_mib": args.budget_mib,
        "repeats": args.repeats,
        "similarity": "cosine",
        "runs": [],
    }
    best_gflops = 0.0
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        for n in sizes:
            path = Path(tmp) / f"vectors_{n}.h5"
            make_file(path, n, args.queries, args.dim)
            for k in ks:
                entry = {"corpus": n, "k": k, "arms": {}}
                for repeat in range(args.repeats):
                    for arm in arms:
                        if arm == "mteb" and repeat > 0 or arm in ("embeval-grouped", "matmul") and k != max(ks):
                            continue
                        gemm = run("gemm")
                        best_gflops = max(best_gflops, gemm["gflops"])
                        out = Path(tmp) / f"{arm}_{n}_{k}.npz"
                        result = run(arm, path, k, budget, out)
                        result["gemm_gflops_before"] = gemm["gflops"]
                        kept = entry["arms"].get(arm)
                        if kept is None or result["seconds"] < kept["seconds"]:
                            entry["arms"][arm] = result
                        print(f"n={n} k={k} {arm}: {result['seconds']:.1f} s, peak {result['peak_rss_mib']:.0f} MiB")
                entry["flops"] = 2 * args.queries * n * args.dim
                if "faiss" in entry["arms"] and "embeval" in entry["arms"]:
                    entry["top10_embeval_vs_faiss"] = compare(
                        path, Path(tmp) / f"embeval_{n}_{k}.npz", Path(tmp) / f"faiss_{n}_{k}.npz"
                    )
                if "mteb" in entry["arms"] and "embeval" in entry["arms"]:
                    entry["top10_embeval_vs_mteb"] = compare(
                        path, Path(tmp) / f"embeval_{n}_{k}.npz", Path(tmp) / f"mteb_{n}_{k}.npz"
                    )
                record["runs"].append(entry)
    record["gemm_gflops"] = best_gflops
    for entry in record["runs"]:
        entry["floor_seconds"] = entry["flops"] / (best_gflops * 1e9)
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print_table(record)


def print_table(record):
    print(f"\nfloat32 GEMM {record['gemm_gflops']:.0f} GFLOP/s; budget {record['budget_mib']} MiB; cosine")
    print(f"{'corpus':>9} {'k':>5} {'arm':<16} {'seconds':>8} {'x floor':>8} {'peak MiB':>9} {'+ MiB':>7}")
    for entry in record["runs"]:
        floor = entry["floor_seconds"]
        print(f"{entry['corpus']:>9} {entry['k']:>5} {'floor':<16} {floor:>8.1f} {1:>8.2f}")
        for arm, r in entry["arms"].items():
            seconds = r["seconds"]
            extra = r["peak_rss_mib"] - r["baseline_rss_mib"]
            print(
                f"{'':>9} {'':>5} {arm:<16} {seconds:>8.1f} {seconds / floor:>8.2f} "
                f"{r['peak_rss_mib']:>9.0f} {extra:>7.0f}"
            )
            if arm == "mteb":
                s = r["search_seconds"]
                print(f"{'':>9} {'':>5} {'mteb similarity':<16} {s:>8.1f} {s / floor:>8.2f}")
        for name in ("top10_embeval_vs_faiss", "top10_embeval_vs_mteb"):
            if name in entry:
                print(f"{'':>16}{name}: {entry[name]}")


if __name__ == "__main__":
    main()
