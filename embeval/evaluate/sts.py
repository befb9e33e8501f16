"""Cosine STS: per-subset Pearson and Spearman, and the mean, wmean and pooled aggregations."""
import numpy as np
import torch
from scipy.stats import pearsonr, spearmanr

from embeval.evaluate import normalize
from embeval.formats import predictions


def cosine(table, ia, ib):
    """cos(u, v) per pair, computed as SentEval does: float32 dot / (norm * norm), NaN -> 0.

    Pairs of identical sentences have a true cosine of 1 that float32 rounding spreads over a few
    ulps; computing exactly as SentEval does breaks those ties the same way, so Spearman agrees.
    """
    x = table.detach().cpu().numpy() if isinstance(table, torch.Tensor) else np.asarray(table, np.float32)
    out = np.empty(len(ia), dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        for k, (i, j) in enumerate(zip(ia, ib)):
            u, v = x[i], x[j]
            out[k] = np.nan_to_num(np.dot(u, v) / (np.linalg.norm(u) * np.linalg.norm(v)))
    return out


def correlations(system, gold):
    """(Pearson r, Spearman rho); NaN when either side is constant."""
    system, gold = np.asarray(system, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    if len(system) < 2 or np.ptp(system) == 0 or np.ptp(gold) == 0:
        return float("nan"), float("nan")
    return float(pearsonr(system, gold)[0]), float(spearmanr(system, gold)[0])


def aggregate(per_subset, pooled_system, pooled_gold):
    """SentEval's `all` entry (mean, wmean) plus `pooled`: one correlation over all pairs."""
    weights = np.array([r["nsamples"] for r in per_subset.values()], dtype=np.float64)
    pooled = correlations(pooled_system, pooled_gold)
    out = {}
    for i, coef in enumerate(("pearson", "spearman")):
        values = np.array([r[coef] for r in per_subset.values()], dtype=np.float64)
        out[coef] = {"mean": float(np.mean(values)), "wmean": float(np.average(values, weights=weights)),
                     "pooled": pooled[i]}
    return out


def subset_scores(table, ctx):
    """Per subset {pearson, spearman, nsamples}, SentEval's `all`, and the prediction set of every pair."""
    results, systems, golds, groups = {}, [], [], []
    for g, (name, split) in enumerate(ctx.data.splits.items()):
        ia, ib = ctx.rows[name]
        system = cosine(table, ia, ib)
        pearson, spearman = correlations(system, split.y)
        results[name] = {"pearson": pearson, "spearman": spearman, "nsamples": len(split)}
        systems.append(system)
        golds.append(split.y)
        groups.append(np.full(len(split), g))
    results["all"] = aggregate(results, np.concatenate(systems), np.concatenate(golds))
    pset = predictions.scores(np.concatenate(golds), np.concatenate(systems), np.concatenate(groups),
                              order="subsets in file order, pairs in file order")
    return results, pset


def evaluate_cosine_sts(ctx):
    """STS12–16: every subset scored by cosine; SentEval's layout with `pooled` added to `all`.

    With a normalization, the same figures on normalized vectors under `normalized` (statistics
    from STSBenchmark's train split, embeval.evaluate.normalize), beside the raw ones."""
    results, pset = subset_scores(ctx.table, ctx)
    ctx.keep("all", pset)
    if ctx.normalize != "none":
        method, tuned = ctx.normalize, None
        if method == "tune":
            tuned = {m: dev_spearman(ctx.reference, m) for m in normalize.METHODS}
            method = max(tuned, key=lambda m: (tuned[m], -normalize.METHODS.index(m)))
        normalizer = normalize.for_task(ctx, method)
        normalized, npset = subset_scores(normalizer(ctx.table), ctx)
        info = normalize.summary(ctx, method)
        if tuned is not None:
            info["tuned_on"] = f"{ctx.task.statistics_from} dev cosine Spearman"
            info["dev"] = tuned
        results["normalized"] = dict(info, **normalized)
        ctx.keep("normalized.all", npset)
    return results


def dev_spearman(reference, method):
    """Cosine Spearman on the reference task's dev split under a normalization fitted on its train split."""
    if reference is None:
        raise ValueError("tuning the normalization of cosine STS needs the reference task's vectors")
    normalizer = normalize.for_task(reference, method)
    ia, ib = reference.rows["dev"]
    return correlations(cosine(normalizer(reference.table), ia, ib), reference.data.splits["dev"].y)[1]


def cosine_on_test(ctx, table=None):
    """Cosine Pearson/Spearman of the test split (SimCSE's unsupervised STS-B / SICK-R protocol),
    and the prediction set of the test pairs (file order)."""
    ia, ib = ctx.rows["test"]
    gold = ctx.data.splits["test"].y
    system = cosine(ctx.table if table is None else table, ia, ib)
    pearson, spearman = correlations(system, gold)
    return {"pearson": pearson, "spearman": spearman, "nsamples": len(ia)}, predictions.scores(gold, system)
