"""Retrieval of queries that carry instructions, as mteb 2.26.24 scores IFIR's and InstructIR's tasks
(type InstructionRetrieval: AbsTaskRetrieval with each task's own task_specific_scores).

What mteb does:
- A query is embedded as its text, a space and its instruction (its text alone when the instruction
  is null); the queries are retrieved as any retrieval task's, with its figures over every query.
- IFIR (IFIRAila, IFIRFiQA, IFIRPm, IFIRScifact): `level_scores`, the mean nDCG@20 of the queries of
  each level of instruction, a query's level read from its id: level 1 when it holds "v1", else 2 when
  it holds "v2", else 3 when it holds "v3" (other queries count in no level). IFIRCds, IFIRFire and
  IFIRNFCorpus score retrieval only.
- InstructIR: `robustness_at_10`, the queries grouped by their id's part before the first "_" (one
  query under its several instructions), each group's lowest nDCG@10, the mean over the groups.

Bootstrap (`level_mean`, `group_mean`): IFIR's levels resample the queries (each level's mean over the resampled
queries of that level); InstructIR's robustness and its retrieval figures resample the groups (a
group's queries share their query: resampled together), a retrieval figure being the sum of its
values over the resampled groups' queries over their number.
"""

from collections.abc import Mapping, Sequence

import numpy as np

from embeval.formats import predictions

MTEB_VERSION = "2.26.24"
LEVELS = ("level_1", "level_2", "level_3")
LEVEL_FIGURE = "ndcg_at_20"  # IFIR's metric of each level (pytrec_eval's ndcg_cut_20)
ROBUSTNESS = "robustness_at_10"
ROBUST_FIGURE = "ndcg_at_10"  # InstructIR's metric (pytrec_eval's ndcg_cut_10)
LEVELS_SET, GROUPS_SET = "instruction-levels", "query-groups"  # the prediction sets' kinds


def levels(query_ids: Sequence[str]) -> np.ndarray:
    """Each query's level of instruction, as IFIR reads it from its id (0: none)."""
    out = np.zeros(len(query_ids), dtype=np.int64)
    for i, query in enumerate(query_ids):
        out[i] = next((level for level, mark in ((1, "v1"), (2, "v2"), (3, "v3")) if mark in query), 0)
    return out


def groups(query_ids: Sequence[str]) -> np.ndarray:
    """Each query's group (one query under several instructions), numbered in order of first appearance:
    InstructIR's id before its first "_"."""
    number: dict[str, int] = {}
    return np.array([number.setdefault(q.split("_")[0], len(number)) for q in query_ids], dtype=np.int64)


def evaluate(ctx, role, main, depth, similarity, ignore_identical, protocol):
    """Retrieval's figures of the instructed queries (embeval.evaluate.retrieval) and the protocol's
    own: `level_scores` (protocol "levels"), `robustness_at_10` ("robustness"), none ("instructed")."""
    from embeval.evaluate import retrieval as retrieval_runs  # torch: not needed to read a task's queries

    keep = {"levels": (LEVEL_FIGURE,), "robustness": (ROBUST_FIGURE,)}.get(protocol, ())
    results = retrieval_runs.evaluate(ctx, main, depth, similarity, ignore_identical, role=role, keep=keep)
    kept = ctx.predictions[""]
    per_query = {name: kept.arrays[name] for name in kept.figures}  # each query's value of the kept figures
    if protocol == "levels":
        level = ctx.data.levels
        values = per_query[LEVEL_FIGURE]
        results["level_scores"] = {name: float(values[level == j + 1].mean()) for j, name in enumerate(LEVELS)}
        arrays = {LEVEL_FIGURE: values, "level": level}
        ctx.keep(
            "level_scores", predictions.PredictionSet(LEVELS_SET, arrays, LEVELS, "evaluated queries in file order")
        )
    elif protocol == "robustness":
        group = ctx.data.groups
        ctx.keep("", grouped(per_query, group))
        results[ROBUSTNESS] = float(np.mean(ctx.predictions[""].arrays[ROBUSTNESS]))
        results["query_groups"] = int(group.max()) + 1
    return results


def grouped(per_query: Mapping[str, np.ndarray], group: np.ndarray) -> predictions.PredictionSet:
    """The prediction set of the query groups: per group, its number of queries, the sum of each kept
    figure over them, and its lowest nDCG@10."""
    count = np.bincount(group)
    arrays: dict[str, np.ndarray] = {"queries": count.astype(np.float64)}
    for name, values in per_query.items():
        arrays[name] = np.bincount(group, weights=values, minlength=len(count))
    lowest = np.full(len(count), np.inf)
    np.minimum.at(lowest, group, per_query[ROBUST_FIGURE])
    arrays[ROBUSTNESS] = lowest
    figures = (ROBUSTNESS, *per_query)
    return predictions.PredictionSet(GROUPS_SET, arrays, figures, "query groups in order of first appearance")


def level_mean(level: int):
    """The statistic of a level's figure: its queries' mean of nDCG@20 under item weights W (b, queries)."""

    def mean(W, arrays):
        members = (arrays["level"] == level).astype(np.float64)
        return (W @ (arrays[LEVEL_FIGURE] * members)) / (W @ members)

    return mean


def group_mean(name: str):
    """The statistic of a figure under weights W (b, groups) of the query groups: robustness@10, the mean
    of the groups' lowest nDCG@10; a retrieval figure, the mean over the resampled groups' queries."""

    def mean(W, arrays):
        if name == ROBUSTNESS:
            return (W @ arrays[name]) / W.sum(1)
        return (W @ arrays[name]) / (W @ arrays["queries"])

    return mean
