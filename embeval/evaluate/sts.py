"""Cosine STS: per-subset Pearson and Spearman, and the mean, wmean and pooled aggregations."""

import numpy as np
import torch
from scipy.stats import pearsonr, spearmanr

from embeval.evaluate import normalize
from embeval.formats import predictions

_CHUNK_VALUES = 1 << 22  # float64 values per side held at once (32 MiB)


def cosine(table, ia, ib):
    """cos(u, v) per pair (float64), the same on every machine; a zero vector gives 0.

    The float32 vectors are widened to float64, where each product is exact, and every dot product
    and squared norm is a sum in numpy's fixed order, not a BLAS call whose rounding depends on the
    build. A pair of identical vectors gives exactly 1: dot(u, u) / sqrt(|u|^2 |u|^2) has equal
    numerator and root, so ties between identical sentences stay ties (SentEval's float32 cosines
    order them by rounding noise instead; docs/sts-cosine.md).
    """
    x = table.detach().cpu().numpy() if isinstance(table, torch.Tensor) else np.asarray(table)
    ia, ib = np.asarray(ia, dtype=np.int64), np.asarray(ib, dtype=np.int64)
    out = np.empty(len(ia), dtype=np.float64)
    step = max(1, _CHUNK_VALUES // max(1, x.shape[1]))
    for start in range(0, len(ia), step):
        u = x[ia[start : start + step]].astype(np.float64)
        v = x[ib[start : start + step]].astype(np.float64)
        dot, uu, vv = (u * v).sum(axis=1), (u * u).sum(axis=1), (v * v).sum(axis=1)
        root = np.sqrt(uu * vv)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start : start + step] = np.where(root > 0, dot / root, 0.0)
    return out


def mteb_cosines(table, ia, ib):
    """(mteb's STS cosine, mteb's model similarity) per pair, both float64, the pairs' vectors gathered
    _PAIR_ROWS at a time into two reused buffers (no fresh memory for each side of every pair):
    - the cosine: 1 - scikit-learn's paired cosine distance, in float32 (pairs of equal cosine may
      differ in the last bits, as in mteb), computed as scikit-learn computes it (paired_cosine):
    - the model similarity (mteb's `pearson` and `spearman` keys with a cosine model): float32 torch,
      each side L2-normalized, then the pairwise products summed (mteb's pairwise_cos_sim).
    Each value depends on its own pair's vectors alone, so the pieces give the bits of the whole."""
    from embeval.evaluate import mteb_similarity

    x = table.detach().cpu().numpy() if isinstance(table, torch.Tensor) else np.asarray(table)
    x = np.asarray(x, dtype=np.float32)
    ia, ib = np.asarray(ia, dtype=np.int64), np.asarray(ib, dtype=np.int64)
    cosines, model = np.empty(len(ia), dtype=np.float64), np.empty(len(ia), dtype=np.float64)
    step = max(1, min(len(ia), _PAIR_ROWS))
    u_buffer, v_buffer = np.empty((step, x.shape[1]), np.float32), np.empty((step, x.shape[1]), np.float32)
    for start in range(0, len(ia), step):
        stop = min(len(ia), start + step)
        u, v = u_buffer[: stop - start], v_buffer[: stop - start]
        np.take(x, ia[start:stop], axis=0, out=u)
        np.take(x, ib[start:stop], axis=0, out=v)
        a = torch.nn.functional.normalize(mteb_similarity.tensor(u), p=2, dim=1)
        b = torch.nn.functional.normalize(mteb_similarity.tensor(v), p=2, dim=1)
        model[start:stop] = (a * b).sum(dim=-1).numpy()
        cosines[start:stop] = paired_cosine(u, v)
    return cosines, model


_PAIR_ROWS = 256  # pairs whose vectors are gathered at once in mteb_cosines (1 MiB a side at 1024 dimensions)


def paired_cosine(u, v):
    """1 - sklearn.metrics.pairwise.paired_cosine_distances(u, v) for finite float32 rows, the same bits,
    overwriting u and v: each row divided by its L2 norm (einsum of the row with itself, then its
    square root; a norm below 10 float32 epsilons taken as 1), then 1 - half the squared norm of the
    difference, in float32."""
    for side in (u, v):
        norms = np.sqrt(np.einsum("ij,ij->i", side, side))
        norms[norms < 10 * np.finfo(norms.dtype).eps] = 1.0
        side /= norms[:, None]
    np.subtract(u, v, out=u)
    return 1 - 0.5 * np.einsum("ij,ij->i", u, u)


def correlations(system, gold):
    """(Pearson r, Spearman rho); NaN when either side is constant."""
    system, gold = np.asarray(system, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    if len(system) < 2 or np.ptp(system) == 0 or np.ptp(gold) == 0:
        return float("nan"), float("nan")
    return float(pearsonr(system, gold)[0]), float(spearmanr(system, gold)[0])


def aggregate(per_subset, pooled_system, pooled_gold):
    """SentEval's `all` entry (mean, wmean) plus `pooled`: one correlation over all pairs (of one
    subset: its own correlations, the same pairs)."""
    weights = np.array([r["nsamples"] for r in per_subset.values()], dtype=np.float64)
    if len(per_subset) == 1:
        (only,) = per_subset.values()
        pooled = (only["pearson"], only["spearman"])
    else:
        pooled = correlations(pooled_system, pooled_gold)
    out = {}
    for i, coef in enumerate(("pearson", "spearman")):
        values = np.array([r[coef] for r in per_subset.values()], dtype=np.float64)
        out[coef] = {
            "mean": float(np.mean(values)),
            "wmean": float(np.average(values, weights=weights)),
            "pooled": pooled[i],
        }
    return out


def subset_scores(table, ctx):
    """Per subset {pearson, spearman, nsamples}, SentEval's `all`, and the prediction set of every pair."""
    results, systems, golds, groups, models = {}, [], [], [], []
    as_mteb = getattr(ctx.task.params, "cosine", "exact") == "mteb"
    for g, (name, split) in enumerate(ctx.data.splits.items()):
        ia, ib = ctx.rows[name]
        if as_mteb:
            system, model = mteb_cosines(table, ia, ib)
            models.append(model)
        else:
            system = cosine(table, ia, ib)
        pearson, spearman = correlations(system, split.y)
        results[name] = {"pearson": pearson, "spearman": spearman, "nsamples": len(split)}
        systems.append(system)
        golds.append(split.y)
        groups.append(np.full(len(split), g))
    results["all"] = aggregate(results, np.concatenate(systems), np.concatenate(golds))
    if as_mteb:  # mteb's `pearson` and `spearman`: the model's similarity (cosine), all pairs pooled
        model = correlations(np.concatenate(models), np.concatenate(golds))
        results["model_similarity"] = {"pearson": model[0], "spearman": model[1]}
    pset = predictions.scores(
        np.concatenate(golds),
        np.concatenate(systems),
        np.concatenate(groups),
        order="subsets in file order, pairs in file order",
    )
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
            info["tuned_on"] = f"{ctx.task.reference} dev cosine Spearman"
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
