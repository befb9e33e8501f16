"""MTEB's regression protocol, as mteb 2.26.24 runs it (AbsTaskRegression); and its bootstrap statistics.

What mteb does on one subset and evaluation split:

- Experiments: n_experiments (10). When the train split holds at most n_samples (2048) rows, every
  experiment trains on all of it (in file order), so the experiments are equal. Otherwise experiment
  e trains on n_samples rows drawn by a stratified subsample with seed `seed + e`: the values are cut
  into 10 quantile bins (pandas' qcut, equal edges merged), and the rows are drawn per bin as the
  `datasets` library's stratified `train_test_split(test_size=n_samples)` draws them (numpy's
  default_rng(seed + e): the approximate mode of the multivariate hypergeometric for the train and
  the test side, a permutation of each bin's rows, then a permutation of the drawn rows).
- Model: scikit-learn's LinearRegression() (ordinary least squares with an intercept), fitted on the
  experiment's rows and predicting every row of the evaluation split.
- Figures per experiment, scikit-learn's and scipy's on the predicted values: mae, mse, rmse
  (sqrt of mse), r2, kendalltau (scipy's kendalltau, tau-b). Reported: the mean over experiments of
  each and `scores_per_experiment`. Main figure kendalltau (MTEB's regression tasks'); fractions.

Bootstrap: the test items are resampled; each experiment's predictions stay fixed and a figure is
averaged over experiments as reported (`STATISTICS`).
"""

from typing import Any, Protocol

import numpy as np

from embeval import stats
from embeval.stats import Statistic

MTEB_VERSION = "2.26.24"
SEED = 42
N_EXPERIMENTS = 10
N_SAMPLES = 2048
N_BINS = 10
MAIN_SCORE = "kendalltau"
FIGURES = ("mae", "mse", "rmse", "r2", "kendalltau")


def quantile_bins(values: np.ndarray, n_bins: int = N_BINS) -> np.ndarray:
    """Each value's bin as pandas' qcut(values, n_bins, labels=False, duplicates="drop") gives it."""
    values = np.asarray(values, dtype=np.float64)
    edges = np.unique(np.percentile(values, np.linspace(0, 1, n_bins + 1) * 100))
    ids = np.searchsorted(edges, values, side="left")
    ids[values == edges[0]] = 1
    return ids - 1


def _approximate_mode(class_counts: np.ndarray, n_draws: int, rng: np.random.Generator) -> np.ndarray:
    """How many rows of each class a stratified draw of n_draws takes (datasets' approximate_mode)."""
    continuous = n_draws * class_counts / class_counts.sum()
    floored = np.floor(continuous)
    need = int(n_draws - floored.sum())
    if need > 0:
        remainder = continuous - floored
        for value in np.sort(np.unique(remainder))[::-1]:
            (tied,) = np.where(remainder == value)
            now = min(len(tied), need)
            floored[rng.choice(tied, size=now, replace=False)] += 1
            need -= now
            if need == 0:
                break
    return floored.astype(np.int64)


def stratified_subsample(values: np.ndarray, n_samples: int, seed: int) -> np.ndarray:
    """The rows of a stratified subsample of n_samples rows (in mteb's order), as mteb's
    stratified_subsampling draws them through datasets' train_test_split. Raises ValueError where
    datasets does (a bin of one row, fewer rows drawn than bins)."""
    bins = quantile_bins(values)
    n_test = int(n_samples)
    n_train = len(bins) - n_test
    classes, inverse = np.unique(bins, return_inverse=True)
    counts = np.bincount(inverse)
    if counts.min() < 2:
        raise ValueError("a quantile bin of the values holds one row (mteb's stratified draw needs two)")
    if n_train < len(classes) or n_test < len(classes):
        raise ValueError(f"each side of mteb's stratified draw needs at least {len(classes)} rows (one per bin)")
    members = np.split(np.argsort(inverse, kind="mergesort"), np.cumsum(counts)[:-1])
    rng = np.random.default_rng(seed)
    taken_train = _approximate_mode(counts, n_train, rng)
    taken_test = _approximate_mode(counts - taken_train, n_test, rng)
    test: list[int] = []
    for i in range(len(classes)):
        rows = members[i].take(rng.permutation(counts[i]), mode="clip")
        test.extend(rows[taken_train[i] : taken_train[i] + taken_test[i]])
    rng.permutation(int(taken_train.sum()))  # datasets permutes the train side first (its draws count)
    return np.asarray(rng.permutation(np.asarray(test, dtype=np.int64)), dtype=np.int64)


def training_rows(
    train_values, n_experiments: int = N_EXPERIMENTS, n_samples: int = N_SAMPLES, seed: int = SEED
) -> list[np.ndarray]:
    """The train rows of each experiment, in mteb's order."""
    values = np.asarray(train_values, dtype=np.float64)
    if n_samples >= len(values):
        return [np.arange(len(values), dtype=np.int64) for _ in range(n_experiments)]
    return [stratified_subsample(values, n_samples, seed + e) for e in range(n_experiments)]


def experiment_figures(gold, pred) -> dict[str, float]:
    """mteb's figures of one experiment's predictions."""
    from scipy.stats import kendalltau
    from sklearn.metrics import mean_absolute_error, mean_squared_error, r2_score

    mse = mean_squared_error(gold, pred)
    return {
        "mse": float(mse),
        "mae": float(mean_absolute_error(gold, pred)),
        "r2": float(r2_score(gold, pred)),
        "kendalltau": float(kendalltau(gold, pred).statistic),
        "rmse": float(np.sqrt(mse)),
    }


class Rows(Protocol):
    def __getitem__(self, rows: Any) -> np.ndarray: ...


def regress(
    train_vectors: Rows,
    train_values,
    test_vectors: np.ndarray,
    test_values,
    *,
    n_experiments: int = N_EXPERIMENTS,
    n_samples: int = N_SAMPLES,
    seed: int = SEED,
):
    """(figures, arrays) of AbsTaskRegression on one split. arrays: "gold" (n,) the test values,
    "pred" (n, experiments) each experiment's predictions."""
    from sklearn.linear_model import LinearRegression

    train_values, test_values = np.asarray(train_values, dtype=np.float64), np.asarray(test_values, dtype=np.float64)
    per_experiment, predictions = [], []
    for rows in training_rows(train_values, n_experiments, n_samples, seed):
        model = LinearRegression()
        model.fit(train_vectors[rows], train_values[rows].tolist())
        pred = model.predict(test_vectors)
        per_experiment.append(experiment_figures(test_values.tolist(), pred))
        predictions.append(pred)
    figures: dict[str, Any] = {name: float(np.mean([s[name] for s in per_experiment])) for name in per_experiment[0]}
    figures["scores_per_experiment"] = per_experiment
    return figures, {"gold": test_values, "pred": np.stack(predictions, axis=1)}


# Weighted statistics: W (b, n) counts of the test items -> (b,) values, the mean over experiments.


def _columns(pred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct prediction columns and how many experiments gave each (equal experiments are
    computed once)."""
    distinct, counts = np.unique(pred.T, axis=0, return_counts=True)
    return distinct, counts


def _over_experiments(name, per_column):
    """The statistic `name`: per_column's value of each resample (float64), averaged over the
    experiments. A row of W that draws every item once is the figure itself, computed as mteb computes
    it (scikit-learn's metrics run in float32 on float32 predictions)."""

    def statistic(W, arrays):
        gold = np.asarray(arrays["gold"], dtype=np.float64)
        distinct, counts = _columns(np.asarray(arrays["pred"]))
        whole = np.all(W == 1, axis=1)
        values = []
        for column in distinct:
            value = np.asarray(per_column(W, gold, column.astype(np.float64)), dtype=np.float64)
            if whole.any():
                value[whole] = experiment_figures(gold.tolist(), column)[name]
            values.append(value)
        return np.average(np.stack(values), axis=0, weights=counts)

    return statistic


def _mse(W, gold, pred):
    return (W @ (gold - pred) ** 2) / W.sum(1)


def _r2(W, gold, pred):
    total = W.sum(1)
    mean = (W @ gold) / total
    residual = W @ (gold - pred) ** 2
    spread = (W * (gold[None, :] - mean[:, None]) ** 2).sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(spread > 0, 1 - residual / np.where(spread > 0, spread, 1), np.nan)


def _kendall(W, gold, pred):
    """Kendall's tau-b of each resample, its items repeated as often as drawn."""
    from scipy.stats import kendalltau

    out = np.empty(len(W))
    for b, counts in enumerate(np.rint(W).astype(np.int64)):
        rows = np.repeat(np.arange(len(gold)), counts)
        out[b] = kendalltau(gold[rows], pred[rows]).statistic
    return out


PER_COLUMN = {
    "kendalltau": _kendall,
    "mae": lambda W, g, p: (W @ np.abs(g - p)) / W.sum(1),
    "mse": _mse,
    "rmse": lambda W, g, p: np.sqrt(_mse(W, g, p)),
    "r2": _r2,
}


def _moments(W, arrays):
    """(distinct columns, their counts, {figure: (b, columns)}) of mae, mse, rmse and r2 from one product
    per block: each column's weighted sums of squared and absolute errors, and the gold values' sums
    (shifted by their mean: the spread is not lost to rounding)."""

    def columns(arrays):
        gold = np.asarray(arrays["gold"], dtype=np.float64)
        distinct, counts = _columns(np.asarray(arrays["pred"]))
        shifted = gold - gold.mean()
        errors = [gold - column.astype(np.float64) for column in distinct]
        design = np.column_stack(
            [np.ones(len(gold)), shifted, shifted * shifted] + [e * e for e in errors] + [np.abs(e) for e in errors]
        )
        return distinct, counts, design

    distinct, counts, design = stats.derived(arrays, "moments", columns)

    def build():
        sums = stats.product(W, design)
        total, first, second = sums[:, 0], sums[:, 1], sums[:, 2]
        k = len(distinct)
        squared, absolute = sums[:, 3 : 3 + k], sums[:, 3 + k :]
        spread = second - first * first / total
        mse = squared / total[:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            r2 = np.where(spread[:, None] > 0, 1 - squared / np.where(spread > 0, spread, 1)[:, None], np.nan)
        doubtful = np.flatnonzero(spread <= 1e-9 * second)  # (nearly) constant gold values: the plain definition
        if len(doubtful):
            gold = np.asarray(arrays["gold"], dtype=np.float64)
            for c, column in enumerate(distinct):
                r2[doubtful, c] = _r2(W[doubtful], gold, column.astype(np.float64))
        return {"mse": mse, "mae": absolute / total[:, None], "rmse": np.sqrt(mse), "r2": r2}

    return distinct, counts, stats.per_block(W, arrays, "moments", build)


def _moments_fast(name):
    """The fast path of mae, mse, rmse and r2 (kendalltau has none: its plain definition is used)."""

    def statistic(W, arrays):
        distinct, counts, values = _moments(W, arrays)
        values = values[name].T.copy()
        whole = np.all(W == 1, axis=1)
        if whole.any():
            gold = np.asarray(arrays["gold"], dtype=np.float64).tolist()
            for c, column in enumerate(distinct):
                values[c, whole] = experiment_figures(gold, column)[name]
        return np.average(values, axis=0, weights=counts)

    return statistic


STATISTICS = {
    name: Statistic(
        _over_experiments(name, function), False, fast=None if name == "kendalltau" else _moments_fast(name)
    )
    for name, function in PER_COLUMN.items()
}
