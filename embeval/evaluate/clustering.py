"""MTEB's clustering protocols, as mteb 2.26.24 runs them; and their bootstrap statistics.

mteb 2.26 has two live clustering protocols, so both are here:

`bootstrap_clustering`: AbsTaskClustering (the "fast" one, 62 text tasks that are not superseded,
all of MTEB(eng, v2)'s clustering: ArXivHierarchical*, Biorxiv/Medrxiv*.v2, StackExchange*.v2,
TwentyNewsgroups.v2).
- Documents embedded: all of the split, or a sample without replacement of
  max_document_to_embed (e.g. 2048), or of int(max_fraction_of_documents_to_embed * n) documents
  (the default fraction is 0.04; every MTEB(eng, v2) clustering task uses it), drawn by the
  task's `random.Random(seed)` (seed 42) as `rng.sample(range(n), k)`.
- Levels: a document's label is a label or a list of labels (one per level of a hierarchy). Level i
  holds the documents with an i-th label; levels run to the longest list, or max_depth if smaller.
  (mteb marks a missing label -1 and drops it where the level's labels are numbers; where they are
  strings numpy turns -1 into "-1", which stays in as a class of its own. level_codes does the same.)
- Per level: MiniBatchKMeans(n_clusters = distinct labels of the level's documents, batch_size 512,
  init k-means++, n_init 1, random_state = seed); n_experiments (10) times: max_documents_per_cluster
  (16,384) of the level's documents drawn with replacement (`rng.choices(range(m), k=16384)`, the
  same random.Random that drew the sample, continued), clustered by fit_predict, and scored by
  scikit-learn's v_measure_score and adjusted_mutual_info_score against their labels (the latter as
  embeval.evaluate.mutual_info computes it: the same figure within scikit-learn's own rounding error).
- Figures: `v_measure` (main) the mean of every level's experiments pooled, `v_measure_std` their
  population standard deviation, `v_measures` {"Level i": [per experiment]}; `ami`, `ami_std`,
  `ami_scores` alike. One random.Random serves a task's subsets one after another (pass `rng` on).
- A level with one distinct label: mteb clusters it into one cluster (v-measure and AMI 1).

`set_clustering`: AbsTaskClusteringLegacy (21 text tasks live, e.g. WikiCitiesClustering,
RomaniBibleClustering and MasakhaNEWSClusteringS2S in MTEB(Multilingual, v2)); each row of the split
is a set of documents with labels.
- Per set: MiniBatchKMeans(n_clusters = distinct labels of the set, batch_size 500, n_init "auto"
  (1 with k-means++), random_state 42) fitted on the set; its labels_ scored by v_measure_score.
- Figures: `v_measure` (main) the mean over the sets, `v_measure_std` the population standard
  deviation, `v_measures` the list. A set with one distinct label: mteb does not embed it and
  counts v-measure 1.

embeval refuses a level or set with one distinct label (EmbevalError): its figure says nothing of
the vectors. Clusterings equal mteb's under equal seeds: the same scikit-learn calls on the same
rows in the same order and dtype (k-means++ seeded by embeval.evaluate.kmeans_init, which gives
scikit-learn's own centers faster).

Bootstrap: items are the documents (the embedded sample, for the bootstrap protocol). A
resample weights each document; each experiment's clusters stay fixed and its v-measure is taken
with weights (draw count x resample count), then averaged as the figure is.
"""

import random

import numpy as np
from sklearn.cluster import MiniBatchKMeans
from sklearn.metrics.cluster import v_measure_score

from embeval import stats
from embeval.errors import EmbevalError
from embeval.evaluate.kmeans_init import fit_predict, init_for
from embeval.evaluate.mutual_info import adjusted_mutual_info
from embeval.stats import Statistic, experiment_counts

MTEB_VERSION = "2.26.24"
SEED = 42
MAIN_SCORE = "v_measure"
BOOTSTRAP = {  # AbsTaskClustering's defaults
    "max_fraction": 0.04,
    "max_documents": None,
    "cluster_size": 16_384,
    "n_experiments": 10,
    "batch_size": 512,
    "max_depth": None,
}
SET_BATCH_SIZE = 500  # AbsTaskClusteringLegacy's evaluator


def embedded_documents(n: int, rng: random.Random, max_fraction=0.04, max_documents=None) -> np.ndarray:
    """The documents mteb embeds, in its order: all n, or its sample of them (see the module docstring)."""
    if max_fraction is not None and max_documents is not None:
        raise ValueError("set max_fraction or max_documents, not both")
    if max_fraction is None and max_documents is None:
        return np.arange(n)
    k = int(max_fraction * n) if max_fraction is not None else int(max_documents)
    return np.array(rng.sample(range(n), k=min(n, k)), dtype=np.int64)


def level_codes(labels) -> np.ndarray:
    """(levels, n) int codes of the documents' labels at each level, -1 where a document is left out.

    labels: one label per document (int or str), or one list of labels per document (a hierarchy;
    lists may be shorter). As in mteb, a document without an i-th label counts as -1 at level i,
    and -1 is left out where the level's labels are numbers; where they are strings, numpy turns
    -1 into the string "-1", which mteb keeps as a class of its own, and so does this."""
    rows = [list(label) if isinstance(label, (list, tuple, np.ndarray)) else [label] for label in labels]
    depth = max((len(row) for row in rows), default=0)
    codes = np.full((depth, len(rows)), -1, dtype=np.int64)
    for level in range(depth):
        values = np.array([row[level] if len(row) > level else -1 for row in rows])
        kept = values != -1 if values.dtype.kind in "biuf" else np.ones(len(values), dtype=bool)
        if kept.any():
            codes[level, kept] = np.unique(values[kept], return_inverse=True)[1]
    return codes


def _refuse_one_label(what, n_labels, task):
    if n_labels < 2:
        raise EmbevalError(f"{what} has {n_labels} distinct label(s); clustering needs 2 or more", task=task)


def bootstrap_clustering(
    vectors: np.ndarray,
    labels,
    *,
    seed: int = SEED,
    rng: random.Random | None = None,
    max_fraction: float | None = 0.04,
    max_documents: int | None = None,
    cluster_size: int = 16_384,
    n_experiments: int = 10,
    batch_size: int = 512,
    max_depth: int | None = None,
    task: str | None = None,
):
    """(figures, arrays) of AbsTaskClustering on one split: the vectors of all n documents (rows in
    the split's order, the dtype mteb would get) and their labels (see level_codes).

    rng: mteb's task-wide random.Random (fresh random.Random(seed) if None); it is advanced as mteb
    advances it. arrays, one row per embedded document and one column per experiment (levels in
    turn): "documents" (k,) its row in the split, "gold" (k, e) its label code at the experiment's
    level (-1 if none), "count" (k, e) how often the experiment drew it, "pred" (k, e) its cluster
    there (-1 if not drawn)."""
    vectors = np.asarray(vectors)
    rng = random.Random(seed) if rng is None else rng
    documents = embedded_documents(len(vectors), rng, max_fraction, max_documents)
    figures, arrays = cluster_documents(
        vectors[documents],
        [labels[j] for j in documents],
        rng=rng,
        seed=seed,
        cluster_size=cluster_size,
        n_experiments=n_experiments,
        batch_size=batch_size,
        max_depth=max_depth,
        task=task,
    )
    return figures, {"documents": documents, **arrays}


def cluster_documents(
    embedded: np.ndarray,
    labels,
    *,
    rng: random.Random,
    seed: int = SEED,
    cluster_size: int = 16_384,
    n_experiments: int = 10,
    batch_size: int = 512,
    max_depth: int | None = None,
    task: str | None = None,
    threads: int | None = None,
):
    """(figures, arrays) of AbsTaskClustering's experiments on the documents it embedded (in the
    order drawn by embedded_documents, with their labels), `rng` continuing from that draw; arrays as
    bootstrap_clustering's without "documents". The experiments run side by side on up to `threads`
    threads (default torch's count), as many as the fair share of the CPU allows."""
    if len(embedded) == 0:
        raise EmbevalError("no document to cluster (the split is too small for the fraction embedded)", task=task)
    gold = level_codes(labels)
    depth = len(gold) if max_depth is None else min(max_depth, len(gold))
    scores: dict[str, dict[str, list[float]]] = {"v_measure": {}, "ami": {}}
    golds, counts, predictions = [], [], []
    for level in range(depth):
        members = np.flatnonzero(gold[level] >= 0)
        level_gold = gold[level, members]
        n_clusters = np.unique(level_gold).size
        _refuse_one_label(f"clustering level {level}", n_clusters, task)
        if cluster_size < n_clusters:
            raise EmbevalError(f"{cluster_size} documents per experiment cannot form {n_clusters} clusters", task=task)
        level_vectors = embedded[members]
        draws = [
            np.array(rng.choices(range(len(members)), k=cluster_size), dtype=np.int64) for _ in range(n_experiments)
        ]

        def experiment(drawn, n_clusters=n_clusters, level_vectors=level_vectors, level_gold=level_gold):
            model = MiniBatchKMeans(
                n_clusters=n_clusters, batch_size=batch_size, init=init_for(level_vectors), n_init=1, random_state=seed
            )
            assignment = fit_predict(model, level_vectors, drawn)
            v, ami = (
                v_measure_score(level_gold[drawn], assignment),
                adjusted_mutual_info(level_gold[drawn], assignment),
            )
            return assignment, float(v), float(ami)

        for name in scores:
            scores[name][f"Level {level}"] = []
        for drawn, (assignment, v, ami) in zip(draws, _side_by_side(experiment, draws, threads), strict=True):
            scores["v_measure"][f"Level {level}"].append(v)
            scores["ami"][f"Level {level}"].append(ami)
            count = np.zeros(len(embedded))
            np.add.at(count, members[drawn], 1.0)
            pred = np.full(len(embedded), -1, dtype=np.int64)
            pred[members[drawn]] = assignment
            golds.append(gold[level])
            counts.append(count)
            predictions.append(pred)
    figures: dict[str, object] = {}
    for name, by_level in scores.items():
        flat = [value for values in by_level.values() for value in values]
        figures[name] = float(np.mean(flat))
        figures[f"{name}_std"] = float(np.std(flat))
        figures["v_measures" if name == "v_measure" else f"{name}_scores"] = by_level
    arrays = {"gold": np.stack(golds, axis=1), "count": np.stack(counts, axis=1), "pred": np.stack(predictions, axis=1)}
    return figures, arrays


def _side_by_side(function, items, most: int | None = None):
    """[function(item) for item in items], on as many threads as the fair share of the CPU gives, at
    most `most` (default torch's count; inside threadpool_limits(1) that count is 1, so callers there
    pass the run's own). The experiments are independent once drawn; scikit-learn's loops release
    the interpreter."""
    import torch

    from embeval import threads

    most = torch.get_num_threads() if most is None else most
    workers = min(len(items), threads.FairShare(most).share() or 1)
    if workers <= 1:
        return [function(item) for item in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(function, items))


def set_clustering(sets, *, seed: int = SEED, batch_size: int = SET_BATCH_SIZE, task: str | None = None):
    """(figures, arrays) of AbsTaskClusteringLegacy on one split: sets is a sequence of (vectors,
    labels), one per row of the split. arrays (all sets' documents in order): "gold" (n,) label
    codes within each set, "pred" (n,) clusters, "group" (n,) the set."""
    v_measures, gold, pred, group = [], [], [], []
    for index, (vectors, labels) in enumerate(sets):
        codes = np.unique(np.asarray(labels), return_inverse=True)[1].reshape(-1)
        n_clusters = int(codes.max()) + 1 if len(codes) else 0
        _refuse_one_label(f"clustering set {index}", n_clusters, task)
        vectors = np.asarray(vectors)
        model = MiniBatchKMeans(  # n_init "auto" is 1 with k-means++
            n_clusters=n_clusters,
            batch_size=batch_size,
            init=init_for(vectors),
            n_init=1,
            compute_labels=True,
            random_state=seed,
        )
        assignment = model.fit(vectors).labels_
        v_measures.append(float(v_measure_score(codes, assignment)))
        gold.append(codes)
        pred.append(assignment.astype(np.int64))
        group.append(np.full(len(codes), index, dtype=np.int64))
    if not v_measures:
        raise EmbevalError("no clustering set", task=task)
    figures = {
        "v_measure": float(np.mean(v_measures)),
        "v_measure_std": float(np.std(v_measures)),
        "v_measures": v_measures,
    }
    return figures, {"gold": np.concatenate(gold), "pred": np.concatenate(pred), "group": np.concatenate(group)}


# Weighted statistics: W (b, n) counts of the documents -> (b,) values.


def _xlogx(x):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(x > 0, x * np.log(np.where(x > 0, x, 1)), 0.0)


def _sums(W, codes):
    """(b, distinct codes) weighted count of each code, and (b,) how many codes have weight."""
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    starts = np.r_[0, np.flatnonzero(sorted_codes[1:] != sorted_codes[:-1]) + 1]
    sums = np.add.reduceat(W[:, order], starts, axis=1)
    return sums, (sums > 0).sum(1)


def weighted_v_measure(W, gold, pred):
    """scikit-learn's v_measure_score with item weights W (b, n) (integer counts: the items repeated);
    gold and pred are non-negative int codes. Items of weight 0 are absent."""
    n_clusters = int(pred.max()) + 1 if len(pred) else 1
    classes, n_classes = _sums(W, gold)
    clusters, n_found = _sums(W, pred)
    cells, _ = _sums(W, gold * n_clusters + pred)
    total = W.sum(1)
    log_total = np.log(np.where(total > 0, total, 1))
    sum_classes, sum_clusters = _xlogx(classes).sum(1), _xlogx(clusters).sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mutual = np.maximum((_xlogx(cells).sum(1) - sum_classes - sum_clusters) / total + log_total, 0.0)
        entropy_classes = log_total - sum_classes / total
        entropy_clusters = log_total - sum_clusters / total
        homogeneity = np.where(n_classes > 1, mutual / entropy_classes, 1.0)
        completeness = np.where(n_found > 1, mutual / entropy_clusters, 1.0)
        v = 2 * homogeneity * completeness / (homogeneity + completeness)
    return np.where(homogeneity + completeness == 0, 0.0, v)


def bootstrap_v_measure(W, arrays):
    """The bootstrap protocol's v_measure: the mean over experiments (resampled with the documents,
    embeval.stats.experiment_counts) of the v-measure of the drawn documents with weights (draw
    count x W)."""
    values = []
    for gold, count, pred in zip(arrays["gold"].T, arrays["count"].T, arrays["pred"].T, strict=True):
        members = count > 0
        values.append(weighted_v_measure(W[:, members] * count[members], gold[members], pred[members]))
    drawn = experiment_counts(W, len(values))
    return (np.array(values).T * drawn).sum(1) / drawn.sum(1)


def set_v_measure(W, arrays):
    """The set protocol's v_measure: the mean over sets of each set's weighted v-measure (resample
    within each set, arrays["group"], to keep every set)."""
    groups = arrays["group"]
    values = [
        weighted_v_measure(W[:, groups == g], arrays["gold"][groups == g], arrays["pred"][groups == g])
        for g in np.unique(groups)
    ]
    return np.mean(values, axis=0)


class _Cells:
    """What the fast v-measure derives once for some documents (an experiment's drawn documents, or
    a set's): the documents in the order of their cell (gold label, cluster), each with its
    multiplicity (draw count), where each cell, class and cluster begins. A resample's counts times
    the multiplicities, summed per cell, give the contingency table; summed per class and per
    cluster, its margins (integers: every sum exact, in the order weighted_v_measure sums them)."""

    def __init__(self, items, multiplicity, gold, pred):
        order = np.lexsort((pred, gold))
        self.items, self.multiplicity = items[order], multiplicity[order].astype(np.float64)
        gold, pred = gold[order], pred[order]
        new_cell = np.r_[True, (gold[1:] != gold[:-1]) | (pred[1:] != pred[:-1])]
        self.cell_starts = np.flatnonzero(new_cell)
        cell_gold, cell_pred = gold[self.cell_starts], pred[self.cell_starts]
        self.class_starts = np.flatnonzero(np.r_[True, cell_gold[1:] != cell_gold[:-1]])
        self.cluster_order = np.argsort(cell_pred, kind="stable")
        by_cluster = cell_pred[self.cluster_order]
        self.cluster_starts = np.flatnonzero(np.r_[True, by_cluster[1:] != by_cluster[:-1]])

    def v_measure(self, W):
        """weighted_v_measure of the documents with weights W x multiplicity: (b,)."""
        weights = np.take(W, self.items, axis=1)
        weights *= self.multiplicity
        cells = np.add.reduceat(weights, self.cell_starts, axis=1)
        classes = np.add.reduceat(cells, self.class_starts, axis=1)
        clusters = np.add.reduceat(np.take(cells, self.cluster_order, axis=1), self.cluster_starts, axis=1)
        return _v_from_sums(classes, clusters, cells)


def _xlogx_sums(x):
    """_xlogx(x).sum(1) of integer counts x (b, k), from a table of x log x over their values (the
    same values, one look-up each instead of a logarithm); _xlogx itself for other values."""
    top = float(x.max(initial=0.0))
    whole = x.astype(np.int64) if 0 <= top < 1 << 22 else None
    if whole is None or not np.array_equal(whole, x):
        return _xlogx(x).sum(1)
    return np.take(_xlogx(np.arange(int(top) + 1, dtype=np.float64)), whole).sum(1)


def _v_from_sums(classes, clusters, cells):
    """weighted_v_measure's figure from the contingency table's cells and margins (b, ...)."""
    n_classes, n_found = (classes > 0).sum(1), (clusters > 0).sum(1)
    total = classes.sum(1)
    log_total = np.log(np.where(total > 0, total, 1))
    sum_classes, sum_clusters = _xlogx_sums(classes), _xlogx_sums(clusters)
    with np.errstate(invalid="ignore", divide="ignore"):
        mutual = np.maximum((_xlogx_sums(cells) - sum_classes - sum_clusters) / total + log_total, 0.0)
        entropy_classes = log_total - sum_classes / total
        entropy_clusters = log_total - sum_clusters / total
        homogeneity = np.where(n_classes > 1, mutual / entropy_classes, 1.0)
        completeness = np.where(n_found > 1, mutual / entropy_clusters, 1.0)
        v = 2 * homogeneity * completeness / (homogeneity + completeness)
    return np.where(homogeneity + completeness == 0, 0.0, v)


def _bootstrap_v_measure_fast(W, arrays):
    def build(arrays):
        experiments = []
        for gold, count, pred in zip(arrays["gold"].T, arrays["count"].T, arrays["pred"].T, strict=True):
            members = np.flatnonzero(count > 0)
            experiments.append(_Cells(members, count[members], gold[members], pred[members]))
        return experiments

    experiments = stats.derived(arrays, "cells", build)
    values = np.array([cells.v_measure(W) for cells in experiments])
    drawn = stats.per_block(
        W, arrays, ("experiments", len(experiments)), lambda: experiment_counts(W, len(experiments))
    )
    return (values.T * drawn).sum(1) / drawn.sum(1)


def _set_v_measure_fast(W, arrays):
    def build(arrays):
        groups = arrays["group"]
        sets = []
        for g in np.unique(groups):
            members = np.flatnonzero(groups == g)
            sets.append(_Cells(members, np.ones(len(members)), arrays["gold"][members], arrays["pred"][members]))
        return sets

    return np.mean([cells.v_measure(W) for cells in stats.derived(arrays, "cells", build)], axis=0)


# figure -> embeval.stats.Statistic (the set protocol resampled within each set)
STATISTICS = {
    "bootstrap.v_measure": Statistic(
        bootstrap_v_measure, stratified=False, centred=True, fast=_bootstrap_v_measure_fast
    ),
    "sets.v_measure": Statistic(set_v_measure, stratified=True, centred=True, fast=_set_v_measure_fast),
}
