"""MTEB's pair classification, clustering and classification protocols against mteb's own evaluators
(tasks built in memory, vectors handed over by an encoder that returns fixed rows: no model, no
network), and their weighted bootstrap statistics against the figures of explicitly resampled items.

Agreement measured with mteb 2.26.24, scikit-learn 1.9.1, numpy 2.4 (and asserted below):
pair classification at most 2.2e-16 apart over 30 random tasks full of tied scores (the pair
scores themselves bit-identical); clustering (both protocols) and classification (both protocols)
identical to the last bit under mteb's seeds, since the same scikit-learn calls see the same rows.
"""

import importlib.util
import itertools
import os
import random

import numpy as np
import pytest
from mteb_helpers import AMI_AGREEMENT, assert_clustering_figures_equal
from report_helpers import need
from sklearn.metrics import accuracy_score, average_precision_score, f1_score, v_measure_score
from threadpoolctl import threadpool_limits

from embeval import stats
from embeval.errors import EmbevalError
from embeval.evaluate import clustering, mteb_classification, pair_scores

PAIR_TOLERANCE = 1e-12  # measured 2.2e-16
WEIGHTED_TOLERANCE = 1e-12  # weighted statistics against the resampled items' figures
TASK_NUMBERS = itertools.count()


@pytest.fixture(autouse=True)
def one_thread():
    """OpenMP and BLAS on one thread: scikit-learn's k-means spins its threads on a loaded 2-core
    machine (30 times slower); its clusterings were measured bit-identical on 1 and 2 threads."""
    with threadpool_limits(1):
        yield


@pytest.fixture(scope="module")
def mteb():
    if importlib.util.find_spec("mteb") is None:
        need("the mteb package", "pip install '.[mteb]'")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import mteb

    return mteb


# Building mteb tasks in memory.

METADATA = {
    "description": "A synthetic task of embeval's tests.",
    "reference": "https://example.org",
    "dataset": {"path": "NA", "revision": "NA"},
    "category": "t2t",
    "eval_splits": ["test"],
    "eval_langs": ["eng-Latn"],
    "date": ("2024-01-01", "2024-01-01"),
    "dialect": ["Written"],
    "domains": [],
    "task_subtypes": [],
    "license": "cc-by-4.0",
    "annotations_creators": "derived",
    "modalities": ["text"],
    "sample_creation": "found",
    "bibtex_citation": "",
}


class RowsEncoder:
    """mteb's encoder protocol over a fixed table: each text's row, in the order asked; the model's
    pairwise similarity is mteb's cosine or dot (what mteb's own wrappers use for such a model)."""

    mteb_model_meta = None

    def __init__(self, table, similarity="cosine"):
        self.table, self.similarity_name, self.encoded = table, similarity, 0

    def encode(self, inputs, **kwargs):
        rows = [self.table[text] for batch in inputs for text in batch["text"]]
        self.encoded += len(rows)
        return np.stack(rows)

    def similarity(self, a, b):
        from mteb.models.model_meta import ScoringFunction
        from mteb.similarity_functions import select_similarity

        return select_similarity(a, b, ScoringFunction(self.similarity_name))

    def similarity_pairwise(self, a, b):
        from mteb.models.model_meta import ScoringFunction
        from mteb.similarity_functions import select_pairwise_similarity

        return select_pairwise_similarity(a, b, ScoringFunction(self.similarity_name))


def make_task(base, task_type, main_score, splits, attributes=None, eval_langs=None):
    """An instance of a subclass of mteb's `base` whose dataset is `splits` (held in memory)."""
    from datasets import Dataset, DatasetDict
    from mteb.abstasks.task_metadata import TaskMetadata

    metadata = dict(METADATA, eval_langs=eval_langs or METADATA["eval_langs"])
    name = f"Embeval{base.__name__}{next(TASK_NUMBERS)}"
    namespace = {
        "metadata": TaskMetadata(type=task_type, name=name, main_score=main_score, **metadata),
        "load_data": lambda self, **kwargs: None,
        **(attributes or {}),
    }
    task = type(name, (base,), namespace)()

    def dataset(columns_by_split):
        return DatasetDict({split: Dataset.from_dict(columns) for split, columns in columns_by_split.items()})

    task.dataset = {lang: dataset(s) for lang, s in splits.items()} if eval_langs else dataset(splits)
    task.data_loaded = True
    return task


def evaluate(task, encoder, subset="default"):
    return task.evaluate(encoder, split="test", encode_kwargs={"batch_size": 32})[subset]


# Pair classification.


def pair_data(seed, n=300, dtype=np.float32):
    """Pairs of small-integer vectors (many equal scores across pairs) with a third of them repeats
    of others (equal vectors: exact ties in every score); labels follow the cosine loosely."""
    rng = np.random.default_rng(seed)
    dim = int(rng.integers(3, 24))
    distinct = 2 * n // 3
    first = np.round(rng.normal(size=(distinct, dim)) * (2 if seed % 2 else 20))
    second = np.round(first * rng.uniform(0, 1, (distinct, 1)) + rng.normal(size=(distinct, dim)) * 3)
    repeats = rng.integers(0, distinct, n - distinct)
    a = np.concatenate([first, first[repeats]]).astype(dtype)
    b = np.concatenate([second, second[repeats]]).astype(dtype)
    cosine = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-9)
    labels = (cosine + rng.normal(0, 0.3, n) > 0.5).astype(np.int64)
    texts1 = [f"first {i}" for i in range(distinct)] + [f"first {j}" for j in repeats]
    texts2 = [f"second {i}" for i in range(distinct)] + [f"second {j}" for j in repeats]
    return a, b, labels, texts1, texts2


@pytest.mark.parametrize(
    "seed, dtype, similarity", [(0, np.float32, "cosine"), (1, np.float32, "dot"), (2, np.float64, "cosine")]
)
def test_pair_classification_equals_mtebs_evaluator(mteb, seed, dtype, similarity):
    from mteb._evaluators.pair_classification_evaluator import PairClassificationEvaluator
    from mteb.abstasks.pair_classification import AbsTaskPairClassification
    from mteb.timing import TimingStack

    a, b, labels, texts1, texts2 = pair_data(seed, dtype=dtype)
    table = dict(zip(texts1 + texts2, np.concatenate([a, b]), strict=True))
    columns = {"sentence1": texts1, "sentence2": texts2, "labels": labels.tolist()}
    task = make_task(AbsTaskPairClassification, "PairClassification", "max_ap", {"test": columns})
    theirs = evaluate(task, RowsEncoder(table, similarity))
    figures, arrays = pair_scores.evaluate_pairs(a, b, labels, similarity)

    evaluator = PairClassificationEvaluator(
        task.dataset["test"],
        input1_column_name="sentence1",
        input2_column_name="sentence2",
        task_metadata=task.metadata,
        hf_split="test",
        hf_subset="default",
        input1_prompt_type=None,
        input2_prompt_type=None,
        timer=TimingStack(),
    )
    their_scores = evaluator(RowsEncoder(table, similarity), encode_kwargs={"batch_size": 32})
    names = {"similarity": "similarity_scores", "cosine": "cosine_scores", "dot": "dot_scores"}
    names.update(euclidean="euclidean_distances", manhattan="manhattan_distances")
    for name, key in names.items():
        assert np.array_equal(arrays[name], np.asarray(their_scores[key], dtype=np.float64)), name
    ties = len(labels) - len(np.unique(arrays["cosine"]))
    assert ties >= len(labels) // 3

    assert theirs["main_score"] == theirs["max_ap"]
    assert set(theirs) - {"main_score"} == {k for k in figures if not k.endswith("_threshold")}
    for key, value in theirs.items():
        if key != "main_score":
            assert abs(figures[key] - value) <= PAIR_TOLERANCE, key
    for name in pair_scores.SCORES:
        scores, higher = arrays[name].tolist(), pair_scores.HIGHER_IS_SIMILAR[name]
        _, accuracy_threshold = task._find_best_acc_and_threshold(scores, labels, higher)
        *_, f1_threshold = task._find_best_f1_and_threshold(scores, labels, higher)
        assert figures[f"{name}_accuracy_threshold"] == accuracy_threshold
        assert figures[f"{name}_f1_threshold"] == f1_threshold


def brute_force_pairs(scores, gold, higher):
    """Best accuracy, best F1 (with precision, recall) and AP, by trying every threshold between two
    distinct scores in turn, most similar first (the first best wins), and scikit-learn's AP."""
    values = np.unique(scores)[::-1] if higher else np.unique(scores)
    best_accuracy, best = 0.0, (0.0, 0.0, 0.0)
    for value in values[:-1]:
        similar = scores >= value if higher else scores <= value
        accuracy = np.mean(similar == (gold == 1))
        best_accuracy = max(best_accuracy, accuracy)
        tp = np.sum(similar & (gold == 1))
        if tp > 0:
            precision, recall = tp / similar.sum(), tp / gold.sum()
            f1 = 2 * precision * recall / (precision + recall)
            if f1 > best[0]:
                best = (f1, precision, recall)
    ap = average_precision_score(gold, scores if higher else -scores)
    return {"accuracy": best_accuracy, "f1": best[0], "precision": best[1], "recall": best[2], "ap": ap}


@pytest.mark.parametrize("seed", range(3))
def test_pair_statistics_equal_the_figures_of_the_resampled_pairs(seed):
    a, b, labels, _, _ = pair_data(10 + seed, n=240)
    figures, arrays = pair_scores.evaluate_pairs(a, b, labels)
    ones = np.ones((1, len(labels)))
    for key, statistic in pair_scores.STATISTICS.items():
        assert statistic.function(ones, arrays)[0] == figures[key], key
    for name in pair_scores.SCORES:
        expected = brute_force_pairs(arrays[name], labels, pair_scores.HIGHER_IS_SIMILAR[name])
        for metric, value in expected.items():
            assert abs(figures[f"{name}_{metric}"] - value) <= WEIGHTED_TOLERANCE, (name, metric)

    rng = stats.rng_for(seed, "pairs", "all")
    W = stats.resample_counts(rng, len(labels), 4)
    for row in W:
        repeated = np.repeat(np.arange(len(labels)), row.astype(np.int64))
        explicit = {
            name: brute_force_pairs(arrays[name][repeated], labels[repeated], pair_scores.HIGHER_IS_SIMILAR[name])
            for name in pair_scores.SCORES
        }
        for metric in ("accuracy", "f1", "ap"):
            weighted = pair_scores.STATISTICS[f"max_{metric}"].function(row[None, :], arrays)[0]
            assert abs(weighted - max(e[metric] for e in explicit.values())) <= WEIGHTED_TOLERANCE, metric
            for name in pair_scores.SCORES:
                value = pair_scores.STATISTICS[f"{name}_{metric}"].function(row[None, :], arrays)[0]
                assert abs(value - explicit[name][metric]) <= WEIGHTED_TOLERANCE, (name, metric)


def test_pair_statistics_counted_once_per_block_equal_each_alone():
    """The fast path computes each score's figures once per block of resamples (stats.per_block): taken
    one after another, alternating between two encoders' pairs on the same resamples (a paired
    comparison), every value equals the one computed alone on a fresh block, and the plain definition."""
    a, b, labels, _, _ = pair_data(31, n=300)
    arrays = [pair_scores.evaluate_pairs(a, b, labels)[1], pair_scores.evaluate_pairs(b, a[::-1].copy(), labels)[1]]
    W = stats.resample_counts(stats.rng_for(1, "pairs", "all"), len(labels), 50)
    blocks = [stats.Prepared(one).for_block() for one in arrays]
    together = [[statistic.fast(W, block) for block in blocks] for statistic in pair_scores.STATISTICS.values()]
    for statistic, values in zip(pair_scores.STATISTICS.values(), together):
        for one, value in zip(arrays, values):
            np.testing.assert_array_equal(statistic.fast(W.copy(), stats.Prepared(one).for_block()), value)
            np.testing.assert_allclose(value, statistic.function(W, one), rtol=0, atol=1e-12)


@pytest.mark.parametrize("threads", [1, 2])
def test_fast_pair_figures_equal_the_plain_ones(threads):
    """fast_figures (the bootstrap's path: each score sorted once, thresholds read from running sums
    of the counts) against best_accuracy, best_f1 and average_precision (the plain definition), to
    1e-12: tied and distinct scores, resamples without a positive, with one pair drawn n times or with
    most pairs left out, one to 300 resamples, on one and two threads."""
    import torch

    rng = np.random.default_rng(21)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for n, distinct, b in [(1, 1, 3), (5, 2, 7), (200, 12, 50), (3000, 3000, 300), (4000, 60, 9)]:
            gold = rng.integers(0, 2, n).astype(np.float64)
            if n > 1 and b == 50:
                gold[:] = 0.0  # no positive pair at all
            runs = pair_scores.Runs.of(rng.integers(0, distinct, n).astype(np.float64), True)
            W = stats.resample_counts(stats.rng_for(n, "pairs", "all"), n, b)
            W[0] = 0.0
            W[0, : max(1, n // 3)] = 1.0  # a resample that leaves most pairs out
            W[-1] = 0.0
            W[-1, -1] = n  # one pair, drawn n times: no threshold at all
            derived = pair_scores._Thresholds(runs.run, gold, n)
            got = pair_scores.fast_figures(pair_scores._float32_counts(W), derived)
            np.testing.assert_allclose(got["accuracy"], pair_scores.best_accuracy(W, runs, gold)[0], rtol=0, atol=1e-12)
            np.testing.assert_allclose(got["f1"], pair_scores.best_f1(W, runs, gold)[0], rtol=0, atol=1e-12)
            np.testing.assert_allclose(got["ap"], pair_scores.average_precision(W, runs, gold), rtol=0, atol=1e-12)
    finally:
        torch.set_num_threads(before)


def test_pair_statistics_in_degenerate_resamples():
    """One run of tied scores (no threshold), no positive pair, and a single positive."""
    scores = {name: np.array([0.5, 0.5, 0.5, 0.2]) for name in pair_scores.SCORES}
    arrays = pair_scores.pair_arrays(scores, np.array([1, 0, 1, 0]))
    only_ties = np.array([[1.0, 2.0, 1.0, 0.0]])
    assert pair_scores.STATISTICS["max_accuracy"].function(only_ties, arrays)[0] == 0.0
    assert pair_scores.STATISTICS["max_f1"].function(only_ties, arrays)[0] == 0.0
    no_positive = np.array([[0.0, 2.0, 0.0, 2.0]])
    assert pair_scores.STATISTICS["max_ap"].function(no_positive, arrays)[0] == 0.0
    figures = pair_scores.evaluate_scores(scores, np.array([1, 0, 1, 0]))
    assert figures["cosine_accuracy"] == 0.75 and figures["cosine_accuracy_threshold"] == pytest.approx(0.35)


# Clustering.


def clustering_data(seed, n=500, dim=16, noise=1.6):
    """Documents around 6 centres; labels: the centre (level 1) under one of 3 groups (level 0)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(6, dim)) * 2
    fine = rng.integers(0, 6, n)
    vectors = (centres[fine] + noise * rng.normal(size=(n, dim))).astype(np.float32)
    return vectors, fine // 2, fine


def int_hierarchy(coarse, fine):
    """Two levels, every seventh document without the second."""
    return [[int(c), int(f)] if i % 7 else [int(c)] for i, (c, f) in enumerate(zip(coarse, fine, strict=True))]


@pytest.mark.parametrize(
    "labels_of, attributes",
    [
        (int_hierarchy, {"max_fraction_of_documents_to_embed": None, "max_document_to_embed": 300}),
        # strings, a missing level: mteb keeps those documents as a class "-1" of that level
        (
            lambda c, f: [
                [f"g{c}", f"c{f}"] if i % 5 else [f"g{c}"] for i, (c, f) in enumerate(zip(c, f, strict=True))
            ],
            {"max_fraction_of_documents_to_embed": 0.5, "n_clusters": 4},
        ),
        (lambda c, f: [int(x) for x in f], {"max_fraction_of_documents_to_embed": None, "max_depth": 1}),
    ],
)
def test_bootstrap_clustering_equals_mteb(mteb, labels_of, attributes):
    from mteb.abstasks.clustering import AbsTaskClustering

    vectors, coarse, fine = clustering_data(3)
    texts = [f"document {i}" for i in range(len(vectors))]
    labels = labels_of(coarse, fine)
    attributes = {"max_documents_per_cluster": 256, **attributes}
    task = make_task(
        AbsTaskClustering, "Clustering", "v_measure", {"test": {"sentences": texts, "labels": labels}}, attributes
    )
    encoder = RowsEncoder(dict(zip(texts, vectors, strict=True)))
    theirs = evaluate(task, encoder)
    ours, arrays = clustering.bootstrap_clustering(
        vectors,
        labels,
        max_fraction=attributes["max_fraction_of_documents_to_embed"],
        max_documents=attributes.get("max_document_to_embed"),
        cluster_size=256,
        n_experiments=attributes.get("n_clusters", 10),
        max_depth=attributes.get("max_depth"),
    )
    assert encoder.encoded == len(arrays["documents"])
    assert_clustering_figures_equal(ours, theirs)
    assert theirs["main_score"] == theirs["v_measure"] and 0.2 < ours["v_measure"] < 0.99


def test_bootstrap_clustering_subsets_share_mtebs_random_stream(mteb):
    from mteb.abstasks.clustering import AbsTaskClustering

    data = {lang: clustering_data(seed) for lang, seed in (("eng", 4), ("fra", 5))}
    table, splits = {}, {}
    for lang, (vectors, coarse, fine) in data.items():
        texts = [f"{lang} document {i}" for i in range(len(vectors))]
        table.update(zip(texts, vectors, strict=True))
        splits[lang] = {"test": {"sentences": texts, "labels": int_hierarchy(coarse, fine)}}
    attributes = {"max_fraction_of_documents_to_embed": None, "max_document_to_embed": 200}
    attributes["max_documents_per_cluster"] = 128
    langs = {"eng": ["eng-Latn"], "fra": ["fra-Latn"]}
    task = make_task(AbsTaskClustering, "Clustering", "v_measure", splits, attributes, eval_langs=langs)
    theirs = task.evaluate(RowsEncoder(table), split="test", encode_kwargs={"batch_size": 32})
    rng = random.Random(clustering.SEED)
    for lang, (vectors, coarse, fine) in data.items():
        ours, _ = clustering.bootstrap_clustering(
            vectors, int_hierarchy(coarse, fine), rng=rng, max_fraction=None, max_documents=200, cluster_size=128
        )
        assert ours["v_measures"] == theirs[lang]["v_measures"], lang
        assert ours["ami"] == pytest.approx(theirs[lang]["ami"], rel=0, abs=AMI_AGREEMENT), lang


def cluster_sets(seed, sizes=(120, 90, 150, 60), classes=(3, 2, 5, 4)):
    rng = np.random.default_rng(seed)
    sets = []
    for size, k in zip(sizes, classes, strict=True):
        centres = rng.normal(size=(k, 12)) * 1.5
        labels = rng.integers(0, k, size)
        sets.append(((centres[labels] + 2.0 * rng.normal(size=(size, 12))).astype(np.float32), labels))
    return sets


def test_set_clustering_equals_mteb(mteb):
    from mteb.abstasks.clustering_legacy import AbsTaskClusteringLegacy

    sets = cluster_sets(6)
    table, rows = {}, {"sentences": [], "labels": []}
    for s, (vectors, labels) in enumerate(sets):
        texts = [f"set {s} document {i}" for i in range(len(vectors))]
        table.update(zip(texts, vectors, strict=True))
        rows["sentences"].append(texts)
        rows["labels"].append([f"label {x}" for x in labels])
    task = make_task(AbsTaskClusteringLegacy, "Clustering", "v_measure", {"test": rows})
    theirs = evaluate(task, RowsEncoder(table))
    ours, _ = clustering.set_clustering([(v, [f"label {x}" for x in y]) for v, y in sets])
    assert ours == {key: theirs[key] for key in ("v_measure", "v_measure_std", "v_measures")}
    assert 0.2 < ours["v_measure"] < 0.95

    # a set with one label: mteb counts v-measure 1 without embedding it; embeval refuses
    rows = {"sentences": [rows["sentences"][0][:5]], "labels": [["same"] * 5]}
    encoder = RowsEncoder(table)
    single = make_task(AbsTaskClusteringLegacy, "Clustering", "v_measure", {"test": rows})
    assert evaluate(single, encoder)["v_measures"] == [1.0] and encoder.encoded == 0
    with pytest.raises(EmbevalError, match="set 0 has 1 distinct label"):
        clustering.set_clustering([(sets[0][0][:5], ["same"] * 5)])


@pytest.mark.parametrize("data", ["gaussian", "ties", "offset"])
def test_kmeans_seeding_gives_scikit_learns_centers(data):
    """embeval's k-means++ seeding (MiniBatchKMeans's init callable) against scikit-learn's own
    "k-means++": the same fitted centers and labels, bit for bit, under MTEB's settings of both
    protocols (batch 512 with n_init 1; batch 500), with the init sample smaller than the rows, one
    chunk or several per distance computation, few clusters and many, Gaussian and tie-heavy rows,
    and rows far from the origin (where distances computed in float32 would pick other centers)."""
    import sklearn
    from sklearn.cluster import MiniBatchKMeans

    from embeval.evaluate import kmeans_init

    assert kmeans_init.init_for(np.zeros((2, 2))) == "k-means++"  # float64 rows: scikit-learn's own
    if ".".join(sklearn.__version__.split(".")[:2]) not in kmeans_init.VERIFIED:
        # another scikit-learn: its own k-means++ is used (check `seeding` there before adding it)
        assert kmeans_init.init_for(np.zeros((2, 2), np.float32)) == "k-means++"
        return
    assert kmeans_init.init_for(np.zeros((2, 2), np.float32)) == kmeans_init.seeding
    rng = np.random.default_rng(12)
    for n, d, k in [(300, 16, 2), (2000, 384, 20), (6000, 64, 300), (3000, 768, 121)]:
        if data == "ties":
            rows = rng.integers(0, 3, size=(n, d)).astype(np.float32)
        elif data == "offset":
            rows = (300 + 0.01 * rng.standard_normal((n, d))).astype(np.float32)
        else:
            rows = rng.standard_normal((n, d)).astype(np.float32)
        for batch in (512, 500):
            fits = [
                MiniBatchKMeans(n_clusters=k, batch_size=batch, init=init, n_init=1, random_state=42).fit(rows)
                for init in ("k-means++", kmeans_init.seeding)
            ]
            assert np.array_equal(fits[0].cluster_centers_, fits[1].cluster_centers_), (n, d, k, batch)
            assert np.array_equal(fits[0].labels_, fits[1].labels_), (n, d, k, batch)


@pytest.mark.parametrize("data", ["gaussian", "ties"])
def test_seeding_from_the_table_of_distances_gives_scikit_learns_centers(data, monkeypatch):
    """With many clusters the seeding reads each round's distances from one table of the init sample's
    distinct rows (kmeans_init._DistanceTable): the same centers and labels as scikit-learn's own
    k-means++, bit for bit, where MTEB's clustering puts it (16,384 draws of fewer distinct documents,
    hundreds of clusters), and the table is really what the rounds read."""
    from sklearn.cluster import MiniBatchKMeans

    from embeval.evaluate import kmeans_init

    if kmeans_init.init_for(np.zeros((2, 2), np.float32)) != kmeans_init.seeding:
        pytest.skip("this scikit-learn version gets its own k-means++ (kmeans_init.VERIFIED)")
    built, read = [], []
    table = kmeans_init._DistanceTable
    original_init, original_read = table.__init__, table.squared_distances
    monkeypatch.setattr(table, "__init__", lambda self, wide: (built.append(1), original_init(self, wide))[1])
    monkeypatch.setattr(table, "squared_distances", lambda self, c: (read.append(1), original_read(self, c))[1])
    rng = np.random.default_rng(14)
    for distinct, d, k in [(1048, 384, 524), (400, 96, 129)]:
        draw = rng.integers(0, 3, (distinct, d)) if data == "ties" else rng.standard_normal((distinct, d))
        docs = draw.astype(np.float32)
        rows = docs[rng.integers(0, distinct, 16_384)]
        built.clear(), read.clear()
        fits = [
            MiniBatchKMeans(n_clusters=k, batch_size=512, init=init, n_init=1, random_state=42).fit(rows)
            for init in ("k-means++", kmeans_init.seeding)
        ]
        assert built == [1] and len(read) == k - 1, (distinct, d, k)  # the check, then every later round
        assert np.array_equal(fits[0].cluster_centers_, fits[1].cluster_centers_), (distinct, d, k)
        assert np.array_equal(fits[0].labels_, fits[1].labels_), (distinct, d, k)
    assert kmeans_init._table_agrees


def test_adjusted_mutual_info_is_scikit_learns():
    """embeval's AMI (expected mutual information summed once per distinct pair of class and cluster
    sizes) against scikit-learn's adjusted_mutual_info_score: equal to 1e-11, the error of scikit-learn's
    own sum (at 524 classes and clusters over 16,384 items its expectation was 1.1e-11 off a 40-digit
    computation, embeval's 3.8e-12; the figures differed by at most 5.3e-12 over 30 such labellings);
    its special cases exactly; the expectation itself against a 40-digit computation."""
    import mpmath
    from sklearn.metrics import adjusted_mutual_info_score

    from embeval.evaluate.mutual_info import adjusted_mutual_info, expected_mutual_info

    rng = np.random.default_rng(15)
    cases = [(16_384, 524, 524), (16_384, 2, 2), (16_384, 129, 129), (16_384, 2, 524), (1000, 999, 5), (100, 3, 50)]
    cases += [(int(rng.integers(2, 3000)), int(rng.integers(1, 60)), int(rng.integers(1, 60))) for _ in range(60)]
    for n, classes, clusters in cases:
        gold = rng.integers(0, classes, n)
        noise = rng.integers(0, max(clusters // 3, 1), n)
        pred = (gold * 7 + noise) % clusters if rng.random() < 0.5 else rng.integers(0, clusters, n)
        assert abs(adjusted_mutual_info(gold, pred) - adjusted_mutual_info_score(gold, pred)) <= 1e-11, (
            n,
            classes,
            clusters,
        )
    for gold, pred in [
        ([0, 0, 1, 1], [0, 0, 1, 1]),
        ([0, 0, 0], [1, 1, 1]),
        ([0, 0, 0, 0], [0, 1, 2, 3]),
        ([0, 1], [0, 0]),
    ]:
        assert adjusted_mutual_info(gold, pred) == adjusted_mutual_info_score(gold, pred), (gold, pred)
    mpmath.mp.dps = 40
    a, b, n = np.array([5, 5, 7, 3, 30]), np.array([10, 10, 20, 10]), 50
    exact = mpmath.mpf(0)
    lg = mpmath.loggamma
    for x in a.tolist():
        for y in b.tolist():
            for k in range(max(1, x + y - n), min(x, y) + 1):
                log_p = lg(x + 1) + lg(y + 1) + lg(n - x + 1) + lg(n - y + 1) - lg(n + 1)
                log_p -= lg(k + 1) + lg(x - k + 1) + lg(y - k + 1) + lg(n - x - y + k + 1)
                exact += mpmath.mpf(k) / n * mpmath.log(mpmath.mpf(n) * k / (x * y)) * mpmath.exp(log_p)
    assert abs(expected_mutual_info(a, b, n) - float(exact)) <= 3e-15  # 2.9e-15 measured (scikit-learn's: 1.5e-15)
    # 16,384 singleton classes against 8,000 clusters: scikit-learn's sequential sum over 131 million
    # overlaps is 1.1e-8 off; embeval's, per distinct pair of sizes, 1.7e-10 (measured)
    n = 16_384
    pred = np.random.default_rng(0).integers(0, 8000, n)
    a, b = np.ones(n, dtype=np.int64), np.unique(pred, return_counts=True)[1]
    exact = mpmath.mpf(0)
    sizes, counts = np.unique(b, return_counts=True)
    for y, count in zip(sizes.tolist(), counts.tolist(), strict=True):
        log_p = lg(2) + lg(y + 1) + lg(n) + lg(n - y + 1) - lg(n + 1) - lg(2) - lg(1) - lg(y) - lg(n - y + 1)
        exact += mpmath.mpf(1) / n * mpmath.log(mpmath.mpf(n) / y) * mpmath.exp(log_p) * n * count
    assert abs(expected_mutual_info(a, b, n) - float(exact)) <= 2e-10


@pytest.mark.parametrize("data", ["gaussian", "ties", "offset"])
def test_labels_once_per_distinct_row_are_scikit_learns(data):
    """kmeans_init.fit_predict (the final labels computed once per distinct drawn row, in scikit-learn's
    chunks of 256) against scikit-learn's own fit_predict on every drawn row: the same labels, bit for
    bit, and the same centers; few distinct rows and many, few clusters and many, MTEB's 16,384 draws
    and fewer (the last chunk filled with copies, or none to fill)."""
    from sklearn.cluster import MiniBatchKMeans

    from embeval.evaluate import kmeans_init

    rng = np.random.default_rng(13)
    shapes = [(52, 384, 26, 16_384), (258, 64, 129, 16_384), (700, 32, 20, 4096), (300, 16, 5, 768)]
    for distinct, d, k, draws in shapes:
        if data == "ties":
            rows = rng.integers(0, 3, size=(distinct, d)).astype(np.float32)
        elif data == "offset":
            rows = (300 + 0.01 * rng.standard_normal((distinct, d))).astype(np.float32)
        else:
            rows = rng.standard_normal((distinct, d)).astype(np.float32)
        drawn = rng.integers(0, distinct, draws)

        def model(rows=rows, k=k):
            init = kmeans_init.init_for(rows)
            return MiniBatchKMeans(n_clusters=k, batch_size=512, init=init, n_init=1, random_state=42)

        theirs, ours = model(), model()
        expected = theirs.fit_predict(rows[drawn])
        np.testing.assert_array_equal(kmeans_init.fit_predict(ours, rows, drawn), expected)
        np.testing.assert_array_equal(ours.cluster_centers_, theirs.cluster_centers_)


def test_clustering_refuses_a_level_with_one_label():
    vectors, coarse, _ = clustering_data(7, n=100)
    with pytest.raises(EmbevalError, match="level 0 has 1 distinct label"):
        clustering.bootstrap_clustering(vectors, [3] * 100, max_fraction=None, cluster_size=50, n_experiments=1)
    with pytest.raises(EmbevalError, match="no document"):
        clustering.bootstrap_clustering(vectors[:20], coarse[:20], cluster_size=50)


def test_weighted_v_measure_equals_scikit_learns_on_repeated_items():
    rng = np.random.default_rng(8)
    for _ in range(20):
        n = int(rng.integers(2, 80))
        gold, pred = rng.integers(0, rng.integers(1, 6), n), rng.integers(0, rng.integers(1, 6), n)
        counts = rng.integers(0, 4, (3, n)).astype(np.float64)
        counts[:, 0] += 1
        for row, value in zip(counts, clustering.weighted_v_measure(counts, gold, pred), strict=True):
            repeated = np.repeat(np.arange(n), row.astype(np.int64))
            assert abs(value - v_measure_score(gold[repeated], pred[repeated])) <= WEIGHTED_TOLERANCE


def test_clustering_statistics_equal_the_figures_of_the_resampled_documents():
    vectors, coarse, fine = clustering_data(9, n=300)
    figures, arrays = clustering.bootstrap_clustering(
        vectors, int_hierarchy(coarse, fine), max_fraction=None, max_documents=200, cluster_size=150, n_experiments=3
    )
    k = len(arrays["documents"])
    assert clustering.bootstrap_v_measure(np.ones((1, k)), arrays)[0] == pytest.approx(figures["v_measure"], abs=1e-12)
    for row in stats.resample_counts(stats.rng_for(1, "clusters", "all"), k, 3):
        values = []
        for gold, count, pred in zip(arrays["gold"].T, arrays["count"].T, arrays["pred"].T, strict=True):
            repeated = np.repeat(np.arange(k), (count * row).astype(np.int64))
            values.append(v_measure_score(gold[repeated], pred[repeated]))
        drawn = stats.experiment_counts(row[None, :], len(values))[0]  # the experiments resampled too
        expected = np.average(values, weights=drawn)
        assert abs(clustering.bootstrap_v_measure(row[None, :], arrays)[0] - expected) <= WEIGHTED_TOLERANCE

    figures, arrays = clustering.set_clustering(cluster_sets(10))
    n = len(arrays["gold"])
    assert clustering.set_v_measure(np.ones((1, n)), arrays)[0] == pytest.approx(figures["v_measure"], abs=1e-12)
    for row in stats.resample_counts(stats.rng_for(2, "sets", "strata"), n, 3, arrays["group"]):
        values = []
        for g in np.unique(arrays["group"]):
            members = np.flatnonzero(arrays["group"] == g)
            repeated = np.repeat(members, row[members].astype(np.int64))
            values.append(v_measure_score(arrays["gold"][repeated], arrays["pred"][repeated]))
        assert abs(clustering.set_v_measure(row[None, :], arrays)[0] - np.mean(values)) <= WEIGHTED_TOLERANCE


# Classification.


def classification_data(seed, n_classes, n_train=300, n_test=200, dim=12):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes, dim))

    def draw(n):
        labels = rng.integers(0, n_classes, n)
        return (centres[labels] + 1.2 * rng.normal(size=(n, dim))).astype(np.float32), labels

    return draw(n_train), draw(n_test)


@pytest.mark.parametrize("n_classes", [2, 5])
def test_classification_equals_mteb(mteb, n_classes):
    from mteb.abstasks.classification import AbsTaskClassification

    (train_x, train_y), (test_x, test_y) = classification_data(n_classes, n_classes)
    train_texts = [f"train {i}" for i in range(len(train_x))]
    test_texts = [f"test {i}" for i in range(len(test_x))]
    table = dict(zip(train_texts + test_texts, np.concatenate([train_x, test_x]), strict=True))
    splits = {
        "train": {"text": train_texts, "label": train_y.tolist()},
        "test": {"text": test_texts, "label": test_y.tolist()},
    }
    task = make_task(AbsTaskClassification, "Classification", "accuracy", splits)
    theirs = evaluate(task, RowsEncoder(table))
    ours, arrays = mteb_classification.classify(train_x, train_y, test_x, test_y)
    for key, value in theirs.items():
        if key == "main_score":
            assert value == ours["accuracy"]
        elif isinstance(value, float) and np.isnan(value):
            assert np.isnan(ours[key]) and n_classes > 2, key
        else:
            assert ours[key] == value, key
    assert arrays["pred"].shape == (len(test_y), 10)
    rows = mteb_classification.training_rows(train_y)
    assert all(np.bincount(train_y[r]).tolist() == [8] * n_classes for r in rows)


def test_cross_validated_classification_equals_mteb(mteb):
    from mteb.abstasks.classification import AbsTaskClassification

    (x, y), _ = classification_data(11, 3, n_train=203)
    texts = [f"text {i}" for i in range(len(x))]
    attributes = {"is_cross_validation": True, "train_split": "test"}
    task = make_task(
        AbsTaskClassification, "Classification", "accuracy", {"test": {"text": texts, "label": y.tolist()}}, attributes
    )
    theirs = evaluate(task, RowsEncoder(dict(zip(texts, x, strict=True))))
    ours, arrays = mteb_classification.cross_validate(x, y)
    assert ours["scores_per_experiment"] == theirs["scores_per_experiment"]
    assert ours["accuracy"] == theirs["accuracy"] and ours["f1"] == theirs["f1"]
    assert mteb_classification.accuracy(np.ones((1, len(y))), arrays)[0] == pytest.approx(ours["accuracy"], abs=1e-12)


@pytest.mark.parametrize("n_classes", [2, 4])
def test_classification_statistics_equal_the_figures_of_the_resampled_items(n_classes):
    """A resample weights the test items and draws the experiments: its figure is scikit-learn's on
    the repeated items, averaged over the drawn experiments."""
    (train_x, train_y), (test_x, test_y) = classification_data(20 + n_classes, n_classes, n_test=150)
    figures, arrays = mteb_classification.classify(train_x, train_y, test_x, test_y, n_experiments=4)
    ones = np.ones((1, len(test_y)))
    assert mteb_classification.accuracy(ones, arrays)[0] == pytest.approx(figures["accuracy"], abs=1e-12)
    assert mteb_classification.macro_f1(ones, arrays)[0] == pytest.approx(figures["f1"], abs=1e-12)
    for row in stats.resample_counts(stats.rng_for(3, "classes", "all"), len(test_y), 4):
        repeated = np.repeat(np.arange(len(test_y)), row.astype(np.int64))
        gold = test_y[repeated]
        drawn = stats.experiment_counts(row[None, :], arrays["pred"].shape[1])[0]
        experiments = np.repeat(np.arange(len(drawn)), drawn.astype(np.int64))  # the experiments resampled
        accuracy = np.mean([accuracy_score(gold, arrays["pred"][repeated, e]) for e in experiments])
        f1 = np.mean([f1_score(gold, arrays["pred"][repeated, e], average="macro") for e in experiments])
        assert abs(mteb_classification.accuracy(row[None, :], arrays)[0] - accuracy) <= WEIGHTED_TOLERANCE
        assert abs(mteb_classification.macro_f1(row[None, :], arrays)[0] - f1) <= WEIGHTED_TOLERANCE


RAW_LABELS = [  # two test labels, as mteb's data may hold them (a third label: of train only)
    (0, 1), (1, 2), (-1, 1), (-1, 0, 1), (1, 2, 3), (0, 2), (2, 10), (0.0, 1.0), (0.5, 1.0), (False, True),
    ("neg", "pos"), ("0", "1"), (-3, 1),
]  # fmt: skip


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")  # a label of train only
@pytest.mark.parametrize("raw", RAW_LABELS, ids=str)
def test_average_precision_is_mtebs_call_on_the_label_values(raw):
    """What mteb computes, scikit-learn's average_precision_score(y_test, y_pred) of the raw labels
    (positive label 1), against embeval's on label ids and the values label_values reads from the
    labels' text (as an --mteb copy spells them): equal, or undefined exactly where scikit-learn raises.
    Text "0" / "1" is read as the numbers (mteb, given strings, raises; embeval's files cannot tell)."""
    from embeval.tasks.samples import label_order

    rng = np.random.default_rng(len(raw))
    gold_raw = [raw[i] for i in rng.choice([0, len(raw) - 1], 60)]  # the test split's two labels
    pred_raw = [raw[i] for i in rng.integers(0, len(raw), 60)]
    classes = label_order({str(v) for v in raw})
    ids = {label: i for i, label in enumerate(classes)}
    gold, pred = (np.array([ids[str(v)] for v in labels]) for labels in (gold_raw, pred_raw))
    values = mteb_classification.label_values(classes)
    figures = mteb_classification.experiment_figures(gold, pred, values)
    try:
        theirs = [average_precision_score(gold_raw, pred_raw, average=a) for a in ("macro", "weighted")]
    except ValueError as err:  # (0.5, 1.0): not even mteb's classifier takes them ("continuous" labels)
        assert "pos_label=1 is not a valid label" in str(err) or "continuous format" in str(err)
        if raw == ("0", "1"):
            assert figures["ap"] == average_precision_score([int(v) for v in gold_raw], [int(v) for v in pred_raw])
            return
        assert figures["ap"] is None and figures["ap_weighted"] is None
        return
    assert [figures["ap"], figures["ap_weighted"]] == theirs and figures["accuracy"] == accuracy_score(
        gold_raw, pred_raw
    )


def test_label_values_are_numbers_only_when_every_label_is_one():
    values = mteb_classification.label_values
    assert values(["-1", "0", "1"]).tolist() == [-1, 0, 1] and values(["0.0", "1.5e1"]).tolist() == [0.0, 15.0]
    assert values(["False", "True"]).tolist() == [0, 1]
    assert values(["1", "01"]).tolist() == ["1", "01"]  # the same number twice: the text
    assert values(["1", "nan"]).tolist() == ["1", "nan"] and values(["inf", "1"]).dtype.kind == "U"
    assert values(["0", "b"]).tolist() == ["0", "b"]


def test_undersampling_reapplies_one_permutation():
    """Experiment e's order is RandomState(42)'s permutation applied e + 1 times, its rows the first
    eight of each label in that order."""
    labels = np.random.default_rng(0).integers(0, 3, 50)
    permutation = np.random.RandomState(42).permutation(50)
    order = np.arange(50)
    for rows in mteb_classification.training_rows(labels, n_experiments=3):
        order = order[permutation]
        expected = [i for i in order if np.sum(labels[order[: list(order).index(i) + 1]] == labels[i]) <= 8]
        assert rows.tolist() == expected


def test_mtebs_bootstrap_clustering_of_a_level_with_one_label_is_one(mteb):
    """What embeval refuses: mteb clusters a one-label level into one cluster, v-measure and AMI 1."""
    from mteb.abstasks.clustering import AbsTaskClustering

    vectors, _, _ = clustering_data(12, n=120)
    texts = [f"alike {i}" for i in range(len(vectors))]
    attributes = {"max_fraction_of_documents_to_embed": None, "max_documents_per_cluster": 64, "n_clusters": 2}
    task = make_task(
        AbsTaskClustering, "Clustering", "v_measure", {"test": {"sentences": texts, "labels": [7] * 120}}, attributes
    )
    theirs = evaluate(task, RowsEncoder(dict(zip(texts, vectors, strict=True))))
    assert theirs["v_measures"] == {"Level 0": [1.0, 1.0]} and theirs["ami"] == 1.0
    with pytest.raises(EmbevalError, match="level 0 has 1 distinct label"):
        clustering.bootstrap_clustering(vectors, [7] * 120, max_fraction=None, cluster_size=64, n_experiments=2)
