"""SICK-R and STS-B: SentEval's supervised regressor on pair features (SPEC §4 "Relatedness").

A score y is encoded as a distribution over the classes 1..5 (Tai et al., 2015); Linear(2d -> 5)
and a softmax learn it under the mean squared error; the prediction is the expected class
p·[1, 2, 3, 4, 5]. Training runs in rounds of 50 passes with early stopping on the dev Pearson.
The random streams are SentEval's: numpy permutations from RandomState(seed) (the stream of
np.random.seed(seed)) and the layer drawn as nn.Linear draws it after torch.manual_seed(seed).
"""

import copy

import numpy as np
import torch

from embeval import threads
from embeval.errors import DataFileError
from embeval.evaluate import normalize, seeded, sts
from embeval.formats import predictions
from embeval.tasks.samples import senteval_order
from embeval.train import rounds
from embeval.train.features import sample_features, to_device

NCLASSES = 5
BATCH_SIZE = 64
PASSES_PER_ROUND = 50
MAX_PASSES = 1000  # SentEval's maxepoch: a new round starts while the pass count is <= this
TENACITY = 3
SCORE_RANGE = (0.0, 5.0)
SPLITS = ("train", "dev", "test")


def tai_encode(scores, nclasses=NCLASSES):
    """Scores as float32 distributions over the classes 1..nclasses, as SentEval encodes them.

    y puts y - floor(y) on class floor(y) + 1 and floor(y) - y + 1 on class floor(y); a class
    outside 1..nclasses gets nothing. So 2.5 -> [0, .5, .5, 0, 0], 5 -> [0, 0, 0, 0, 1], and a
    score below 1 keeps only its mass y on class 1 (0.4 -> [.4, 0, 0, 0, 0]): SentEval's quirk.
    """
    y = np.asarray(scores, dtype=np.float64)
    low = np.floor(y)
    out = np.zeros((len(y), nclasses), dtype=np.float32)
    rows = np.arange(len(y))
    for cls, mass in ((low + 1, y - low), (low, low - y + 1)):
        ok = (cls >= 1) & (cls <= nclasses)
        out[rows[ok], cls[ok].astype(np.int64) - 1] = mass[ok]
    return out


def expected_score(proba):
    """ŷ = p·[1..n] in float64 (SentEval's float32 probabilities dotted with an integer range)."""
    proba = proba.detach().cpu().numpy().astype(np.float64)
    return proba @ np.arange(1, proba.shape[1] + 1, dtype=np.float64)


def dev_pearson(yhat, gold):
    """Pearson r of the predictions; a NaN (constant predictions) counts as 0."""
    r = sts.correlations(yhat, gold)[0]
    return 0.0 if np.isnan(r) else r


class SoftmaxRegressor:
    """Linear(dim -> 5) + softmax fitted to target distributions under the mean squared error
    with Adam (lr 1e-3, betas (0.9, 0.999), eps 1e-8, no weight decay): SentEval's model.

    The layer is drawn as nn.Linear draws it after torch.manual_seed(seed). One `step` runs the
    kernels that autograd and torch.optim.Adam (single-tensor path) run for that model, in the
    same order, without their per-step bookkeeping (about 3x faster on small batches).
    """

    LR, BETA1, BETA2, EPS = 1e-3, 0.9, 0.999, 1e-8

    def __init__(self, dim, seed, device):
        layer = seeded.linear(dim, NCLASSES, seeded.generator(seed))
        self.params = [layer.weight.detach().to(device), layer.bias.detach().to(device)]
        self.moments = [(torch.zeros_like(p), torch.zeros_like(p)) for p in self.params]
        self.steps = 0
        self._one = torch.ones((), device=device)

    def proba(self, x):
        weight, bias = self.params
        return torch.softmax(torch.addmm(bias, x, weight.t()), dim=1)

    def step(self, x, target):
        """One Adam step on the batch's mean squared error."""
        proba = self.proba(x)
        grad_proba = torch.ops.aten.mse_loss_backward(self._one, proba, target, 1)  # 1: mean reduction
        grad_logits = torch._softmax_backward_data(grad_proba, proba, 1, proba.dtype)
        grads = (grad_logits.t().mm(x), grad_logits.sum(0))
        self.steps += 1
        correction1 = 1 - self.BETA1**self.steps
        correction2 = 1 - self.BETA2**self.steps
        for param, grad, (mean, sq_mean) in zip(self.params, grads, self.moments):
            mean.lerp_(grad, 1 - self.BETA1)
            sq_mean.mul_(self.BETA2).addcmul_(grad, grad, value=1 - self.BETA2)
            denom = (sq_mean.sqrt() / correction2**0.5).add_(self.EPS)
            param.addcdiv_(mean, denom, value=-self.LR / correction1)

    def predict(self, x):
        """ŷ = p·[1..5] (float64)."""
        with torch.no_grad():
            return expected_score(self.proba(x))

    def copy(self):
        return copy.deepcopy(self)


def train_regressor(train_x, train_target, dev_x, dev_scores, seed):
    """SentEval's RelatednessPytorch.run on tensors: (best dev Pearson, best model, passes run).

    Batches of 64 over a fresh permutation every pass; after each round of 50 passes the dev
    Pearson; the best model is kept (strictly greater replaces); a counter of non-improving rounds
    is never reset and stops training at the first non-improving round that finds it at 3, or
    once more than 1000 passes have run.
    """
    rng = np.random.RandomState(seed)
    model = SoftmaxRegressor(train_x.shape[1], seed, train_x.device)
    n = len(train_x)
    kept = {}

    def train_round(running):
        (orders,) = to_device([np.stack([rng.permutation(n) for _ in range(PASSES_PER_ROUND)])], train_x.device)
        for order in orders:
            x, target = train_x[order], train_target[order]
            for i in range(0, n, BATCH_SIZE):
                model.step(x[i : i + BATCH_SIZE], target[i : i + BATCH_SIZE])

    def keep_best(improved, stopping):
        if improved:
            kept["model"] = model.copy()

    with torch.no_grad(), threads.one_thread(train_x.device):
        stopping, passes = rounds.run(
            train_round,
            lambda: dev_pearson(model.predict(dev_x), dev_scores),
            keep_best,
            (),
            TENACITY,
            PASSES_PER_ROUND,
            MAX_PASSES,
        )
    return float(stopping.best), kept.get("model"), passes


def _split_file(ctx, name):
    files = ctx.data.files
    return files[SPLITS.index(name)] if len(files) == len(SPLITS) else (files[0] if files else None)


def split_features(ctx, name, table=None):
    """(features, scores, order) of one split, in SentEval's sample order (order[i] is the file
    position of sample i); scores must lie in 0..5."""
    split = ctx.data.splits[name]
    scores = np.asarray(split.y, dtype=np.float64)
    bad = ~np.isfinite(scores) | (scores < SCORE_RANGE[0]) | (scores > SCORE_RANGE[1])
    if len(scores) == 0 or bad.any():
        what = (
            "no samples"
            if len(scores) == 0
            else (f"{int(bad.sum())} relatedness scores outside 0..5 (first: {scores[bad][0]!r})")
        )
        raise DataFileError(f"{name} split: {what}", file=_split_file(ctx, name), task=ctx.task.name)
    order = senteval_order(split, "pair", ctx.data.spaced)
    ia, ib = ctx.rows[name]
    table = ctx.table if table is None else table
    return sample_features(table, ia[order], ib[order], "pair"), scores[order], order


def evaluate_relatedness(ctx):
    """SICK-R / STS-B: SentEval's keys (devpearson, pearson, spearman, mse, ndev, ntest), the
    cosine Pearson/Spearman of the test split under `cosine`, and for SICK-R MTEB's cosine figures
    (every split pooled) under `mteb`.

    With a normalization the regressor is trained on normalized vectors (statistics from the
    train split) and the cosine figures of the normalized vectors sit under `normalized`, beside
    the raw ones."""
    normalizer = normalize.for_task(ctx)
    table = normalizer(ctx.table)
    (train_x, train_y, _), (dev_x, dev_y, _), (test_x, test_y, test_order) = (
        split_features(ctx, s, table) for s in SPLITS
    )
    target = torch.from_numpy(tai_encode(train_y)).to(train_x.device)
    devpearson, model, _ = train_regressor(train_x, target, dev_x, dev_y, ctx.seed)
    yhat = model.predict(test_x)
    pearson, spearman = (0.0 if np.isnan(c) else c for c in sts.correlations(yhat, test_y))
    in_file_order = np.empty_like(yhat)
    in_file_order[test_order] = yhat
    ctx.keep("", predictions.scores(ctx.data.splits["test"].y, in_file_order))
    cosine, cosine_set = sts.cosine_on_test(ctx)
    ctx.keep("cosine", cosine_set)
    result = {
        "devpearson": float(devpearson),
        "pearson": pearson,
        "spearman": spearman,
        "mse": float(np.mean((yhat - test_y) ** 2)),
        "ndev": len(dev_y),
        "ntest": len(test_y),
        "cosine": cosine,
    }
    if ctx.task.mteb is not None and ctx.task.mteb.pooled_splits:
        result["mteb"] = pooled_cosine(ctx, ctx.task.mteb.pooled_splits)
    if normalizer.method != "none":
        normalized, normalized_set = sts.cosine_on_test(ctx, table)
        ctx.keep("normalized.cosine", normalized_set)
        result["normalized"] = dict(normalize.summary(ctx), cosine=normalized)
    return result


def pooled_cosine(ctx, splits):
    """{pearson, spearman, nsamples, splits} of the cosine over the pairs of `splits` pooled
    (the task's raw vectors, as MTEB embeds them)."""
    system, gold = [], []
    for name in splits:
        ia, ib = ctx.rows[name]
        system.append(sts.cosine(ctx.table, ia, ib))
        gold.append(ctx.data.splits[name].y)
    pearson, spearman = sts.correlations(np.concatenate(system), np.concatenate(gold))
    return {
        "pearson": pearson,
        "spearman": spearman,
        "nsamples": int(sum(len(g) for g in gold)),
        "splits": list(splits),
    }
