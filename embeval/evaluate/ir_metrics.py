"""MTEB's retrieval and reranking figures, per query and averaged, as mteb 2.26.24 reports them.

Input: each query's ranked candidates as the search returns them, `rows` (queries, k) document rows
(-1 pads a shorter list) and their `scores`, and the judgments (qrels) as three arrays: query row,
document row, integer grade. Output: one float64 array per figure with a value per query, so a
bootstrap can resample queries (a figure is the mean of its per-query values; embeval.stats.item_mean).

What mteb does (mteb/_evaluators/retrieval_metrics.py, calculate_retrieval_scores):
- nDCG@k, MAP@k, Recall@k, P@k and HitRate@k are pytrec_eval's `ndcg_cut`,
  `map_cut`, `recall`, `P` and `success` at k in (1, 3, 5, 10, 20, 100, 1000); the main figure of
  retrieval is ndcg_at_10 (most reranking tasks report map_at_1000, a few mrr_at_10 or ndcg_at_10).
  A document is relevant when its grade is >= 1; nDCG's gain is the grade itself, discounted by
  log2(rank + 1), normalised by the ideal ordering of the query's judged grades at the same cut-off.
  MAP@k divides by all the query's relevant documents (not min(k, R)); P@k divides by k even when fewer
  than k were retrieved; Recall@k and MAP@k are 0 for a query without a relevant document. Negative
  grades count as judged non-relevant (gain 0), exactly like grade 0.
- MRR@k is mteb's own (function `mrr`), not trec_eval's: 1/rank of the first document of grade > 0
  within the top k, else 0, at the same seven cut-offs.
- Ties: trec_eval ranks by score descending, then by document id descending in strcmp's byte order
  (form_res_rels.c, comp_sim_docno); mteb's MRR sorts by (score, id) descending, the same order, since
  Python orders strings by code point and UTF-8 preserves it. So "d2" ranks above "d10" above "d1" at
  an equal score. This module gets that order from `id_ranks(doc_ids)`.
- Means: over the evaluated queries, left to right in query order; mteb rounds nDCG, MAP, Recall, P
  and HitRate to 5 decimals (MRR is not rounded): `mteb_scores` returns that dict, `means` the
  unrounded figures. `accuracy` is recall_at_1 (mteb reports it for multiple-choice tasks).
- ignore_identical_ids (default False; True for ArguAna, Quora, FiQA, FEVER, MS MARCO and some
  others): the document whose id equals the query's is dropped from that query's results after
  retrieval; pass `exclude=identical_rows(query_ids, doc_ids)` to do the same.
- Reranking (type "Reranking"): the same figures, computed over each query's candidate list
  ("top_ranked") scored by the model, instead of the whole corpus; relevant documents outside the
  candidates still count in Recall's and MAP's denominators and in the ideal DCG.
- nAUC (mteb's abstention figures, arXiv 2402.12997): for each of nDCG, MAP, Recall, P and MRR at each
  cut-off and each of three confidences of a query (its retrieved scores' maximum, standard deviation,
  and the gap between its two best), the area under the curve of the figure's mean over the queries
  kept when the least confident are left out (rates 0, 0.1, ..., 0.9; a group of equal confidences
  counted at its mean), scaled between the flat curve (0) and the oracle's (1): `naucs`.

Retrieval at depth 1000: mteb keeps the top 1000 documents by score, choosing among documents tied at
rank 1000 by torch.topk and a heap on (score, id); the search here breaks that tie by row. The
figures can differ only when such a tie group straddles rank 1000 and holds a relevant document.
"""

from collections.abc import Sequence

import numpy as np

CUTOFFS = (1, 3, 5, 10, 20, 100, 1000)
MAIN_SCORE = "ndcg_at_10"
FIGURES = ("ndcg", "map", "recall", "precision", "mrr", "hit_rate")
ROUNDED = ("ndcg", "map", "recall", "precision", "hit_rate")  # mteb rounds these means to 5 decimals
BLOCK_CELLS = 1 << 18  # candidates ranked at once (queries x k): about 30 MB of temporaries


def id_ranks(ids: Sequence[str]) -> np.ndarray:
    """Each id's position in sorted order (Python's code-point order = strcmp's order of the UTF-8 bytes)."""
    order = sorted(range(len(ids)), key=ids.__getitem__)
    ranks = np.empty(len(ids), dtype=np.int64)
    ranks[order] = np.arange(len(ids))
    return ranks


def identical_rows(query_ids: Sequence[str], doc_ids: Sequence[str]) -> np.ndarray:
    """(queries,) the row of the document whose id equals each query's id, -1 where none does."""
    row_of = {doc_id: row for row, doc_id in enumerate(doc_ids)}
    return np.array([row_of.get(query_id, -1) for query_id in query_ids], dtype=np.int64)


def pad_candidates(n_queries: int, cand_query: np.ndarray, cand_doc: np.ndarray) -> np.ndarray:
    """(queries, longest list) document rows of each query's candidates in the given order, -1 padded."""
    cand_query, cand_doc = np.asarray(cand_query, dtype=np.int64), np.asarray(cand_doc, dtype=np.int64)
    counts = np.bincount(cand_query, minlength=n_queries)
    rows = np.full((n_queries, int(counts.max(initial=0))), -1, dtype=np.int64)
    order = np.argsort(cand_query, kind="stable")
    starts = np.cumsum(counts) - counts
    position = np.arange(len(order)) - starts[cand_query[order]]
    rows[cand_query[order], position] = cand_doc[order]
    return rows


def candidate_scores(queries: np.ndarray, documents: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """(queries, k) cosine of each query with its candidate rows (NaN where rows is -1), in float64."""
    q = np.asarray(queries, dtype=np.float64)
    d = np.asarray(documents, dtype=np.float64)
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    d = d / np.linalg.norm(d, axis=1, keepdims=True)
    out = np.full(rows.shape, np.nan)
    block = max(1, BLOCK_CELLS // max(1, rows.shape[1] * d.shape[1]))
    for start in range(0, len(rows), block):
        r = rows[start : start + block]
        valid = r >= 0
        dots = np.einsum("qkd,qd->qk", d[np.where(valid, r, 0)], q[start : start + block])
        out[start : start + block] = np.where(valid, dots, np.nan)
    return out


def _qrels_table(n_queries, n_docs, qrels, absent=None):
    """The judgments as sorted (query, doc) keys with their grades, each query's number of relevant
    documents, and its positive grades in descending order (the ideal ranking), grouped by query.
    absent: (query rows, grades) of judged documents outside the corpus: relevant ones count in the
    number of relevant documents and the ideal ranking, never in the keys (they are never retrieved)."""
    query, doc, grade = (np.asarray(a, dtype=np.int64) for a in qrels)
    keys = query * n_docs + doc
    order = np.argsort(keys, kind="stable")
    if np.any(np.diff(keys[order]) == 0):
        raise ValueError("qrels hold a (query, document) pair twice")
    if absent is not None and len(absent[0]):
        all_query = np.concatenate([query, np.asarray(absent[0], dtype=np.int64)])
        all_grade = np.concatenate([grade, np.asarray(absent[1], dtype=np.int64)])
    else:
        all_query, all_grade = query, grade
    positive = all_grade >= 1
    n_relevant = np.bincount(all_query[positive], minlength=n_queries)
    ideal_order = np.lexsort((-all_grade[positive], all_query[positive]))
    ideal = (all_query[positive][ideal_order], all_grade[positive][ideal_order], np.cumsum(n_relevant) - n_relevant)
    return keys[order], grade[order], n_relevant, ideal


def _ideal_dcg(n_relevant, ideal, lo, hi, depth):
    """(hi - lo, width) cumulative DCG of the ideal ranking of queries lo..hi-1 (width = min(depth, the
    most relevant documents of a query), at least 1), summed in rank order as trec_eval sums it."""
    ideal_query, ideal_grade, ideal_start = ideal
    width = max(1, int(min(depth, n_relevant[lo:hi].max(initial=0))))
    span = slice(ideal_start[lo], ideal_start[hi - 1] + n_relevant[hi - 1])
    query, grade = ideal_query[span], ideal_grade[span]
    position = np.arange(span.start, span.stop) - ideal_start[query]
    keep = position < width
    gains = np.zeros((hi - lo, width))
    gains[query[keep] - lo, position[keep]] = grade[keep] / np.log2(position[keep] + 2.0)
    return np.cumsum(gains, axis=1)


def ranked_grades(rows, scores, valid, first_query, keys, grades, id_rank):
    """(queries, k) the grade of each query's candidates in trec_eval's rank order: score descending,
    then document id descending; invalid entries last. Unjudged candidates and padding get 0.
    A query whose valid candidates already come by strictly decreasing score (a search's results,
    as a rule) keeps their order (the sorts would): they are only packed to the front."""
    descending = np.where(valid, -scores, np.inf)  # padding and excluded candidates last
    if (valid[:, 1:] <= valid[:, :-1]).all():  # already packed: the valid candidates first
        packed, ranked, ranked_valid = descending, rows.copy(), valid.copy()
    else:
        position = np.cumsum(valid, axis=1) - 1
        query, column = np.nonzero(valid)
        packed = np.full(descending.shape, np.inf)
        packed[query, position[query, column]] = descending[query, column]
        ranked = np.zeros_like(rows)  # invalid places: masked below
        ranked[query, position[query, column]] = rows[query, column]
        ranked_valid = np.isfinite(packed)
    unsorted = np.flatnonzero(~((packed[:, 1:] > packed[:, :-1]) | np.isinf(packed[:, 1:])).all(axis=1))
    if len(unsorted):  # equal scores, or not in score order: both sorts
        some = rows[unsorted]
        by_id = np.argsort(-id_rank[np.where(valid[unsorted], some, 0)], axis=1, kind="stable")
        by_score = np.argsort(np.take_along_axis(descending[unsorted], by_id, axis=1), axis=1, kind="stable")
        order = np.take_along_axis(by_id, by_score, axis=1)
        ranked[unsorted] = np.take_along_axis(some, order, axis=1)
        ranked_valid[unsorted] = np.take_along_axis(valid[unsorted], order, axis=1)
    if len(keys) == 0:
        return np.zeros(rows.shape, dtype=np.int64)
    query_keys = np.arange(first_query, first_query + len(rows), dtype=np.int64)[:, None] * len(id_rank) + ranked
    at = np.minimum(np.searchsorted(keys, query_keys), len(keys) - 1)
    return np.where(ranked_valid & (keys[at] == query_keys), grades[at], 0)


def per_query(
    rows: np.ndarray,
    scores: np.ndarray,
    qrels: tuple[np.ndarray, np.ndarray, np.ndarray],
    id_rank: np.ndarray,
    *,
    cutoffs: Sequence[int] = CUTOFFS,
    exclude: np.ndarray | None = None,
    distinct: bool = False,
    absent: tuple[np.ndarray, np.ndarray] | None = None,
    ties: "Ties | None" = None,
) -> dict[str, np.ndarray]:
    """{figure_at_k: (queries,) float64} for every figure of FIGURES at every cut-off.

    rows, scores: (queries, k) candidates (document rows, -1 for padding) and their scores, in any
    order (they are ranked here by score, then by document id descending, as trec_eval ranks).
    qrels: (query rows, document rows, grades) of the judgments; id_rank: id_ranks(doc_ids);
    exclude: (queries,) a document row to drop from each query's candidates, or -1; distinct: the
    caller vouches that no query lists a document twice (an exact search's results): not checked;
    absent: (query rows, grades) of judged documents outside the corpus (relevant, never retrieved);
    ties: filled with each query's exposure to the order of equally scored documents (Ties)."""
    rows, scores, id_rank = np.asarray(rows), np.asarray(scores), np.asarray(id_rank, dtype=np.int64)
    if rows.ndim != 2 or rows.shape != scores.shape:
        raise ValueError(f"rows {rows.shape} and scores {scores.shape} must both be (queries, k)")
    n_queries, k = rows.shape
    cutoffs = sorted({int(c) for c in cutoffs})
    keys, grades, n_relevant, ideal = _qrels_table(n_queries, len(id_rank), qrels, absent)
    out = {f"{figure}_at_{c}": np.zeros(n_queries) for figure in FIGURES for c in cutoffs}
    if k == 0:
        return out
    block = max(1, BLOCK_CELLS // k)
    for lo in range(0, n_queries, block):
        hi = min(n_queries, lo + block)
        block_rows, block_scores = _checked(rows[lo:hi], scores[lo:hi], len(id_rank), distinct)
        valid = block_rows >= 0
        if exclude is not None:
            valid &= block_rows != np.asarray(exclude, dtype=np.int64)[lo:hi, None]
        grade = ranked_grades(block_rows, block_scores, valid, lo, keys, grades, id_rank)
        ideal_dcg = _ideal_dcg(n_relevant, ideal, lo, hi, cutoffs[-1])
        _fill(out, slice(lo, hi), grade, n_relevant[lo:hi], ideal_dcg, cutoffs)
        if ties is not None:
            ties.fill(slice(lo, hi), grade, np.sort(np.where(valid, -block_scores, np.inf), axis=1), cutoffs[-1])
    return out


class Ties:
    """Each query's exposure to ties: whether putting its equally scored documents in another order
    (embeval ranks them by document id, descending, as pytrec_eval does; another implementation's
    rounding may order them otherwise) can change one of its figures, and its figure `main`.

    Precisely, in the query's ranked list (after ignore_identical_ids' exclusion), a tie group is a run
    of documents with equal scores, from rank a to rank b (1-based); some order of it changes
    - nDCG@k when its documents' gains differ (the grade if >= 1, else 0) and a <= k;
    - MAP@k when relevance (grade >= 1) differs within it and a <= k; MRR@k when, in addition, no
      relevant document ranks before a;
    - P@k and Recall@k when relevance differs within it and a <= k < b; HitRate@k when, in addition,
      no relevant document ranks before a and the group holds at least k - a + 1 non-relevant ones.
    `order` marks a query when some group can change some figure at the cut-offs (any group of
    differing gains that starts within the largest), `main` when one can change the figure `main`.
    `beyond` (queries,): the query's last group may continue past the list with documents that can
    change its figures (retrieval.evaluate's search keeps the lowest rows of a group at its depth
    limit): that group counts as reaching every cut-off, with gains that may differ."""

    def __init__(self, n_queries: int, main: str, beyond: np.ndarray | None = None):
        family, _, cut = ("recall_at_1" if main == "accuracy" else main).rpartition("_at_")
        known = family in FIGURES and cut.isdigit()
        self.family: str | None = family if known else None  # another figure: as `order`
        self.cut = int(cut) if known else 0
        self.order = np.zeros(n_queries, dtype=bool)
        self.main = np.zeros(n_queries, dtype=bool)
        self.beyond = np.zeros(n_queries, dtype=bool) if beyond is None else np.asarray(beyond, dtype=bool)

    def fill(self, span: slice, grade: np.ndarray, descending: np.ndarray, largest: int) -> None:
        """A block of queries: their ranked grades, their scores negated and sorted (inf: no document),
        the largest cut-off."""
        n, k = grade.shape
        valid = np.isfinite(descending)
        gain = np.where(grade >= 1, grade, 0)
        relevant = gain > 0
        same = np.zeros((n, k), dtype=bool)
        same[:, 1:] = valid[:, 1:] & (descending[:, 1:] == descending[:, :-1])
        gains_differ = np.zeros((n, k), dtype=bool)  # at a place: its gain differs from the place before's
        gains_differ[:, 1:] = same[:, 1:] & (gain[:, 1:] != gain[:, :-1])
        relevance_differs = np.zeros((n, k), dtype=bool)
        relevance_differs[:, 1:] = same[:, 1:] & (relevant[:, 1:] != relevant[:, :-1])
        place = np.broadcast_to(np.arange(k), (n, k))
        start = np.maximum.accumulate(np.where(same, 0, place), axis=1)  # each place's group's first place
        last = np.ones((n, k), dtype=bool)
        last[:, :-1] = ~same[:, 1:]
        end = np.minimum.accumulate(np.where(last, place, k - 1)[:, ::-1], axis=1)[:, ::-1]  # its last place
        misses = np.cumsum(valid & ~relevant, axis=1)  # non-relevant documents up to each place
        group_misses = np.take_along_axis(misses, end, axis=1) - np.take_along_axis(misses, start, axis=1)
        group_misses += np.take_along_axis(valid & ~relevant, start, axis=1)
        beyond = self.beyond[span]
        if beyond.any():  # the last group continues past the list: it reaches every cut-off, gains unknown
            final = np.maximum(valid.sum(axis=1) - 1, 0)
            rows = np.flatnonzero(beyond)
            gains_differ[rows, final[rows]] = relevance_differs[rows, final[rows]] = True
            in_final = start[rows] == start[rows, final[rows]][:, None]
            end, group_misses = end.copy(), group_misses.copy()
            end[rows] = np.where(in_final, np.iinfo(np.int64).max // 2, end[rows])
            group_misses[rows] = np.where(in_final, np.iinfo(np.int64).max // 2, group_misses[rows])
        first_relevant = np.where(relevant.any(axis=1), relevant.argmax(axis=1), k)[:, None]
        self.order[span] = (gains_differ & (start < largest)).any(axis=1)
        c = self.cut
        if self.family is None:
            exposed = gains_differ & (start < largest)
        elif self.family == "ndcg":
            exposed = gains_differ & (start < c)
        elif self.family == "map":
            exposed = relevance_differs & (start < c)
        elif self.family == "mrr":
            exposed = relevance_differs & (start < c) & (first_relevant >= start)
        elif self.family == "hit_rate":
            reach = (start < c) & (end >= c) & (first_relevant >= start) & (group_misses >= c - start)
            exposed = relevance_differs & reach
        else:  # precision, recall
            exposed = relevance_differs & (start < c) & (end >= c)
        self.main[span] = exposed.any(axis=1)


def _checked(rows, scores, n_docs, distinct=False):
    """A block of candidates as int64 rows and float64 scores, refused if a row is outside the documents,
    a score is not finite or (unless `distinct` is vouched for) a query lists a document twice."""
    rows, scores = rows.astype(np.int64), scores.astype(np.float64)
    if rows.size and (rows.min() < -1 or rows.max() >= n_docs):
        raise ValueError("a candidate row is outside the documents")
    if not np.all(np.isfinite(scores[rows >= 0])):
        raise ValueError("a candidate's score is not finite")
    if distinct:
        return rows, scores
    ascending = np.sort(rows, axis=1)
    if np.any((ascending[:, 1:] == ascending[:, :-1]) & (ascending[:, 1:] >= 0)):
        raise ValueError("a query lists the same candidate twice")
    return rows, scores


def _fill(out, span, grade, n_relevant, ideal_dcg, cutoffs):
    """Each figure of a block of queries from its ranked grades, as trec_eval (and mteb's MRR) compute them."""
    k = grade.shape[1]
    relevant = grade >= 1
    rank = np.arange(1, k + 1, dtype=np.float64)
    found = np.cumsum(relevant, axis=1)
    dcg = np.cumsum(np.where(relevant, grade / np.log2(rank + 1.0), 0.0), axis=1)
    precision_sum = np.cumsum(np.where(relevant, found / rank, 0.0), axis=1)
    first = np.where(relevant.any(1), relevant.argmax(1) + 1.0, np.inf)  # rank of the first relevant
    has_relevant = n_relevant > 0
    denominator = np.where(has_relevant, n_relevant, 1)
    for c in cutoffs:
        found_c = found[:, min(c, k) - 1]
        idcg = ideal_dcg[:, min(c, ideal_dcg.shape[1]) - 1]
        out[f"precision_at_{c}"][span] = found_c / c
        out[f"recall_at_{c}"][span] = np.where(has_relevant, found_c / denominator, 0.0)
        out[f"map_at_{c}"][span] = np.where(has_relevant, precision_sum[:, min(c, k) - 1] / denominator, 0.0)
        out[f"hit_rate_at_{c}"][span] = (found_c > 0).astype(np.float64)
        out[f"mrr_at_{c}"][span] = np.where(first <= c, 1.0 / first, 0.0)
        out[f"ndcg_at_{c}"][span] = np.where(idcg > 0, dcg[:, min(c, k) - 1] / np.where(idcg > 0, idcg, 1.0), 0.0)


def means(values: dict[str, np.ndarray]) -> dict[str, float]:
    """The unrounded mean of each figure over the queries, summed left to right in query order as mteb sums."""
    return {name: sum(v.tolist()) / len(v) if len(v) else float("nan") for name, v in values.items()}


def mteb_scores(values: dict[str, np.ndarray], main_score: str = MAIN_SCORE) -> dict[str, float]:
    """The figures as mteb's make_score_dict reports them: same keys, nDCG/MAP/Recall/P/HitRate means
    rounded to 5 decimals, MRR unrounded, accuracy = recall_at_1 (nAUC figures left out)."""
    scores = {
        name: round(value, 5) if name.split("_at_")[0] in ROUNDED else value for name, value in means(values).items()
    }
    if "recall_at_1" in scores:
        scores["accuracy"] = scores["recall_at_1"]
    scores["main_score"] = scores[main_score]
    return scores


ABSTENTION_RATES = np.linspace(0, 1, 11)[:-1]
CONFIDENCES = ("max", "std", "diff1")
NAUC_FAMILIES = ("ndcg", "map", "recall", "precision", "mrr")


def confidences(rows: np.ndarray, scores: np.ndarray, exclude: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """{"max", "std", "diff1"}: (queries,) each query's confidence from its retrieved documents' scores
    (as float64 values of the scores): the largest, their population standard deviation, the largest
    minus the second (0 with fewer than two documents; all 0 for a query with none). The queries
    with as many documents are taken together, each row's documents packed in their order: the
    values are those of numpy on each query's own list."""
    rows, scores = np.asarray(rows), np.asarray(scores)
    out = {name: np.zeros(len(rows)) for name in CONFIDENCES}
    valid = rows >= 0
    if exclude is not None:
        valid &= rows != np.asarray(exclude)[:, None]
    packed = np.take_along_axis(scores, np.argsort(~valid, axis=1, kind="stable"), axis=1).astype(np.float64)
    counts = valid.sum(axis=1)
    for count in np.unique(counts[counts > 0]).tolist():
        which = np.flatnonzero(counts == count)
        values = np.ascontiguousarray(packed[which, :count])
        ranked = np.sort(values, axis=1)
        out["max"][which] = ranked[:, -1]
        out["std"][which] = np.std(values, axis=1)
        out["diff1"][which] = ranked[:, -1] - ranked[:, -2] if count > 1 else 0.0
    return out


def _ties(confidence: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order of the queries by confidence, least first; where each group of equal confidence starts
    in it; the groups' sizes): what an abstention curve needs of the confidence, for any metric."""
    order = np.argsort(confidence, kind="stable")
    ranked = confidence[order]
    starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])
    return order, starts, np.diff(np.r_[starts, len(ranked)])


def _abstention_curve(ties: tuple[np.ndarray, np.ndarray, np.ndarray], metric: np.ndarray) -> np.ndarray:
    """The mean of `metric` over the queries kept at each abstention rate, the least confident (by
    _ties of the confidence) left out first; queries of equal confidence count at their group's mean
    (the expectation over tie orders)."""
    order, starts, sizes = ties
    if order.size == 0:
        return np.full(len(ABSTENTION_RATES), np.nan)
    values = np.repeat(np.add.reduceat(metric[order], starts) / sizes, sizes)
    left_out = [min(round(rate * len(order)), len(order) - 1) for rate in ABSTENTION_RATES]
    return np.array([values[n:].mean() for n in left_out])


def _normalized_area(curve: np.ndarray, oracle: np.ndarray) -> float:
    area, best = np.trapezoid(curve, ABSTENTION_RATES), np.trapezoid(oracle, ABSTENTION_RATES)
    flat = oracle[0] * (ABSTENTION_RATES[-1] - ABSTENTION_RATES[0])
    return float("nan") if best == flat else float((area - flat) / (best - flat))


def nauc(confidence: np.ndarray, metric: np.ndarray) -> float:
    """The normalized area under the abstention curve: 0 for the flat curve, 1 for the oracle's
    (confidence = the metric itself); NaN when the two coincide."""
    return _normalized_area(_abstention_curve(_ties(confidence), metric), _abstention_curve(_ties(metric), metric))


def naucs(values: dict[str, np.ndarray], confidence: dict[str, np.ndarray]) -> dict[str, float]:
    """mteb's nauc_{figure}_at_{k}_{confidence} of every figure of NAUC_FAMILIES at every cut-off of
    `values` (per-query figures, the queries in the order of `confidence`): nauc's values, each
    confidence's and each figure's order found once."""
    out = {}
    ties = {kind: _ties(confidence[kind]) for kind in CONFIDENCES}
    for name, metric in values.items():
        if name.split("_at_")[0] in NAUC_FAMILIES:
            metric = np.asarray(metric, dtype=np.float64)
            oracle = _abstention_curve(_ties(metric), metric)
            for kind in CONFIDENCES:
                out[f"nauc_{name}_{kind}"] = _normalized_area(_abstention_curve(ties[kind], metric), oracle)
    return out
