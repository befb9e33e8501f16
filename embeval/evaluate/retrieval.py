"""MTEB's retrieval and reranking over vectors read from the file: exact search of each query's best
documents (embeval.train.search, streamed block by block under the device's memory budget, here or
over shards: the document list's source searches), or each query's candidates scored (reranking),
then MTEB's figures per query (embeval.evaluate.ir_metrics) and their means.

Scores are float32 inner products of the float32 vectors (L2-normalized for cosine), as mteb's
search computes them (reranking: each query against its candidates, mteb's shapes and
operations); documents of equal score are ranked by document id, descending, as
pytrec_eval ranks them (the search's own tie rule, lowest row first, only decides which of the
documents tied at the depth limit are kept).
"""

import numpy as np
import torch

from embeval.evaluate import ir_metrics, mteb_similarity
from embeval.formats import predictions

# The figures whose per-query values are kept for intervals and paired comparisons.
KEPT = ("ndcg_at_10", "map_at_10", "map_at_1000", "mrr_at_10", "recall_at_100", "recall_at_1000")
SET_KIND = "query_means"
RERANK_CELLS = 1 << 24  # candidate vector entries gathered at once (64 MiB of float32)
RERANK_QUERIES = 1 << 16  # a reranking task's queries scored and evaluated at once (the memory of their
# padded candidate lists, not of all of them: MindSmallReranking has 2.4 million queries)


def query_set(values, main, ties=None, confidence_tied=None):
    """The prediction set of per-query figures (their means are the figures; a bootstrap resamples
    queries), and each query's tie exposure: `tie_order`, `tie_main` (ir_metrics.Ties) and
    `tie_confidence` (its nAUC confidence equals another query's)."""
    names = tuple(dict.fromkeys((main, *KEPT)))
    arrays = {name: np.asarray(values[name]) for name in names}
    if ties is not None:
        arrays.update(tie_order=ties.order.copy(), tie_main=ties.main.copy(), tie_confidence=confidence_tied)
    return predictions.PredictionSet(SET_KIND, arrays, names, "evaluated queries in file order")


def retrieve(ctx, depth, similarity, role="query"):
    """(scores, document indices) of each query's `depth` best documents (the document list's source
    searches it: streamed from the file, or over shards); the queries are the list of `role`."""
    queries = ctx.sources[role].gather(ctx.rows[role])
    documents = len(ctx.rows["document"])
    ctx.progress.stage(f"exact search of {len(queries)} queries in {documents} documents", unit="document")
    searched = [0]

    def step(rows):
        searched[0] += rows
        ctx.progress.step(searched[0])

    return ctx.sources["document"].search(queries, ctx.rows["document"], depth, similarity, step)


def rerank(ctx, similarity, role="query"):
    """(scores, document rows) of each query's candidates, scored as mteb's reranking scores them:
    per query, its float32 vector against its candidates' in their given order (mteb's cos_sim or
    dot_score on those shapes; queries with as many candidates are batched, with the same bits), so
    equal and near-equal scores fall as they do in mteb."""
    data = ctx.data
    rows = ir_metrics.pad_candidates(len(data.query_ids), *data.candidates)
    needed, table = _candidate_table(ctx, similarity, rows[rows >= 0])
    return _scored(ctx, similarity, role, slice(None), rows, needed, table), rows


def _candidate_table(ctx, similarity, documents):
    """(the distinct document rows among `documents`, sorted; their vectors, prepared for the
    similarity): once, not once per query a document is a candidate of."""
    present = np.zeros(len(ctx.rows["document"]), dtype=bool)
    present[documents] = True
    needed = np.flatnonzero(present)
    table = mteb_similarity.tensor(ctx.sources["document"].gather(ctx.rows["document"][needed]))
    return needed, mteb_similarity.normalized(table, similarity)


def _scored(ctx, similarity, role, which, rows, needed, table):
    """The scores of the padded candidate rows (queries, k) of the queries `which` (a slice of the
    task's queries), as rerank's."""
    queries = mteb_similarity.tensor(ctx.sources[role].gather(ctx.rows[role][which]))
    queries = mteb_similarity.normalized(queries, similarity)
    local = torch.as_tensor(np.searchsorted(needed, np.maximum(rows, 0)))  # candidates first, then -1
    counts = (rows >= 0).sum(axis=1)
    scores = np.zeros(rows.shape, dtype=np.float32)
    width = queries.shape[1]
    for count in np.unique(counts[counts > 0]).tolist():
        group = torch.as_tensor(np.flatnonzero(counts == count))
        step = max(1, RERANK_CELLS // (count * width))
        for a in range(0, len(group), step):
            chunk = group[a : a + step]
            documents = table[local[chunk, :count]]
            scores[chunk.numpy(), :count] = mteb_similarity.per_query(
                queries[chunk], documents, similarity, prepared=True
            ).numpy()
    return scores


def _beyond(rows, scores, depth, qrels):
    """(queries,) whether a query's list of `depth` documents ends inside a tie group that continues
    past it (the search's depth + 1 results `rows`, `scores`: the next document's score equals the
    last kept one's) and swapping in the group's documents beyond could change a figure: a document of
    the group that is kept is relevant, or a relevant document of the corpus is not kept (it may be
    one of the group's documents beyond)."""
    n = len(rows)
    out = np.zeros(n, dtype=bool)
    if rows.shape[1] <= depth:
        return out
    crossing = np.flatnonzero((rows[:, depth] >= 0) & (scores[:, depth] == scores[:, depth - 1]))
    if not len(crossing):
        return out
    query, doc, grade = (np.asarray(a, dtype=np.int64) for a in qrels)
    positive = grade >= 1
    relevant = {}
    for q, d in zip(query[positive].tolist(), doc[positive].tolist()):
        relevant.setdefault(q, set()).add(d)
    for q in crossing.tolist():
        wanted = relevant.get(q, set())
        kept = rows[q, :depth]
        group = kept[scores[q, :depth] == scores[q, depth - 1]]
        out[q] = bool(wanted - set(kept.tolist())) or any(d in wanted for d in group.tolist())
    return out


def _exposure(ties, confidence):
    """The task's tie exposure: how many queries' figures the order of equally scored documents can
    change (`order`; `main`: the main figure), and how many queries' nAUC confidence (max, std or diff1)
    equals another query's (nAUC counts such a group at its mean; float32 rounding elsewhere may split it)."""
    tied = np.zeros(len(ties.order), dtype=bool)
    for values in confidence.values():
        _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
        tied |= counts[inverse] > 1
    return {
        "queries": len(ties.order),
        "order": int(ties.order.sum()),
        "main": int(ties.main.sum()),
        "confidence": int(tied.sum()),
    }, tied


def _reranked(ctx, similarity, exclude, id_rank, main):
    """A reranking task's per-query figures, confidences and depth (the longest candidate list),
    RERANK_QUERIES queries at a time: each query's values are those of one pass over all queries."""
    data = ctx.data
    n = len(data.query_ids)
    cand_query, cand_doc = (np.asarray(a, dtype=np.int64) for a in data.candidates)
    edges = np.arange(0, n + RERANK_QUERIES, RERANK_QUERIES).clip(max=n)  # the parts' first queries, and n
    order = np.argsort(cand_query, kind="stable")  # by query, each query's candidates in file order
    starts = np.searchsorted(cand_query, edges, sorter=order)
    needed, table = _candidate_table(ctx, similarity, cand_doc)
    judged, judged_doc, grade = (np.asarray(a, dtype=np.int64) for a in data.qrels)
    by_query = np.argsort(judged, kind="stable")
    judged_starts = np.searchsorted(judged, edges, sorter=by_query)
    absent_query, absent_grade = (np.asarray(a, dtype=np.int64) for a in data.absent)
    by_absent = np.argsort(absent_query, kind="stable")
    absent_starts = np.searchsorted(absent_query, edges, sorter=by_absent)
    values, confidence, depth = [], [], 0
    ties = ir_metrics.Ties(n, main)
    for part, a in enumerate(range(0, n, RERANK_QUERIES)):
        b = min(n, a + RERANK_QUERIES)
        picked = order[starts[part] : starts[part + 1]]
        rows = ir_metrics.pad_candidates(b - a, cand_query[picked] - a, cand_doc[picked])
        del picked
        scores = _scored(ctx, similarity, "query", slice(a, b), rows, needed, table)
        judgments = by_query[judged_starts[part] : judged_starts[part + 1]]
        qrels = (judged[judgments] - a, judged_doc[judgments], grade[judgments])
        outside = by_absent[absent_starts[part] : absent_starts[part + 1]]
        absent = (absent_query[outside] - a, absent_grade[outside])
        own = None if exclude is None else exclude[a:b]
        part_ties = ir_metrics.Ties(b - a, main)
        values.append(ir_metrics.per_query(rows, scores, qrels, id_rank, exclude=own, absent=absent, ties=part_ties))
        ties.order[a:b], ties.main[a:b] = part_ties.order, part_ties.main
        confidence.append(ir_metrics.confidences(rows, scores, own))
        depth = max(depth, rows.shape[1])
    joined = {name: np.concatenate([v[name] for v in values]) for name in values[0]}
    return joined, {name: np.concatenate([c[name] for c in confidence]) for name in confidence[0]}, depth, ties


def evaluate(ctx, main, depth, similarity, ignore_identical, reranking=False):
    """The task's figures (means over the evaluated queries, unrounded) and counts; the per-query
    values of the main and a few other figures are kept as a prediction set."""
    data = ctx.data
    exclude = ir_metrics.identical_rows(data.query_ids, data.doc_ids) if ignore_identical else None
    id_rank = ir_metrics.id_ranks(data.doc_ids)
    if reranking:
        values, confidence, depth, ties = _reranked(ctx, similarity, exclude, id_rank, main)
    else:
        searched = depth + 1 if len(ctx.rows["document"]) > depth else depth  # one more: a tie at the limit
        scores, rows = retrieve(ctx, searched, similarity)
        ties = ir_metrics.Ties(len(rows), main, _beyond(rows, scores, depth, data.qrels))
        scores, rows = scores[:, :depth], rows[:, :depth]
        values = ir_metrics.per_query(
            rows, scores, data.qrels, id_rank, exclude=exclude, distinct=True, absent=data.absent, ties=ties
        )
        confidence, depth = ir_metrics.confidences(rows, scores, exclude), rows.shape[1]
        del scores, rows
    exposure, confidence_tied = _exposure(ties, confidence)
    ctx.keep("", query_set(values, main, ties, confidence_tied))
    results = ir_metrics.means(values)
    results.update(ir_metrics.naucs(values, confidence))
    results.update(nqueries=len(data.query_ids), ndocs=len(data.doc_ids), depth=int(depth))
    results["tie_exposure"] = exposure
    return results
