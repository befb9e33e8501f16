"""SentEval's PyTorch classifier protocol for many problems at once (`--solver senteval`).

Problems come in groups: the problems of a group share their train set, their early-stopping
set and their random stream and differ only in weight decay (the regularization grid), so one
gather of a batch's features serves the whole group. The weights of every (group, reg) problem
are slices of stacked tensors, output-major so one batched matmul serves a whole group and the
weight gradient is a matmul on the gathered batch itself: W1 (G, R, H, D), b1 (G, R, H), and for
the MLP W2 (G, R, C, H), b2 (G, R, C). Groups are trained in chunks, each through a whole round
before the next, so that a chunk's weights, optimizer state and gathered batch stay in cache.

Per problem, as SentEval's MLP.fit does: the model is initialised as nn.Linear would be right
after torch.manual_seed(seed); numpy's stream seeded with `seed` draws the 5% early-stopping split
(when no early-stopping set is given) and then one permutation of the train set per pass; a round
is `epoch_size` passes in batches of `batch_size` with mean cross-entropy; after each round the
accuracy on the early-stopping set keeps the best model (strictly greater replaces); a counter of
non-improving rounds that is never reset stops training at the first non-improving round that
finds it at `tenacity`, or once more than `max_epoch` passes are done. Problems of equal train size
share one numpy stream, drawn once per pass, exactly as separate seeded runs would draw it.
Gradients are written out (softmax cross-entropy, sigmoid MLP), not taken by autograd. On the CPU,
the steps run on a fair share of the threads, measured between rounds (embeval.threads.fair_share);
the weights are the same to the last bit for any thread count.
"""

from dataclasses import dataclass

import numpy as np
import torch

from embeval import threads
from embeval.train import rounds
from embeval.train.features import to_device
from embeval.train.optimizers import BatchedOptimizer, parse

VALIDATION_SPLIT = 0.05
EVAL_CHUNK_BYTES = 8 << 20
STEP_CHUNK_BYTES = 4 << 20


@dataclass
class Group:
    """Sample indices (into the features) of one group's train set and early-stopping set.

    With `valid` None, SentEval's validation_split applies: the first 5% of a permutation of
    `train` (drawn from the group's seeded stream) is held out for early stopping.
    """

    train: np.ndarray
    valid: np.ndarray | None = None


@dataclass
class Trained:
    """The best model of every (group, reg) problem and its early-stopping accuracy."""

    params: list[torch.Tensor]
    best_accuracy: np.ndarray  # (G, R)
    rounds: np.ndarray  # (G, R) rounds trained
    nhid: int

    def problem(self, group, reg):
        """One problem's weights and biases, as nn.Linear's transposes: [W1 (D, H), b1, W2 (H, C), b2]."""
        out = [self.params[0][group, reg].t(), self.params[1][group, reg]]
        if self.nhid:
            out += [self.params[2][group, reg].t(), self.params[3][group, reg]]
        return out

    def logits(self, features, idx, group):
        """Logits (len(idx), R, C) of group `group`'s R best models on samples idx."""
        x = features(torch.as_tensor(idx, device=self.params[0].device))[None]
        with torch.no_grad():
            logits = _forward([p[group : group + 1] for p in self.params], x, self.nhid)[-1][0]
        return logits.permute(2, 0, 1).contiguous()

    def predict(self, features, idx, group):
        """Predicted classes (len(idx), R)."""
        return _argmax(self.logits(features, idx, group)).cpu().numpy()


def _argmax(logits, dim=-1):
    """Index of the first maximal logit along dim (torch.max's convention, as SentEval uses it).

    A short class dimension is moved last first: torch's argmax over a strided dimension is
    an order of magnitude slower than over a contiguous one."""
    if dim not in (-1, logits.dim() - 1) and logits.shape[dim] <= 64:
        return logits.transpose(dim, -1).contiguous().argmax(dim=-1)
    return logits.argmax(dim=dim)


class _Stream:
    """numpy's legacy stream seeded like np.random.seed(seed), shared by problems of one train size."""

    def __init__(self, seed, n, split):
        self.rng = np.random.RandomState(seed)
        self.split_perm = self.rng.permutation(n) if split else None
        self.n_train = n - int(VALIDATION_SPLIT * n) if split else n
        self.current = None

    def next_pass(self):
        self.current = self.rng.permutation(self.n_train)


def initial_params(seed, dim, nclasses, nhid, device):
    """Weights as nn.Linear initialises them right after torch.manual_seed(seed), as (in, out).

    Only the CPU generator is seeded (nn.Linear draws there), and fork_rng restores its state:
    the process's random state, CPU or CUDA, is the same after the call as before."""
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)
        if nhid == 0:
            layers = [torch.nn.Linear(dim, nclasses)]
        else:
            layers = [torch.nn.Linear(dim, nhid), torch.nn.Linear(nhid, nclasses)]
    out = []
    for layer in layers:
        out += [layer.weight.detach().t().contiguous().to(device), layer.bias.detach().to(device)]
    return out


def _stack(init, G, R):
    """Every problem starts from the same initial weights, in the stacked output-major layout."""
    stacked = []
    for p in init:
        p = p.t() if p.dim() == 2 else p
        stacked.append(p.expand((G, R) + tuple(p.shape)).contiguous())
    return stacked


def _per_problem_shapes(params):
    """Shapes that broadcast a (G, R) per-problem value over each parameter tensor."""
    return [tuple(p.shape[:2]) + (1,) * (p.dim() - 2) for p in params]


def _forward(params, x, nhid, keep=None):
    """x (G, B, D) -> [hidden activations..., logits], sample-last: (G, R, H, B) and (G, R, C, B).

    Products are taken as W @ x^T, which keeps the batch as the long inner dimension of every
    matmul (faster for these thin problems) and lets the weight gradient be dz @ x without a
    transpose. keep: dropout mask/scale (G, R, H, B).
    """
    w1, b1 = params[0], params[1]
    G, R, H, D = w1.shape
    B = x.shape[1]
    z = torch.baddbmm(b1.reshape(G, R * H, 1), w1.reshape(G, R * H, D), x.transpose(1, 2)).reshape(G, R, H, B)
    if nhid == 0:
        return [z]
    if keep is not None:
        z = z * keep
    hidden = torch.sigmoid(z)
    C = params[3].shape[2]
    logits = torch.baddbmm(params[3].reshape(G * R, C, 1), params[2].reshape(G * R, C, H), hidden.reshape(G * R, H, B))
    return [hidden, logits.reshape(G, R, C, B)]


def _gradients(params, x, target, weight, nhid, keep):
    """Gradients of the mean cross-entropy of every problem: the gradient at the logits is
    softmax * weight - target, with weight (G, B) = valid / batch count and target (G, C, B) the
    one-hot labels times that weight."""
    outputs = _forward(params, x, nhid, keep)
    dz = torch.softmax(outputs[-1], dim=2).mul_(weight[:, None, None]).sub_(target[:, None])
    G, R, C, B = dz.shape
    if nhid == 0:
        return [torch.bmm(dz.reshape(G, R * C, B), x).reshape(G, R, C, -1), dz.sum(dim=-1)]
    hidden = outputs[0]
    grad_w2 = torch.matmul(dz, hidden.transpose(-1, -2))
    dh = torch.matmul(params[2].transpose(-1, -2), dz) * hidden * (1 - hidden)
    if keep is not None:
        dh = dh * keep
    H = dh.shape[2]
    grad_w1 = torch.bmm(dh.reshape(G, R * H, B), x).reshape(G, R, H, -1)
    return [grad_w1, dh.sum(dim=-1), grad_w2, dz.sum(dim=-1)]


def _pad(arrays, fill=0):
    """Stack int arrays of unequal length into (len(arrays), max) plus a validity mask."""
    width = max((len(a) for a in arrays), default=0)
    out = np.full((len(arrays), width), fill, dtype=np.int64)
    valid = np.zeros((len(arrays), width), dtype=bool)
    for i, a in enumerate(arrays):
        out[i, : len(a)] = a
        valid[i, : len(a)] = True
    return out, valid


def _accuracy(params, features, labels, eval_idx, eval_valid, nhid):
    """Accuracy (G, R) of every problem on its group's evaluation samples."""
    g_total = eval_idx.shape[0]
    r = params[1].shape[1]
    per_group = max(1, eval_idx.shape[1]) * features.dim * 4
    chunk = max(1, EVAL_CHUNK_BYTES // per_group)
    correct = torch.zeros((g_total, r), dtype=torch.float64, device=labels.device)
    with torch.no_grad():
        for lo in range(0, g_total, chunk):
            idx = eval_idx[lo : lo + chunk]
            logits = _forward([p[lo : lo + chunk] for p in params], features(idx), nhid)[-1]
            hit = (_argmax(logits, dim=2) == labels[idx][:, None]) & eval_valid[lo : lo + chunk][:, None]
            correct[lo : lo + chunk] = hit.sum(dim=-1).double()
    return correct / eval_valid.sum(dim=1, keepdim=True).clamp(min=1).double()


def train(features, labels, nclasses, groups, regs, classifier, seed, device, dropouts=None, progress=None):
    """Train every (group, reg) problem with SentEval's protocol; return their best models.

    features: callable idx -> (..., D) float32 on device; labels: int64 tensor (N,) on device;
    groups: list of Group; regs: weight decays, (R,) for every group or (G, R); classifier: its
    embeval.settings.ClassifierSettings; dropouts: a dropout rate per column r (default: the classifier's).
    """
    nhid, batch = classifier.nhid, classifier.batch_size
    tenacity, epoch_size, max_epoch = classifier.tenacity, classifier.epoch_size, classifier.max_epoch
    optim_name, optim_settings = parse(classifier.optim)
    regs = np.array(np.broadcast_to(np.asarray(regs, dtype=np.float64), (len(groups), np.shape(regs)[-1])))
    G, R = regs.shape
    rates = classifier.dropout if dropouts is None else dropouts
    dropout = np.array(np.broadcast_to(np.asarray(rates, dtype=np.float64), (R,)))

    streams, stream_of, train_sets, eval_sets = {}, [], [], []
    for grp in groups:
        split = grp.valid is None
        key = (len(grp.train), split)
        if key not in streams:
            streams[key] = _Stream(seed, len(grp.train), split)
        stream = streams[key]
        stream_of.append(stream)
        if split:
            cut = int(VALIDATION_SPLIT * len(grp.train))
            eval_sets.append(np.asarray(grp.train)[stream.split_perm[:cut]])
            train_sets.append(np.asarray(grp.train)[stream.split_perm[cut:]])
        else:
            eval_sets.append(np.asarray(grp.valid))
            train_sets.append(np.asarray(grp.train))
    eval_idx, eval_valid = (torch.as_tensor(a, device=device) for a in _pad(eval_sets))

    params = _stack(initial_params(seed, features.dim, nclasses, nhid, device), G, R)
    best = [p.clone() for p in params]
    shapes = _per_problem_shapes(params)
    weight_decay = torch.as_tensor(regs, dtype=torch.float32, device=device)
    optimizer = BatchedOptimizer(optim_name, params, weight_decay, optim_settings, shapes)
    dropout_rng = torch.Generator(device=device).manual_seed(seed) if nhid and dropout.any() else None
    dropout = torch.as_tensor(dropout, dtype=torch.float32, device=device)
    onehot = torch.eye(nclasses, device=device)
    chunk = max(1, STEP_CHUNK_BYTES // (batch * features.dim * 4))

    passes_done = [0]

    def train_round(running):
        active = np.flatnonzero(running.any(axis=1))
        passes = []
        for _ in range(epoch_size):
            for stream in {id(s): s for s in (stream_of[g] for g in active)}.values():
                stream.next_pass()
            passes.append([train_sets[g][stream_of[g].current] for g in active])
        for lo in range(0, len(active), chunk):
            part = torch.as_tensor(active[lo : lo + chunk], device=device)
            sub = [p[part] for p in params]
            sub_opt = optimizer.select(part, active[lo : lo + chunk])
            plan = _RoundPlan([orders[lo : lo + chunk] for orders in passes], batch, device)
            for p in range(len(passes)):
                _train_pass(sub, sub_opt, plan, p, features, labels, onehot, batch, nhid, dropout_rng, dropout)
            for full, trained in zip(params, sub):
                full[part] = trained
            optimizer.put(part, active[lo : lo + chunk], sub_opt)
        passes_done[0] += epoch_size

    def score():
        return _accuracy(params, features, labels, eval_idx, eval_valid, nhid).cpu().numpy()

    def keep_best(improved, stopping):
        mask = torch.as_tensor(improved, device=device)
        for b, p, shape in zip(best, params, shapes):
            b.copy_(torch.where(mask.reshape(shape), p, b))
        if progress:
            progress(passes_done[0], int(stopping.running.sum()), G * R)

    with threads.fair_share(device) as check:

        def paced_round(running):
            check()
            train_round(running)

        stopping, _ = rounds.run(paced_round, score, keep_best, (G, R), tenacity, epoch_size, max_epoch)
    return Trained(best, stopping.best, stopping.rounds, nhid)


class _RoundPlan:
    """The batches of every pass of one round for a chunk of groups, moved to the device at once.

    idx, valid: (passes, G, steps, batch) sample indices and their validity; has_batch: whether a
    group has any sample at a step, on the host (it decides masking without asking the device) and
    on the device (the mask itself)."""

    def __init__(self, passes, batch, device):
        padded = [_pad(orders) for orders in passes]
        width = max(idx.shape[1] for idx, _ in padded)
        self.steps = -(-width // batch)
        G = len(passes[0])
        idx = np.zeros((len(passes), G, self.steps * batch), dtype=np.int64)
        valid = np.zeros(idx.shape, dtype=bool)
        for p, (i, v) in enumerate(padded):
            idx[p, :, : i.shape[1]], valid[p, :, : v.shape[1]] = i, v
        idx, valid = idx.reshape(len(passes), G, self.steps, batch), valid.reshape(len(passes), G, self.steps, batch)
        self.has_batch = valid.any(axis=3)
        (packed,) = to_device([np.stack([idx, valid])], device)  # one copy: indices and validity
        self.idx, self.valid = packed[0], packed[1].bool()
        self.has_batch_device = self.valid.any(dim=3)


def _train_pass(params, optimizer, plan, p, features, labels, onehot, batch, nhid, dropout_rng, dropout):
    """Pass p of the round's plan: one pass over every active group's permuted train set, in
    lockstep batches.

    Problems that already stopped keep moving with their group: their best weights are saved and
    nothing reads their current ones again. Only a group that has no batch at a step (it has fewer
    samples than another group) is held still at that step.
    """
    device = params[0].device
    idx_t, valid_t, has_batch = plan.idx[p], plan.valid[p], plan.has_batch[p]
    G, steps = has_batch.shape
    counts = valid_t.sum(dim=2)
    weights = valid_t / counts.clamp(min=1)[..., None]
    targets = (onehot[labels[idx_t]] * weights[..., None]).transpose(2, 3).contiguous()
    R = params[1].shape[1]
    buffer = torch.empty((G * batch, features.dim), device=device)
    for s in range(steps):
        i = idx_t[:, s]
        x = features(i, out=buffer)
        keep = None
        if dropout_rng is not None:
            H = params[1].shape[2]
            keep = (
                (torch.rand((G, batch, R, H), generator=dropout_rng, device=device) >= dropout[:, None])
                / (1 - dropout[:, None])
            ).permute(0, 2, 3, 1)
        grads = _gradients(params, x, targets[:, s], weights[:, s], nhid, keep)
        if has_batch[:, s].all():
            optimizer.step(params, grads)
        else:
            optimizer.step(params, grads, plan.has_batch_device[p, :, s, None].expand(G, R), has_batch[:, s])
