"""Classifier benchmark: embeval's two solvers against two one-fit-at-a-time baselines.

    python bench/classifiers.py --data ../shared/senteval_data [--dims 300,768] [--tasks CR,MR,...]

For every task and dimension, in one run on this machine:
  senteval  embeval --solver senteval (all problems of a stage batched)
  lbfgs     embeval --solver lbfgs (batched exact L-BFGS)
  (a) sklearn   SentEval's usepytorch=False protocol fit by fit: LogisticRegression(C, random_state=1111)
                with scikit-learn's defaults (lbfgs, max_iter 100), as SentEval runs it
  (a') sklearn converged
                the same fits run to embeval's tolerance (tol 1e-7, max_iter 5000): the optimum
                embeval's lbfgs returns, so the comparison at equal numbers
  (b) single    SentEval's PyTorch protocol one classifier at a time: embeval's trainer given one
                problem per call, for every problem SentEval trains (including its retrain of the
                chosen regularization on split tasks)
The baselines are timed on a random sample of their fits (--sample, fixed seed); `--sample 0` times
every fit. (a) and (a') are scaled by the number of fits SentEval makes. (b)'s fits differ mostly in
how long early stopping lets them run, so its time is scaled by work instead: every fit is also
trained batched, which gives each fit's rounds, and the sampled time is multiplied by
(sum over all fits of rounds x train size) / (the same sum over the sampled fits). The sampled
problems' results and rounds are compared with the same problems trained batched (they must be
equal). Each measurement
runs in a fresh process; peak memory is that process's maximum resident set size.
Vectors: a deterministic bag of random token vectors (devbow's construction at the given dimension).
Writes bench/results/classifiers.json and prints a table.

    git worktree add --detach ../embeval-before <commit>
    python bench/classifiers.py --dims 300 --solvers-only --against-tree ../embeval-before \
        --out bench/results/classifiers_300d_solvers.json

times embeval's two solvers only, in this checkout and in another one (an earlier commit), one after
the other in the same run (--repeat times each, the fastest kept): seconds of each and whether the
figures (dev and test accuracy) are equal.
"""

import argparse
import hashlib
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _checkout  # noqa: F401  (this clone's embeval, from any folder)
import numpy as np

HERE = Path(__file__).resolve().parent
TASKS = ["CR", "MR", "SUBJ", "MPQA", "TREC", "MRPC", "SST2", "SST5", "SICKEntailment"]


def encoder(dim, salt=""):
    """The mean of random token vectors, each seeded by sha256(salt + token): devbow's construction;
    a different salt gives a different deterministic encoder."""
    cache = {}

    def vector(token):
        if token not in cache:
            seed = int.from_bytes(hashlib.sha256((salt + token).encode("utf-8")).digest()[:8], "little")
            cache[token] = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
        return cache[token]

    def encode(sentences):
        out = np.zeros((len(sentences), dim), dtype=np.float32)
        for i, s in enumerate(sentences):
            tokens = s.split()
            if tokens:
                out[i] = np.mean([vector(t) for t in tokens], axis=0)
        return out

    return encode


def make_vectors(data, tasks, dim, work):
    import embeval
    from embeval.formats import sentences as export
    from embeval.tasks.registry import TASKS as REGISTRY

    path = work / f"bow{dim}.h5"
    if not path.exists():
        export.export([REGISTRY[t].load(data) for t in tasks], work / "sent")
        embeval.vectors.write(path, work / "sent", encoder(dim), batch_size=8192, progress=False)
    return path


def context(vectors, data, task):
    """The Context embeval's runner would build for this task."""
    import torch

    from embeval.evaluate.context import Context
    from embeval.formats.vectors import VectorsFile
    from embeval.run.config import build
    from embeval.run.plan import Located, TaskDataCache, UnionRows
    from embeval.tasks.registry import TASKS as REGISTRY
    from embeval.tasks.registry import builtin

    cache = TaskDataCache(data)
    spec = REGISTRY[task]
    with VectorsFile(vectors) as vf:
        loc = Located(spec, vf, UnionRows(vf, cache, builtin()), cache)
        table = loc.read(vf)
    row_of = {"text": {s: i for i, s in enumerate(loc.sentences)}}
    rows = spec.kind_module.rows(spec, loc.data, row_of)
    config = build(solver="senteval")
    return Context(spec, loc.data, torch.from_numpy(table), rows, torch.device("cpu"), config, 1111)


GRIDS = {"nested-kfold": "inner_kfold", "kfold": "kfold", "split": "split"}  # classify's grid of each protocol


def stage_problems(ctx, solver):
    """Every fit SentEval makes for this task, as (train idx, early-stopping idx or None, reg, stage)."""
    from embeval.evaluate import classify

    samples = classify.prepare(ctx)
    protocol = ctx.task.protocol
    regs = classify.regularization_grid(solver, GRIDS[protocol], ctx.task)
    k = ctx.config.kfold
    fits = []
    if protocol == "nested-kfold":
        y = samples.y("all")
        for train, _test, inner in classify.inner_kfold_folds(y, k):
            fits += [(a, b, reg, "select") for a, b in inner for reg in regs]
            fits.append((train, None, regs[0], "final"))
    elif protocol == "kfold":
        idx, y = samples.idx("train"), samples.y("train")
        fits += [(idx[a], idx[b], reg, "select") for a, b in classify.kfold_folds(y, k, 1111) for reg in regs]
        fits.append((idx, None, regs[0], "final"))
    else:
        fits += [(samples.idx("train"), samples.idx("dev"), reg, "select") for reg in regs]
        fits.append((samples.idx("train"), samples.idx("dev"), regs[0], "final"))
    return samples, fits


def run_solver(vectors, data, task, solver):
    import embeval
    from embeval.run.config import build

    record = embeval.score(vectors, data, tasks=[task], config=build(solver=solver), progress=False, log=lambda m: None)
    entry = record["tasks"][task]
    return {"seconds": entry["seconds"], "devacc": entry["results"]["devacc"], "acc": entry["results"]["acc"]}


def run_baseline(vectors, data, task, which, sample):
    import torch
    from sklearn.linear_model import LogisticRegression

    from embeval.evaluate import classify
    from embeval.train import batched, lbfgs

    ctx = context(vectors, data, task)
    samples, fits = stage_problems(ctx, "lbfgs" if which.startswith("sklearn") else "senteval")
    chosen = range(len(fits))
    if sample and sample < len(fits):
        chosen = sorted(np.random.default_rng(0).choice(len(fits), sample, replace=False).tolist())
    nclasses = classify.class_count(ctx)
    x = samples.features(torch.arange(len(samples.labels))).numpy() if which.startswith("sklearn") else None
    settings = {"sklearn": {}, "sklearn-converged": {"tol": lbfgs.GTOL_FLOAT64, "max_iter": lbfgs.MAX_ITER}}
    y = samples.labels.numpy()
    start = time.perf_counter()
    outcomes, rounds = [], []
    for i in chosen:
        train, valid, reg, _ = fits[i]
        if which.startswith("sklearn"):
            clf = LogisticRegression(C=reg, random_state=1111, **settings[which]).fit(x[train], y[train])
            outcomes.append(float(clf.score(x[valid], y[valid])) if valid is not None else None)
        else:
            trained = batched.train(
                samples.features,
                samples.labels,
                nclasses,
                [batched.Group(train, valid)],
                [reg],
                ctx.config.classifier,
                1111,
                torch.device("cpu"),
            )
            outcomes.append(float(trained.best_accuracy[0, 0]))
            rounds.append(int(trained.rounds[0, 0]))
    seconds = time.perf_counter() - start
    per_fit = seconds / max(len(chosen), 1)
    out = {
        "seconds": per_fit * len(fits),
        "measured_seconds": seconds,
        "fits_total": len(fits),
        "fits_timed": len(chosen),
        "timed": list(chosen),
        "outcomes": outcomes,
    }
    if rounds:
        out["rounds"] = rounds
        out["sample_passes"] = sum(r * len(fits[i][0]) for r, i in zip(rounds, chosen))
    return out


def every_fit_batched(samples, fits, nclasses, classifier):
    """Train every fit with embeval's trainer (fits sharing their sets as one group); best accuracy
    and rounds trained per fit, in the order of `fits`."""
    import torch

    from embeval.train import batched

    groups = {}
    for i, (train, valid, _, _) in enumerate(fits):
        key = (train.tobytes(), None if valid is None else valid.tobytes())
        groups.setdefault(key, []).append(i)
    accuracy, rounds = [None] * len(fits), [None] * len(fits)
    for width in sorted({len(members) for members in groups.values()}):
        chosen = [m for m in groups.values() if len(m) == width]
        trained = batched.train(
            samples.features,
            samples.labels,
            nclasses,
            [batched.Group(fits[m[0]][0], fits[m[0]][1]) for m in chosen],
            [[fits[i][2] for i in m] for m in chosen],
            classifier,
            1111,
            torch.device("cpu"),
        )
        for g, members in enumerate(chosen):
            for r, i in enumerate(members):
                accuracy[i], rounds[i] = float(trained.best_accuracy[g, r]), int(trained.rounds[g, r])
    return accuracy, rounds


def run_batched_check(vectors, data, task, timed, solver):
    """The baseline's fits solved by embeval. senteval: every fit, batched, giving each fit's best
    early-stopping accuracy (the sampled ones set against the one-at-a-time outcomes) and its rounds
    (the work of all fits, by which the sampled (b) time is scaled); lbfgs: the sampled fits'
    accuracy on their held-out sets."""
    import torch

    from embeval.evaluate import classify

    ctx = context(vectors, data, task)
    samples, fits = stage_problems(ctx, solver)
    nclasses = classify.class_count(ctx)
    if solver == "senteval":
        accuracy, rounds = every_fit_batched(samples, fits, nclasses, ctx.config.classifier)
        return {
            "outcomes": [accuracy[i] for i in timed],
            "rounds": [rounds[i] for i in timed],
            "all_passes": sum(r * len(f[0]) for r, f in zip(rounds, fits)),
        }
    chosen = [fits[i] for i in timed]
    fitted = classify.fit(
        "lbfgs",
        samples,
        nclasses,
        [t for t, _, _, _ in chosen],
        [v for _, v, _, _ in chosen],
        [[r] for _, _, r, _ in chosen],
        None,
        1111,
        torch.device("cpu"),
    )
    return {"outcomes": [None if np.isnan(a) else float(a) for a in fitted.selection_accuracy[:, 0]]}


def heldout_gaps(baseline, exact):
    """Mean and largest |baseline - embeval lbfgs| held-out accuracy over the sampled fits, in points."""
    gaps = [abs(a - b) * 100 for a, b in zip(baseline["outcomes"], exact["outcomes"]) if a is not None]
    return {"mean": float(np.mean(gaps)) if gaps else None, "max": float(np.max(gaps)) if gaps else None}


def child(args):
    """One measurement in this fresh process; prints its JSON result with peak memory."""
    if args.what in ("senteval", "lbfgs"):
        result = run_solver(args.vectors, args.data, args.task, args.what)
    elif args.what in ("check-senteval", "check-lbfgs"):
        result = run_batched_check(args.vectors, args.data, args.task, json.loads(args.timed), args.what[6:])
    else:
        result = run_baseline(args.vectors, args.data, args.task, args.what, args.sample)
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def measure(vectors, data, task, what, sample=0, timed=None):
    cmd = [
        sys.executable,
        __file__,
        "--child",
        what,
        "--vectors",
        str(vectors),
        "--data",
        str(data),
        "--task",
        task,
        "--sample",
        str(sample),
    ]
    if timed is not None:
        cmd += ["--timed", json.dumps(timed)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get("EMBEVAL_DATA", HERE.parent.parent / "shared/senteval_data"))
    parser.add_argument("--dims", default="300,768")
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--sample", type=int, default=24, help="fits timed per baseline and task (0: all)")
    parser.add_argument("--out", default=str(HERE / "results" / "classifiers.json"))
    parser.add_argument("--solvers-only", action="store_true", help="time embeval's two solvers, no baselines")
    parser.add_argument("--against-tree", help="with --solvers-only: another checkout of embeval to time alongside")
    parser.add_argument("--solvers", default="senteval,lbfgs", help="with --solvers-only: which solvers")
    parser.add_argument("--repeat", type=int, default=2, help="with --solvers-only: runs of each, the fastest kept")
    parser.add_argument("--child", dest="what", default=None)
    parser.add_argument("--vectors")
    parser.add_argument("--task")
    parser.add_argument("--timed")
    args = parser.parse_args()
    if args.what:
        return child(args)
    tasks = args.tasks.split(",")
    if args.solvers_only:
        if not args.against_tree:
            parser.error("--solvers-only needs --against-tree")
        return solvers_only(args, tasks)
    work = Path(tempfile.mkdtemp(prefix="embeval-bench-"))
    results = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "torch_threads": __import__("torch").get_num_threads(),
            "python": platform.python_version(),
        },
        "sample": args.sample,
        "runs": [],
    }
    print(
        f"{'task':16s}{'dim':>5s}{'senteval':>10s}{'(b) 1-by-1':>12s}{'ratio':>8s}{'lbfgs':>9s}{'(a) sklearn':>12s}"
        f"{'ratio':>8s}{'(a1) conv.':>12s}{'ratio':>8s}  acc senteval/lbfgs  |(a)-lbfgs| |(a1)-lbfgs| pts"
        f"  peak MiB s/l"
    )
    for dim in map(int, args.dims.split(",")):
        vectors = make_vectors(args.data, tasks, dim, work)
        for task in tasks:
            s = measure(vectors, args.data, task, "senteval")
            single = measure(vectors, args.data, task, "single", args.sample)
            check = measure(vectors, args.data, task, "check-senteval", timed=single["timed"])
            single["seconds_scaled_by_fits"] = single["seconds"]
            single["seconds"] = single["measured_seconds"] * check["all_passes"] / single["sample_passes"]
            lb = measure(vectors, args.data, task, "lbfgs")
            sk = measure(vectors, args.data, task, "sklearn", args.sample)
            conv = measure(vectors, args.data, task, "sklearn-converged", args.sample)
            exact = measure(vectors, args.data, task, "check-lbfgs", timed=sk["timed"])
            run = {
                "task": task,
                "dim": dim,
                "senteval": s,
                "single": single,
                "lbfgs": lb,
                "sklearn": sk,
                "sklearn_converged": conv,
                "single_equals_batched": (single["outcomes"], single["rounds"]) == (check["outcomes"], check["rounds"]),
                "sklearn_vs_lbfgs_heldout_points": heldout_gaps(sk, exact),
                "sklearn_converged_vs_lbfgs_heldout_points": heldout_gaps(conv, exact),
                "speedup_senteval_vs_single": single["seconds"] / s["seconds"],
                "speedup_lbfgs_vs_sklearn": sk["seconds"] / lb["seconds"],
                "speedup_lbfgs_vs_sklearn_converged": conv["seconds"] / lb["seconds"],
            }
            results["runs"].append(run)
            print(
                f"{task:16s}{dim:5d}{s['seconds']:10.1f}{single['seconds']:12.1f}"
                f"{run['speedup_senteval_vs_single']:8.1f}{lb['seconds']:9.1f}{sk['seconds']:12.1f}"
                f"{run['speedup_lbfgs_vs_sklearn']:8.1f}{conv['seconds']:12.1f}"
                f"{run['speedup_lbfgs_vs_sklearn_converged']:8.1f}  {s['acc']:.2f}/{lb['acc']:.2f}"
                f"   {run['sklearn_vs_lbfgs_heldout_points']['max'] or 0:.2f}"
                f"   {run['sklearn_converged_vs_lbfgs_heldout_points']['max'] or 0:.2f}"
                f"   {s['peak_rss_mib']:.0f}/{lb['peak_rss_mib']:.0f}"
                f"{'' if run['single_equals_batched'] else '  (b) DIFFERS'}",
                flush=True,
            )
    for dim in map(int, args.dims.split(",")):
        runs = [r for r in results["runs"] if r["dim"] == dim]
        totals = {
            k: sum(r[k]["seconds"] for r in runs)
            for k in ("senteval", "single", "lbfgs", "sklearn", "sklearn_converged")
        }
        results[f"total_{dim}"] = totals
        print(
            f"total {dim}-d: senteval {totals['senteval']:.0f} s vs (b) {totals['single']:.0f} s "
            f"({totals['single'] / totals['senteval']:.1f}x); lbfgs {totals['lbfgs']:.0f} s vs (a) "
            f"{totals['sklearn']:.0f} s ({totals['sklearn'] / totals['lbfgs']:.1f}x), vs (a') "
            f"{totals['sklearn_converged']:.0f} s ({totals['sklearn_converged'] / totals['lbfgs']:.1f}x)"
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out}")


def cli_solver(tree, vectors, data, task, solver):
    """Seconds and figures of `embeval score` (the code in `tree`) on one task: a fresh process."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "embeval",
                "score",
                str(vectors),
                "--data",
                str(data),
                "--tasks",
                task,
                "--solver",
                solver,
                "--device",
                "cpu",
                "--out",
                str(out),
                "--quiet",
            ],
            check=True,
            cwd=tree,
            env=dict(os.environ, PYTHONPATH=str(tree)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        entry = json.loads(out.read_text())["tasks"][task]
    return {"seconds": entry["seconds"], "devacc": entry["results"]["devacc"], "acc": entry["results"]["acc"]}


def solvers_only(args, tasks):
    """Both solvers per task and dimension, this checkout against another (--against-tree: e.g. a
    worktree of an earlier commit), measured alternately in the same run, --repeat times each;
    the fastest of each is kept, so a busy moment on a shared machine does not decide."""
    trees = {"this": HERE.parent, "other": Path(args.against_tree).resolve()}
    work = Path(tempfile.mkdtemp(prefix="embeval-bench-"))
    results = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "torch_threads": __import__("torch").get_num_threads(),
            "python": platform.python_version(),
        },
        "against_tree": args.against_tree,
        "repeat": args.repeat,
        "runs": [],
    }
    print(f"{'task':16s}{'dim':>5s}{'solver':>10s}{'this':>9s}{'other':>9s}{'ratio':>8s}  same figures")
    for dim in map(int, args.dims.split(",")):
        vectors = make_vectors(args.data, tasks, dim, work)
        for task in tasks:
            for solver in args.solvers.split(","):
                runs = {name: [] for name in trees}
                for _ in range(args.repeat):
                    for name, tree in trees.items():
                        runs[name].append(cli_solver(tree, vectors, args.data, task, solver))
                best = {name: min(r["seconds"] for r in rs) for name, rs in runs.items()}
                same = all(r[k] == runs["this"][0][k] for rs in runs.values() for r in rs for k in ("devacc", "acc"))
                run = {
                    "task": task,
                    "dim": dim,
                    "solver": solver,
                    "seconds": best,
                    "all_seconds": {n: [r["seconds"] for r in rs] for n, rs in runs.items()},
                    "devacc": runs["this"][0]["devacc"],
                    "acc": runs["this"][0]["acc"],
                    "same_figures": same,
                }
                results["runs"].append(run)
                print(
                    f"{task:16s}{dim:5d}{solver:>10s}{best['this']:9.1f}{best['other']:9.1f}"
                    f"{best['this'] / best['other']:8.2f}  {same}",
                    flush=True,
                )
    for solver in args.solvers.split(","):
        totals = {n: sum(r["seconds"][n] for r in results["runs"] if r["solver"] == solver) for n in trees}
        results[f"total_{solver}"] = totals
        print(
            f"total {solver}: this {totals['this']:.1f} s, other {totals['other']:.1f} s "
            f"({totals['this'] / totals['other']:.2f}x)"
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
