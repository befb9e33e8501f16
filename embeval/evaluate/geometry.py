"""Geometry of an encoder's sentence vectors (Wang & Isola, 2020; Gao et al., 2021, SimCSE).

Computed on STSBenchmark (all three splits), on L2-normalized vectors f(x):
- alignment = mean over positive pairs of ||f(x) - f(y)||^2, the positives being the pairs with a
  gold score >= 4 (lower is better: similar sentences lie close);
- uniformity = log of the mean over pairs of distinct sentences of exp(-2 ||f(x) - f(y)||^2),
  over a fixed-seed sample of at most 2,000 of the task's distinct sentences (lower is better:
  the vectors spread over the sphere);
- the singular values of the centred table of the task's distinct sentences (raw vectors), and
  its effective rank exp(entropy of the normalized singular values) (Roy & Vetterli, 2007).
"""

import numpy as np
import torch

POSITIVE = 4.0
SAMPLE = 2000
SPLITS = ("train", "dev", "test")


def _unit(x):
    x = x.double()
    norms = x.norm(dim=1, keepdim=True)
    return torch.where(norms > 0, x / torch.where(norms > 0, norms, torch.ones_like(norms)), x)


def alignment(u, v):
    """Mean squared distance of the L2-normalized pairs (u_i, v_i)."""
    if len(u) == 0:
        return float("nan")
    return float(((_unit(u) - _unit(v)) ** 2).sum(1).mean())


def uniformity(x, sample=SAMPLE, seed=1111):
    """log mean exp(-2 ||f(x_i) - f(x_j)||^2) over pairs i < j of a seeded sample of rows."""
    n = len(x)
    if n < 2:
        return float("nan"), n
    rows = np.sort(np.random.default_rng(seed).choice(n, size=min(n, sample), replace=False))
    z = _unit(x[torch.as_tensor(rows, device=x.device)])
    sq = (2 - 2 * z @ z.t()).clamp(min=0)
    i, j = torch.triu_indices(len(z), len(z), offset=1, device=z.device)
    values = -2 * sq[i, j]
    return float(torch.logsumexp(values, 0) - np.log(len(values))), len(rows)


def spectrum(x):
    """Singular values (descending) of the centred table, float64."""
    x = x.double()
    centred = x - x.mean(0, keepdim=True)
    return torch.linalg.svdvals(centred).cpu().numpy()


def effective_rank(singular_values):
    s = np.asarray(singular_values, dtype=np.float64)
    s = s[s > 0]
    if len(s) == 0:
        return 0.0
    p = s / s.sum()
    return float(np.exp(-(p * np.log(p)).sum()))


def diagnostics(table, data, rows, seed):
    """The geometry record of one encoder from a relatedness task's table, data and rows."""
    u, v = [], []
    for name in SPLITS:
        gold = np.asarray(data.splits[name].y, dtype=np.float64)
        ia, ib = rows[name]
        keep = torch.as_tensor(np.flatnonzero(gold >= POSITIVE), device=table.device)
        u.append(table[torch.as_tensor(ia, device=table.device)[keep]])
        v.append(table[torch.as_tensor(ib, device=table.device)[keep]])
    u, v = torch.cat(u), torch.cat(v)
    uniform, sampled = uniformity(table, seed=seed)
    values = spectrum(table)
    return {
        "task": data.name,
        "alignment": alignment(u, v),
        "positive_pairs": int(len(u)),
        "positive_threshold": POSITIVE,
        "uniformity": uniform,
        "uniformity_sample": sampled,
        "sample_seed": seed,
        "singular_values": values.tolist(),
        "effective_rank": effective_rank(values),
        "sentences": int(len(table)),
        "dim": int(table.shape[1]),
    }
