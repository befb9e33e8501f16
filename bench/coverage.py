"""Coverage of the 95% bootstrap intervals, per kind, by simulation.

For each kind, many data sets are drawn from one known population (synthetic vectors or scores of a
task's size), each is scored by the kind's own protocol code (embeval.evaluate) and given its
interval by the kind's own bootstrap statistic (embeval.stats.bootstrap_ci, the statistic the kind
registers: `embeval score --bootstrap`), and the bench counts how often the interval holds the
population value. The population value is the figure's expected value at the task's size (the mean
of the figure over the data sets drawn: a figure biased at small sizes, a v-measure or a bitext F1,
is an estimate of that). Target: 93-97% (a 95% interval; the count's own standard error with 400
data sets is 1.1 points).

What is resampled is each kind's unit: queries (retrieval and reranking share the statistic),
pairs, texts, first sentences, embedded documents, test items (and, for MTEB classification, its
experiments: the training draws).

  python bench/coverage.py [--datasets 400] [--resamples 500] [--out bench/results/coverage.json]
  python bench/coverage.py --markdown      # the table of docs/comparison.md, from the results file
"""

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from threadpoolctl import threadpool_limits  # noqa: E402

from embeval import stats  # noqa: E402
from embeval.evaluate import bitext, clustering, ir_metrics, mteb_classification, pair_scores, summarization  # noqa: E402, I001
from embeval.tasks.catalog import statistic  # noqa: E402

TARGET = (0.93, 0.97)


def retrieval(rng):
    """60 queries, 40 candidates each, 1-4 relevant (graded 1-2) scoring higher on average: nDCG@10."""
    queries, k = 60, 40
    rows = np.tile(np.arange(k), (queries, 1))
    relevant = [rng.choice(k, int(rng.integers(1, 5)), replace=False) for _ in range(queries)]
    scores = rng.normal(size=(queries, k))
    q_rows, d_rows, grades = [], [], []
    for q, docs in enumerate(relevant):
        scores[q, docs] += 1.0
        q_rows += [q] * len(docs)
        d_rows += docs.tolist()
        grades += rng.integers(1, 3, len(docs)).tolist()
    qrels = (np.array(q_rows), np.array(d_rows), np.array(grades))
    values = ir_metrics.per_query(rows, scores, qrels, ir_metrics.id_ranks([f"d{i}" for i in range(k)]))
    arrays = {"ndcg_at_10": values["ndcg_at_10"]}
    return float(np.mean(values["ndcg_at_10"])), arrays


def pairs(rng):
    """200 pairs of 8-d vectors, the similar ones (half) nearer: max AP."""
    n = 200
    labels = (rng.random(n) < 0.5).astype(int)
    a = rng.normal(size=(n, 8))
    b = np.where(labels[:, None] == 1, a * 0.6, 0) + rng.normal(size=(n, 8))
    figures, arrays = pair_scores.evaluate_pairs(a.astype(np.float32), b.astype(np.float32), labels)
    return figures["max_ap"], arrays


def mteb_classification_task(rng):
    """3 labels, 8-d Gaussian classes, 240 train and 150 test sentences, MTEB's 10 experiments of 8 per
    label (seed 42): accuracy."""
    centres = np.random.default_rng(5).normal(size=(3, 8)) * 0.6

    def split(n):
        y = rng.integers(0, 3, n)
        return (centres[y] + rng.normal(size=(n, 8))).astype(np.float32), y

    (train_x, train_y), (test_x, test_y) = split(240), split(150)
    figures, arrays = mteb_classification.classify(train_x, train_y, test_x, test_y)
    return figures["accuracy"], arrays


def clustering_task(rng):
    """300 documents of 4 Gaussian topics (8-d), all embedded, MTEB's 10 experiments of 300 draws: v-measure."""
    centres = np.random.default_rng(6).normal(size=(4, 8)) * 0.9
    y = rng.integers(0, 4, 300)
    x = (centres[y] + rng.normal(size=(300, 8))).astype(np.float32)
    figures, arrays = clustering.bootstrap_clustering(
        x, y.tolist(), max_fraction=None, cluster_size=300, n_experiments=10, batch_size=512
    )
    return figures["v_measure"], arrays


def summarization_task(rng):
    """30 texts, 8 graded machine summaries each, best cosines following the grades loosely: the mean
    per-text Spearman."""
    texts, per_text = 30, 8
    grades = rng.integers(1, 6, texts * per_text).astype(np.float64)
    machine_text = np.repeat(np.arange(texts), per_text)
    cosine = 0.15 * grades + rng.normal(size=len(grades))
    scores = {"cosine": cosine, "dot": cosine * 2}
    values = summarization.per_text(scores, grades, machine_text)
    items = summarization.item_values(values)
    return float(np.mean(items["cosine_spearman"])), {"cosine_spearman": items["cosine_spearman"]}


def bitext_task(rng):
    """150 translation pairs (8-d vectors, the translation the sentence plus noise): F1."""
    first = rng.normal(size=(150, 8))
    second = first + rng.normal(size=(150, 8)) * 0.8
    predicted = bitext.nearest(first, second)
    gold = np.arange(150)
    return bitext.mteb_scores(gold, predicted)["f1"], {"gold": gold, "pred": predicted}


def sts_task(rng):
    """300 pairs, gold scores 0-5 and system cosines = gold + noise: pooled Spearman."""
    gold = rng.uniform(0, 5, 300)
    system = gold + rng.normal(size=300) * 2.0
    arrays = {"system": system, "gold": gold}
    return stats.observed(stats.STATISTICS["scores"]["spearman.pooled"], arrays), arrays


def labels_task(rng):
    """500 test items of a classifier right with probability 0.8 (SentEval's accuracy, percent)."""
    gold = rng.integers(0, 2, 500)
    pred = np.where(rng.random(500) < 0.8, gold, 1 - gold)
    return 100.0 * float(np.mean(pred == gold)), {"gold": gold, "pred": pred}


# kind -> (simulator, prediction set kind, figure, what a resample draws)
KINDS = {
    "retrieval and reranking": (retrieval, "query_means", "ndcg_at_10", "queries"),
    "pair-classification (mteb)": (pairs, "mteb-pairs", "max_ap", "pairs"),
    "classification (mteb)": (mteb_classification_task, "mteb-classification", "accuracy", "test items, experiments"),
    "clustering (bootstrap)": (clustering_task, "mteb-clustering", "v_measure", "embedded documents, experiments"),
    "summarization": (summarization_task, "mteb-summarization", "cosine_spearman", "texts kept"),
    "bitext-mining": (bitext_task, "mteb-bitext", "f1", "first sentences"),
    "sts (pooled Spearman)": (sts_task, "scores", "spearman.pooled", "pairs"),
    "SentEval classification (accuracy)": (labels_task, "labels", "acc", "test items"),
}


def coverage(name, datasets, resamples):
    simulate, set_kind, figure, unit = KINDS[name]
    stat = statistic(set_kind, figure)
    start = time.perf_counter()
    figures, intervals = [], []
    for d in range(datasets):
        value, arrays = simulate(np.random.default_rng([2026, d]))
        ci = stats.bootstrap_ci(stat, arrays, seed=d, task="coverage", resamples=resamples)
        assert abs(ci["value"] - value) <= 1e-9 * max(1.0, abs(value)), (name, ci["value"], value)
        figures.append(value)
        intervals.append((ci["low"], ci["high"]))
    population = float(np.mean(figures))
    lows, highs = np.array(intervals).T
    held = float(np.mean((lows <= population) & (population <= highs)))
    own = float(np.mean((lows <= np.array(figures)) & (np.array(figures) <= highs)))
    return {
        "kind": name,
        "figure": figure,
        "resampled": unit,
        "datasets": datasets,
        "population_value": population,
        "coverage": held,
        "standard_error": float(np.sqrt(held * (1 - held) / datasets)),
        "figure_inside_own_interval": own,
        "mean_width": float(np.mean(highs - lows)),
        "spread_of_figure_x3.92": float(3.92 * np.std(figures)),
        "within_target": TARGET[0] <= held <= TARGET[1],
        "seconds": round(time.perf_counter() - start, 1),
    }


def table(result):
    """The markdown table of a results file (docs/comparison.md holds it; a test checks they agree)."""
    lines = [
        "| kind | figure | resampled | coverage of the 95% interval | within 93-97% |",
        "|---|---|---|---|---|",
    ]
    for row in result["kinds"]:
        coverage = f"{100 * row['coverage']:.1f}% ± {100 * row['standard_error']:.1f}"
        verdict = "yes" if row["within_target"] else "**no**"
        lines.append(f"| {row['kind']} | `{row['figure']}` | {row['resampled']} | {coverage} | {verdict} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", type=int, default=400)
    parser.add_argument("--resamples", type=int, default=500)
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated kind names (default: all)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "coverage.json"))
    parser.add_argument("--markdown", action="store_true", help="print the table of the results file --out and stop")
    args = parser.parse_args()
    if args.markdown:
        print(table(json.loads(Path(args.out).read_text())))
        return
    rows = []
    with threadpool_limits(1):
        for name in [k for k in KINDS if k in args.kinds.split(",")]:
            row = coverage(name, args.datasets, args.resamples)
            rows.append(row)
            print(
                f"{row['kind']:38} {row['figure']:16} coverage {100 * row['coverage']:5.1f}% "
                f"(+-{100 * row['standard_error']:.1f})  "
                f"own figure inside {100 * row['figure_inside_own_interval']:5.1f}%  "
                f"width {row['mean_width']:.4f} vs 3.92 sd {row['spread_of_figure_x3.92']:.4f}  {row['seconds']} s",
                flush=True,
            )
    result = {
        "target": TARGET,
        "level": 0.95,
        "datasets": args.datasets,
        "resamples": args.resamples,
        "kinds": rows,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load": os.getloadavg()},
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
