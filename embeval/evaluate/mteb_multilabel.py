"""MTEB's multilabel classification protocol, as mteb 2.26.24 runs it (AbsTaskMultilabelClassification);
and its bootstrap statistics.

What mteb does on one subset and evaluation split:

- Label columns: the labels of the evaluation split, sorted (scikit-learn's MultiLabelBinarizer fitted
  on it); a training label the evaluation split lacks is dropped from the training rows' labels.
- Experiments: n_experiments (10) training sets drawn from the train split with one numpy
  default_rng(seed) (seed 42) that carries on from one experiment to the next: each experiment
  shuffles the row numbers 0..n-1 afresh with it, then, in that order, takes a row while any of its
  labels has been taken fewer than samples_per_label (8) times, counting every label of each row
  taken (a row without labels is never taken). The training set keeps that order.
- Classifier: scikit-learn's KNeighborsClassifier(n_neighbors=5) (its defaults otherwise: uniform
  weights, Minkowski p=2, algorithm "auto"), fitted on the experiment's rows' label indicators and
  predicting every row of the evaluation split (vectors as the encoder gave them).
- Figures per experiment: accuracy (subset accuracy: every label of a row right), lrap
  (label_ranking_average_precision_score of the 0/1 predictions), f1 (macro over the label columns)
  and hamming (mteb's hamming_score: per row |true and predicted| / |true or predicted|, 1 when both
  are empty, averaged). Reported: the mean over experiments of each and `scores_per_experiment`.
  Main figure: accuracy for most of MTEB's multilabel tasks (f1 for a few, lrap for its mock task).
- Evaluation splits of more than max_eval_samples (3000) rows are cut by mteb to that many rows with
  iterative stratification over pairs of labels (Sechidis et al. 2011, Szymański and Kajdanowicz
  2017, as mteb's copy of scikit-multilearn runs it with numpy's RandomState(seed)), the rows kept in
  file order: `stratified_test_rows`.

Bootstrap: the test rows are resampled; each experiment's predictions stay fixed and a figure is
averaged over experiments as reported (`STATISTICS`).
"""

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
N_NEIGHBORS = 5
MAX_EVAL_SAMPLES = 3000
FIGURES = ("accuracy", "lrap", "f1", "hamming")


def training_rows(
    train_labels: Sequence[Sequence[Any]],
    n_experiments: int = N_EXPERIMENTS,
    samples_per_label: int = SAMPLES_PER_LABEL,
    seed: int = SEED,
) -> list[np.ndarray]:
    """The train rows of each experiment, in mteb's order."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_experiments):
        order = list(np.arange(len(train_labels)))
        rng.shuffle(order)
        taken: defaultdict[Any, int] = defaultdict(int)
        chosen = []
        for row in order:
            labels = train_labels[int(row)]
            if any(taken[label] < samples_per_label for label in labels):
                chosen.append(int(row))
                for label in labels:
                    taken[label] += 1
        out.append(np.array(chosen, dtype=np.int64))
    return out


def _most_needed(members: dict[tuple[int, ...], list[int]]) -> tuple[int, ...] | None:
    """The label combination whose rows are placed next: the first with rows left, replaced by a later
    one only when that one has more distinct labels and fewer rows left (the rule mteb runs)."""
    chosen, best_labels, best_rows = None, 0, 0
    for combination, rows in members.items():
        if not rows:
            continue
        labels, count = len(set(combination)), len(rows)
        if chosen is None or (best_labels < labels and best_rows > count):
            chosen, best_labels, best_rows = combination, labels, count
    return chosen


def stratified_test_rows(gold: np.ndarray, n_samples: int, seed: int = SEED) -> np.ndarray:
    """The rows (ascending) mteb keeps of an evaluation split of label indicators `gold` (rows,
    labels) cut to n_samples rows: the first of two folds of an iterative stratification by pairs of
    labels, the folds wanting n_samples / rows and the rest of the rows."""
    from itertools import combinations_with_replacement

    n = len(gold)
    share = np.array([n_samples / n, 1.0 - n_samples / n])
    wanted = share * n
    rng = np.random.RandomState(seed)
    members: dict[tuple[int, ...], list[int]] = {}
    of_row: list[list[tuple[int, ...]]] = []
    for row in range(n):
        pairs: list[tuple[int, ...]] = list(combinations_with_replacement(np.flatnonzero(gold[row]).tolist(), 2))
        for pair in pairs:
            members.setdefault(pair, []).append(row)
        of_row.append(pairs)
    wanted_of = {combination: len(rows) * share for combination, rows in members.items()}
    placed = np.zeros(n, dtype=bool)
    folds: list[list[int]] = [[], []]

    def place(row: int, fold: int) -> None:
        folds[fold].append(row)
        placed[row] = True
        wanted[fold] -= 1

    combination = _most_needed(members)
    while combination is not None:
        rows = members[combination]
        while rows:
            row = rows.pop()
            if placed[row]:
                continue
            want = wanted_of[combination]
            tied = np.flatnonzero(want == want.max())
            fold = int(tied[0]) if len(tied) == 1 else int(rng.choice(tied, 1)[0])
            for other in of_row[row]:
                if row in members[other]:
                    members[other].remove(row)
                wanted_of[other][fold] -= 1
            place(row, fold)
        combination = _most_needed(members)
    unplaced = [row for row in range(n) if not placed[row]]
    while unplaced:
        row = unplaced.pop()
        place(row, int(rng.choice(np.flatnonzero(wanted > 0), 1)[0]))
    return np.sort(np.array(folds[0], dtype=np.int64))


def indicator(label_lists: Sequence[Sequence[Any]], classes: Sequence[Any]) -> np.ndarray:
    """(rows, classes) 0/1 matrix of each row's labels among `classes` (others dropped)."""
    column = {label: i for i, label in enumerate(classes)}
    out = np.zeros((len(label_lists), len(classes)), dtype=np.int64)
    for row, labels in enumerate(label_lists):
        for label in labels:
            if label in column:
                out[row, column[label]] = 1
    return out


def hamming_score(gold: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """Each row's |gold and pred| / |gold or pred| (1 when both are empty)."""
    gold, pred = gold.astype(bool), pred.astype(bool)
    union = (gold | pred).sum(1)
    return np.where(union == 0, 1.0, (gold & pred).sum(1) / np.maximum(union, 1))


def row_lrap(gold: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """Each row's label ranking average precision of 0/1 scores (scikit-learn's: 1 for a row whose
    labels are none or all of the columns)."""
    gold, pred = gold.astype(bool), pred.astype(bool)
    n_labels = gold.shape[1]
    relevant = gold.sum(1)
    predicted = pred.sum(1)
    hits = (gold & pred).sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        scored = hits * (hits / np.maximum(predicted, 1)) + (relevant - hits) * (relevant / n_labels)
        value = scored / np.maximum(relevant, 1)
    return np.where((relevant == 0) | (relevant == n_labels), 1.0, value)


def experiment_figures(gold: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    """mteb's figures of one experiment's predictions (scikit-learn's metrics and mteb's hamming score)."""
    from sklearn.metrics import accuracy_score, f1_score, label_ranking_average_precision_score

    return {
        "accuracy": float(accuracy_score(gold, pred)),
        "lrap": float(label_ranking_average_precision_score(gold, pred)),
        "f1": float(f1_score(gold, pred, average="macro")),
        "hamming": float(hamming_score(gold, pred).mean()),
    }


class Rows(Protocol):
    def __getitem__(self, rows: Any) -> np.ndarray: ...


def classify(
    train_vectors: Rows,
    train_labels: Sequence[Sequence[Any]],
    test_vectors: np.ndarray,
    test_labels: Sequence[Sequence[Any]],
    *,
    n_experiments: int = N_EXPERIMENTS,
    samples_per_label: int = SAMPLES_PER_LABEL,
    seed: int = SEED,
    n_neighbors: int = N_NEIGHBORS,
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(figures, arrays) of AbsTaskMultilabelClassification on one split. arrays: "gold" (n, labels)
    the test rows' indicators, "pred" (n, labels, experiments) each experiment's predictions."""
    from sklearn.neighbors import KNeighborsClassifier

    classes = sorted({label for labels in test_labels for label in labels})
    gold = indicator(test_labels, classes)
    per_experiment, predictions = [], []
    for rows in training_rows(train_labels, n_experiments, samples_per_label, seed):
        model = KNeighborsClassifier(n_neighbors=n_neighbors)
        model.fit(train_vectors[rows], indicator([train_labels[i] for i in rows], classes))
        pred = np.asarray(model.predict(test_vectors))
        per_experiment.append(experiment_figures(gold, pred))
        predictions.append(pred)
    figures: dict[str, Any] = {name: float(np.mean([s[name] for s in per_experiment])) for name in FIGURES}
    figures["scores_per_experiment"] = per_experiment
    return figures, {"gold": gold.astype(np.int8), "pred": np.stack(predictions, axis=2).astype(np.int8)}


# Weighted statistics: W (b, n) counts of the test rows -> (b,) values, the mean over experiments.


def _item_mean(per_row):
    def statistic(W, arrays):
        gold, pred = arrays["gold"], arrays["pred"]
        values = [(W @ per_row(gold, pred[:, :, e])) / W.sum(1) for e in range(pred.shape[2])]
        return np.mean(values, axis=0)

    return statistic


def macro_f1(W, arrays):
    """The mean over experiments of the macro F1 over the label columns with row weights (a column
    without any true or predicted row in the resample counts 0, as scikit-learn counts it)."""
    gold = arrays["gold"].astype(bool)
    values = []
    for e in range(arrays["pred"].shape[2]):
        pred = arrays["pred"][:, :, e].astype(bool)
        true_positive = W @ (gold & pred)
        denominator = 2 * true_positive + W @ (~gold & pred) + W @ (gold & ~pred)
        f1 = np.where(denominator > 0, 2 * true_positive / np.where(denominator > 0, denominator, 1), 0.0)
        values.append(f1.mean(1))
    return np.mean(values, axis=0)


PER_ROW = {
    "accuracy": lambda g, p: (g == p).all(1).astype(np.float64),
    "lrap": row_lrap,
    "hamming": hamming_score,
}


def _row_figures(W, arrays):
    """{figure: (b, experiments)} the per-row figures' weighted means, from one product per block."""

    def columns(arrays):
        gold, pred = arrays["gold"], arrays["pred"]
        experiments = pred.shape[2]
        values = [PER_ROW[name](gold, pred[:, :, e]) for name in PER_ROW for e in range(experiments)]
        return np.column_stack(values + [np.ones(len(gold))])

    def build():
        sums = stats.product(W, stats.derived(arrays, "rows", columns))
        means = sums[:, :-1] / sums[:, -1:]
        return dict(zip(PER_ROW, np.split(means, len(PER_ROW), axis=1)))

    return stats.per_block(W, arrays, "rows", build)


def _item_mean_fast(name):
    return lambda W, arrays: np.mean(_row_figures(W, arrays)[name], axis=1)


def _macro_f1_fast(W, arrays):
    """macro_f1 from one sparse product per block: every experiment's true positive, false positive
    and false negative sums of every label column."""

    def matrix(arrays):
        gold = arrays["gold"].astype(bool)
        pred = arrays["pred"].astype(bool)
        n, labels, experiments = pred.shape
        blocks = []
        for e in range(experiments):
            p = pred[:, :, e]
            blocks += [gold & p, ~gold & p, gold & ~p]
        dense = np.stack(blocks, axis=1).reshape(n, 3 * experiments * labels)
        return (experiments, labels), sparse.csr_array(dense.T.astype(np.float64))

    (experiments, labels), counts = stats.derived(arrays, "f1", matrix)
    sums = (counts @ np.ascontiguousarray(W.T)).T.reshape(len(W), experiments, 3, labels)
    true_positive = sums[:, :, 0]
    denominator = 2 * true_positive + sums[:, :, 1] + sums[:, :, 2]
    f1 = np.where(denominator > 0, 2 * true_positive / np.where(denominator > 0, denominator, 1), 0.0)
    return f1.mean(2).mean(1)


STATISTICS = {
    "accuracy": Statistic(_item_mean(PER_ROW["accuracy"]), False, fast=_item_mean_fast("accuracy")),
    "lrap": Statistic(_item_mean(row_lrap), False, fast=_item_mean_fast("lrap")),
    "f1": Statistic(macro_f1, False, fast=_macro_f1_fast),
    "hamming": Statistic(_item_mean(hamming_score), False, fast=_item_mean_fast("hamming")),
}
