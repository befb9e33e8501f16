"""Where MTEB's clustering protocol spends its time, in mteb's evaluator and in embeval's, part by part.

For documents like those of MTEB(eng, v2)'s clustering tasks (random float32 vectors; the embedded
documents and labels of a task at its real size or at 1% of it), one level of 10 experiments of
16,384 draws is run three ways on one thread, each the best of --repeats runs of CPU seconds:

  mteb        mteb's own _evaluate_clustering_bootstrapped (scikit-learn's k-means++, fit_predict,
              v-measure and AMI per experiment)
  embeval     embeval.evaluate.clustering.cluster_documents (one thread), the same clusterings and figures
  parts       embeval's experiment taken apart: the draws, the k-means++ seeding (scikit-learn's and
              embeval's), the fit's mini-batch steps, the final labels of every drawn row (scikit-learn's)
              and of each distinct row once (embeval's), the v-measure and the AMI (scikit-learn's and
              embeval's)

  python bench/clustering_parts.py [--repeats 3] [--out bench/results/clustering_parts.json]
"""

import argparse
import json
import os
import platform
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

# (name, embedded documents, labels): 4% of each task's documents (mteb's fraction), at its real size
# and at 1% of it (bench/mteb_benchmark.py's --scale 0.01: at least 50 documents per label)
CASES = [
    ("ArXivHierarchicalClusteringS2S (6,450 documents)", 258, 129),
    ("BiorxivClusteringP2P.v2, 1% (1,300 documents)", 52, 26),
    ("BiorxivClusteringP2P.v2 (53,787 documents)", 2151, 26),
    ("StackExchangeClusteringP2P.v2, 1% (26,200 documents)", 1048, 524),
    ("StackExchangeClusteringP2P.v2 (74,914 documents)", 2996, 524),
]
DIM, DRAWS, EXPERIMENTS = 384, 16_384, 10


def best(function, repeats):
    """(the least CPU seconds of `repeats` runs, the last result)."""
    seconds, result = [], None
    for _ in range(repeats):
        start = time.process_time()
        result = function()
        seconds.append(time.process_time() - start)
    return min(seconds), result


PARTS = (
    "seeding, scikit-learn's k-means++",
    "seeding, embeval's (the same centers)",
    "fit: the mini-batch steps",
    "final labels of every drawn row (scikit-learn's)",
    "final labels once per distinct row (embeval's)",
    "v-measure",
    "AMI, scikit-learn's",
    "AMI, embeval's (the same figure to 1e-11)",
)


def experiment_parts(vectors, labels, clusters, drawn, repeats):
    """[CPU seconds of each of PARTS] of one experiment."""
    from sklearn.cluster import MiniBatchKMeans, _kmeans
    from sklearn.metrics.cluster import adjusted_mutual_info_score, v_measure_score

    from embeval.evaluate import kmeans_init
    from embeval.evaluate.mutual_info import adjusted_mutual_info

    rows = vectors[drawn]
    sample = rows[np.random.RandomState(42).randint(0, len(rows), 3 * 512)]
    norms = (sample.astype(np.float64) ** 2).sum(1)
    weights = np.ones(len(sample), sample.dtype)
    theirs_seed = best(
        lambda: _kmeans._kmeans_plusplus(sample, clusters, norms, weights, np.random.RandomState(42)), repeats
    )
    ours_seed = best(lambda: kmeans_init.seeding(sample, clusters, np.random.RandomState(42)), repeats)
    model = MiniBatchKMeans(
        n_clusters=clusters,
        batch_size=512,
        init=kmeans_init.init_for(rows),
        n_init=1,
        random_state=42,
        compute_labels=False,
    )
    fit_s, fitted = best(lambda: model.fit(rows), repeats)
    centers = fitted.cluster_centers_
    every_s, every = best(
        lambda: _kmeans._labels_inertia(rows, np.ones(len(rows), rows.dtype), centers, 1, return_inertia=False), repeats
    )
    distinct = np.unique(drawn)
    once = vectors[np.r_[distinct, np.repeat(distinct[-1:], -len(distinct) % 256)]]
    once_s = best(
        lambda: _kmeans._labels_inertia(once, np.ones(len(once), once.dtype), centers, 1, return_inertia=False), repeats
    )[0]
    gold = labels[drawn]
    v_s = best(lambda: v_measure_score(gold, every), repeats)[0]
    ami_s = best(lambda: adjusted_mutual_info_score(gold, every), repeats)[0]
    our_ami_s = best(lambda: adjusted_mutual_info(gold, every), repeats)[0]
    return [theirs_seed[0], ours_seed[0], max(0.0, fit_s - ours_seed[0]), every_s, once_s, v_s, ami_s, our_ami_s]


def parts(vectors, labels, clusters, repeats):
    """{part: CPU seconds over the experiments} of embeval's experiments taken apart."""
    rng = random.Random(42)
    draws_s, draws = best(lambda: [rng.choices(range(len(vectors)), k=DRAWS) for _ in range(EXPERIMENTS)], 1)
    totals = np.zeros(len(PARTS))
    for drawn in draws:
        totals += experiment_parts(vectors, labels, clusters, np.array(drawn, dtype=np.int64), repeats)
    return {"draws": round(draws_s, 3), **{part: round(float(s), 3) for part, s in zip(PARTS, totals)}}


def case(name, documents, clusters, repeats):
    """The case's row: mteb's and embeval's CPU seconds, and embeval's parts."""
    import mteb.abstasks.clustering as mteb_clustering
    from threadpoolctl import threadpool_limits

    from embeval.evaluate import clustering

    rng = np.random.default_rng(documents)
    vectors = rng.standard_normal((documents, DIM), dtype=np.float32)
    labels = rng.integers(0, clusters, documents)
    labels[:clusters] = np.arange(clusters)
    texts, codes = [[f"{y:04d}"] for y in labels], [[int(y)] for y in labels]  # the same order of labels
    with threadpool_limits(1):
        mteb_s, theirs = best(
            lambda: mteb_clustering._evaluate_clustering_bootstrapped(
                vectors,
                texts,
                n_clusters=EXPERIMENTS,
                cluster_size=DRAWS,
                kmean_batch_size=512,
                max_depth=None,
                rng_state=random.Random(42),
                seed=42,
            ),
            repeats,
        )
        ours_s, ours = best(lambda: clustering.cluster_documents(vectors, codes, rng=random.Random(42)), repeats)
        split = parts(vectors, labels, clusters, repeats)
    assert ours[0]["v_measures"] == theirs[0]["v_measure"], name
    assert np.allclose(ours[0]["ami_scores"]["Level 0"], theirs[0]["ami"]["Level 0"], rtol=0, atol=1e-11), name
    print(f"{name}: mteb {mteb_s:.2f} s, embeval {ours_s:.2f} s ({mteb_s / ours_s:.2f}x); parts: {split}", flush=True)
    return {
        "documents": documents,
        "clusters": clusters,
        "mteb_cpu_s": round(mteb_s, 3),
        "embeval_cpu_s": round(ours_s, 3),
        "mteb_over_embeval": round(mteb_s / ours_s, 2),
        "embeval_parts_cpu_s": split,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "clustering_parts.json"))
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from embeval import threads

    threads.FairShare.share = lambda self: 1  # embeval's experiments one after another, as mteb's
    rows = {name: case(name, documents, clusters, args.repeats) for name, documents, clusters in CASES}
    result = {
        "what": __doc__.splitlines()[0],
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "repeats": args.repeats,
        "cases": rows,
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
