"""SentEval's classification protocols: inner k-fold (MR, CR, SUBJ, MPQA), k-fold (TREC, MRPC) and
split (SST2, SST5, SICK-E, SNLI, probing), for either solver.

Samples are put in SentEval's order first (the folds depend on it). Every (fold, regularization)
problem of a stage is trained in one batched call; selection follows SentEval exactly: scores are
accuracies in percent rounded to 2 decimals, the first best regularization wins.
"""

from collections.abc import Generator
from dataclasses import dataclass, replace

import numpy as np
import torch
from sklearn.metrics import f1_score
from sklearn.model_selection import StratifiedKFold

from embeval.evaluate import normalize
from embeval.evaluate.context import QUIET
from embeval.formats import predictions
from embeval.settings import MLP_NHID, ClassifierSettings, RunConfig
from embeval.tasks.samples import senteval_order
from embeval.train import batched, lbfgs
from embeval.train.features import Features

TORCH_REGS = [10.0**t for t in range(-5, -1)]
SKLEARN_REGS = {
    "inner_kfold": [2.0**t for t in range(-2, 4)],
    "kfold": [2.0**t for t in range(-1, 6)],
    "split": [2.0**t for t in range(-2, 4)],
}
NOREG = {"senteval": 1e-9, "lbfgs": 1e9}
INNER_FOLD_SEED = 1111  # SentEval fixes both StratifiedKFold seeds of the inner k-fold protocol


@dataclass
class Samples:
    """A task's samples in SentEval's order, split by split, as index ranges into `features`."""

    features: object
    labels: torch.Tensor
    ranges: dict
    orders: dict | None = (
        None  # split -> SentEval's permutation: sample i of the split is file position orders[split][i]
    )
    a_rows: np.ndarray | None = None
    b_rows: np.ndarray | None = None

    def idx(self, split):
        return np.arange(*self.ranges[split])

    def y(self, split):
        lo, hi = self.ranges[split]
        return self.labels[lo:hi].cpu().numpy()

    def in_file_order(self, split, values):
        """Values given per sample of `split` in SentEval's order, put back in the split's file order."""
        out = np.empty_like(values)
        out[self.orders[split]] = values
        return out


def prepare(ctx, table=None):
    """Concatenate the task's splits in SentEval's order and build their features (from `table`,
    the task's sentence table by default)."""
    a_rows, b_rows, labels, ranges, orders, start = [], [], [], {}, {}, 0
    for name, split in ctx.data.splits.items():
        order = senteval_order(split, ctx.task.params.sort, ctx.data.spaced)
        orders[name] = order
        ia, ib = ctx.rows[name]
        a_rows.append(ia[order])
        if ib is not None:
            b_rows.append(ib[order])
        labels.append(split.y[order])
        ranges[name] = (start, start + len(split))
        start += len(split)
    a_rows = np.concatenate(a_rows)
    b_rows = np.concatenate(b_rows) if b_rows else None
    features = Features(ctx.table if table is None else table, a_rows, b_rows, ctx.task.params.features).dense()
    return Samples(features, torch.as_tensor(np.concatenate(labels), device=ctx.device), ranges, orders, a_rows, b_rows)


@dataclass
class Fitted:
    """Models of a stage: accuracy on each group's selection set, and predictions."""

    selection_accuracy: np.ndarray  # (G, R)
    predict: object  # predict(group, idx) -> (len(idx), R) classes
    info: dict


@dataclass
class FitRequest:
    """What a protocol asks to be fitted: every (group, regularization) problem of one stage. A
    protocol is a generator that yields its requests and receives their Fitted (see `drive`); a
    sweep answers the requests of several files' protocols together (embeval.evaluate.stack)."""

    solver: str
    samples: Samples
    nclasses: int
    train_sets: list
    valid_sets: list
    regs: list
    classifier: ClassifierSettings
    seed: int
    device: torch.device
    label: str = "training"

    def fit(self, progress=QUIET):
        return fit(
            self.solver,
            self.samples,
            self.nclasses,
            self.train_sets,
            self.valid_sets,
            self.regs,
            self.classifier,
            self.seed,
            self.device,
            progress,
            self.label,
        )


def drive(evaluation, progress=QUIET):
    """The results of an evaluation run alone: a generator's fit requests answered one by one (a
    plain result is returned as it is)."""
    if not isinstance(evaluation, Generator):
        return evaluation
    try:
        request = next(evaluation)
        while True:
            request = evaluation.send(request.fit(progress))
    except StopIteration as stop:
        return stop.value


def fit(
    solver, samples, nclasses, train_sets, valid_sets, regs, classifier, seed, device, progress=QUIET, label="training"
):
    """Fit problem (g, r) on train_sets[g] with regularization regs[g][r].

    senteval: valid_sets[g] is the early-stopping set (None: SentEval's 5% split of the train set);
    lbfgs: valid_sets[g] is only scored. Returns a Fitted. progress: told the stage (`label`) and,
    for senteval, every early-stopping round.
    """
    regs = np.asarray(regs, dtype=np.float64)
    if solver == "senteval":
        progress.stage(f"{label}, {regs.size} fits at once", total=classifier.max_epoch, unit="pass")
        groups = [batched.Group(t, v) for t, v in zip(train_sets, valid_sets)]
        trained = batched.train(
            samples.features,
            samples.labels,
            nclasses,
            groups,
            regs,
            classifier,
            seed,
            device,
            progress=lambda passes, active, total: progress.step(passes, f"{active} of {total} fits still training"),
        )
        return Fitted(
            trained.best_accuracy, lambda g, idx: trained.predict(samples.features, idx, g), {"rounds": trained.rounds}
        )
    progress.stage(f"{label}, {regs.size} fits at once (lbfgs)")
    theta, iterations, converged = lbfgs.fit(samples.features, samples.labels, nclasses, train_sets, regs, device)

    def predict(g, idx):
        x = samples.features(torch.as_tensor(idx, device=device))
        return lbfgs.predict(theta[g], x).cpu().numpy()

    accuracy = np.full(regs.shape, np.nan)
    labels = samples.labels.cpu().numpy()
    for g, valid in enumerate(valid_sets):
        if valid is not None:
            accuracy[g] = (predict(g, valid) == labels[valid][:, None]).mean(axis=0)
    return Fitted(accuracy, predict, {"iterations": iterations, "converged": converged})


def percent(x):
    """A fraction as SentEval reports it: a percentage rounded to 2 decimals."""
    return round(100 * float(x), 2)


def _select(scores, regs):
    """SentEval's choice: the first regularization with the best (rounded) score."""
    best = int(np.argmax(scores))
    return regs[best], scores[best]


def regularization_grid(solver, protocol, task):
    """SentEval's grid: weight decays for the PyTorch path, C values for scikit-learn's."""
    if task.params.regularization == "none":
        return [NOREG[solver]]
    return TORCH_REGS if solver == "senteval" else SKLEARN_REGS[protocol]


def class_count(ctx):
    """Classes of the task: its data's (declared, or found in its training split), else its declared labels."""
    return len(ctx.data.classes or ctx.task.params.labels)


def stage_label(ctx, classifier: ClassifierSettings, what: str) -> str:
    """A fit stage as the progress line names it: the classifier, the normalization, what it fits."""
    name = "logistic regression" if classifier.nhid == 0 else f"MLP ({classifier.nhid} hidden units)"
    norm = "" if ctx.normalize in (None, "none") else f", {ctx.normalize}-normalized vectors"
    if not norm and getattr(ctx.config, "normalize", "none") != "none":
        norm = ", raw vectors"  # --normalize tune's trial without normalization
    return f"{name}{norm}: {what}"


def task_classifier(task, config: RunConfig, base: ClassifierSettings | None = None) -> ClassifierSettings:
    """The classifier a task trains: `base` (the configured one by default) with the task's own
    max_epoch and epoch_size, and nhid 0 where the task allows only logistic regression."""
    changes = {
        key: getattr(task.params, key) for key in ("max_epoch", "epoch_size") if getattr(task.params, key) is not None
    }
    if task.params.logreg_only:
        changes["nhid"] = 0
    return replace(config.classifier if base is None else base, **changes)


def inner_kfold_folds(y, k):
    """[(outer train, outer test, [(inner train, inner valid)...])...] as sample indices.

    SentEval seeds both StratifiedKFold splitters of this protocol with 1111, whatever the seed.
    """
    outer = StratifiedKFold(k, shuffle=True, random_state=INNER_FOLD_SEED).split(np.zeros(len(y)), y)
    folds = []
    for train, test in outer:
        inner = StratifiedKFold(k, shuffle=True, random_state=INNER_FOLD_SEED).split(np.zeros(len(train)), y[train])
        folds.append((train, test, [(train[a], train[b]) for a, b in inner]))
    return folds


def kfold_folds(y, k, seed):
    """[(train, held-out)...] of the k-fold protocol, as sample indices."""
    return list(StratifiedKFold(k, shuffle=True, random_state=seed).split(np.zeros(len(y)), y))


def keep_predictions(ctx, prefix, samples, split, yhat, group=None):
    """Keep the test predictions (file order) as the prediction set `prefix`."""
    gold = samples.in_file_order(split, samples.y(split))
    pred = samples.in_file_order(split, np.asarray(yhat))
    group = None if group is None else samples.in_file_order(split, group)
    order = "every sample in file order, group = outer fold" if group is not None else "test split, file order"
    ctx.keep(prefix, predictions.labels(gold, pred, group, f1=ctx.task.params.f1, order=order))


def inner_kfold(ctx, classifier=None, prefix=""):
    """MR, CR, SUBJ, MPQA: reg chosen by inner k-fold within each outer training fold.

    A z-score normalization takes its statistics from each outer training fold separately: the
    samples are presented to the trainer once per outer fold (index o * N + i: sample i under
    fold o's statistics), so the folds still train in one batched call."""
    per_fold = ctx.normalize.startswith("zscore")
    samples = prepare(ctx, None if per_fold else normalize.table(ctx))
    solver, k, seed = ctx.config.solver, ctx.config.kfold, ctx.seed
    classifier = task_classifier(ctx.task, ctx.config, classifier)
    regs = regularization_grid(solver, "inner_kfold", ctx.task)
    y = samples.y("all")
    n = len(y)
    outer = inner_kfold_folds(y, k)
    shift = [0] * k
    if per_fold:
        features = normalize.fold_features(
            ctx, ctx.normalize, samples.a_rows, samples.b_rows, [train for train, _, _ in outer]
        )
        samples = Samples(
            features, samples.labels.repeat(k), samples.ranges, samples.orders, samples.a_rows, samples.b_rows
        )
        shift = [o * n for o in range(k)]
    train_sets = [itrain + shift[o] for o, (_, _, inner) in enumerate(outer) for itrain, _ in inner]
    valid_sets = [ivalid + shift[o] for o, (_, _, inner) in enumerate(outer) for _, ivalid in inner]
    nclasses = class_count(ctx)
    stage1 = yield FitRequest(
        solver,
        samples,
        nclasses,
        train_sets,
        valid_sets,
        [regs] * len(train_sets),
        classifier,
        seed,
        ctx.device,
        stage_label(ctx, classifier, f"choosing the regularization ({k} x {k} inner folds)"),
    )
    chosen, dev_scores = [], []
    for o in range(k):
        scores = [percent(np.mean(stage1.selection_accuracy[o * k : (o + 1) * k, r])) for r in range(len(regs))]
        reg, score = _select(scores, regs)
        chosen.append(reg)
        dev_scores.append(score)
    stage2 = yield FitRequest(
        solver,
        samples,
        nclasses,
        [train + shift[o] for o, (train, _, _) in enumerate(outer)],
        [None] * k,
        [[r] for r in chosen],
        classifier,
        seed,
        ctx.device,
        stage_label(ctx, classifier, f"training the {k} outer folds"),
    )
    yhat, fold_of, test_scores = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64), []
    for o, (_, test, _) in enumerate(outer):
        yhat[test] = stage2.predict(o, test + shift[o])[:, 0]
        fold_of[test] = o
        test_scores.append(percent(np.mean(yhat[test] == y[test])))
    keep_predictions(ctx, prefix, samples, "all", yhat, fold_of)
    return {
        "devacc": round(float(np.mean(dev_scores)), 2),
        "acc": round(float(np.mean(test_scores)), 2),
        "ndev": n,
        "ntest": n,
        "reg": chosen,
        "fold_acc": test_scores,
    }


def kfold(ctx, classifier=None, prefix=""):
    """TREC, MRPC: reg chosen by k-fold cross-validation on train, retrained, tested on test."""
    samples = prepare(ctx, normalize.table(ctx))
    solver, k, seed = ctx.config.solver, ctx.config.kfold, ctx.seed
    classifier = task_classifier(ctx.task, ctx.config, classifier)
    regs = regularization_grid(solver, "kfold", ctx.task)
    train_idx, y = samples.idx("train"), samples.y("train")
    folds = kfold_folds(y, k, seed)
    nclasses = class_count(ctx)
    stage1 = yield FitRequest(
        solver,
        samples,
        nclasses,
        [train_idx[t] for t, _ in folds],
        [train_idx[v] for _, v in folds],
        [regs] * k,
        classifier,
        seed,
        ctx.device,
        stage_label(ctx, classifier, f"choosing the regularization ({k} folds)"),
    )
    scores = [percent(np.mean(stage1.selection_accuracy[:, r])) for r in range(len(regs))]
    reg, devacc = _select(scores, regs)
    stage2 = yield FitRequest(
        solver,
        samples,
        nclasses,
        [train_idx],
        [None],
        [[reg]],
        classifier,
        seed,
        ctx.device,
        stage_label(ctx, classifier, "retraining on all of train"),
    )
    test_idx, y_test = samples.idx("test"), samples.y("test")
    yhat = stage2.predict(0, test_idx)[:, 0]
    keep_predictions(ctx, prefix, samples, "test", yhat)
    result = {
        "devacc": devacc,
        "acc": percent(np.mean(yhat == y_test)),
        "ndev": len(train_idx),
        "ntest": len(test_idx),
        "reg": reg,
        "dev_scores": dict(zip(map(str, regs), scores)),
    }
    if ctx.task.params.f1:
        result["f1"] = percent(f1_score(y_test, yhat))
    return result


def split(ctx, classifier=None, prefix=""):
    """SST2, SST5, SICK-E, SNLI, probing: reg chosen on dev; the chosen model is tested.

    Retraining the chosen regularization, as SentEval does, reproduces the same model (same seed,
    same data), so the model trained during selection is the one tested.
    """
    samples = prepare(ctx, normalize.table(ctx))
    solver, seed = ctx.config.solver, ctx.seed
    classifier = task_classifier(ctx.task, ctx.config, classifier)
    regs = regularization_grid(solver, "split", ctx.task)
    nclasses = class_count(ctx)
    stage = yield FitRequest(
        solver,
        samples,
        nclasses,
        [samples.idx("train")],
        [samples.idx("dev")],
        [regs],
        classifier,
        seed,
        ctx.device,
        stage_label(ctx, classifier, "training, selected on dev"),
    )
    scores = [percent(a) for a in stage.selection_accuracy[0]]
    reg, devacc = _select(scores, regs)
    test_idx = samples.idx("test")
    yhat = stage.predict(0, test_idx)[:, regs.index(reg)]
    keep_predictions(ctx, prefix, samples, "test", yhat)
    return {
        "devacc": devacc,
        "acc": percent(np.mean(yhat == samples.y("test"))),
        "ndev": len(samples.idx("dev")),
        "ntest": len(test_idx),
        "reg": reg,
        "dev_scores": dict(zip(map(str, regs), scores)),
    }


def classifier_named(config: RunConfig, name: str) -> ClassifierSettings:
    """The classifier settings of --classifiers' `logreg` or `mlp` (the configured one otherwise)."""
    base = config.classifier
    if name == "logreg":
        return replace(base, nhid=0)
    return replace(base, nhid=base.nhid or MLP_NHID)


def with_classifiers(protocol):
    """The protocol run once per classifier of --classifiers (once, with the configured classifier,
    without it). Each classifier's results sit under its name; SentEval's keys at the top are the
    logistic regression's (SentEval's transfer protocol), named by `classifier`."""

    def evaluate(ctx):
        names = ctx.config.classifiers
        if not names:
            return (yield from protocol(ctx))
        ran = {}
        for name in names:
            ran[name] = yield from protocol(ctx, classifier_named(ctx.config, name), prefix=name)
        headline = "logreg" if "logreg" in ran else names[0]
        result = dict(ran[headline], classifier=headline)
        result.update(ran)
        ctx.keep("", ctx.predictions[headline])
        return result

    evaluate.__name__ = protocol.__name__
    evaluate.__doc__ = protocol.__doc__
    return evaluate


PROTOCOLS = {
    "split": with_classifiers(split),
    "kfold": with_classifiers(kfold),
    "nested-kfold": with_classifiers(inner_kfold),
}


def evaluate(ctx):
    """The task's SentEval protocol (its `protocol`) with the run's classifiers: a generator of fit
    requests returning the results."""
    return PROTOCOLS[ctx.task.protocol](ctx)
