"""MTEB's tasks scored by name, seen from a results file (no import of mteb): each (subset, split)
is a task of the results, its declaration's [mteb] table naming the mteb task, subset and split;
an mteb task's main score is the mean of its parts' main scores, as mteb's TaskResult.get_score
averages every (split, subset) entry of its scores.

`summary(record)` is what the results JSON holds under "mteb": per mteb task its type, main score
name and value, dataset revision, the benchmarks it was asked through and its parts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from embeval.tasks.spec import TaskSpec


def by_name(spec: TaskSpec) -> bool:
    """Whether a spec is a part of an mteb task scored by name (its [mteb] table has mteb's type)."""
    return spec.mteb is not None and bool(spec.mteb.type)


def part_score(spec: TaskSpec, results: Mapping[str, Any]) -> tuple[dict[str, Any], float] | None:
    """(mteb's score fields of one part, its main score), or None when the results lack it."""
    assert spec.mteb is not None
    fields = spec.kind_module.mteb_scores(spec, results)
    if fields is None:
        return None
    fields.pop("pairs", None)
    fields.pop("hf_subsets", None)  # a part of many subsets: its main score is their mean
    main = fields.get(spec.mteb.main_score, fields.get("main_score"))
    if not isinstance(main, (int, float)) or isinstance(main, bool):
        return None
    fields["main_score"] = float(main)
    return fields, float(main)


def tie_exposure(spec: TaskSpec, results: Mapping[str, Any]) -> dict[str, Any] | None:
    """The tie exposure (embeval.evaluate.ir_metrics.Ties) of the items of a part's main figure: its
    queries, or its queries merged with their subqueries (None: not a retrieval figure)."""
    parent = spec.headline.path.rpartition(".")[0]
    holder = results.get(parent) if parent else results
    found = holder.get("tie_exposure") if isinstance(holder, Mapping) else None
    return dict(found) if isinstance(found, Mapping) else None


def summary(record: Mapping[str, Any]) -> dict[str, Any]:
    """{mteb task: {type, main_score, value, revision, benchmarks, parts}} of the record's tasks
    scored by name (value None until every part of the task is scored); each part's entry gets `mteb`, its row
    (task, type, main_score, value, subset, split, benchmarks). A part also lists the notes on its data
    (what mteb does silently: judgments outside the corpus, ...) and, for retrieval and reranking, its
    tie exposure (embeval.evaluate.ir_metrics.Ties), which the task sums over its parts."""
    from embeval.errors import EmbevalError
    from embeval.tasks.registry import recorded_spec

    out: dict[str, Any] = {}
    for name, entry in record.get("tasks", {}).items():
        try:
            spec = recorded_spec(name, entry)
        except EmbevalError:
            continue
        if not by_name(spec):
            continue
        mteb = spec.mteb
        assert mteb is not None
        task = out.setdefault(
            mteb.name,
            {
                "type": mteb.type,
                "main_score": mteb.main_score,
                "value": None,
                "revision": mteb.revision,
                "dataset": mteb.dataset,
                "benchmarks": list(mteb.benchmarks),
                "parts": {},
                "expected": mteb.parts,
            },
        )
        if mteb.revision_mismatch:
            task["revision_mismatch"] = mteb.revision_mismatch
            if mteb.revision_scored:
                task["revision_scored"] = mteb.revision_scored
        if mteb.revision_unverified:
            task["revision_unverified"] = mteb.revision_unverified
        scored = part_score(spec, entry.get("results", {}))
        if scored is not None and isinstance(entry, dict):
            entry["mteb"] = {  # the part's own row, for aggregations over tasks (benchmark means)
                "task": mteb.name,
                "type": mteb.type,
                "main_score": mteb.main_score,
                "value": scored[1],
                "subset": mteb.subset,
                "split": mteb.split,
                "benchmarks": list(mteb.benchmarks),
            }
        part: dict[str, Any] = {
            "subset": mteb.subset,
            "split": mteb.split,
            "languages": list(mteb.languages),
            "main_score": None if scored is None else scored[1],
        }
        task["parts"][name] = part
        if mteb.notes:
            part["notes"] = list(mteb.notes)
        exposure = tie_exposure(spec, entry.get("results", {})) if isinstance(entry, dict) else None
        if exposure is not None:
            part["tie_exposure"] = dict(exposure)
            total = task.setdefault("tie_exposure", dict.fromkeys(exposure, 0))
            for key, count in exposure.items():
                total[key] = total.get(key, 0) + count
    for task in out.values():
        values = [p["main_score"] for p in task["parts"].values()]
        if len(values) < task.pop("expected"):
            continue  # a part not scored (left out of the file or of --tasks): no main score
        if values and all(v is not None for v in values):
            import numpy as np

            task["value"] = float(np.mean(values))
    return out
