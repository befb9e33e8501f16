"""Several sources' classification problems trained together, with results per source identical to
training each source alone.

Each source's task runs its own protocol (embeval.evaluate.classify); `run_together` collects one
`fit` call of every source still running and fits them together: source v's sample i becomes sample
offset_v + i of one stacked feature matrix (as FoldFeatures presents k fold-specific copies of the
samples in one index space), its groups are appended after the previous source's, and the batched
trainer (or lbfgs) trains every (source x fold x regularization) problem in one call. Each source
then gets back a Fitted that sees only its own groups and samples.

Why the results are identical: the batched trainer gives every group the same initial weights and
the numpy stream of its train size (drawn once per pass, whichever groups use it), and every
operation is per problem; lbfgs solves problems on disjoint samples on pools of their own.
Classifiers with dropout draw their masks from one stream for all groups, so they are fitted source
by source, as are calls whose settings differ.
"""

import json

import numpy as np
import torch

from embeval.evaluate import classify
from embeval.train.features import DenseFeatures


class StackedFeatures:
    """Features of several sources' samples in one index space: part v's sample i is index
    offsets[v] + i."""

    def __init__(self, parts):
        self.parts = parts
        self.offsets = np.concatenate([[0], np.cumsum([len(p) for p in parts])])
        self.bounds = torch.as_tensor(self.offsets[1:], device=parts[0].device)
        self.dim = parts[0].dim
        self.device = parts[0].device

    def __len__(self):
        return int(self.offsets[-1])

    def __call__(self, idx, out=None):
        idx = torch.as_tensor(idx, device=self.device)
        flat = idx.reshape(-1)
        part = torch.bucketize(flat, self.bounds, right=True)
        rows = torch.empty((flat.numel(), self.dim), device=self.device)
        for v, features in enumerate(self.parts):
            where = (part == v).nonzero()[:, 0]
            if where.numel():
                rows[where] = features(flat[where] - int(self.offsets[v]))
        if out is not None:
            out = out.reshape(-1)[: rows.numel()].view_as(rows)
            out.copy_(rows)
            rows = out
        return rows.reshape(tuple(idx.shape) + (self.dim,))

    def nbytes(self):
        return len(self) * self.dim * 4


def stack_features(parts):
    """One features object over every part: a DenseFeatures when every part is dense."""
    if all(isinstance(p, DenseFeatures) for p in parts):
        return DenseFeatures(torch.cat([p.matrix for p in parts]))
    return StackedFeatures(parts)


def _stackable(call):
    args = call["args"]
    classifier = args["classifier"]
    return args["solver"] == "lbfgs" or not (classifier["nhid"] and np.any(classifier["dropout"]))


def _key(call):
    """Calls with equal keys can be fitted together."""
    a = call["args"]
    regs = np.asarray(a["regs"], dtype=np.float64)
    return (
        a["solver"],
        a["nclasses"],
        regs.shape[1:],
        json.dumps(a["classifier"], sort_keys=True),
        a["seed"],
        str(a["device"]),
        a["samples"].features.dim,
        len(a["train_sets"]),
    )


def fit_together(calls):
    """Fitted of each call (in order), from one classify.fit of all their problems."""
    samples = [c["args"]["samples"] for c in calls]
    features = stack_features([s.features for s in samples])
    offsets = (
        features.offsets
        if isinstance(features, StackedFeatures)
        else np.concatenate([[0], np.cumsum([len(s.features) for s in samples])])
    )
    labels = torch.cat([s.labels for s in samples])
    train_sets, valid_sets, regs, first = [], [], [], []
    for call, offset in zip(calls, offsets):
        a = call["args"]
        first.append(len(train_sets))
        train_sets += [np.asarray(t) + offset for t in a["train_sets"]]
        valid_sets += [None if v is None else np.asarray(v) + offset for v in a["valid_sets"]]
        regs += list(
            np.broadcast_to(np.asarray(a["regs"], dtype=np.float64), (len(a["train_sets"]), np.shape(a["regs"])[-1]))
        )
    a = calls[0]["args"]
    stacked = classify.Samples(features, labels, ranges={})
    together = classify.fit(
        a["solver"],
        stacked,
        a["nclasses"],
        train_sets,
        valid_sets,
        np.stack(regs),
        a["classifier"],
        a["seed"],
        a["device"],
        label=f"{a['label']}, {len(calls)} sources",
    )
    return [
        _share(together, g0, len(c["args"]["train_sets"]), int(offset)) for c, g0, offset in zip(calls, first, offsets)
    ]


def _share(fitted, g0, count, offset):
    """The part of a stacked Fitted that belongs to one source: groups g0.. g0+count-1, samples from offset."""
    info = {k: (v[g0 : g0 + count] if isinstance(v, np.ndarray) else v) for k, v in fitted.info.items()}
    return classify.Fitted(
        fitted.selection_accuracy[g0 : g0 + count],
        lambda g, idx: fitted.predict(g0 + g, np.asarray(idx) + offset),
        info,
    )


def fit_calls(calls):
    """Fitted of each call: compatible stackable calls fitted together, the others one by one."""
    results = [None] * len(calls)
    groups = {}
    for i, call in enumerate(calls):
        if _stackable(call):
            groups.setdefault(_key(call), []).append(i)
        else:
            results[i] = classify.fit(**call["args"])
    for members in groups.values():
        if len(members) == 1:
            results[members[0]] = classify.fit(**calls[members[0]]["args"])
            continue
        for i, fitted in zip(members, fit_together([calls[i] for i in members])):
            results[i] = fitted
    return results


FIT_PARAMETERS = (
    "solver",
    "samples",
    "nclasses",
    "train_sets",
    "valid_sets",
    "regs",
    "classifier",
    "seed",
    "device",
    "progress",
    "label",
)


class _Unanswered(BaseException):
    """Stops a job at a fit call whose answer is not known yet (a BaseException, so that a
    protocol's own `except Exception` cannot swallow it)."""


def run_together(jobs):
    """Run jobs (callables taking a fit function with classify.fit's signature) on this thread,
    fitting the classifiers they ask for together; returns [(result, exception)...] in job order.

    Each pass runs every unfinished job from its start: its fit calls already answered are answered
    from the record, and its first new call is recorded and stops the job. The recorded calls of
    all jobs are then fitted together by fit_calls, and the next pass begins. Protocols are
    deterministic, so a job run again with the same answers reaches the same next call; a job asks
    for one or two fits, so the repeated work is its preparation, not its training. Everything
    runs on the calling thread: with jobs in threads of their own, torch's intra-op worker threads
    belonging to the waiting jobs slowed the fitting thread's parallel work about twofold (measured
    with two threads on two cores)."""
    answers = [[] for _ in jobs]
    outcomes = [(None, None)] * len(jobs)
    unfinished = list(range(len(jobs)))
    while unfinished:
        asked = {}
        for slot in unfinished:
            try:
                outcomes[slot] = (jobs[slot](_replaying(answers[slot], asked, slot)), None)
            except _Unanswered:
                pass
            except Exception as err:  # noqa: BLE001 (reported to the caller with its job)
                outcomes[slot] = (None, err)
        slots = sorted(asked)
        if not slots:
            break
        try:
            fitted = [(f, None) for f in fit_calls([asked[s] for s in slots])]
        except Exception as err:  # every job waiting on this fit fails with it
            fitted = [(None, err)] * len(slots)
        for slot, answer in zip(slots, fitted):
            answers[slot].append(answer)
        unfinished = slots
    return outcomes


def _replaying(answers, asked, slot):
    """A job's fit function for one pass: recorded answers in order, then record the next call."""
    position = [0]

    def fit(*args, **kwargs):
        if position[0] < len(answers):
            fitted, err = answers[position[0]]
            position[0] += 1
            if err is not None:
                raise err
            return fitted
        call = dict(zip(FIT_PARAMETERS, args))
        call.update(kwargs)
        call.pop("progress", None)
        asked[slot] = {"args": call}
        raise _Unanswered()

    return fit
