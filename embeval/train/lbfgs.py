"""Exact logistic regression for many problems at once (`--solver lbfgs`).

Each problem minimises scikit-learn's LogisticRegression objective,
    C * sum_i loss_i(W, b) + 1/2 ||W||^2        (intercept not penalised),
with the binomial (logistic) loss for two classes and the multinomial loss otherwise, exactly as
scikit-learn >= 0.22 with the lbfgs solver. Problems sharing a pool of samples (cross-validation
folds, the regularization grid) are solved together: the scores of every problem are one matrix
product of the pool's features with the stacked weights, and so are the gradients. A batched
L-BFGS with a backtracking line search, preconditioned by the pool's Gram matrix, runs each
problem to a tight gradient tolerance in float32; a float64 phase then checks that tolerance in
exact arithmetic and polishes what float32 could not reach, continuing from the float32 phase's
curvature pairs. The result is the optimum, not an iteration-capped approximation.
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse
import scipy.sparse.csgraph
import torch

from embeval import threads
from embeval.train.features import dense_budget

BLOCK_BYTES = 256 << 20
HISTORY = 10
NOISE_WINDOW = 100


class Objective:
    """The batched objective of problems (g, r): rows of group g's train set, penalty C[g, r]."""

    def __init__(self, features, labels, nclasses, train_sets, C, device):
        pool = np.unique(np.concatenate(train_sets))
        self.features = features
        self.pool = torch.as_tensor(pool, device=device)
        self.k = 1 if nclasses == 2 else nclasses
        self.nclasses = nclasses
        y = labels[self.pool]
        self.labels = y
        self.target = (y == 1).double()[:, None] if self.k == 1 else None
        share = torch.bincount(y, minlength=nclasses).double() / max(len(y), 1)
        self.frequencies = share[1:] if self.k == 1 else share  # (k,) the pool's class shares
        member = np.zeros((len(pool), len(train_sets)), dtype=bool)
        for g, rows in enumerate(train_sets):
            member[np.searchsorted(pool, rows), g] = True
        self.member = torch.as_tensor(member, device=device)
        self.n = self.member.sum(dim=0).double()
        G, R = C.shape
        self.group = torch.arange(G, device=device).repeat_interleave(R)
        self.C = torch.as_tensor(C, dtype=torch.float64, device=device).reshape(-1)
        self.dim = features.dim
        self.device = device
        self._dense = None
        rows_per_block = max(1024, BLOCK_BYTES // (4 * max(self.dim, 1)))
        self.blocks = [slice(i, i + rows_per_block) for i in range(0, len(pool), rows_per_block)]
        if len(pool) * self.dim * 4 <= dense_budget(self.pool.device):
            self._dense = features(self.pool)

    def rows(self, block, stride=1):
        """Features of the pool's rows in `block`, every stride-th one."""
        if self._dense is not None:
            return self._dense[block][::stride]
        return self.features(self.pool[block][::stride])

    def __call__(self, theta, problems, dtype):
        """Mean-scaled objective and gradient of problems (P,) at theta (P, D+1, k).

        Scores are laid out class-major, (rows, k, P): the reductions over the classes then run
        across contiguous rows of P values, which is an order of magnitude faster than over a
        short innermost class axis."""
        P = len(problems)
        D, k = self.dim, self.k
        groups = self.group[problems]
        scale = 1.0 / self.n[groups]  # (P,)
        w_rows = theta[:, :D, :].to(dtype).permute(2, 0, 1).reshape(k * P, D)
        bias = theta[:, D, :].to(dtype).t().reshape(1, k * P)
        value = torch.zeros(P, dtype=torch.float64, device=self.device)
        grad_w = torch.zeros((k * P, D), dtype=dtype, device=self.device)
        grad_b = torch.zeros((k, P), dtype=torch.float64, device=self.device)
        for block in self.blocks:
            x = self.rows(block).to(dtype)
            z = torch.addmm(bias, x, w_rows.t()).reshape(-1, k, P)
            weight = (self.member[block][:, groups].to(dtype) * scale.to(dtype))[:, None, :]
            if k == 1:
                target = self.target[block][:, :, None].to(dtype)
                loss = torch.nn.functional.softplus(z) - target * z
                dz = torch.sigmoid(z) - target
            else:
                label = self.labels[block][:, None, None].expand(-1, 1, P)
                log_p = torch.log_softmax(z, dim=1)
                loss = -log_p.gather(1, label)
                dz = log_p.exp_().scatter_add_(1, label, torch.full_like(loss, -1.0))
            value += (loss * weight).sum(dim=(0, 1)).double()
            residual = dz.mul_(weight)
            grad_w += residual.reshape(-1, k * P).t() @ x
            grad_b += residual.sum(dim=0).double()
        penalty = scale / self.C[problems]
        w64 = theta[:, :D, :].double()
        value += 0.5 * penalty * (w64**2).sum(dim=(1, 2))
        grad = torch.empty((P, D + 1, k), dtype=torch.float64, device=self.device)
        grad[:, :D, :] = grad_w.reshape(k, P, D).permute(1, 2, 0).double() + penalty[:, None, None] * w64
        grad[:, D, :] = grad_b.t()
        return value, grad


class Preconditioner:
    """An approximate inverse Hessian shared by all problems of a pool, as L-BFGS's initial matrix.

    The Hessian of problem p is close to (X'X / N) kron A + I / (C n), where A is the curvature of
    the loss over the classes at a model that predicts the class frequencies q (q1 (1 - q1) for the
    logistic loss, diag(q) - q q' for the softmax). One eigendecomposition of the pool's X'X / N and
    one of A serve every problem and every C. Past MAX_EIGH_DIM features only X'X's diagonal is used.
    A large pool's X'X / N is estimated on evenly strided rows, about GRAM_ROWS_PER_FEATURE per
    feature: the preconditioner only shapes the search direction, not the optimum.
    """

    MAX_EIGH_DIM = 4096
    GRAM_ROWS_PER_FEATURE = 32

    def __init__(self, objective):
        self.objective = objective
        D = objective.dim
        full = D <= self.MAX_EIGH_DIM
        gram = torch.zeros((D, D) if full else (D,), dtype=torch.float64, device=objective.device)
        stride = max(1, len(objective.pool) // (self.GRAM_ROWS_PER_FEATURE * max(D, 1)))
        used = 0
        for block in objective.blocks:
            x = objective.rows(block, stride)
            gram += (x.t() @ x if full else (x * x).sum(dim=0)).double()
            used += x.shape[0]
        gram /= max(used, 1)
        q = objective.frequencies
        curvature = q * (1 - q) if objective.k == 1 else torch.diag(q) - torch.outer(q, q)
        self.class_values, self.class_vectors = torch.linalg.eigh(curvature.reshape(objective.k, objective.k))
        self.class_values = self.class_values.clamp(min=0)
        if full:
            self.values, vectors = torch.linalg.eigh(gram)
            self.values, self.vectors = self.values.clamp(min=0), vectors.float()
        else:
            self.values, self.vectors = gram, None

    def apply(self, q, problems):
        """M^-1 q for vectors q (P, D+1, k) of problems (P,); the bias row has X'X's value 1.

        The change of basis runs in float32 on rows (P * k, D): M^-1 only shapes the search
        direction, so its rounding does not move the optimum the search converges to."""
        obj = self.objective
        D = obj.dim
        P, k = q.shape[0], q.shape[2]
        ridge = 1.0 / (obj.C[problems] * obj.n[obj.group[problems]])
        ones = torch.ones(1, dtype=torch.float64, device=q.device)
        values = torch.cat([self.values, ones])  # (D+1,)
        scale = 1.0 / (values[None, :, None] * self.class_values[None, None, :] + ridge[:, None, None])
        scale[:, D, :] = 1.0 / self.class_values.clamp(min=1e-3)
        z = q @ self.class_vectors  # into the class eigenbasis
        out = z * scale
        if self.vectors is not None:
            rows = z[:, :D, :].transpose(1, 2).reshape(P * k, D).float() @ self.vectors
            rows = (rows.double() * scale[:, :D, :].transpose(1, 2).reshape(P * k, D)).float() @ self.vectors.t()
            out[:, :D, :] = rows.double().reshape(P, k, D).transpose(1, 2)
        return out @ self.class_vectors.t()


def predict(theta, x):
    """Classes predicted by models theta (R, D+1, k) for features x (n, D): (n, R)."""
    D = x.shape[1]
    z = torch.einsum("nd,rdk->nrk", x.double(), theta[:, :D, :].double()) + theta[None, :, D, :].double()
    if z.shape[-1] == 1:
        return (z[..., 0] > 0).long()
    return z.argmax(dim=-1)


def _two_loop(grad, S, Y, rho, newest, count, precondition):
    """L-BFGS direction -H g for every problem; history slots with rho 0 are skipped.

    H's initial matrix is gamma * M^-1 (the preconditioner), gamma = s'y / y'M^-1 y of the newest pair.
    """
    q = grad.clone()
    m = S.shape[0]
    alphas = []
    order = [(newest - i) % m for i in range(min(count, m))]
    for j in order:
        a = rho[j] * (S[j] * q).sum(dim=1)
        q -= a[:, None] * Y[j]
        alphas.append(a)
    r = precondition(q)
    if order:
        j = order[0]
        yhy = (Y[j] * precondition(Y[j])).sum(dim=1)
        ok = (rho[j] > 0) & (yhy > 0)
        gamma = torch.where(ok, 1.0 / (rho[j] * yhy).clamp(min=1e-300), torch.ones_like(yhy))
        r *= gamma[:, None]
    for j, a in zip(reversed(order), reversed(alphas)):
        b = rho[j] * (Y[j] * r).sum(dim=1)
        r += (a - b)[:, None] * S[j]
    return -r


def _identity(q):
    return q


@dataclass
class History:
    """The curvature pairs (s, y) of every problem in a ring of HISTORY slots, and the ring's position."""

    S: torch.Tensor  # (HISTORY, P, n)
    Y: torch.Tensor
    rho: torch.Tensor  # (HISTORY, P); 0 marks an empty or skipped slot
    newest: int = -1
    count: int = 0

    @classmethod
    def empty(cls, P, n, device):
        S = torch.zeros((HISTORY, P, n), dtype=torch.float64, device=device)
        return cls(S, torch.zeros_like(S), torch.zeros((HISTORY, P), dtype=torch.float64, device=device))


def minimize(
    objective, theta, problems, dtype, gtol, max_iter, preconditioner=None, progress=None, history=None, pace=None
):
    """Batched L-BFGS with Armijo backtracking; returns theta, iterations, convergence flags and
    the curvature history, which a later call (the float64 polish) continues from.

    In float32 the sufficient-decrease test allows the objective's rounding noise (a relative
    1e-6), so noise does not stall the search, and a problem whose largest gradient entry has not
    improved for NOISE_WINDOW iterations has reached float32's noise floor (features of large
    magnitude) and is handed on; the float64 phase that follows uses the exact test.

    pace: called before every iteration (the thread share's check, embeval.threads.fair_share).

    Every test stays on the device; the host asks it one question per iteration (did a trial
    step fail, did a problem finish) and a second only when the answer is yes: the indices of
    the problems still pending or still running.
    """
    slack = 1e-6 if dtype == torch.float32 else 0.0
    P = len(problems)
    shape = theta.shape[1:]
    device = theta.device
    x = theta.reshape(P, -1).double().clone()
    result = x.clone()
    iterations = torch.zeros(P, dtype=torch.int64, device=device)
    converged = torch.zeros(P, dtype=torch.bool, device=device)
    active = torch.arange(P, device=device)
    f, g = objective(x.reshape((P,) + shape), problems, dtype)
    g = g.reshape(P, -1)
    memory = history if history is not None else History.empty(P, x.shape[1], x.device)
    S, Y, rho, newest, count = memory.S, memory.Y, memory.rho, memory.newest, memory.count
    best = g.abs().amax(dim=1)
    since_best = torch.zeros_like(best)
    done = best <= gtol
    some_done = bool(done.any())
    for it in range(max_iter):
        if pace is not None:
            pace()
        if some_done:
            keep = (~done).nonzero()[:, 0]
            if len(keep) == 0:
                break
            converged.index_copy_(0, active, done)
            result.index_copy_(0, active, x)
            if S is not memory.S:
                memory.S.index_copy_(1, active, S)
                memory.Y.index_copy_(1, active, Y)
                memory.rho.index_copy_(1, active, rho)
            active, x, f, g = active[keep], x[keep], f[keep], g[keep]
            best, since_best = best[keep], since_best[keep]
            S, Y, rho = S[:, keep], Y[:, keep], rho[:, keep]
        sub = problems[active]
        if preconditioner is None:
            precondition = _identity
        else:

            def precondition(q, sub=sub):
                return preconditioner.apply(q.reshape((len(sub),) + shape), sub).reshape(len(sub), -1)

        direction = _two_loop(g, S, Y, rho, newest, count, precondition)
        slope = (direction * g).sum(dim=1)
        bad = slope >= 0
        direction = torch.where(bad[:, None], -g, direction)
        slope = torch.where(bad, -(g**2).sum(dim=1), slope)
        step = torch.ones_like(f)
        if count == 0 and preconditioner is None:
            step = torch.minimum(step, 1.0 / g.abs().sum(dim=1).clamp(min=1e-12))
        trial = x + step[:, None] * direction
        f_new, g_new = objective(trial.reshape((len(sub),) + shape), sub, dtype)
        g_new = g_new.reshape(len(sub), -1)
        ok = f_new <= f + 1e-4 * step * slope + slack * f.abs()
        x_new = torch.where(ok[:, None], trial, x)
        f_new, g_new = torch.where(ok, f_new, f), torch.where(ok[:, None], g_new, g)
        pending = ~ok
        step = torch.where(ok, step, step * 0.5)
        largest, done = _finished(f, f_new, g_new, pending, best, since_best, gtol, dtype)
        any_pending, some_done = torch.stack([pending.any(), done.any()]).tolist()
        if any_pending:
            for _ in range(39):
                idx = pending.nonzero()[:, 0]
                if len(idx) == 0:
                    break
                trial = x[idx] + step[idx, None] * direction[idx]
                f_t, g_t = objective(trial.reshape((len(idx),) + shape), sub[idx], dtype)
                ok = f_t <= f[idx] + 1e-4 * step[idx] * slope[idx] + slack * f[idx].abs()
                x_new[idx] = torch.where(ok[:, None], trial, x_new[idx])
                f_new[idx] = torch.where(ok, f_t, f_new[idx])
                g_new[idx] = torch.where(ok[:, None], g_t.reshape(len(idx), -1), g_new[idx])
                pending[idx] = ~ok
                step[idx] = torch.where(ok, step[idx], step[idx] * 0.5)
            largest, done = _finished(f, f_new, g_new, pending, best, since_best, gtol, dtype)
            some_done = bool(done.any())
        newest = (newest + 1) % HISTORY
        count += 1
        s, y = x_new - x, g_new - g
        sy = (s * y).sum(dim=1)
        S[newest], Y[newest] = s, y
        rho[newest] = torch.where(
            sy > 1e-12 * (y * y).sum(dim=1).clamp(min=1e-300), 1.0 / sy.clamp(min=1e-300), torch.zeros_like(sy)
        )
        x, f, g = x_new, f_new, g_new
        iterations[active] += 1
        since_best = torch.where(largest < best, torch.zeros_like(since_best), since_best + 1)
        best = torch.minimum(best, largest)
        if progress:
            progress(it, int((~done).sum()))
    converged[active] = done
    result[active] = x
    if S is not memory.S:
        memory.S[:, active], memory.Y[:, active], memory.rho[:, active] = S, Y, rho
    memory.newest, memory.count = newest, count
    return result.reshape(theta.shape), iterations.cpu().numpy(), converged.cpu().numpy(), memory


def _finished(f, f_new, g_new, pending, best, since_best, gtol, dtype):
    """(largest gradient entry, done) of every problem after a step: done when
    the gradient is within gtol, the line search failed, the objective stopped changing, or (in
    float32) the gradient has not improved for NOISE_WINDOW iterations."""
    largest = g_new.abs().amax(dim=1)
    small_change = (f - f_new).abs() <= 1e-15 * f.abs().clamp(min=1e-300)
    done = (largest <= gtol) | pending | small_change
    if dtype == torch.float32:
        done |= torch.where(largest < best, torch.zeros_like(since_best), since_best + 1) >= NOISE_WINDOW
    return largest, done


GTOL_FLOAT32 = 1e-7
GTOL_FLOAT64 = 1e-7
MAX_ITER = 5000


def fit(features, labels, nclasses, train_sets, C, device, gtol32=GTOL_FLOAT32, gtol64=GTOL_FLOAT64, max_iter=MAX_ITER):
    """Solve every problem (g, r) exactly; return theta (G, R, D+1, k) float64, iterations, converged.

    The stopping test is the largest absolute gradient entry of the mean-scaled objective
    (loss / n + ||W||^2 / (2 C n)), scikit-learn's own `tol` test: first gtol32 in float32
    arithmetic, then gtol64 in float64, with no iteration cap short of max_iter. With both at
    1e-7 the float64 phase is mostly a check of one or a few evaluations: float32 iterations are
    several times cheaper, and float32 gradients are accurate well below 1e-7 here.
    """
    C = np.asarray(C, dtype=np.float64)
    G, R = C.shape
    k = 1 if nclasses == 2 else nclasses
    theta = torch.zeros((G, R, features.dim + 1, k), dtype=torch.float64, device=device)
    iterations = np.zeros((G, R), dtype=np.int64)
    converged = np.zeros((G, R), dtype=bool)
    with threads.fair_share(device) as pace:
        for part in separate_pools(train_sets):
            sets = [train_sets[g] for g in part]
            objective = Objective(features, labels, nclasses, sets, C[part], device)
            preconditioner = Preconditioner(objective)
            problems = torch.arange(len(part) * R, device=device)
            start = torch.zeros((len(problems), features.dim + 1, k), dtype=torch.float64, device=device)
            found, it32, _, history = minimize(
                objective, start, problems, torch.float32, gtol32, max_iter, preconditioner, pace=pace
            )
            found, it64, done, _ = minimize(
                objective, found, problems, torch.float64, gtol64, max_iter, preconditioner, history=history, pace=pace
            )
            theta[torch.as_tensor(part, device=device)] = found.reshape(len(part), R, features.dim + 1, k)
            iterations[part] = (it32 + it64).reshape(len(part), R)
            converged[part] = done.reshape(len(part), R)
    return theta, iterations, converged


def separate_pools(train_sets):
    """The groups split into sets that share no sample with one another (sorted group indices).

    Each set is solved on its own pool: problems on disjoint samples (the fold-normalized copies
    of --normalize zscore) would otherwise each be scored on every other set's rows too."""
    G = len(train_sets)
    if G <= 1:
        return [np.arange(G)]
    rows = np.concatenate([np.asarray(t, dtype=np.int64) for t in train_sets])
    cols = np.repeat(np.arange(G), [len(t) for t in train_sets])
    width = int(rows.max()) + 1 if len(rows) else 1
    member = scipy.sparse.csr_matrix((np.ones(len(rows), dtype=np.int64), (cols, rows)), shape=(G, width))
    shared = (member @ member.T) > 0
    count, label = scipy.sparse.csgraph.connected_components(shared, directed=False)
    return [np.flatnonzero(label == c) for c in range(count)]
