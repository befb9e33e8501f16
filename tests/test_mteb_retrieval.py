"""MTEB's retrieval and reranking figures (embeval.evaluate.ir_metrics) and BEIR's files (embeval.tasks.beir)
against mteb 2.26's own evaluator run on the same vectors, and against pytrec_eval directly.

The synthetic tasks are written as BEIR files, read by embeval's reader, and handed to mteb in memory
(AbsTaskRetrieval with its dataset set, no download); mteb encodes through an encoder that looks each
text up in a table built from embeval's reading of the files, so a text mteb joins differently from
embeval (title + text) fails the lookup. Vectors hold small integers and the similarity is their dot
product in float64, exact in any summation order, so both sides see bit-identical scores and the
exact ties the vectors make (every tie is broken by document id, as trec_eval breaks it).

Agreement measured: every per-query figure equal to pytrec_eval's / mteb's to 0.0 (bit-identical) and
every reported mean equal; the tests allow 1e-12 (libm's log2 may differ by an ulp elsewhere).
"""

import importlib.util
import json

import numpy as np
import pytest
from mteb_helpers import TableEncoder, metadata, mteb_client
from report_helpers import need

from embeval import stats
from embeval.errors import DataFileError
from embeval.evaluate import ir_metrics
from embeval.tasks import beir

TOL = 1e-12
TREC = {"ndcg": "ndcg_cut_", "map": "map_cut_", "recall": "recall_", "precision": "P_", "hit_rate": "success_"}


@pytest.fixture(scope="module")
def client():
    return mteb_client()


@pytest.fixture(scope="module")
def pytrec_eval():
    if importlib.util.find_spec("pytrec_eval") is None:
        need("pytrec_eval", "pip install '.[mteb]' (mteb depends on it)")
    import pytrec_eval

    return pytrec_eval


# ---------------------------------------------------------------------------------------------------
# Synthetic tasks


PREFIXES = ("d", "doc-", "D", "é", "z", "Ω", "")  # "" makes all-digit ids, written as JSON integers


def synthetic(seed, n_docs=300, n_queries=40, dim=8, span=2, duplicates=12, identical=0):
    """A task as records: documents (id, title, text), queries, graded judgments, vectors, candidates."""
    rng = np.random.default_rng(seed)
    numbers = rng.permutation(n_docs)
    doc_ids = [f"{PREFIXES[i % len(PREFIXES)]}{numbers[i]}" for i in range(n_docs)]
    query_ids = [f"q{i}" if i % 4 else f"é{i}" for i in range(n_queries)]
    for j in range(identical):  # documents named like queries (MTEB's ignore_identical_ids)
        doc_ids[5 * j + 1] = query_ids[3 * j]
    docs = []
    for i, doc_id in enumerate(doc_ids):
        record = {"_id": int(doc_id) if doc_id.isdigit() else doc_id, "text": f" text of document {i}\t"}
        if i % 3 == 0:
            record["title"] = f"  Title {i} "
        elif i % 6 == 2:
            record["title"] = None if i % 12 == 2 else ""
        docs.append(record)
    queries = [{"_id": q, "text": f"query {i} " if i % 2 else f"Query {i}?"} for i, q in enumerate(query_ids)]
    doc_vectors = rng.integers(-span, span + 1, (n_docs, dim)).astype(np.float64)
    for a, b in rng.choice(n_docs, (duplicates, 2), replace=False):
        doc_vectors[b] = doc_vectors[a]  # exact ties
    query_vectors = rng.integers(-span, span + 1, (n_queries, dim)).astype(np.float64)
    scores = query_vectors @ doc_vectors.T
    qrels = []
    for q in range(n_queries):
        if q == 3:
            continue  # no judgment: left out
        judged = rng.choice(n_docs, int(rng.integers(1, 7)), replace=False)
        if q == 5:
            judged = np.r_[judged[judged != scores[q].argmin()], scores[q].argmin()]  # ranked last
        for d in judged:
            grade = 0 if q == 1 else int(rng.choice([-1, 0, 1, 1, 2, 3]))
            if q == 5 and d == judged[-1]:
                grade = 3
            qrels.append((query_ids[q], doc_ids[d], grade))
    order = rng.permutation(len(qrels))
    qrels = [qrels[i] for i in order]
    candidates = []
    for q in range(n_queries):
        if q == 7:
            continue  # no candidate: scores 0
        pool = rng.choice(n_docs, int(rng.integers(5, 40)), replace=False)
        judged = np.array([doc_ids.index(d) for qid, d, _ in qrels if qid == query_ids[q]], dtype=np.int64)
        pool = np.union1d(pool, judged[:-1])  # the last judged document is left out unless drawn
        candidates += [(query_ids[q], doc_ids[d]) for d in rng.permutation(pool)]
    return {
        "docs": docs,
        "queries": queries,
        "qrels": qrels,
        "candidates": candidates,
        "doc_vectors": dict(zip(doc_ids, doc_vectors)),
        "query_vectors": dict(zip(query_ids, query_vectors)),
    }


def write_task(folder, task):
    """BEIR's files of a synthetic task; returns their paths."""
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    paths = {
        "corpus": folder / "corpus.jsonl",
        "queries": folder / "queries.jsonl",
        "qrels": folder / "qrels" / "test.tsv",
        "candidates": folder / "top_ranked.tsv",
    }
    paths["corpus"].write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in task["docs"]), "utf-8")
    paths["queries"].write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in task["queries"]), "utf-8")
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{g}" for q, d, g in task["qrels"]]
    paths["qrels"].write_text("\n".join(lines) + "\n", "utf-8")
    lines = ["query-id\tcorpus-id"] + [f"{q}\t{d}" for q, d in task["candidates"]]
    paths["candidates"].write_text("\n".join(lines) + "\n", "utf-8")
    return paths


def vectors_of(data, task):
    queries = np.array([task["query_vectors"][q] for q in data.query_ids])
    documents = np.array([task["doc_vectors"][d] for d in data.doc_ids])
    return queries, documents


def brute_force_top_k(queries, documents, k):
    """Rows and scores of each query's k best documents (dot product), ties by row ascending."""
    scores = queries @ documents.T
    rows = np.lexsort((np.broadcast_to(np.arange(len(documents)), scores.shape), -scores), axis=1)[:, :k]
    return rows, np.take_along_axis(scores, rows, axis=1)


# ---------------------------------------------------------------------------------------------------
# mteb's side


def run_mteb(client, task, data, *, reranking=False, k_values=None, ignore_identical_ids=False):
    """mteb's evaluation of the task: (reported scores, per-query pytrec_eval scores, results)."""
    from datasets import Dataset
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData

    task_metadata = (
        metadata("EmbevalSyntheticReranking", "Reranking", "map_at_1000")
        if reranking
        else metadata("EmbevalSyntheticRetrieval", "Retrieval", "ndcg_at_10")
    )
    relevant = {}
    for q, d, g in task["qrels"]:
        relevant.setdefault(q, {})[d] = g
    top_ranked = None
    if reranking:
        top_ranked = {}
        for q, d in task["candidates"]:
            top_ranked.setdefault(q, []).append(d)
    corpus = [{"id": str(d["_id"]), "title": d.get("title") or "", "text": d["text"]} for d in task["docs"]]
    split = RetrievalSplitData(
        corpus=Dataset.from_list(corpus),
        queries=Dataset.from_list([{"id": q["_id"], "text": q["text"]} for q in task["queries"]]),
        relevant_docs=relevant,
        top_ranked=top_ranked,
    )

    class Synthetic(AbsTaskRetrieval):
        def load_data(self, **kwargs):
            self.dataset = {"default": {"test": split}}
            self.data_loaded = True

        def task_specific_scores(self, scores, qrels, results, hf_split, hf_subset):
            self.recorded = (scores, results)
            return {}

    Synthetic.metadata = task_metadata
    Synthetic.ignore_identical_ids = ignore_identical_ids
    if k_values is not None:
        Synthetic.k_values = k_values
    runner = Synthetic()
    query_vectors, doc_vectors = vectors_of(data, task)
    encoder = TableEncoder(
        {"query": dict(zip(data.query_texts, query_vectors)), "document": dict(zip(data.doc_texts, doc_vectors))}
    )
    reported = runner.evaluate(encoder, split="test", encode_kwargs={"batch_size": 64, "show_progress_bar": False})
    return reported["default"], runner.recorded[0], runner.recorded[1], relevant


def assert_matches_mteb(values, data, reported, per_query, results, relevant, cutoffs, main_score):
    """Every per-query figure equal to pytrec_eval's (as mteb ran it) and mteb's MRR, every mean to mteb's."""
    from mteb._evaluators.retrieval_metrics import mrr

    assert list(per_query) == data.query_ids
    worst = 0.0
    for row, query in enumerate(data.query_ids):
        for figure, trec in TREC.items():
            for k in cutoffs:
                worst = max(worst, abs(values[f"{figure}_at_{k}"][row] - per_query[query][f"{trec}{k}"]))
    reference = mrr(relevant, results, list(cutoffs))
    for k in cutoffs:
        worst = max(worst, float(np.max(np.abs(values[f"mrr_at_{k}"] - np.array(reference[f"MRR@{k}"])))))
    assert worst <= TOL
    ours = ir_metrics.mteb_scores(values, main_score)
    for name, value in ours.items():
        assert abs(value - reported[name]) <= TOL, (name, value, reported[name])
    assert {n for n in reported if not n.startswith("nauc_") and n not in ("hf_subset", "languages")} == set(ours)


def assert_same_candidates(rows, scores, data, results, exclude=None):
    """mteb scored the same documents with the same scores as embeval's inputs."""
    for q, query in enumerate(data.query_ids):
        ours = {
            data.doc_ids[r]: s for r, s in zip(rows[q], scores[q]) if r >= 0 and (exclude is None or r != exclude[q])
        }
        assert results[query] == ours


# ---------------------------------------------------------------------------------------------------
# Parity with mteb


@pytest.mark.parametrize("span", [2, 60], ids=["dense-ties", "sparse-ties"])
def test_retrieval_figures_equal_mteb(client, tmp_path, span):
    task = synthetic(seed=span, span=span)
    data = beir.load_retrieval(**{k: v for k, v in write_task(tmp_path, task).items() if k != "candidates"}, task="T")
    queries, documents = vectors_of(data, task)
    rows, scores = brute_force_top_k(queries, documents, min(1000, len(documents)))
    values = ir_metrics.per_query(rows, scores, data.qrels, ir_metrics.id_ranks(data.doc_ids))
    reported, per_query, results, relevant = run_mteb(client, task, data)
    assert_same_candidates(rows, scores, data, results)
    assert_matches_mteb(values, data, reported, per_query, results, relevant, ir_metrics.CUTOFFS, "ndcg_at_10")
    assert reported["main_score"] == reported["ndcg_at_10"]


def test_retrieval_at_depth_100_leaves_relevant_documents_unretrieved_as_mteb(client, tmp_path):
    """mteb keeps the top max(k_values) documents; with k_values up to 100 some relevant documents fall outside.
    The data has no score tie across rank 100 (where mteb and the search may choose different documents)."""
    task = synthetic(seed=5, span=60)
    data = beir.load_retrieval(**{k: v for k, v in write_task(tmp_path, task).items() if k != "candidates"}, task="T")
    queries, documents = vectors_of(data, task)
    full = np.sort(queries @ documents.T, axis=1)[:, ::-1]
    assert np.all(full[:, 99] > full[:, 100])
    rows, scores = brute_force_top_k(queries, documents, 100)
    cutoffs = (1, 3, 5, 10, 20, 100)
    values = ir_metrics.per_query(rows, scores, data.qrels, ir_metrics.id_ranks(data.doc_ids), cutoffs=cutoffs)
    assert values["recall_at_100"].min() < 1.0  # some relevant document is not retrieved
    reported, per_query, results, relevant = run_mteb(client, task, data, k_values=cutoffs)
    assert_same_candidates(rows, scores, data, results)
    assert_matches_mteb(values, data, reported, per_query, results, relevant, cutoffs, "ndcg_at_10")


def test_ignore_identical_ids_drops_the_query_itself_as_mteb(client, tmp_path):
    task = synthetic(seed=11, span=2, identical=8)
    data = beir.load_retrieval(**{k: v for k, v in write_task(tmp_path, task).items() if k != "candidates"}, task="T")
    queries, documents = vectors_of(data, task)
    rows, scores = brute_force_top_k(queries, documents, len(documents))
    exclude = ir_metrics.identical_rows(data.query_ids, data.doc_ids)
    assert (exclude >= 0).sum() == 7  # one of the 8 is the query without judgments
    values = ir_metrics.per_query(rows, scores, data.qrels, ir_metrics.id_ranks(data.doc_ids), exclude=exclude)
    kept = ir_metrics.per_query(rows, scores, data.qrels, ir_metrics.id_ranks(data.doc_ids))
    assert any(not np.array_equal(values[name], kept[name]) for name in values)
    reported, per_query, results, relevant = run_mteb(client, task, data, ignore_identical_ids=True)
    assert_same_candidates(rows, scores, data, results, exclude)
    assert_matches_mteb(values, data, reported, per_query, results, relevant, ir_metrics.CUTOFFS, "ndcg_at_10")


@pytest.mark.parametrize("span", [2, 60], ids=["dense-ties", "sparse-ties"])
def test_reranking_figures_equal_mteb(client, tmp_path, span):
    task = synthetic(seed=100 + span, span=span)
    data = beir.load_retrieval(**write_task(tmp_path, task), task="T")
    queries, documents = vectors_of(data, task)
    rows = ir_metrics.pad_candidates(len(data.query_ids), *data.candidates)
    scores = np.where(rows >= 0, np.einsum("qkd,qd->qk", documents[np.maximum(rows, 0)], queries), np.nan)
    values = ir_metrics.per_query(rows, scores, data.qrels, ir_metrics.id_ranks(data.doc_ids))
    assert values["recall_at_1000"].min() < 1.0  # some relevant document is not a candidate
    reported, per_query, results, relevant = run_mteb(client, task, data, reranking=True)
    assert_same_candidates(rows, scores, data, results)
    assert_matches_mteb(values, data, reported, per_query, results, relevant, ir_metrics.CUTOFFS, "map_at_1000")
    no_candidate = data.query_ids.index("q7")
    assert all(values[name][no_candidate] == 0 for name in values)


# ---------------------------------------------------------------------------------------------------
# Ties and the figures' definitions, against pytrec_eval and by hand


def test_ties_are_broken_by_document_id_descending(pytrec_eval):
    """Equal scores rank by id in descending code-point order: é > d2 > d10 > d1 > Z9."""
    ids = ["d1", "d10", "d2", "Z9", "é"]
    rows = np.array([[0, 1, 2, 3, 4], [3, 0, 1, 2, 4]])
    scores = np.array([[0.5] * 5, [0.9, 0.5, 0.5, 0.2, 0.2]])
    qrels = (np.array([0, 1, 1]), np.array([1, 0, 3]), np.array([1, 2, 1]))
    values = ir_metrics.per_query(rows, scores, qrels, ir_metrics.id_ranks(ids), cutoffs=(1, 3, 5))
    # query 0: ranking é, d2, d10, d1, Z9 -> its relevant d10 is third
    assert values["mrr_at_1"][0] == 0 and values["mrr_at_3"][0] == pytest.approx(1 / 3)
    assert values["ndcg_at_3"][0] == pytest.approx(1 / np.log2(4))
    assert values["precision_at_3"][0] == pytest.approx(1 / 3) and values["map_at_5"][0] == pytest.approx(1 / 3)
    # query 1: Z9 (0.9) first, then d10 before d1 at 0.5, then é before d2 at 0.2
    expected_dcg = 1 / np.log2(2) + 2 / np.log2(4)
    assert values["ndcg_at_3"][1] == pytest.approx(expected_dcg / (2 + 1 / np.log2(3)))
    run = {f"q{q}": {ids[r]: float(s) for r, s in zip(rows[q], scores[q])} for q in range(2)}
    judged = {f"q{q}": {} for q in range(2)}
    for q, d, g in zip(*qrels):
        judged[f"q{q}"][ids[d]] = int(g)
    reference = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut.1,3,5", "map_cut.1,3,5", "P.1,3,5"}).evaluate(run)
    for q in range(2):
        for figure in ("ndcg", "map", "precision"):
            for k in (1, 3, 5):
                assert values[f"{figure}_at_{k}"][q] == pytest.approx(reference[f"q{q}"][f"{TREC[figure]}{k}"], abs=TOL)


@pytest.mark.parametrize("seed", range(3))
def test_random_runs_with_ties_equal_pytrec_eval(pytrec_eval, client, seed):
    """Short candidate lists (shorter than the cut-offs), half-point scores, grades -1..3, queries without a
    relevant document, unicode ids: every figure per query equals pytrec_eval's and mteb's MRR."""
    from mteb._evaluators.retrieval_metrics import mrr

    rng = np.random.default_rng(seed)
    n_docs, n_queries, k = 60, 30, 25
    ids = [f"{PREFIXES[i % len(PREFIXES)]}{i}" for i in range(n_docs)]
    rows = np.full((n_queries, k), -1)
    scores = np.full((n_queries, k), np.nan)
    run, judged, qrels = {}, {}, ([], [], [])
    for q in range(n_queries):
        size = int(rng.integers(0, k + 1))
        rows[q, :size] = rng.choice(n_docs, size, replace=False)
        scores[q, :size] = rng.integers(0, 5, size) / 2
        run[f"q{q}"] = {ids[r]: float(s) for r, s in zip(rows[q, :size], scores[q, :size])}
        judged[f"q{q}"] = {}
        for d in rng.choice(n_docs, int(rng.integers(1, 8)), replace=False):
            grade = int(rng.integers(-1, 4))
            judged[f"q{q}"][ids[d]] = grade
            for column, value in zip(qrels, (q, d, grade)):
                column.append(value)
    cutoffs = ir_metrics.CUTOFFS
    measures = {f"{m}.{','.join(map(str, cutoffs))}" for m in ("ndcg_cut", "map_cut", "recall", "P", "success")}
    reference = pytrec_eval.RelevanceEvaluator(judged, measures).evaluate(run)
    reference_mrr = mrr(judged, run, list(cutoffs))
    values = ir_metrics.per_query(rows, scores, tuple(map(np.array, qrels)), ir_metrics.id_ranks(ids))
    for q in range(n_queries):
        for figure, trec in TREC.items():
            for c in cutoffs:
                assert abs(values[f"{figure}_at_{c}"][q] - reference[f"q{q}"][f"{trec}{c}"]) <= TOL
    for c in cutoffs:
        assert np.max(np.abs(values[f"mrr_at_{c}"] - reference_mrr[f"MRR@{c}"])) <= TOL


def test_figures_by_hand():
    """One query, grades 3 (rank 2), 1 (rank 4) and 2 (never retrieved); rows padded with -1."""
    rows = np.array([[4, 7, 1, 2, -1, -1]])
    scores = np.array([[0.9, 0.8, 0.7, 0.6, np.nan, np.nan]])
    qrels = (np.zeros(4, int), np.array([7, 2, 5, 4]), np.array([3, 1, 2, 0]))
    values = ir_metrics.per_query(rows, scores, qrels, np.arange(10), cutoffs=(1, 3, 5, 10))
    dcg = {3: 3 / np.log2(3), 5: 3 / np.log2(3) + 1 / np.log2(5)}
    ideal = {3: 3 + 2 / np.log2(3) + 1 / np.log2(4)}
    assert values["ndcg_at_3"][0] == pytest.approx(dcg[3] / ideal[3])
    assert values["ndcg_at_5"][0] == pytest.approx(dcg[5] / ideal[3])
    assert values["map_at_5"][0] == pytest.approx((1 / 2 + 2 / 4) / 3)  # divided by all 3 relevant
    assert values["precision_at_10"][0] == pytest.approx(2 / 10)  # divided by 10, though 4 were retrieved
    assert values["recall_at_3"][0] == pytest.approx(1 / 3) and values["recall_at_10"][0] == pytest.approx(2 / 3)
    assert values["mrr_at_1"][0] == 0 and values["mrr_at_3"][0] == 0.5
    assert values["hit_rate_at_1"][0] == 0 and values["hit_rate_at_3"][0] == 1


def test_blocks_give_the_figures_of_one_pass(monkeypatch):
    rng = np.random.default_rng(5)
    rows = np.array([rng.choice(50, 12, replace=False) for _ in range(40)])
    scores = rng.integers(0, 4, rows.shape) / 4
    qrels = (rng.integers(0, 40, 200), rng.integers(0, 50, 200), rng.integers(0, 4, 200))
    keys = np.unique(qrels[0] * 50 + qrels[1], return_index=True)[1]
    qrels = tuple(a[keys] for a in qrels)
    whole = ir_metrics.per_query(rows, scores, qrels, np.arange(50))
    monkeypatch.setattr(ir_metrics, "BLOCK_CELLS", 12 * 7)
    for name, value in ir_metrics.per_query(rows, scores, qrels, np.arange(50)).items():
        assert np.array_equal(value, whole[name]), name


@pytest.mark.parametrize("ties", [False, True])
def test_candidates_in_rank_order_give_the_figures_of_any_order(ties):
    """Candidates as a search returns them (score descending; padding last; some queries with an
    excluded candidate) give the figures of the same candidates shuffled, which go through the two
    sorts: with and without queries with equal scores in the same block."""
    rng = np.random.default_rng(21)
    n_docs, n_queries, k = 300, 60, 40
    rows = np.array([rng.choice(n_docs, k, replace=False) for _ in range(n_queries)])
    scores = rng.standard_normal(rows.shape)
    if ties:  # every other query: equal scores (sorted), the others none (taken as they come)
        scores[::2] = np.round(scores[::2], 1)
    order = np.argsort(-scores, axis=1, kind="stable")
    rows, scores = np.take_along_axis(rows, order, axis=1), np.take_along_axis(scores, order, axis=1)
    rows[:5, -7:], scores[:5, -7:] = -1, np.nan  # padding
    exclude = np.where(np.arange(n_queries) % 3 == 0, rows[:, 3], -1)
    qrels = (rng.integers(0, n_queries, 900), rng.integers(0, n_docs, 900), rng.integers(0, 3, 900))
    keys = np.unique(qrels[0] * n_docs + qrels[1], return_index=True)[1]
    qrels = tuple(a[keys] for a in qrels)
    id_rank = rng.permutation(n_docs)
    shuffle = np.array([rng.permutation(k) for _ in range(n_queries)])
    mixed = np.take_along_axis(rows, shuffle, axis=1), np.take_along_axis(scores, shuffle, axis=1)
    for drop in (None, exclude):
        ranked = ir_metrics.per_query(rows, scores, qrels, id_rank, exclude=drop)
        shuffled = ir_metrics.per_query(*mixed, qrels, id_rank, exclude=drop)
        for name, value in ranked.items():
            assert np.array_equal(value, shuffled[name]), name
        assert ranked["ndcg_at_10"].any()


def test_bad_candidate_lists_are_refused():
    qrels = (np.array([0]), np.array([0]), np.array([1]))
    with pytest.raises(ValueError, match="twice"):
        ir_metrics.per_query(np.array([[1, 1]]), np.zeros((1, 2)), qrels, np.arange(3))
    with pytest.raises(ValueError, match="not finite"):
        ir_metrics.per_query(np.array([[1, 2]]), np.array([[0.0, np.nan]]), qrels, np.arange(3))
    with pytest.raises(ValueError, match="outside"):
        ir_metrics.per_query(np.array([[3]]), np.zeros((1, 1)), qrels, np.arange(3))


def test_candidate_scores_are_cosines_and_padding_is_nan():
    rng = np.random.default_rng(2)
    queries, documents = rng.normal(size=(5, 7)), rng.normal(size=(30, 7))
    rows = ir_metrics.pad_candidates(5, np.array([0, 0, 1, 3, 3, 3]), np.array([4, 9, 2, 0, 29, 4]))
    assert rows.tolist() == [[4, 9, -1], [2, -1, -1], [-1, -1, -1], [0, 29, 4], [-1, -1, -1]]
    cosine = (queries @ documents.T) / np.outer(np.linalg.norm(queries, axis=1), np.linalg.norm(documents, axis=1))
    got = ir_metrics.candidate_scores(queries, documents, rows)
    assert np.isnan(got[rows < 0]).all()
    assert np.allclose(got[rows >= 0], np.take_along_axis(cosine, np.maximum(rows, 0), axis=1)[rows >= 0], atol=1e-14)


def test_confidences_equal_numpy_on_each_query_alone():
    """The nAUC confidences, computed for the queries with as many documents at once, are numpy's
    values on each query's own documents, bit for bit: lists shorter and longer than numpy's pairwise
    summation blocks, padding, an excluded document in the middle, tied scores."""
    rng = np.random.default_rng(4)
    for trial in range(24):
        q, w = int(rng.integers(1, 200)), int(rng.choice([1, 2, 8, 9, 130, 1100]))
        rows = rng.integers(0, 5000, size=(q, w))
        for i, pad in enumerate(rng.integers(0, w + 1, size=q)):
            rows[i, w - pad :] = -1
        scores = rng.normal(size=(q, w)).astype(np.float32)
        if trial % 2:
            scores = np.round(scores * 4) / 4
        exclude = rows[np.arange(q), rng.integers(0, w, size=q)] if trial % 3 == 0 else None
        got = ir_metrics.confidences(rows, scores, exclude)
        for i in range(q):
            valid = (rows[i] >= 0) & (True if exclude is None else rows[i] != exclude[i])
            values = scores[i][valid].astype(np.float64)
            if len(values) == 0:
                assert got["max"][i] == got["std"][i] == got["diff1"][i] == 0
                continue
            ranked = np.sort(values)[::-1]
            assert got["max"][i] == ranked[0] and got["std"][i] == np.std(values)
            assert got["diff1"][i] == (ranked[0] - ranked[1] if len(values) > 1 else 0.0)


def test_bootstrap_of_a_per_query_mean():
    """stats.item_mean: the plain mean with unit counts, the mean of the resampled queries with counts."""
    rng = np.random.default_rng(3)
    values = rng.uniform(size=50)
    idx = rng.integers(0, 50, 50)
    W = np.bincount(idx, minlength=50)[None].astype(np.float64)
    assert stats.item_mean(W, {"value": values})[0] == pytest.approx(values[idx].mean(), abs=1e-15)
    mean = stats.STATISTICS["values"]["mean"]
    assert stats.observed(mean, {"value": values}) == pytest.approx(values.mean(), abs=1e-15)
    ci = stats.bootstrap_ci(mean, {"value": values}, seed=1, task="SciFact", resamples=400)
    assert ci["low"] < values.mean() < ci["high"]
    se = values.std(ddof=1) / np.sqrt(50)
    assert ci["high"] - ci["low"] == pytest.approx(2 * 1.96 * se, rel=0.2)
    test = stats.paired_test(mean, {"value": values}, {"value": values + 0.01}, seed=1, task="T")
    assert test["diff"] == pytest.approx(0.01) and test["p"] < 0.01


# ---------------------------------------------------------------------------------------------------
# The readers


def test_reader_round_trip(tmp_path):
    task = synthetic(seed=1)
    data = beir.load_retrieval(**write_task(tmp_path, task), task="T")
    assert data.doc_ids == [str(d["_id"]) for d in task["docs"]]
    assert data.doc_texts[0] == "Title 0   text of document 0"  # (title + " " + text).strip()
    assert data.doc_texts[1] == "text of document 1"  # no title
    assert data.doc_texts[2] == "text of document 2"  # null title
    assert data.doc_texts[8] == "text of document 8"  # empty title
    assert "3" in data.doc_ids or any(d.isdigit() for d in data.doc_ids)
    judged = {q for q, _, _ in task["qrels"]}
    assert data.query_ids == [q["_id"] for q in task["queries"] if q["_id"] in judged]
    assert data.query_texts[0] == task["queries"][0]["text"]  # queries unchanged (no strip)
    got = {(data.query_ids[q], data.doc_ids[d], int(g)) for q, d, g in zip(*data.qrels)}
    assert got == set(task["qrels"]) and len(data.qrels[0]) == len(task["qrels"])
    pairs = {(data.query_ids[q], data.doc_ids[d]) for q, d in zip(*data.candidates)}
    assert pairs == {(q, d) for q, d in task["candidates"] if q in judged}
    assert len(data.notes) == 4
    assert "1 of 40 queries have no line in" in data.notes[0] and "'q3'" in data.notes[0]
    assert "1 of 39 queries have no document of grade >= 1" in data.notes[1] and "'q1'" in data.notes[1]
    assert "candidate lines belong to queries without a line" in data.notes[2]
    assert "1 of 39 queries have no candidate" in data.notes[3] and "'q7'" in data.notes[3]


def test_crlf_bom_and_blank_lines_are_read(tmp_path):
    (tmp_path / "corpus.jsonl").write_bytes(b'\xef\xbb\xbf{"_id": "a", "text": "x"}\r\n\r\n{"_id": 7, "text": "y"}\r\n')
    (tmp_path / "queries.jsonl").write_bytes(b'{"_id": "q", "text": "z"}')
    (tmp_path / "qrels.tsv").write_bytes(b"query-id\tcorpus-id\tscore\r\nq\t7\t2\r\n")
    data = beir.load_retrieval(tmp_path / "corpus.jsonl", tmp_path / "queries.jsonl", tmp_path / "qrels.tsv", "T")
    assert data.doc_ids == ["a", "7"] and [a.tolist() for a in data.qrels] == [[0], [1], [2]]


CORPUS = '{"_id": "d1", "title": "t", "text": "one"}\n{"_id": "d2", "text": "two"}\n'
QUERIES = '{"_id": "q1", "text": "first"}\n{"_id": "q2", "text": "second"}\n'
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t0\n"
CANDIDATES = "query-id\tcorpus-id\nq1\td1\nq1\td2\n"

BAD = [
    ("corpus", CORPUS.encode() + b'{"_id": "d3", "text": "\xff"}\n', 3, "not valid UTF-8"),
    ("corpus", CORPUS + '{"_id": "d3", "text": "x"\n', 3, "malformed JSON"),
    ("corpus", CORPUS + '["d3", "x"]\n', 3, "must be a JSON object, not list"),
    ("corpus", CORPUS + '{"text": "x"}\n', 3, "missing field '_id'"),
    ("corpus", CORPUS + '{"_id": "d3", "title": "x"}\n', 3, "missing field 'text'"),
    ("corpus", CORPUS + '{"_id": "d3", "text": 5}\n', 3, "field 'text' is int, not a string"),
    ("corpus", CORPUS + '{"_id": "d3", "title": 1, "text": "x"}\n', 3, "field 'title' is int"),
    ("corpus", CORPUS + '{"_id": "d\\ud800", "text": "x"}\n', 3, "lone surrogate"),
    ("corpus", CORPUS + '{"_id": "d1", "text": "again"}\n', 3, "duplicate _id 'd1' (first on line 1)"),
    ("corpus", "\n  \n", None, "no documents"),
    ("queries", QUERIES + '{"_id": "q1", "text": "again"}\n', 3, "duplicate _id 'q1'"),
    ("queries", QUERIES + '{"_id": "q3"}\n', 3, "missing field 'text'"),
    ("queries", "", None, "no queries"),
    ("qrels", "q1\td1\t1\n", 1, "the first line must be the header query-id<TAB>corpus-id<TAB>score"),
    ("qrels", QRELS + "q1\td2\n", 4, "expected 3 tab-separated columns, found 2"),
    ("qrels", QRELS + "q1\td2\t1.5\n", 4, "grade '1.5' is not an integer"),
    ("qrels", QRELS + "q1\td2\thigh\n", 4, "grade 'high' is not an integer"),
    ("qrels", QRELS + "q1\td2\t99999999999\n", 4, "outside the 32-bit integers"),
    ("qrels", QRELS + "q1\td1\t2\n", 4, "judgment (q1, d1) is listed twice (first on line 2)"),
    ("qrels", QRELS + "q9\td1\t1\nq8\td2\t1\nq7\td2\t1\nq6\td2\t1\n", 4, "4 judgment line(s) name a query id"),
    ("qrels", QRELS + "q1\td9\t1\n", 4, "name a corpus id that is not in the corpus (first: 'd9')"),
    ("qrels", "query-id\tcorpus-id\tscore\n", None, "no judgment lines after the header"),
    ("candidates", CANDIDATES + "q1\td7\n", 4, "1 candidate line(s) name a corpus id that is not in the corpus"),
    ("candidates", CANDIDATES + "q1\td2\n", 4, "candidate (q1, d2) is listed twice"),
    (
        "candidates",
        "query-id\tcorpus-id\tscore\nq1\td1\t1\n",
        1,
        "the first line must be the header query-id<TAB>corpus-id",
    ),
]


@pytest.mark.parametrize(("which", "content", "line", "message"), BAD, ids=[f"{b[0]}:{b[3][:30]}" for b in BAD])
def test_bad_input_is_one_line_naming_file_and_line(tmp_path, which, content, line, message):
    files = {"corpus": CORPUS, "queries": QUERIES, "qrels": QRELS, "candidates": CANDIDATES}
    files[which] = content
    paths = {}
    for name, text in files.items():
        paths[name] = tmp_path / f"{name}.data"
        paths[name].write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    with pytest.raises(DataFileError) as err:
        beir.load_retrieval(**paths, task="MyRetrieval")
    text = str(err.value)
    assert "\n" not in text and message in text and "MyRetrieval" in text
    where = str(paths[which]) if line is None else f"{paths[which]}:{line}"
    assert text.startswith(where + ": "), text


def test_good_small_files_load(tmp_path):
    paths = {}
    for name, text in {"corpus": CORPUS, "queries": QUERIES, "qrels": QRELS, "candidates": CANDIDATES}.items():
        paths[name] = tmp_path / name
        paths[name].write_text(text)
    data = beir.load_retrieval(**paths, task="T")
    assert data.doc_texts == ["t one", "two"] and data.query_ids == ["q1", "q2"]
    assert [a.tolist() for a in data.candidates] == [[0, 0], [0, 1]]


@pytest.mark.parametrize("chunk", [1 << 20, 24])  # read at once, and in pieces of a line or two
def test_judgments_outside_the_corpus_are_taken_with_missing_documents_count(tmp_path, monkeypatch, chunk):
    """missing_documents="count": judgments naming documents that are not in the corpus are kept apart
    (query rows, grades), noted, and make a query judged; the default still refuses them."""
    monkeypatch.setattr(beir, "PAIR_CHUNK_BYTES", chunk)
    texts = {
        "corpus": CORPUS,
        "queries": QUERIES + '{"_id": "q3", "text": "third"}\n',
        "qrels": QRELS + "q1\tgone\t2\nq2\tgone\t0\nq1\tfar\t1\nq3\tgone\t1\n",
    }
    paths = {}
    for name, text in texts.items():
        paths[name] = tmp_path / name
        paths[name].write_text(text)
    data = beir.load_retrieval(**paths, task="T", missing_documents="count")
    assert data.query_ids == ["q1", "q2", "q3"]  # q3 is judged by a document outside the corpus only
    assert [a.tolist() for a in data.qrels] == [[0, 1], [0, 1], [1, 0]]
    assert [a.tolist() for a in data.absent] == [[0, 1, 0, 2], [2, 0, 1, 1]]
    note = data.notes[0]
    assert "4 judgments name 2 documents that are not in the corpus (first: 'gone', 'far'); 3 of grade >= 1" in note
    with pytest.raises(DataFileError, match="name a corpus id that is not in the corpus"):
        beir.load_retrieval(**paths, task="T")


def test_naucs_are_each_figure_and_confidence_nauc():
    """naucs finds each confidence's and figure's order once: every value is nauc's of that pair (ties
    in both, a constant figure: NaN)."""
    rng = np.random.default_rng(4)
    values = {f"{figure}_at_{k}": rng.integers(0, 4, 500) / 4 for figure in ("ndcg", "map", "recall") for k in (1, 10)}
    values["ndcg_at_10"][:] = 0.5
    confidence = {kind: rng.integers(0, 30, 500) / 7 for kind in ir_metrics.CONFIDENCES}
    found = ir_metrics.naucs(values, confidence)
    for name, metric in values.items():
        for kind in ir_metrics.CONFIDENCES:
            expected = ir_metrics.nauc(confidence[kind], metric)
            assert np.array_equal(found[f"nauc_{name}_{kind}"], expected, equal_nan=True)
    assert np.isnan(found["nauc_ndcg_at_10_max"])


# ---------------------------------------------------------------------------------------------------
# Judgments naming documents outside the corpus, and the exposure to ties


def random_run(rng, n_docs=60, n_queries=40, k=25, step=0.5, judged=12):
    """Candidate lists with scores on a grid of `step` (many ties) and up to `judged` judgments per
    query, grades -1..3."""
    rows = np.full((n_queries, k), -1)
    scores = np.full((n_queries, k), np.nan)
    qrels = ([], [], [])
    for q in range(n_queries):
        size = int(rng.integers(1, k + 1))
        rows[q, :size] = rng.choice(n_docs, size, replace=False)
        scores[q, :size] = rng.integers(0, 5, size) * step
        for d in rng.choice(n_docs, int(rng.integers(1, judged)), replace=False):
            for column, value in zip(qrels, (q, d, int(rng.integers(-1, 4)))):
                column.append(value)
    return rows, scores, tuple(np.array(c) for c in qrels)


def test_judgments_outside_the_corpus_count_as_pytrec_eval_counts_them(pytrec_eval):
    """Judged documents that are not in the corpus (never retrieved): relevant ones count in Recall's
    and MAP's denominators and the ideal DCG, as pytrec_eval counts a judged document missing from
    the run; other grades change nothing."""
    rng = np.random.default_rng(3)
    rows, scores, qrels = random_run(rng)
    ids = [f"d{i}" for i in range(60)]
    absent = (rng.integers(0, 40, 30), rng.integers(-1, 4, 30))
    judged = {f"q{q}": {} for q in range(40)}
    for q, d, g in zip(*qrels):
        judged[f"q{q}"][ids[d]] = int(g)
    for i, (q, g) in enumerate(zip(*absent)):
        judged[f"q{q}"][f"gone{i}"] = int(g)
    run = {f"q{q}": {ids[r]: float(s) for r, s in zip(rows[q], scores[q]) if r >= 0} for q in range(40)}
    cutoffs = ir_metrics.CUTOFFS
    measures = {f"{m}.{','.join(map(str, cutoffs))}" for m in ("ndcg_cut", "map_cut", "recall", "P", "success")}
    reference = pytrec_eval.RelevanceEvaluator(judged, measures).evaluate(run)
    values = ir_metrics.per_query(rows, scores, qrels, ir_metrics.id_ranks(ids), absent=absent)
    without = ir_metrics.per_query(rows, scores, qrels, ir_metrics.id_ranks(ids))
    for q in range(40):
        for figure, trec in TREC.items():
            for c in cutoffs:
                assert abs(values[f"{figure}_at_{c}"][q] - reference[f"q{q}"][f"{trec}{c}"]) <= TOL
    assert (values["recall_at_1000"] < without["recall_at_1000"]).any()  # the case is exercised


MAINS = ("ndcg_at_10", "map_at_1000", "mrr_at_10", "recall_at_5", "precision_at_3", "hit_rate_at_5", "accuracy")


@pytest.mark.parametrize("seed, judged", [(0, 12), (1, 12), (2, 40), (3, 55)])
def test_tie_exposure_marks_the_queries_whose_figures_an_order_of_ties_changes(seed, judged):
    """Each query's equally scored documents put best first (higher gain first) and worst first: a
    query is marked `order` exactly when some figure differs between the two, `main` exactly when its
    main figure does (the two extreme orders reach every change an order of ties can make). Few and
    many relevant documents per query."""
    rng = np.random.default_rng(seed)
    rows, scores, qrels = random_run(rng, step=0.5, judged=judged)
    id_rank = rng.permutation(60)
    exclude = np.where(np.arange(40) % 5 == 0, rows[:, 0], -1)
    gains = np.zeros(rows.shape)
    grade_of = {(q, d): g for q, d, g in zip(*qrels)}
    for (q, j), r in np.ndenumerate(rows):
        gains[q, j] = max(0, grade_of.get((q, r), 0))
    best = ir_metrics.per_query(rows, scores + 1e-3 * gains, qrels, id_rank, exclude=exclude)
    worst = ir_metrics.per_query(rows, scores - 1e-3 * gains, qrels, id_rank, exclude=exclude)
    changed = {name: best[name] != worst[name] for name in best}
    for main in MAINS:
        ties = ir_metrics.Ties(40, main)
        ir_metrics.per_query(rows, scores, qrels, id_rank, exclude=exclude, ties=ties)
        figure = "recall_at_1" if main == "accuracy" else main
        assert np.array_equal(ties.main, changed[figure]), main
        assert np.array_equal(ties.order, np.any(list(changed.values()), axis=0)), main
        assert 0 < ties.main.sum() < 40 or main == "accuracy"
    for main, expected in (("ndcg_at_10", True), ("map_at_10", False), ("recall_at_1", False)):  # two relevant, tied
        ties = ir_metrics.Ties(1, main)
        qrels_one = (np.array([0, 0]), np.array([0, 1]), np.array([2, 1]))
        ir_metrics.per_query(np.array([[0, 1, 2]]), np.array([[1.0, 1.0, 0.5]]), qrels_one, np.arange(3), ties=ties)
        assert ties.main.tolist() == [expected] and ties.order.tolist() == [True], main
    untied = ir_metrics.Ties(40, "ndcg_at_10")
    distinct = scores + 1e-6 * rng.permutation(rows.size).reshape(rows.shape)
    ir_metrics.per_query(rows, distinct, qrels, id_rank, ties=untied)
    assert not untied.order.any()


def test_a_tie_at_the_depth_limit_counts_when_it_may_change_a_figure():
    """The search's depth + 1 results: a query whose last kept document ties the next one is exposed
    when the tie group holds a relevant document or a relevant document is not kept; the exposure
    then reaches every cut-off from the group's start."""
    from embeval.evaluate.retrieval import _beyond

    rows = np.array([[0, 1, 2, 3], [4, 5, 6, 7], [0, 2, 4, 6], [1, 3, 5, 7]])
    scores = np.array([[0.9, 0.5, 0.5, 0.5], [0.9, 0.8, 0.5, 0.5], [0.9, 0.8, 0.7, 0.7], [0.9, 0.8, 0.7, 0.6]])
    qrels = (np.array([0, 1, 2, 3]), np.array([1, 4, 9, 3]), np.array([1, 1, 1, 1]))
    beyond = _beyond(rows, scores, 3, qrels)
    # 0: the group (rows 1, 2, 3) holds relevant row 1; 1: the group (row 6, and 7 beyond) has nothing
    # relevant and every relevant document is kept; 2: relevant row 9 is not kept (it may tie); 3: no tie
    assert beyond.tolist() == [True, False, True, False]
    ties = ir_metrics.Ties(4, "recall_at_3", beyond)
    ir_metrics.per_query(rows[:, :3], scores[:, :3], qrels, np.arange(10), ties=ties)
    assert ties.main.tolist() == [True, False, True, False] and ties.order.tolist() == [True, False, True, False]


def test_queries_merged_with_their_subqueries_equal_mtebs_max_over_subqueries(client):
    """Reranking with `subqueries = "max"`: each group of queries (ids alike but for their last
    '_'-separated part, judged alike) scored as one, each document at its best score over the group:
    the figures of mteb's max_over_subqueries (MindSmallReranking's main score) on the same runs."""
    from mteb._evaluators.retrieval_metrics import max_over_subqueries

    from embeval.evaluate.retrieval import _merged, subquery_groups

    rng = np.random.default_rng(11)
    ids = [f"d{i}" for i in range(50)]
    query_ids = [f"u{g}_{k}" for g in range(12) for k in range(int(rng.integers(1, 4)))]
    group, groups = subquery_groups(query_ids)
    rows = np.full((len(query_ids), 10), -1)
    scores = np.zeros(rows.shape, dtype=np.float32)
    for q in range(len(query_ids)):
        size = int(rng.integers(1, 11))
        rows[q, :size] = rng.choice(50, size, replace=False)
        scores[q, :size] = rng.integers(0, 6, size) / 5
    judged = {g: {int(d): int(rng.integers(0, 3)) for d in rng.choice(50, 4, replace=False)} for g in range(groups)}
    qrels = {q: {ids[d]: grade for d, grade in judged[group[i]].items()} for i, q in enumerate(query_ids)}
    run = {q: {ids[r]: float(s) for r, s in zip(rows[i], scores[i]) if r >= 0} for i, q in enumerate(query_ids)}
    theirs = max_over_subqueries(qrels, run, list(ir_metrics.CUTOFFS))
    merged_rows, merged_scores = _merged(rows, scores, group)
    group_qrels = tuple(np.array(c) for c in zip(*[(g, d, v) for g, docs in judged.items() for d, v in docs.items()]))
    values = ir_metrics.per_query(merged_rows, merged_scores, group_qrels, ir_metrics.id_ranks(ids))
    mine = ir_metrics.mteb_scores(values)
    mine.update(ir_metrics.naucs(values, ir_metrics.confidences(merged_rows, merged_scores)))
    for name, value in mine.items():
        if name == "main_score":
            continue
        other = theirs[f"max_over_subqueries_{name}"]
        assert value == pytest.approx(other, abs=TOL, nan_ok=True), name
