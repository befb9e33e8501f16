"""Several sources' classification problems trained together, with results per source identical to
training each source alone.

Each source's task runs its own protocol (embeval.evaluate.classify), a generator that yields a
FitRequest whenever it needs classifiers fitted. `run_together` advances every source's generator
to its next request, fits the compatible requests together, and sends each source its answer:
source v's sample i becomes sample offset_v + i of one stacked feature matrix (as FoldFeatures
presents k fold-specific copies of the samples in one index space), its groups are appended after
the previous source's, and the batched trainer (or lbfgs) trains every (source x fold x
regularization) problem in one call. Each source then gets back a Fitted that sees only its own
groups and samples. Every source's preparation (features, folds) runs once.

Why the results are identical: the batched trainer gives every group the same initial weights and
the numpy stream of its train size (drawn once per pass, whichever groups use it), and every
operation is per problem; lbfgs solves problems on disjoint samples on pools of their own.
Classifiers with dropout draw their masks from one stream for all groups, so they are fitted source
by source, as are calls whose settings differ.
"""

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


def _stackable(request):
    classifier = request.classifier
    return request.solver == "lbfgs" or not (classifier.nhid and classifier.dropout)


def _key(request):
    """Requests with equal keys can be fitted together."""
    regs = np.asarray(request.regs, dtype=np.float64)
    return (
        request.solver,
        request.nclasses,
        regs.shape[1:],
        request.classifier,
        request.seed,
        str(request.device),
        request.samples.features.dim,
        len(request.train_sets),
    )


def fit_together(requests):
    """Fitted of each request (in order), from one classify.fit of all their problems."""
    samples = [r.samples for r in requests]
    features = stack_features([s.features for s in samples])
    offsets = (
        features.offsets
        if isinstance(features, StackedFeatures)
        else np.concatenate([[0], np.cumsum([len(s.features) for s in samples])])
    )
    labels = torch.cat([s.labels for s in samples])
    train_sets, valid_sets, regs, first = [], [], [], []
    for request, offset in zip(requests, offsets):
        first.append(len(train_sets))
        train_sets += [np.asarray(t) + offset for t in request.train_sets]
        valid_sets += [None if v is None else np.asarray(v) + offset for v in request.valid_sets]
        regs += list(
            np.broadcast_to(
                np.asarray(request.regs, dtype=np.float64), (len(request.train_sets), np.shape(request.regs)[-1])
            )
        )
    a = requests[0]
    stacked = classify.Samples(features, labels, ranges={})
    together = classify.fit(
        a.solver,
        stacked,
        a.nclasses,
        train_sets,
        valid_sets,
        np.stack(regs),
        a.classifier,
        a.seed,
        a.device,
        label=f"{a.label}, {len(requests)} sources",
    )
    return [_share(together, g0, len(r.train_sets), int(offset)) for r, g0, offset in zip(requests, first, offsets)]


def _share(fitted, g0, count, offset):
    """The part of a stacked Fitted that belongs to one source: groups g0.. g0+count-1, samples from offset."""
    info = {k: (v[g0 : g0 + count] if isinstance(v, np.ndarray) else v) for k, v in fitted.info.items()}
    return classify.Fitted(
        fitted.selection_accuracy[g0 : g0 + count],
        lambda g, idx: fitted.predict(g0 + g, np.asarray(idx) + offset),
        info,
    )


def fit_requests(requests):
    """Fitted of each request: compatible stackable requests fitted together, the others one by one."""
    results = [None] * len(requests)
    groups = {}
    for i, request in enumerate(requests):
        if _stackable(request):
            groups.setdefault(_key(request), []).append(i)
        else:
            results[i] = request.fit()
    for members in groups.values():
        if len(members) == 1:
            results[members[0]] = requests[members[0]].fit()
            continue
        for i, fitted in zip(members, fit_together([requests[i] for i in members])):
            results[i] = fitted
    return results


def run_together(evaluations):
    """Run evaluations (generators of FitRequest returning their result) on this thread, fitting the
    classifiers they ask for together; returns [(result, exception)...] in their order.

    Each round advances every unfinished evaluation to its next request; the requests of the round
    are fitted together (fit_requests) and each evaluation is sent its Fitted. An exception raised by
    an evaluation ends it (its traceback kept on the exception); one raised by a joint fit ends
    every evaluation that waited on it. Everything runs on the calling thread: with evaluations in
    threads of their own, torch's intra-op worker threads belonging to the waiting ones slowed the
    fitting thread's parallel work about twofold (measured with two threads on two cores)."""
    outcomes = [(None, None)] * len(evaluations)
    pending = {}

    def advance(slot, answer=None, first=False):
        try:
            request = next(evaluations[slot]) if first else evaluations[slot].send(answer)
        except StopIteration as stop:
            outcomes[slot] = (stop.value, None)
        except Exception as err:  # noqa: BLE001 (reported to the caller with its evaluation)
            outcomes[slot] = (None, err)
        else:
            pending[slot] = request

    for slot in range(len(evaluations)):
        advance(slot, first=True)
    while pending:
        slots = sorted(pending)
        requests = [pending.pop(slot) for slot in slots]
        try:
            fitted = fit_requests(requests)
        except Exception as err:  # noqa: BLE001 (every evaluation waiting on this fit fails with it)
            for slot in slots:
                evaluations[slot].close()
                outcomes[slot] = (None, err)
            continue
        for slot, answer in zip(slots, fitted):
            advance(slot, answer)
    return outcomes
