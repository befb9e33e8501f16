"""--resume: which units of a run can reuse an earlier record, and why the others are recomputed.

A result is reused only when it was computed by the same code (the record's embeval version and
code fingerprint, embeval._version.code_fingerprint), with the same configuration, vectors and data,
and its figures match their digest (`figures_sha256`, present and right: an entry without it is
recomputed, never signed anew)."""

import logging

from embeval.formats.results import entry_problem
from embeval.run.outputs import _listed

logger = logging.getLogger("embeval")


def reuse_decision(previous, record, unit, has_predictions=None):
    """(previous entry, None, index of its record) when the unit's result can be reused, else (None,
    why it is recomputed, None).

    previous: results records, most recent first; the first with a matching entry wins.
    has_predictions(index, run, task): whether that record's saved predictions hold the task (only
    asked when predictions are being saved)."""
    reason = None
    for i, earlier in enumerate(previous):
        entry, why = _reusable(earlier, record, unit)
        if entry is not None and has_predictions is not None and not has_predictions(i, unit.source.run, unit.task):
            entry, why = None, "no saved predictions"
        if entry is not None:
            return entry, None, i
        reason = reason or why
    return None, reason, None


def _reusable(previous, record, unit):
    run = unit.source.run
    if (previous.get("embeval"), previous.get("embeval_code")) != (record["embeval"], record["embeval_code"]):
        return None, f"computed by other embeval code ({_code(previous)}, this is {_code(record)})"
    if previous.get("config") != record["config"]:
        return None, "configuration changed"
    tasks = previous["tasks"] if run == "encoder" else (previous.get(run) or {}).get("tasks", {})
    entry = tasks.get(unit.task) if isinstance(tasks, dict) else None
    if not isinstance(entry, dict) or not isinstance(entry.get("vectors"), dict):
        return None, "no previous result"
    problem = entry_problem(entry)  # as `embeval report` checks it: a hand-edited entry is never reused
    if problem:
        return None, f"the earlier result is not valid: {problem}"
    if not isinstance(entry.get("figures_sha256"), str):  # what embeval writes always has it: never re-signed
        return None, "the earlier result has no digest figures_sha256 of its figures (edited by hand?)"
    key = "vectors_sha256" if run == "encoder" else "sha256"
    if entry["vectors"].get(key) != unit.identity:
        return None, "vectors changed"
    reference = unit.reference.identity if unit.reference is not None else None
    if entry["vectors"].get("reference_sha256") != reference:
        return None, f"{unit.reference.task if unit.reference else 'the reference task'}'s vectors changed"
    if entry.get("data_sha256") != unit.data_sha256:
        return None, "data changed"
    if _declaration(entry) != (None if unit.spec.builtin else dict(unit.spec.declaration)):
        return None, "task declaration changed"
    return entry, None


def _declaration(entry):
    """The declaration a result of a declared task records (None: a built-in task's result)."""
    recorded = entry.get("declaration")
    return recorded.get("declaration") if isinstance(recorded, dict) else None


def _code(record):
    """A record's embeval version and code fingerprint, in short: '0.2.0 53ce1b36db86…'."""
    code = record.get("embeval_code")
    return f"{record.get('embeval')} {code[:12] + '…' if isinstance(code, str) else '(code not recorded)'}"


def describe_resume(sources, decisions, previous):
    """One line: which tasks are reused, which recomputed and why."""
    reused = [name for name, (entry, _) in decisions.items() if entry is not None]
    why = {}
    for name, (entry, reason) in decisions.items():
        if entry is None:
            why.setdefault(reason, []).append(name)
    parts = [f"resuming from {' and '.join(map(str, sources))}: reused {_listed(reused) if reused else 'no task'}"]
    parts += [f"recomputing {_listed(names)} ({reason})" for reason, names in why.items()]
    dropped = [name for name in dict.fromkeys(n for p in previous for n in p["tasks"]) if name not in decisions]
    if dropped:
        parts.append(f"not kept (not scored in this run): {_listed(dropped)}")
    return "; ".join(parts)


def reusable_units(files, previous, record, units):
    """{(run, task): (earlier entry, its prediction sets) or (None, None)}; said in one line."""
    if not previous:
        logger.info(f"nothing to resume: no {files.out} or {files.progress.name} yet; scoring every task")
        return {}
    saved = [files.previous_predictions(p) for p in previous] if files.sidecar else None

    def has_predictions(i, run, task):
        return saved[i] is not None and task in saved[i].get(run, {})

    decisions, said = {}, {}
    for unit in units:
        run = unit.source.run
        entry, why, i = reuse_decision(previous, record, unit, has_predictions if saved is not None else None)
        sets = (
            saved[i][run][unit.task]["sets"]
            if entry is not None and saved is not None
            else ({} if entry is not None else None)
        )
        decisions[(run, unit.task)] = (entry, sets)
        if unit.task not in said or (said[unit.task][0] is not None and entry is None):
            said[unit.task] = (entry, why if run == "encoder" else f"{run}: {why}")
    logger.info(describe_resume(files.sources(), said, previous))
    return decisions
