"""MTEB's retrieval and reranking over vectors read from the file: exact search of each query's best
documents (embeval.train.search, streamed block by block under the device's memory budget, here or
over shards: the document list's source searches), or each query's candidates scored (reranking),
then MTEB's figures per query (embeval.evaluate.ir_metrics) and their means.

Scores are float32 inner products of the float32 vectors (L2-normalized for cosine), as mteb's
search computes them; documents of equal score are ranked by document id, descending, as
pytrec_eval ranks them (the search's own tie rule, lowest row first, only decides which of the
documents tied at the depth limit are kept).
"""

import numpy as np

from embeval.evaluate import ir_metrics
from embeval.formats import predictions
from embeval.train import search

# The figures whose per-query values are kept for intervals and paired comparisons.
KEPT = ("ndcg_at_10", "map_at_10", "map_at_1000", "mrr_at_10", "recall_at_100", "recall_at_1000")
SET_KIND = "query_means"


def query_set(values, main):
    """The prediction set of per-query figures (their means are the figures; a bootstrap resamples queries)."""
    names = tuple(dict.fromkeys((main, *KEPT)))
    return predictions.PredictionSet(
        SET_KIND, {name: np.asarray(values[name]) for name in names}, names, "evaluated queries in file order"
    )


def retrieve(ctx, depth, similarity):
    """(scores, document indices) of each query's `depth` best documents (the document list's source
    searches it: streamed from the file, or over shards)."""
    queries = ctx.sources["query"].gather(ctx.rows["query"])
    documents = len(ctx.rows["document"])
    ctx.progress.stage(f"exact search of {len(queries)} queries in {documents} documents", unit="document")
    searched = [0]

    def step(rows):
        searched[0] += rows
        ctx.progress.step(searched[0])

    return ctx.sources["document"].search(queries, ctx.rows["document"], depth, similarity, step)


def rerank(ctx, similarity):
    """(scores, document rows) of each query's candidates, scored by the similarity of the vectors."""
    data = ctx.data
    queries = ctx.sources["query"].gather(ctx.rows["query"]).astype(np.float32)
    rows = ir_metrics.pad_candidates(len(data.query_ids), *data.candidates)
    valid = rows >= 0
    documents = np.zeros((*rows.shape, queries.shape[1]), dtype=np.float32)
    documents[valid] = ctx.sources["document"].gather(ctx.rows["document"][rows[valid]])
    if similarity == "cosine":
        queries = queries / np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), search.NORM_EPS)
        documents = documents / np.maximum(np.linalg.norm(documents, axis=2, keepdims=True), search.NORM_EPS)
    scores = np.einsum("qd,qkd->qk", queries, documents).astype(np.float32)
    return np.where(valid, scores, np.float32(0)), rows


def evaluate(ctx, main, depth, similarity, ignore_identical, reranking=False):
    """The task's figures (means over the evaluated queries, unrounded) and counts; the per-query
    values of the main and a few other figures are kept as a prediction set."""
    data = ctx.data
    scores, rows = rerank(ctx, similarity) if reranking else retrieve(ctx, depth, similarity)
    exclude = ir_metrics.identical_rows(data.query_ids, data.doc_ids) if ignore_identical else None
    values = ir_metrics.per_query(rows, scores, data.qrels, ir_metrics.id_ranks(data.doc_ids), exclude=exclude)
    ctx.keep("", query_set(values, main))
    results = ir_metrics.means(values)
    results.update(nqueries=len(data.query_ids), ndocs=len(data.doc_ids), depth=int(rows.shape[1]))
    return results
