"""GPU benchmark: device timings on a GPU, the device audit of every evaluator on the CPU.

    python bench/gpu.py --data DATA                       # on a CUDA machine: time every task at 768-d
    python bench/gpu.py --audit [--before CHECKOUT]       # anywhere: the device audit, per evaluator
    python bench/gpu.py --roofline                         # the hot loops' FLOPs, bytes and rates here
    python bench/gpu.py --mteb-benchmark [--scale S] [--tasks A,B] [--dim 384]
                                                           # MTEB(eng, v2) synthesized: embeval on the GPU vs mteb

On a GPU every task is scored with `--device cuda` on a deterministic bag of random 768-d token
vectors (devbow's construction), and the seconds per task go to bench/results/gpu_<device>.json,
with the exact retrieval search's (1,000,000 x 384 random rows, 10,000 queries, top 1000 and
top 10) and its GEMM floor there.

`--audit` runs every evaluator and solver on synthetic data of a realistic small size under
embeval.audit.DeviceAudit (the CPU standing in for the device) and records, per evaluator, the host
synchronizations, host-to-device copies, cross-device operations and numpy-of-device calls, with
the trainer steps and early-stopping rounds they happened in and the source lines that cause most
of them. `--before CHECKOUT` also audits another checkout of embeval (the audit module is loaded
from this tree by path) and records both in bench/results/device_audit.json.

`--mteb-benchmark` runs bench/mteb_benchmark.py with embeval's arm on the CUDA device (mteb's arm
as mteb runs it), into bench/results/mteb_benchmark_gpu_<device>.json; without a CUDA device it
says so and times embeval on the CPU, into bench/results/mteb_benchmark_cpu_fallback.json.

`--roofline` times one call of each hot loop (trainer step, regressor step, COCO ranker step, L-BFGS
objective evaluation) and records its FLOPs, bytes moved, achieved GFLOP/s and its floor here: the
same operations on problems of dimension 1 (the loop's per-operation overhead) plus the larger of
its FLOPs at the machine's measured large-GEMM rate and its bytes at the measured copy bandwidth,
in bench/results/roofline_cpu.json.
"""

import argparse
import collections
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _checkout  # noqa: F401  (this clone's embeval, from any folder)
import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _load_audit():
    spec = importlib.util.spec_from_file_location("device_audit", ROOT / "embeval" / "audit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _classification(task, splits, dim, config, seed=0):
    import torch

    from embeval.evaluate.context import Context
    from embeval.tasks.registry import TASKS
    from embeval.tasks.samples import Split, TaskData

    rng = np.random.default_rng(seed)
    pair = TASKS[task].params.features != "single"
    data_splits, rows, vectors, start = {}, {}, [], 0
    for name, n in splits.items():
        labels = rng.integers(0, 3 if task != "MRPC" and task != "CR" else 2, n)
        data_splits[name] = Split(
            name,
            [f"{name} a{i}" + " x" * (i % 3) for i in range(n)],
            labels,
            b=[f"{name} b{i}" for i in range(n)] if pair else None,
        )
        centre = np.eye(dim)[labels] * 1.5
        vectors.append(centre + rng.normal(size=(n, dim)))
        if pair:
            vectors.append(centre + rng.normal(size=(n, dim)))
            rows[name] = (np.arange(start, start + n), np.arange(start + n, start + 2 * n))
            start += 2 * n
        else:
            rows[name] = (np.arange(start, start + n), None)
            start += n
    classes = sorted({int(y) for s in data_splits.values() for y in s.y})
    device = torch.device("cpu")
    table = torch.as_tensor(np.concatenate(vectors).astype(np.float32), device=device)
    return Context(
        TASKS[task], TaskData(task, data_splits, [str(c) for c in classes]), table, rows, device, config, config.seed
    )


def _pairs(task, sizes, dim, names, seed=0):
    import torch

    from embeval.evaluate.context import Context
    from embeval.tasks.registry import TASKS
    from embeval.tasks.samples import Split, TaskData

    rng = np.random.default_rng(seed)
    splits, tables, rows, offset = {}, [], {}, 0
    for name, n in zip(names, sizes):
        a = rng.normal(size=(n, dim))
        b = a + rng.normal(size=(n, dim))
        y = np.clip(5 - np.linalg.norm(a - b, axis=1) / np.sqrt(dim) * 3, 0, 5)
        splits[name] = Split(name, [f"{name}a{i}" for i in range(n)], y, b=[f"{name}b{i}" for i in range(n)])
        tables += [a, b]
        rows[name] = (np.arange(offset, offset + n), np.arange(offset + n, offset + 2 * n))
        offset += 2 * n
    device = torch.device("cpu")
    table = torch.as_tensor(np.concatenate(tables).astype(np.float32), device=device)
    return Context(TASKS[task], TaskData(task, splits, None, [f"{s}.file" for s in splits]), table, rows, device)


def _coco(images, dim, feat_dim, seed=0):
    import torch

    from embeval.evaluate.context import Context
    from embeval.tasks.registry import TASKS
    from embeval.tasks.samples import Split, TaskData

    rng = np.random.default_rng(seed)
    splits, tables, rows, offset = {}, [], {}, 0
    mix = rng.normal(size=(feat_dim, dim))
    for name, m in zip(("train", "dev", "test"), images):
        features = rng.normal(size=(m, feat_dim)).astype(np.float32)
        captions = np.repeat(features @ mix, 5, axis=0) + rng.normal(size=(5 * m, dim)) * 3
        splits[name] = Split(name, [f"{name} {i}" for i in range(5 * m)], np.repeat(np.arange(m), 5), images=features)
        tables.append(captions)
        rows[name] = (np.arange(offset, offset + 5 * m), None)
        offset += 5 * m
    device = torch.device("cpu")
    table = torch.as_tensor(np.concatenate(tables).astype(np.float32), device=device)
    task = TASKS["ImageCaptionRetrieval"]
    return Context(task, TaskData(task.name, splits, None, []), table, rows, device)


def _cases(dim):
    """(name, run) for every evaluator and solver; each run builds its data inside the audit."""
    from embeval.evaluate import (
        classify,
        geometry,
        probing,
        relatedness,
        sts,
    )
    from embeval.evaluate import (
        ranking as retrieval,
    )
    from embeval.evaluate.classify import drive
    from embeval.run.config import build

    small = {"tenacity": 3, "epoch_size": 2, "max_epoch": 20}
    split = {"train": 1000, "dev": 200, "test": 200}
    kfold = {"train": 1000, "test": 200}
    cases = [
        (
            "split SST5 senteval",
            lambda: drive(classify.split(_classification("SST5", split, dim, build(classifier=small)))),
        ),
        ("split SST5 lbfgs", lambda: drive(classify.split(_classification("SST5", split, dim, build(solver="lbfgs"))))),
        (
            "split SST5 mlp dropout",
            lambda: drive(
                classify.split(_classification("SST5", split, dim, build(classifier=dict(small, nhid=50, dropout=0.1))))
            ),
        ),
        (
            "kfold TREC senteval",
            lambda: drive(classify.kfold(_classification("TREC", kfold, dim, build(kfold=5, classifier=small)))),
        ),
        (
            "kfold MRPC (pair) lbfgs",
            lambda: drive(classify.kfold(_classification("MRPC", kfold, dim, build(kfold=5, solver="lbfgs")))),
        ),
        (
            "split SICKEntailment (pair) senteval",
            lambda: drive(classify.split(_classification("SICKEntailment", split, dim, build(classifier=small)))),
        ),
        (
            "split SNLI (snli) senteval",
            lambda: drive(classify.split(_classification("SNLI", split, dim, build(classifier=small)))),
        ),
        (
            "probing Length mlp grid",
            lambda: drive(
                probing.evaluate_probing(
                    _classification(
                        "Length", split, dim, build(classifier=dict(small, max_epoch=8), probing_classifier="mlp")
                    )
                )
            ),
        ),
        (
            "relatedness STSBenchmark",
            lambda: relatedness.evaluate_relatedness(
                _pairs("STSBenchmark", (1000, 200, 200), dim, ("train", "dev", "test"))
            ),
        ),
        ("retrieval COCO", lambda: retrieval.evaluate_ranking(_coco((200, 25, 25), dim, 64))),
        ("cosine STS12", lambda: sts.evaluate_cosine_sts(_pairs("STS12", (300, 300), dim, ("MSRpar", "OnWN")))),
    ]
    for method in ("none", "zscore+l2"):

        def inner(method=method):
            ctx = _classification("CR", {"all": 600}, dim, build(kfold=5, classifier=small, normalize=method))
            ctx.normalize = method
            return drive(classify.inner_kfold(ctx))

        cases.append((f"inner_kfold CR senteval {method}", inner))

    def diagnostics():
        ctx = _pairs("STSBenchmark", (500, 100, 100), dim, ("train", "dev", "test"))
        return geometry.diagnostics(ctx.table, ctx.data, ctx.rows, 1111)

    cases.append(("geometry", diagnostics))

    def exact_search():
        from embeval.train import search

        rng = np.random.default_rng(0)
        corpus = rng.standard_normal((20000, dim), dtype=np.float32)
        queries = rng.standard_normal((512, dim), dtype=np.float32)
        budget = 64 << 20
        return search.top_k(
            queries, lambda a, b: corpus[a:b], len(corpus), 1000, "cosine", budget, "cpu", filtered=False
        )

    cases.append(("exact search top-1000 (the GPU's grouped selection)", exact_search))
    return cases


def _counters():
    """Call counts of the steps and rounds of each training loop, by wrapping them."""
    from embeval.evaluate import ranking as retrieval
    from embeval.evaluate import relatedness
    from embeval.train import batched, lbfgs
    from embeval.train.optimizers import BatchedOptimizer

    calls = collections.Counter()
    for owner, name, label in (
        (BatchedOptimizer, "step", "trainer steps"),
        (batched, "_accuracy", "trainer rounds"),
        (lbfgs, "_two_loop", "lbfgs iterations"),
        (relatedness.SoftmaxRegressor, "step", "regressor steps"),
        (relatedness, "dev_pearson", "regressor rounds"),
        (retrieval, "train_step", "ranker steps"),
        (retrieval, "evaluate_split", "ranker rounds"),
    ):
        original = getattr(owner, name)

        def counted(*args, _original=original, _label=label, **kwargs):
            calls[_label] += 1
            return _original(*args, **kwargs)

        setattr(owner, name, counted)
    return calls


def audit_here(dim):
    """{evaluator: figures} of the embeval importable here."""
    import torch

    torch.set_num_threads(1)
    audit_module = _load_audit()
    calls = _counters()
    out = {}
    for name, run in _cases(dim):
        calls.clear()
        started = time.perf_counter()
        with audit_module.DeviceAudit("cpu") as audit:
            run()
        top = collections.Counter(audit.counts["sync"]).most_common(3)
        out[name] = {
            "syncs": audit.total("sync"),
            "copies_to_device": audit.total("copy_to_device"),
            "cross_device": audit.total("cross_device"),
            "numpy_of_device": audit.total("numpy_of_device"),
            **dict(calls),
            "seconds_audited": round(time.perf_counter() - started, 1),
            "top_sync_lines": dict(top),
        }
        print(
            f"{name:40s} syncs {out[name]['syncs']:6d}  copies {out[name]['copies_to_device']:5d}  {dict(calls)}",
            flush=True,
        )
    return out


def time_on_gpu(data, dim, tasks):
    """Seconds per task of `embeval score --device cuda` on random token vectors."""
    import hashlib

    import torch

    from embeval.formats import sentences as export
    from embeval.formats.vectors import write
    from embeval.run.score import score
    from embeval.tasks.registry import TASKS

    cache = {}

    def encode(sentences):
        out = np.zeros((len(sentences), dim), dtype=np.float32)
        for i, s in enumerate(sentences):
            for token in s.split():
                if token not in cache:
                    seed = int.from_bytes(hashlib.sha256(token.encode()).digest()[:8], "little")
                    cache[token] = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
            if s.split():
                out[i] = np.mean([cache[t] for t in s.split()], axis=0)
        return out

    names = [n for n in (tasks or TASKS) if not TASKS[n].missing_files(data)]
    with tempfile.TemporaryDirectory() as tmp:
        export.export([TASKS[n].load(data) for n in names], Path(tmp) / "sentences")
        write(Path(tmp) / "v.h5", Path(tmp) / "sentences", encode, batch_size=4096, progress=False)
        record = score(Path(tmp) / "v.h5", data, tasks=names, device="cuda", progress=False, log=lambda m: None)
    return {
        "device": torch.cuda.get_device_name(0),
        "dim": dim,
        "seconds": {n: record["tasks"][n]["seconds"] for n in names},
    }


def time_search_on_gpu(n=1_000_000, q=10_000, dim=384, k=1000):
    """Seconds of the exact search (top-k by cosine) of q queries in n random rows, the corpus read from
    host memory piece by piece, under the device's memory budget; and the GEMM floor of its FLOPs."""
    import torch

    from embeval.memory import dense_budget
    from embeval.train import search

    rng = np.random.default_rng(0)
    corpus = rng.standard_normal((n, dim), dtype=np.float32)
    queries = rng.standard_normal((q, dim), dtype=np.float32)
    device = torch.device("cuda")
    budget = dense_budget(device)
    a = torch.randn(8192, 8192, device=device)
    torch.mm(a, a)
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(5):
        torch.mm(a, a)
    torch.cuda.synchronize()
    gflops = 5 * 2 * 8192**3 / (time.perf_counter() - started) / 1e9
    times = {}
    for depth in (k, 10):
        search.top_k(queries[:256], lambda a, b: corpus[a:b], 100_000, depth, "cosine", budget, device)
        started = time.perf_counter()
        search.top_k(queries, lambda a, b: corpus[a:b], n, depth, "cosine", budget, device)
        times[f"top_{depth}"] = time.perf_counter() - started
    return {
        "corpus": n,
        "queries": q,
        "dim": dim,
        "budget_mib": budget / 2**20,
        "seconds": times,
        "gemm_gflops": gflops,
        "floor_seconds": 2 * n * q * dim / (gflops * 1e9),
    }


def _rate(fn, repeat):
    """Seconds per call of fn, the best of three timings of `repeat` calls after one warm-up."""
    fn()
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter() - started) / repeat)
    return best


def _loops(dim, batch, rows, nhid_width, cpu):
    """The hot loops at one size: {name: (call, FLOPs, bytes moved)}. At dim 1 and batch 1 the same
    operations run on problems too small for arithmetic to matter: their time is the loop's overhead."""
    import torch

    from embeval.evaluate import ranking as retrieval
    from embeval.evaluate import relatedness
    from embeval.train import batched, lbfgs
    from embeval.train.features import DenseFeatures
    from embeval.train.optimizers import BatchedOptimizer, parse

    rng = np.random.default_rng(0)
    x = torch.randn(max(rows, 64), dim)
    labels = torch.as_tensor(rng.integers(0, 2, len(x)))
    features = DenseFeatures(x)
    loops = {}
    for nhid, C in ((0, 2), (nhid_width, 2)):
        R = 4
        params = batched._stack(batched.initial_params(1, dim, C, nhid, cpu), 1, R)
        name, settings = parse("adam")
        optimizer = BatchedOptimizer(name, params, torch.full((1, R), 1e-4), settings)
        idx = torch.as_tensor(rng.integers(0, len(x), (1, batch)))
        target = torch.nn.functional.one_hot(labels[idx], C).float().transpose(1, 2) / batch
        weight = torch.full((1, batch), 1.0 / batch)
        buffer = torch.empty(batch, dim)

        def step(params=params, optimizer=optimizer, idx=idx, target=target, weight=weight, buffer=buffer, nhid=nhid):
            xb = features(idx, out=buffer)
            optimizer.step(params, batched._gradients(params, xb, target, weight, nhid, None))

        width = C if nhid == 0 else nhid
        flops = 4 * R * width * dim * batch + (4 * R * C * nhid * batch if nhid else 0)
        nbytes = batch * dim * 4 + sum(p.numel() for p in params) * 4 * 7
        loops[f"trainer step (nhid {50 if nhid else 0}, 4 problems, batch 64)"] = (step, flops, nbytes)
    pair = torch.randn(max(rows, 64), 2 * dim)
    model = relatedness.SoftmaxRegressor(2 * dim, 1, cpu)
    target = torch.softmax(torch.randn(len(pair), 5), 1)
    loops["regressor step (batch 64)"] = (
        lambda: model.step(pair[:batch], target[:batch]),
        4 * batch * 2 * dim * 5,
        batch * 2 * dim * 4 + 2 * dim * 5 * 4 * 7,
    )
    image_dim = 2048 if dim > 1 else 1
    images = rng.standard_normal((1000, image_dim)).astype(np.float32)
    split = retrieval.CaptionSplit(torch.randn(5000, dim), np.arange(5000), np.repeat(np.arange(1000), 5), images, cpu)
    ranker = retrieval.RankingModel(dim, image_dim, 1)
    adam = torch.optim.Adam(ranker.parameters())
    coco_batch = next(retrieval.epoch_batches(np.random.RandomState(1), 5000))
    coco_rows = 128 * (1 + retrieval.NCONTRAST)
    loops["COCO ranker step (768-d captions, 2048-d images)"] = (
        lambda: retrieval.train_step(ranker, adam, split, coco_batch),
        4 * coco_rows * (image_dim + dim) * retrieval.PROJ_DIM,
        coco_rows * (image_dim + dim) * 4 + (image_dim + dim) * retrieval.PROJ_DIM * 4 * 7,
    )
    P = 6
    objective = lbfgs.Objective(DenseFeatures(x[:rows]), labels[:rows], 2, [np.arange(rows)], np.ones((1, P)), cpu)
    theta = torch.zeros((P, dim + 1, 1), dtype=torch.float64)
    problems = torch.arange(P)
    loops["L-BFGS objective and gradient (10,000 x 768, 6 problems, float32)"] = (
        lambda: objective(theta, problems, torch.float32),
        4 * rows * dim * P,
        2 * rows * dim * 4,
    )
    return loops


REPEATS = {"trainer": 300, "regressor": 500, "COCO": 3, "L-BFGS": 20}


def roofline(dim=768):
    """Per call of each hot loop: its FLOPs and bytes, the time taken, and its floor on this machine:
    the time of the same operations on problems of dimension 1 (per-operation overhead) plus the
    larger of FLOPs at the measured large-GEMM rate and bytes at the measured copy bandwidth."""
    import torch

    cpu = torch.device("cpu")
    n = 4096
    a, b = torch.randn(n, n), torch.randn(n, n)
    gemm = 2 * n**3 / _rate(lambda: a @ b, 3) / 1e9
    big = torch.randn(64 << 20 >> 2)
    copy = torch.empty_like(big)
    bandwidth = 2 * big.numel() * 4 / _rate(lambda: copy.copy_(big), 10) / 1e9
    full = _loops(dim, 64, 10000, 50, cpu)
    tiny = _loops(1, 1, 8, 1, cpu)
    loops = {}
    for name, (fn, flops, nbytes) in full.items():
        repeat = next(r for key, r in REPEATS.items() if name.startswith(key))
        seconds = _rate(fn, repeat)
        overhead = _rate(tiny[name][0], repeat)
        work = max(flops / (gemm * 1e9), nbytes / (bandwidth * 1e9))
        floor = overhead + work
        loops[name] = {
            "us_per_call": round(seconds * 1e6, 1),
            "gflop_per_call": flops / 1e9,
            "mbytes_per_call": nbytes / 1e6,
            "gflops": round(flops / seconds / 1e9, 2),
            "floor_us_flops": round(flops / (gemm * 1e9) * 1e6, 1),
            "floor_us_bytes": round(nbytes / (bandwidth * 1e9) * 1e6, 1),
            "overhead_us": round(overhead * 1e6, 1),
            "floor_us": round(floor * 1e6, 1),
            "time_over_floor": round(seconds / floor, 2),
        }
    return {
        "threads": torch.get_num_threads(),
        "gemm_gflops": round(gemm, 1),
        "copy_gbytes_per_s": round(bandwidth, 1),
        "load_average": [round(v, 1) for v in os.getloadavg()],
        "loops": loops,
    }


def mteb_benchmark(args):
    """bench/mteb_benchmark.py with embeval on the CUDA device, or on the CPU when there is none."""
    import torch

    spec = importlib.util.spec_from_file_location("mteb_benchmark", HERE / "mteb_benchmark.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if torch.cuda.is_available():
        device = "cuda"
        name = "gpu_" + torch.cuda.get_device_name(0).replace(" ", "_")
    else:
        print("no CUDA device: timing embeval on the CPU instead", flush=True)
        device, name = "cpu", "cpu_fallback"
    argv = [
        "--scale",
        str(args.scale),
        "--device",
        device,
        "--out",
        str(HERE / "results" / f"mteb_benchmark_{name}.json"),
    ]
    if args.tasks:
        argv += ["--tasks", args.tasks]
    if args.dim:
        argv += ["--dims", str(args.dim)]
    module.main(argv)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--audit", action="store_true")
    parser.add_argument("--before", help="another checkout of embeval to audit as the 'before' figures")
    parser.add_argument("--dim", type=int, default=None)
    parser.add_argument("--data")
    parser.add_argument("--tasks")
    parser.add_argument("--roofline", action="store_true")
    parser.add_argument("--mteb-benchmark", action="store_true", help="time bench/mteb_benchmark.py's benchmark")
    parser.add_argument("--scale", type=float, default=1.0, help="--mteb-benchmark: fraction of each task's size")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.roofline:
        figures = roofline()
        path = HERE / "results" / "roofline_cpu.json"
        path.write_text(json.dumps(figures, indent=1) + "\n")
        print(json.dumps(figures, indent=1))
        return
    if args.json:
        print(json.dumps(audit_here(args.dim or 64)))
        return
    if args.mteb_benchmark:
        return mteb_benchmark(args)
    if args.audit:
        dim = args.dim or 64
        after = audit_here(dim)
        result = {"dim": dim, "after": after}
        if args.before:
            env = dict(os.environ, PYTHONPATH=str(Path(args.before).resolve()))
            proc = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--json", "--dim", str(dim)],
                cwd=args.before,
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            result["before"] = json.loads(proc.stdout.strip().splitlines()[-1])
        path = HERE / "results" / "device_audit.json"
        path.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {path}")
        return
    import torch

    if not torch.cuda.is_available():
        sys.exit("no CUDA device: run with --audit on the CPU, or on a machine with a GPU")
    figures = time_on_gpu(args.data, args.dim or 768, args.tasks.split(",") if args.tasks else None)
    figures["exact_search"] = time_search_on_gpu()
    name = figures["device"].replace(" ", "_")
    path = HERE / "results" / f"gpu_{name}.json"
    path.write_text(json.dumps(figures, indent=1) + "\n")
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
