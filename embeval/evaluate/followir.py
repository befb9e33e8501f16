"""MTEB's instruction retrieval and reranking (FollowIR), as mteb 2.26.24 evaluates them
(AbsTaskRetrieval with instructed queries, and evaluate_p_mrr_change of
mteb/_evaluators/retrieval_metrics.py, which FollowIR's tasks use).

What mteb does:
- Each query comes twice, with its original instruction (id "Q-og") and with a changed one
  ("Q-changed"); a query is embedded as its text, a space and its instruction. Both runs are
  retrieved (or their candidates reranked) as any retrieval task's queries are and scored against
  their own judgments: the retrieval figures over every query, and again over the "-og" queries
  (`og`) and the "-changed" queries (`changed`).
- p-MRR: for each query Q of the changed judgments (the documents whose relevance the changed
  instruction alters), and each such document, its rank in Q-og's run and in Q-changed's run (ranked
  by score, then by document id, descending; a document not in the run ranks one after its last);
  a document's value is new/og - 1 when it ranks no lower under the changed instruction (og >= new),
  else 1 - og/new; the mean over a query's documents, then the mean over the queries. A query whose
  "-og" or "-changed" run is missing is left out (mteb warns).
- Means of nDCG, MAP, Recall, P and HitRate are rounded by mteb to 5 decimals (here: only on export).

Bootstrap: p-MRR's interval resamples the queries Q of the changed judgments (`STATISTICS`).
"""

from collections.abc import Sequence

import numpy as np

from embeval.evaluate import ir_metrics
from embeval.evaluate import retrieval as retrieval_runs
from embeval.formats import predictions
from embeval.stats import mean_of

MAIN_SCORE = "p-MRR"
SET_KIND = "followir"  # the prediction set's kind: each changed query's p-MRR
ORIGINAL, CHANGED = "-og", "-changed"


def ranks_of(rows: np.ndarray, scores: np.ndarray, id_rank: np.ndarray, documents: Sequence[int]) -> np.ndarray:
    """The 1-based rank of each document row in one query's run (rows, scores; -1 rows are padding),
    ranked by score then document id, descending; a document not in the run: its length + 1."""
    valid = rows >= 0
    run_rows, run_scores = rows[valid], scores[valid].astype(np.float64)
    out = np.empty(len(documents), dtype=np.int64)
    for i, doc in enumerate(documents):
        at = np.flatnonzero(run_rows == doc)
        if len(at) == 0:
            out[i] = len(run_rows) + 1
            continue
        score, rank = run_scores[at[0]], id_rank[doc]
        ahead = (run_scores > score) | ((run_scores == score) & (id_rank[run_rows] > rank))
        out[i] = 1 + int(ahead.sum())
    return out


def rank_score(original: np.ndarray, new: np.ndarray) -> np.ndarray:
    """mteb's value of each document's change of rank."""
    original, new = original.astype(np.float64), new.astype(np.float64)
    return np.where(original >= new, (1 / original) / (1 / new) - 1, 1 - (1 / new) / (1 / original))


def p_mrr(rows, scores, id_rank, pairs) -> np.ndarray:
    """Each pair's p-MRR: pairs is a list of (original query row, changed query row, document rows)."""
    out = np.empty(len(pairs))
    for i, (original, changed, documents) in enumerate(pairs):
        before = ranks_of(rows[original], scores[original], id_rank, documents)
        after = ranks_of(rows[changed], scores[changed], id_rank, documents)
        out[i] = float(np.mean(rank_score(before, after)))
    return out


def evaluate(ctx, role, depth, similarity, reranking):
    """The figures of every query, of the original and of the changed runs, and p-MRR; the p-MRR of
    each changed query is kept as a prediction set."""
    data = ctx.data
    scores, rows = (
        retrieval_runs.rerank(ctx, similarity, role)
        if reranking
        else retrieval_runs.retrieve(ctx, depth, similarity, role)
    )
    id_rank = ir_metrics.id_ranks(data.doc_ids)
    values = ir_metrics.per_query(rows, scores, data.qrels, id_rank, absent=data.absent)
    results = ir_metrics.means(values)
    original = np.array([q.endswith(ORIGINAL) for q in data.query_ids])
    for name, members in (("og", original), ("changed", ~original)):
        results[name] = ir_metrics.means({figure: v[members] for figure, v in values.items()})
    per_query = p_mrr(rows, scores, id_rank, data.pairs)
    results[MAIN_SCORE] = float(np.mean(per_query))
    results.update(
        nqueries=len(data.query_ids), ndocs=len(data.doc_ids), changed_queries=len(data.pairs), depth=int(rows.shape[1])
    )
    ctx.keep(
        "",
        predictions.PredictionSet(
            SET_KIND, {MAIN_SCORE: per_query}, (MAIN_SCORE,), "queries of the changed judgments, in their file's order"
        ),
    )
    return results


STATISTICS = {MAIN_SCORE: mean_of(MAIN_SCORE)}
