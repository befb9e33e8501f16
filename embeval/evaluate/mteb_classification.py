"""MTEB's classification protocol, as mteb 2.26.24 runs it (AbsTaskClassification); and its bootstrap statistics.

What mteb does on one subset and evaluation split:

- Experiments: n_experiments (10) training sets, each undersampled from the train split. The
  train rows' order is shuffled by numpy's legacy `RandomState(seed).shuffle` (seed 42), afresh
  each experiment but on the order the previous experiment left, so experiment e uses the
  permutation applied e + 1 times; going through that order, a row is taken while its label has
  fewer than samples_per_label (8; 16, 20, 32 or 128 for some tasks) rows taken. The training set
  keeps that order.
- Classifier: scikit-learn's LogisticRegression(max_iter=100) with random_state = seed, the rest
  scikit-learn's defaults (lbfgs, L2, C=1, tol 1e-4, intercept), fitted on the experiment's rows
  and predicting every row of the evaluation split (vectors as the encoder gave them).
- Figures per experiment, scikit-learn's on the predicted labels: accuracy, f1 (macro),
  f1_weighted, precision (macro), precision_weighted, recall (macro), recall_weighted, and for a
  binary evaluation split (two distinct labels) ap and ap_weighted: average_precision_score of the
  label values themselves (binary, so the two are equal): the gold labels against the predicted
  labels as scores, scikit-learn's default positive label 1 (so labels 1 and 2 rank a predicted 2
  above a predicted 1 and count 1 as the positive class). Labels that are not numbers, or two labels
  without 1 (0 and 2), make scikit-learn raise and mteb's run of the task stop: `ap_values` says
  where the figure is defined, and embeval leaves it undefined (None) elsewhere. Reported: the mean
  over experiments of each (ap NaN when not binary or undefined) and `scores_per_experiment`. Main
  figure `accuracy` (`f1` for 23 of the 352 single-label text classification tasks mteb 2.26 has not
  superseded); fractions in [0, 1].
- Cross-validation (`is_cross_validation`, 3 SciRepEval tasks): KFold(n_splits=5, shuffle=True,
  random_state=seed) over the one split; fold i is experiment i, its train rows undersampled as
  above, except that the order carried over has the length of the first fold's train rows (a
  later, larger fold never draws its last rows).

Bootstrap: the test items and the experiments are resampled together (each experiment's predictions
stay fixed; a resample weights the test items and draws the experiments with replacement), and a
figure is averaged over the drawn experiments as reported (`STATISTICS`): the interval of the mean
over experiments holds both the test items' sampling and the spread of the training draws.
"""

import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
from scipy import sparse

from embeval import stats
from embeval.stats import Statistic

MTEB_VERSION = "2.26.24"
SEED = 42
N_EXPERIMENTS = 10
SAMPLES_PER_LABEL = 8
MAX_ITER = 100
N_SPLITS = 5
MAIN_SCORE = "accuracy"
FIGURES = ("accuracy", "f1", "f1_weighted", "precision", "precision_weighted", "recall", "recall_weighted")


def undersample(labels, order, samples_per_label: int, seed: int = SEED):
    """(shuffled order, rows taken) of one experiment: `order` (a list of row indices into labels)
    shuffled by RandomState(seed), then up to samples_per_label rows of each label in that order."""
    order = list(order)
    np.random.RandomState(seed).shuffle(order)
    taken: defaultdict[object, int] = defaultdict(int)
    chosen: list[int] = []
    for row in order:
        if taken[labels[row]] < samples_per_label:
            chosen.append(row)
            taken[labels[row]] += 1
    return order, np.array(chosen, dtype=np.int64)


def training_rows(
    train_labels, n_experiments: int = N_EXPERIMENTS, samples_per_label: int = SAMPLES_PER_LABEL, seed: int = SEED
) -> list[np.ndarray]:
    """The train rows of each experiment, in mteb's order."""
    labels = np.asarray(train_labels).tolist()
    order, rows = list(range(len(labels))), []
    for _ in range(n_experiments):
        order, chosen = undersample(labels, order, samples_per_label, seed)
        rows.append(chosen)
    return rows


def classifier(seed: int = SEED, max_iter: int = MAX_ITER) -> Any:
    """mteb's classifier: scikit-learn's LogisticRegression (imported here: the statistics below are
    used without scikit-learn, e.g. by `embeval rank`)."""
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(max_iter=max_iter, random_state=seed)


POSITIVE = 1  # average_precision_score's default pos_label, which mteb leaves as it is
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?", re.ASCII)
_BOOLEAN = {"False": 0, "True": 1}  # a boolean label column, as the writer of an --mteb copy spells it


def label_values(classes: Sequence[str]) -> np.ndarray:
    """The value of each label (in class-id order) as mteb's data holds it, for average precision:
    numbers when every label is one (an integer, a decimal, True / False: a boolean column as an
    --mteb copy spells it) and no two are the same number; else the labels' text."""
    values: list[int | float] = []
    for label in classes:
        if label in _BOOLEAN:
            values.append(_BOOLEAN[label])
        elif _NUMBER.fullmatch(label):
            values.append(int(label) if label.lstrip("+-").isdigit() else float(label))
        else:
            return np.array(classes)
    return np.array(values) if len(set(values)) == len(values) else np.array(classes)


def ap_values(gold, pred, values=None):
    """(gold, pred) as the label values mteb computes average precision with (values: each label id's,
    label_values'; None: gold and pred are the values), or None where scikit-learn raises and mteb's
    run stops: labels that are not numbers (or not whole numbers), or two gold labels without the
    positive label 1."""
    from sklearn.utils.multiclass import type_of_target

    gold, pred = np.asarray(gold), np.asarray(pred)
    if values is not None:
        gold, pred = values[gold], values[pred]
    if gold.dtype.kind not in "biuf" or type_of_target(gold) != "binary" or POSITIVE not in gold:
        return None
    return gold, pred


def experiment_figures(gold, pred, values=None) -> dict:
    """mteb's figures of one experiment's predictions (values: see ap_values)."""
    from sklearn.metrics import accuracy_score, average_precision_score, f1_score, precision_score, recall_score

    scores = {
        "accuracy": accuracy_score(gold, pred),
        "f1": f1_score(gold, pred, average="macro"),
        "f1_weighted": f1_score(gold, pred, average="weighted"),
        "precision": precision_score(gold, pred, average="macro"),
        "precision_weighted": precision_score(gold, pred, average="weighted"),
        "recall": recall_score(gold, pred, average="macro"),
        "recall_weighted": recall_score(gold, pred, average="weighted"),
        "ap": None,
        "ap_weighted": None,
    }
    scored = ap_values(gold, pred, values) if len(np.unique(gold)) == 2 else None
    if scored is not None:
        scores["ap"] = average_precision_score(*scored, average="macro")
        scores["ap_weighted"] = average_precision_score(*scored, average="weighted")
    return {name: value if value is None else float(value) for name, value in scores.items()}


def average(per_experiment) -> dict:
    """The mean over experiments of each figure (NaN for ap when no experiment has one), and the list."""
    out = {}
    for name in per_experiment[0]:
        values = [scores[name] for scores in per_experiment if scores[name] is not None]
        out[name] = float(np.mean(values)) if values else float("nan")
    out["scores_per_experiment"] = per_experiment
    return out


class Rows(Protocol):
    """Anything that gives the vectors of some rows: an array, or a view mapping samples to a table's rows."""

    def __getitem__(self, rows: Any) -> np.ndarray: ...


def classify(
    train_vectors: Rows,
    train_labels,
    test_vectors: np.ndarray,
    test_labels,
    *,
    n_experiments: int = N_EXPERIMENTS,
    samples_per_label: int = SAMPLES_PER_LABEL,
    seed: int = SEED,
    max_iter: int = MAX_ITER,
    values: np.ndarray | None = None,
):
    """(figures, arrays) of AbsTaskClassification on one split. arrays: "gold" (n,) the test labels,
    "pred" (n, experiments) each experiment's predictions. values: each label's value as mteb's data
    holds it, when the labels given are ids (label_values; None: the labels are mteb's own)."""
    train_labels, test_labels = np.asarray(train_labels), np.asarray(test_labels)
    model = classifier(seed, max_iter)
    per_experiment, predictions = [], []
    for rows in training_rows(train_labels, n_experiments, samples_per_label, seed):
        model.fit(train_vectors[rows], train_labels[rows].tolist())
        pred = model.predict(test_vectors)
        per_experiment.append(experiment_figures(test_labels, pred, values))
        predictions.append(pred)
    return average(per_experiment), {"gold": test_labels, "pred": np.stack(predictions, axis=1)}


def folds(labels, n_splits: int = N_SPLITS, samples_per_label: int = SAMPLES_PER_LABEL, seed: int = SEED):
    """[(train rows drawn, test rows)] of each fold of the cross-validated protocol, as row indices of
    the split in mteb's order: KFold(n_splits, shuffle=True, random_state=seed); each fold's train rows
    undersampled in the order carried over from the previous fold (its length the first fold's)."""
    from sklearn.model_selection import KFold

    labels = np.asarray(labels)
    out, order = [], None
    for train, test in KFold(n_splits=n_splits, shuffle=True, random_state=seed).split(labels):
        fold_labels = labels[train].tolist()
        order, chosen = undersample(fold_labels, range(len(train)) if order is None else order, samples_per_label, seed)
        out.append((train[chosen], test))
    return out


def cross_validate(
    vectors: np.ndarray,
    labels,
    *,
    samples_per_label: int = SAMPLES_PER_LABEL,
    seed: int = SEED,
    max_iter: int = MAX_ITER,
    n_splits: int = N_SPLITS,
    values: np.ndarray | None = None,
):
    """(figures, arrays) of AbsTaskClassification with is_cross_validation. arrays: "gold" (n,),
    "pred" (n, 1) each row's prediction in its fold, "group" (n,) its fold. values: as classify's."""
    labels = np.asarray(labels)
    model = classifier(seed, max_iter)
    per_experiment = []
    pred, fold = np.empty(len(labels), dtype=labels.dtype), np.empty(len(labels), dtype=np.int64)
    for index, (train, test) in enumerate(folds(labels, n_splits, samples_per_label, seed)):
        model.fit(vectors[train], labels[train].tolist())
        pred[test] = model.predict(vectors[test])
        fold[test] = index
        per_experiment.append(experiment_figures(labels[test], pred[test], values))
    return average(per_experiment), {"gold": labels, "pred": pred[:, None], "group": fold}


# Weighted statistics: W (b, n) counts of the test items -> (b,) values.


def _codes(arrays):
    """(gold (n,), predictions (n, experiments), number of labels) as int codes of the labels."""
    classes, codes = np.unique(np.column_stack([arrays["gold"], arrays["pred"]]), return_inverse=True)
    codes = codes.reshape(len(arrays["gold"]), -1)
    return codes[:, 0], codes[:, 1:], len(classes)


def _by_group(statistic):
    """The statistic per fold, averaged over folds, when the arrays have folds ("group")."""

    def grouped(W, arrays):
        if "group" not in arrays:
            return statistic(W, arrays)
        groups = arrays["group"]
        members = [groups == g for g in np.unique(groups)]
        values = [statistic(W[:, m], {"gold": arrays["gold"][m], "pred": arrays["pred"][m]}) for m in members]
        return np.mean(values, axis=0)

    return grouped


@_by_group
def accuracy(W, arrays):
    """The mean over experiments of the weighted accuracy (fraction), experiments resampled too."""
    correct = (arrays["pred"] == arrays["gold"][:, None]).astype(np.float64)
    per_experiment = (W @ correct) / W.sum(1)[:, None]
    counts = stats.experiment_counts(W, correct.shape[1])
    return (per_experiment * counts).sum(1) / counts.sum(1)


def _one_hot(codes, n_classes):
    return sparse.csr_array((np.ones(len(codes)), (np.arange(len(codes)), codes)), shape=(len(codes), n_classes))


@_by_group
def macro_f1(W, arrays):
    """The mean over experiments of scikit-learn's macro F1 with item weights: the mean F1 of the
    labels present (weight > 0) in the resample's gold or predicted labels; experiments resampled too."""
    gold, predictions, n_classes = _codes(arrays)
    gold_hot = _one_hot(gold, n_classes)
    in_gold = np.asarray(W @ gold_hot)
    values = []
    for pred in predictions.T:
        true_positive = np.asarray((W * (pred == gold)) @ gold_hot)
        denominator = in_gold + np.asarray(W @ _one_hot(pred, n_classes))
        present = denominator > 0
        f1 = np.where(present, 2 * true_positive / np.where(present, denominator, 1), 0.0)
        values.append(f1.sum(1) / present.sum(1))
    counts = stats.experiment_counts(W, len(values))
    return (np.array(values).T * counts).sum(1) / counts.sum(1)


class _Units:
    """The test items of a set (or of one fold) grouped into units: items with the same gold label and
    the same prediction in every experiment count alike in every figure, so a resample's counts are
    summed per unit (once per block) and the figures are taken from the units' sums: accuracy from
    each experiment's correct units, macro F1 from one sparse product giving, per experiment and
    label, the gold, predicted and true-positive sums."""

    def __init__(self, gold, predictions, n_classes, items):
        rows = np.column_stack([gold[items], predictions[items]])
        distinct, first, unit = np.unique(rows, axis=0, return_index=True, return_inverse=True)
        renumbered = np.empty(len(first), dtype=np.int64)  # units numbered in the order they first occur
        renumbered[np.argsort(first, kind="stable")] = np.arange(len(first))
        distinct, unit = distinct[np.argsort(first, kind="stable")], renumbered[unit.reshape(-1)]
        order = np.argsort(unit, kind="stable")
        self.items = items[order]
        self.starts = np.flatnonzero(np.r_[True, unit[order][1:] != unit[order][:-1]])
        self.alone = len(distinct) == len(items)  # every item a unit of its own, in the items' order
        gold_u, pred_u = distinct[:, 0], distinct[:, 1:]
        self.correct = (pred_u == gold_u[:, None]).astype(np.float64)
        units, experiments = pred_u.shape
        k = n_classes
        columns = [gold_u[:, None]]
        for e in range(experiments):
            hit = pred_u[:, e] == gold_u
            columns.append(np.where(hit, k + 2 * k * e + gold_u, -1)[:, None])
            columns.append((k + 2 * k * e + k + pred_u[:, e])[:, None])
        cols = np.hstack(columns)
        row = np.repeat(np.arange(units), cols.shape[1]).reshape(units, -1)
        kept = cols >= 0
        self.sums = sparse.csr_array(
            (np.ones(kept.sum()), (cols[kept], row[kept])), shape=(k + 2 * k * experiments, units)
        )  # (columns, units): transposed, to multiply the units' sums (units, b) from the left
        self.shape = (experiments, k)

    def summed(self, W):
        """(b, units) the resamples' counts summed per unit."""
        if self.alone:
            return W if len(self.items) == W.shape[1] else np.take(W, self.items, axis=1)
        return np.add.reduceat(np.take(W, self.items, axis=1), self.starts, axis=1)


def _units(W, arrays):
    """[(its units, the block's sums per unit)] per fold (one of all items without folds), once per block."""

    def build(arrays):
        gold, predictions, n_classes = _codes(arrays)
        groups = arrays.get("group")
        parts = [np.arange(len(gold))] if groups is None else [np.flatnonzero(groups == g) for g in np.unique(groups)]
        return [_Units(gold, predictions, n_classes, items) for items in parts]

    units = stats.derived(arrays, "units", build)
    return stats.per_block(W, arrays, "unit sums", lambda: [(u, u.summed(W)) for u in units])


def _experiments(W, arrays, n_experiments):
    """stats.experiment_counts of the block, once per block."""
    return stats.per_block(W, arrays, ("experiments", n_experiments), lambda: stats.experiment_counts(W, n_experiments))


def _accuracy_fast(W, arrays):
    values = []
    for units, summed in _units(W, arrays):
        per_experiment = stats.product(summed, units.correct) / summed.sum(1)[:, None]
        counts = _experiments(W, arrays, units.correct.shape[1])
        values.append((per_experiment * counts).sum(1) / counts.sum(1))
    return np.mean(values, axis=0)


def _macro_f1_fast(W, arrays):
    values = []
    for units, summed in _units(W, arrays):
        experiments, k = units.shape
        sums = (units.sums @ np.ascontiguousarray(summed.T)).T  # (b, k + 2 k experiments)
        in_gold = sums[:, None, :k]
        pairs = sums[:, k:].reshape(len(W), experiments, 2, k)
        true_positive, denominator = pairs[:, :, 0], in_gold + pairs[:, :, 1]
        present = denominator > 0
        f1 = np.where(present, 2 * true_positive / np.where(present, denominator, 1), 0.0)
        per_experiment = f1.sum(2) / present.sum(2)
        counts = _experiments(W, arrays, experiments)
        values.append((per_experiment * counts).sum(1) / counts.sum(1))
    return np.mean(values, axis=0)


# figure -> embeval.stats.Statistic (stratified: resampled within folds where the arrays have them)
STATISTICS = {
    "accuracy": Statistic(accuracy, stratified=True, fast=_accuracy_fast),
    "f1": Statistic(macro_f1, stratified=True, fast=_macro_f1_fast),
}
