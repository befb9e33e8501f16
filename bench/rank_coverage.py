"""Coverage of `embeval rank`'s 95% rank intervals, by simulation.

Runs are drawn from known item-level distributions, so every run's true figure on every task, and
therefore its true rank on every task and on every benchmark aggregate (Mean (Task), Mean (TaskType),
each type's mean, Borda's points), is known. Each trial draws a test set per task, every run's
predictions on it (items correlated across runs: an item hard for one run is hard for the others),
ranks them with embeval's own code (embeval.stats.resampled: the task's seeded resamples applied to
every run; embeval.reports.rank: the benchmark aggregation in every resample, the pairwise step-down
tests and the rank intervals) and checks whether each true rank lies in its interval.

Two tasks' kinds: accuracy (test items right or wrong, the `labels` statistic of SentEval's and
MTEB's classification) and a mean of per-item values in [0, 1] (the per-query figures of retrieval;
`values`). A run's item is right when z < Phi^-1(p), z = sqrt(rho) e_item + sqrt(1 - rho) e_run,item
standard normal (so its accuracy is exactly p); its value is Phi(z + m), whose mean is
Phi(m / sqrt(2)).

Reported per scenario and ranking: the simultaneous coverage (every run's true rank in its interval
at once: what the intervals claim, target >= 95%), the mean per-run coverage, the mean interval length
as a share of the possible (0: every rank known, 1: nothing known), and, beside it, the same for the
intervals of the percentiles of each run's bootstrap rank (the marginal bootstrap rank interval, not
what embeval shows: for comparison).

  python bench/rank_coverage.py [--trials 500] [--resamples 1000] [--out bench/results/rank_coverage.json]
  python bench/rank_coverage.py --scenarios 3 --borda-spread 1 --out bench/results/rank_coverage_borda_plain.json
  python bench/rank_coverage.py --markdown     # the table of docs/ranking.md, from the results file
"""

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import norm

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from embeval import stats  # noqa: E402
from embeval.reports import rank  # noqa: E402
from embeval.tasks import benchmarks as bm  # noqa: E402

RHO = 0.5  # the share of an item's difficulty common to every run
LEVEL = 0.95


def scenario(name, quality, tasks, spread=0.0, seed=0):
    """True figures (runs, tasks): a base per task, each run's quality, and a run-by-type pattern
    (`spread`: some runs better on one type, others on the other) equal for runs of equal quality."""
    rng = np.random.default_rng(seed)
    quality = np.asarray(quality, dtype=float)
    pattern = {q: rng.normal() for q in np.unique(quality)}
    truth = np.empty((len(quality), len(tasks)))
    for t, (_, kind, _, base) in enumerate(tasks):
        sign = 1.0 if kind == "accuracy" else -1.0
        truth[:, t] = base + quality + sign * spread * np.array([pattern[q] for q in quality])
    return {"name": name, "tasks": tasks, "truth": truth}


TASKS = [  # (name, kind, items, base figure)
    ("A1", "accuracy", 600, 0.70),
    ("A2", "accuracy", 400, 0.62),
    ("A3", "accuracy", 800, 0.78),
    ("V1", "values", 300, 0.45),
    ("V2", "values", 500, 0.55),
    ("V3", "values", 250, 0.35),
]
TYPES = {"accuracy": "Classification", "values": "Retrieval"}
SCENARIOS = [
    scenario("near ties on each task, 8 runs", [0, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035], TASKS, spread=0.015),
    scenario("near ties, 8 runs", [0, 0, 0.01, 0.02, 0.04, 0.04, 0.07, 0.10], TASKS, spread=0.01),
    scenario("all equal, 6 runs", [0.0] * 6, TASKS),
    scenario("spread out, 12 runs", [0, 0.015, 0.03, 0.03, 0.045, 0.06, 0.075, 0.09, 0.09, 0.105, 0.12, 0.15], TASKS),
]


def draw(truth, tasks, rng):
    """Every run's prediction set on each task: {task: [arrays per run]}."""
    out = {}
    for t, (name, kind, n, _) in enumerate(tasks):
        common = np.sqrt(RHO) * rng.standard_normal(n)
        z = common[None, :] + np.sqrt(1 - RHO) * rng.standard_normal((truth.shape[0], n))
        if kind == "accuracy":
            right = z < norm.ppf(truth[:, t])[:, None]
            out[name] = [{"gold": np.zeros(n, dtype=np.int64), "pred": (~r).astype(np.int64)} for r in right]
        else:
            values = norm.cdf(z + np.sqrt(2) * norm.ppf(truth[:, t])[:, None])
            out[name] = [{"value": v} for v in values]
    return out


STATISTICS = {
    "accuracy": (stats.STATISTICS["labels"]["acc"], 0.01),
    "values": (stats.STATISTICS["values"]["mean"], 1.0),
}


def rankings_of(sets, tasks, seed, resamples):
    """embeval's rankings of one trial's runs (each task's, the benchmark's; fractions), and each ranking's
    resampled values as drawn (Borda's points without the spread embeval's tests give them)."""
    observed, values, out = {}, {}, []
    for name, kind, _, _ in tasks:
        stat, scale = STATISTICS[kind]
        observed[name] = scale * np.array([stats.observed(stat, arrays) for arrays in sets[name]])
        values[name] = scale * stats.resampled(stat, sets[name], seed, name, resamples)
        out.append(rank.Ranking(name, "task", 100.0, observed[name], values[name], task=name))
    types = {name: TYPES[kind] for name, kind, _, _ in tasks}
    out += rank.aggregate_rankings([t[0] for t in tasks], types, observed, values)
    raw = [r.values for r in out]  # Borda's as resampled, not spread out: the percentile intervals' input
    raw[len(tasks)] = rank.borda_points(np.stack([values[t[0]] for t in tasks]))
    return out, raw


def true_ranks(truth, tasks):
    """The true rank of every run on every ranking of rankings_of, in its order."""
    names = [t[0] for t in tasks]
    figures = {name: truth[:, t] for t, name in enumerate(names)}
    out = [rank.ranks_of(figures[name]) for name in names]
    types = {name: TYPES[kind] for name, kind, _, _ in tasks}
    out.append(rank.ranks_of(rank.borda_points(truth.T[:, :, None])[:, 0]))
    means = bm.means_of(figures, types, names)
    out += [rank.ranks_of(np.asarray(means[m])) for m in (*bm.MEANS, *dict.fromkeys(types.values()))]
    return out


def percentile_intervals(values, level=LEVEL):
    """The marginal bootstrap rank interval: percentiles of each run's rank over the resamples."""
    above = (values[None, :, :] > values[:, None, :]).sum(axis=1)
    ranks = 1 + above
    tail = 100 * (1 - level) / 2
    low = np.percentile(ranks, tail, axis=1, method="inverted_cdf")
    high = np.percentile(ranks, 100 - tail, axis=1, method="inverted_cdf")
    return low, high


def family(ranking):
    return "each task" if ranking.family == "task" else ranking.name


def run(scenarios, trials, resamples):
    out = []
    for sc in scenarios:
        started = time.perf_counter()
        truth, tasks = sc["truth"], sc["tasks"]
        truth_ranks = true_ranks(truth, tasks)
        tally: dict[str, dict[str, list]] = {}
        for trial in range(trials):
            rng = np.random.default_rng([17, trial])
            sets = draw(truth, tasks, rng)
            labels = [f"run{r}" for r in range(truth.shape[0])]
            rankings, raw = rankings_of(sets, tasks, trial, resamples)
            for ranking, values, true in zip(rankings, raw, truth_ranks):
                summary = rank.summarize(ranking, LEVEL, labels)
                low = np.array([r["rank_low"] for r in summary["runs"]])
                high = np.array([r["rank_high"] for r in summary["runs"]])
                plow, phigh = percentile_intervals(values)
                inside, pinside = (low <= true) & (true <= high), (plow <= true) & (true <= phigh)
                k = len(true)
                row = tally.setdefault(family(ranking), {n: [] for n in ("all", "each", "length", "p_all", "p_each")})
                row["all"].append(inside.all())
                row["each"].append(inside.mean())
                row["length"].append(np.mean((high - low) / (k - 1)))
                row["p_all"].append(pinside.all())
                row["p_each"].append(pinside.mean())
        rows = []
        for name, row in tally.items():
            count = len(row["all"])
            simultaneous = float(np.mean(row["all"]))
            rows.append(
                {
                    "ranking": name,
                    "rankings": count,
                    "simultaneous": simultaneous,
                    "simultaneous_se": float(np.sqrt(simultaneous * (1 - simultaneous) / count)),
                    "per_run": float(np.mean(row["each"])),
                    "length": float(np.mean(row["length"])),
                    "percentile_simultaneous": float(np.mean(row["p_all"])),
                    "percentile_per_run": float(np.mean(row["p_each"])),
                }
            )
        seconds = time.perf_counter() - started
        out.append({"scenario": sc["name"], "runs": int(truth.shape[0]), "rows": rows, "seconds": round(seconds, 1)})
        print(table([out[-1]]), flush=True)
    return out


def table(results):
    lines = [
        "| scenario | ranking | simultaneous coverage | per run | interval length "
        "| percentile intervals: simultaneous, per run |",
        "|---|---|---|---|---|---|",
    ]
    for sc in results:
        for row in sc["rows"]:
            lines.append(
                f"| {sc['scenario']} | {row['ranking']} | {100 * row['simultaneous']:.1f}% ± "
                f"{100 * row['simultaneous_se']:.1f} | {100 * row['per_run']:.1f}% | {row['length']:.2f} | "
                f"{100 * row['percentile_simultaneous']:.1f}%, {100 * row['percentile_per_run']:.1f}% |"
            )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "rank_coverage.json"))
    parser.add_argument("--scenarios", default=None, help="the scenarios to run, by number from 1 (default: all)")
    parser.add_argument(
        "--borda-spread",
        type=float,
        default=rank.BORDA_SPREAD,
        help="the spread of Borda's resamples to measure (default: embeval's; 1: the plain bootstrap)",
    )
    parser.add_argument("--markdown", action="store_true", help="print the table of the results file and stop")
    args = parser.parse_args()
    if args.markdown:
        print(table(json.loads(Path(args.out).read_text())["scenarios"]))
        return
    started = time.perf_counter()
    rank.BORDA_SPREAD = args.borda_spread
    chosen = SCENARIOS if not args.scenarios else [SCENARIOS[int(k) - 1] for k in args.scenarios.split(",")]
    results = run(chosen, args.trials, args.resamples)
    record = {
        "level": LEVEL,
        "trials": args.trials,
        "resamples": args.resamples,
        "rho": RHO,
        "borda_spread": args.borda_spread,
        "tasks": [{"name": n, "kind": k, "items": i, "base": b} for n, k, i, b in TASKS],
        "scenarios": results,
        "seconds": round(time.perf_counter() - started, 1),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load": os.getloadavg()},
    }
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
