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
# Candidate vector entries gathered at once (8 MiB of float32): a gather small enough to be still in the
# cache when its products read it (a 64 MiB one made the gather and products of MindSmallReranking's
# 41 candidates 1.8x slower at 384 dimensions, 2.1x at 1024: bench/rerank_chunks.py).
RERANK_CELLS = 1 << 21
RERANK_QUERIES = 1 << 16  # a reranking task's queries scored and evaluated at once (the memory of their
# padded candidate lists, not of all of them: MindSmallReranking has 2.4 million queries)


def query_set(values, main, keep=(), ties=None, confidence_tied=None):
    """The prediction set of per-query figures (their means are the figures; a bootstrap resamples
    queries): the main figure's, KEPT's and `keep`'s, and each query's tie exposure: `tie_order`,
    `tie_main` (ir_metrics.Ties) and `tie_confidence` (its nAUC confidence equals another query's)."""
    names = tuple(dict.fromkeys((main, *KEPT, *keep)))
    arrays = {name: np.asarray(values[name]) for name in names}
    if ties is not None:
        arrays.update(tie_order=ties.order.copy(), tie_main=ties.main.copy(), tie_confidence=confidence_tied)
    return predictions.PredictionSet(SET_KIND, arrays, names, "evaluated queries in file order")


def retrieve(ctx, depth, similarity, role="query"):
    """(scores, document indices) of each query's `depth` best documents (the document list's source
    searches it: streamed from the file, or over shards); the queries are the list of `role`."""
    queries = ctx.sources[role].gather(ctx.rows[role])
    documents = len(ctx.rows["document"])
    ctx.progress.stage(f"exact search of {len(queries)} queries in {documents} documents", unit="rows scored")
    searched, total = [0], [0]

    def planned(rows):
        total[0] += rows

    def step(rows):
        searched[0] += rows
        passes = total[0] // max(documents, 1)
        done = min(searched[0] // max(documents, 1) + 1, passes)
        detail = f"pass {done} of {passes} over the documents (a block of queries a pass)" if passes > 1 else ""
        ctx.progress.step(searched[0], detail, total=total[0] or None)

    return ctx.sources["document"].search(queries, ctx.rows["document"], depth, similarity, step, planned)


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
            chunk = group[a : a + step]  # gathered by index_select: torch's indexing by a tensor took
            # milliseconds a call whatever its size (bench/rerank_chunks.py)
            documents = table.index_select(0, local.index_select(0, chunk)[:, :count].reshape(-1))
            scores[chunk.numpy(), :count] = mteb_similarity.per_query(
                queries.index_select(0, chunk), documents.view(len(chunk), count, width), similarity, prepared=True
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


SUBQUERIES = "max_over_subqueries"  # the figures of queries merged with their subqueries (mteb's name)


def subquery_groups(query_ids):
    """(each query's group, the number of groups): mteb's max_over_subqueries takes the queries whose
    ids agree but for their last '_'-separated part as subqueries of one query; groups are numbered in
    order of their first query."""
    found = {}
    group = np.array([found.setdefault("_".join(q.split("_")[:-1]), len(found)) for q in query_ids], dtype=np.int64)
    return group, len(found)


def _by_key(keys, n):
    """(order, starts): the entries of key k are order[starts[k]:starts[k + 1]], in their own order."""
    order = np.argsort(keys, kind="stable")
    return order, np.searchsorted(keys, np.arange(n + 1), sorter=order)


def _entries(index, which):
    """The positions of the entries of the keys `which` (index: _by_key's), key after key."""
    order, starts = index
    counts = starts[which + 1] - starts[which]
    offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    return order[np.repeat(starts[which], counts) + offsets]


def _parts(n, group=None):
    """The queries of each part, RERANK_QUERIES at a time: in file order; with subquery groups, ordered
    by group and cut between groups (a larger group is a part of its own)."""
    if group is None:
        return [np.arange(a, min(n, a + RERANK_QUERIES)) for a in range(0, n, RERANK_QUERIES)]
    order = np.argsort(group, kind="stable")
    ranked = group[order]
    cuts = np.r_[np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]]), n]  # each group's first place, and n
    bounds = [0]
    while bounds[-1] < n:
        i = int(np.searchsorted(cuts, bounds[-1] + RERANK_QUERIES, side="right")) - 1
        bounds.append(int(cuts[i]) if cuts[i] > bounds[-1] else int(cuts[i + 1]))
    return [order[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def _merged(rows, scores, group):
    """Each group's candidates: every document of its queries' lists once, with its best score
    (mteb's max_over_subqueries), as padded (groups, k) rows and scores; group: each row's group, 0..g-1."""
    query, place = np.nonzero(rows >= 0)
    key, doc, score = group[query], rows[query, place], scores[query, place]
    order = np.lexsort((-score, doc, key))
    key, doc, score = key[order], doc[order], score[order]
    first = np.r_[True, (key[1:] != key[:-1]) | (doc[1:] != doc[:-1])]
    key, doc, score = key[first], doc[first], score[first]
    g = int(group.max()) + 1 if len(group) else 0
    counts = np.bincount(key, minlength=g)
    width = int(counts.max(initial=0))
    merged_rows, merged_scores = np.full((g, width), -1, dtype=np.int64), np.zeros((g, width), dtype=scores.dtype)
    position = np.arange(len(key)) - (np.cumsum(counts) - counts)[key]
    merged_rows[key, position], merged_scores[key, position] = doc, score
    return merged_rows, merged_scores


class _Collected:
    """Per-item figures, confidences and tie exposure gathered part by part, each at its items' places."""

    def __init__(self, n, main):
        self.n, self.values, self.confidence, self.ties = n, {}, {}, ir_metrics.Ties(n, main)

    def put(self, which, values, confidence, ties):
        for into, found in ((self.values, values), (self.confidence, confidence)):
            for name, array in found.items():
                into.setdefault(name, np.zeros(self.n))[which] = array
        self.ties.order[which], self.ties.main[which] = ties.order, ties.main


def _reranked(ctx, similarity, exclude, id_rank, main, subqueries=False, role="query"):
    """A reranking task's per-query figures, confidences and tie exposure and its depth (the longest
    candidate list), RERANK_QUERIES queries at a time: each query's values are those of one pass over
    all queries. subqueries: also each group of subqueries' (mteb's max_over_subqueries), or None."""
    data = ctx.data
    n = len(data.query_ids)
    cand_query, cand_doc = (np.asarray(a, dtype=np.int64) for a in data.candidates)
    needed, table = _candidate_table(ctx, similarity, cand_doc)
    judged, judged_doc, grade = (np.asarray(a, dtype=np.int64) for a in data.qrels)
    absent_query, absent_grade = (np.asarray(a, dtype=np.int64) for a in data.absent)
    by_candidate, by_judgment, by_absent = _by_key(cand_query, n), _by_key(judged, n), _by_key(absent_query, n)
    group, groups = subquery_groups(data.query_ids) if subqueries else (None, 0)
    queries, merged = _Collected(n, main), (_Collected(groups, main) if subqueries else None)
    local = np.full(n, -1, dtype=np.int64)  # a query's place in its part
    depth = 0
    for which in _parts(n, group):
        m = len(which)
        local[which] = np.arange(m)
        picked = _entries(by_candidate, which)
        rows = ir_metrics.pad_candidates(m, local[cand_query[picked]], cand_doc[picked])
        del picked
        scores = _scored(ctx, similarity, role, which, rows, needed, table)
        judgments, outside = _entries(by_judgment, which), _entries(by_absent, which)
        qrels = (local[judged[judgments]], judged_doc[judgments], grade[judgments])
        absent = (local[absent_query[outside]], absent_grade[outside])
        own = None if exclude is None else exclude[which]
        ties = ir_metrics.Ties(m, main)
        values = ir_metrics.per_query(rows, scores, qrels, id_rank, exclude=own, absent=absent, ties=ties)
        queries.put(which, values, ir_metrics.confidences(rows, scores, own), ties)
        depth = max(depth, rows.shape[1])
        if merged is not None:  # the part holds whole groups: each judged as its first query (all alike)
            first_group = int(group[which].min())
            part_group = group[which] - first_group
            merged_rows, merged_scores = _merged(rows, scores, part_group)
            lead = np.full(len(merged_rows), m, dtype=np.int64)
            np.minimum.at(lead, part_group, np.arange(m))
            is_lead = lead[part_group] == np.arange(m)
            pick = is_lead[qrels[0]]
            group_qrels = (part_group[qrels[0][pick]], qrels[1][pick], qrels[2][pick])
            pick = is_lead[absent[0]]
            group_absent = (part_group[absent[0][pick]], absent[1][pick])
            ties = ir_metrics.Ties(len(merged_rows), main)
            values = ir_metrics.per_query(
                merged_rows, merged_scores, group_qrels, id_rank, absent=group_absent, ties=ties
            )
            span = np.arange(first_group, first_group + len(merged_rows))
            merged.put(span, values, ir_metrics.confidences(merged_rows, merged_scores), ties)
        local[which] = -1
    return queries, merged, depth


def _figures(collected, main, keep=()):
    """(figures: means, nAUC figures and tie exposure; the prediction set) of collected items."""
    exposure, confidence_tied = _exposure(collected.ties, collected.confidence)
    results = ir_metrics.means(collected.values)
    results.update(ir_metrics.naucs(collected.values, collected.confidence))
    results["tie_exposure"] = exposure
    return results, query_set(collected.values, main, keep, collected.ties, confidence_tied)


def evaluate(ctx, main, depth, similarity, ignore_identical, reranking=False, subqueries=False, role="query", keep=()):
    """The task's figures (means over the evaluated queries, unrounded) and counts; the per-query
    values of the main and a few other figures are kept as a prediction set. subqueries (reranking):
    also the figures of the queries merged with their subqueries, under SUBQUERIES (its own set)."""
    data = ctx.data
    exclude = ir_metrics.identical_rows(data.query_ids, data.doc_ids) if ignore_identical else None
    id_rank = ir_metrics.id_ranks(data.doc_ids)
    main = main.removeprefix(SUBQUERIES + ".")
    merged = None
    if reranking:
        collected, merged, depth = _reranked(ctx, similarity, exclude, id_rank, main, subqueries, role)
    else:
        searched = depth + 1 if len(ctx.rows["document"]) > depth else depth  # one more: a tie at the limit
        scores, rows = retrieve(ctx, searched, similarity, role)
        collected = _Collected(len(rows), main)
        collected.ties.beyond = _beyond(rows, scores, depth, data.qrels)
        scores, rows = scores[:, :depth], rows[:, :depth]
        collected.values = ir_metrics.per_query(
            rows, scores, data.qrels, id_rank, exclude=exclude, distinct=True, absent=data.absent, ties=collected.ties
        )
        collected.confidence, depth = ir_metrics.confidences(rows, scores, exclude), rows.shape[1]
        del scores, rows
    results, kept = _figures(collected, main, keep)
    ctx.keep("", kept)
    results.update(nqueries=len(data.query_ids), ndocs=len(data.doc_ids), depth=int(depth))
    if merged is not None:
        results[SUBQUERIES], kept = _figures(merged, main)
        results[SUBQUERIES]["nqueries"] = merged.n
        ctx.keep(SUBQUERIES, kept)
    return results
