"""MTEB's protocol beside SentEval's, for the tasks both have: cosine Spearman, computed in every run.

STS12–16: MTEB's test sets are SentEval's subsets of the year pooled, i.e. `all.spearman.pooled`.
STSBenchmark: MTEB embeds the test split's raw, cased sentences, which SentEval's copy has
tokenized and lowercased; the task STSBenchmarkRaw holds them, scored by cosine like STS12–16.
SICK-R: MTEB pools SentEval's train, trial and test splits (9,927 pairs); SICKRelatedness reports
that figure under `mteb`.
"""

import numpy as np

from embeval.evaluate import sts
from embeval.tasks.registry import TASKS

# MTEB's task name -> (embeval task, path of MTEB's cosine Spearman in that task's results)
MTEB_FIGURES = {
    task.mteb.name: (name, task.mteb.figures.format(coef="spearman"))
    for name, task in TASKS.items()
    if task.mteb is not None
}


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


def figures(record):
    """{MTEB task name: cosine Spearman} of the tasks a results record holds."""
    out = {}
    for mteb_name, (task, path) in MTEB_FIGURES.items():
        value = record["tasks"].get(task, {}).get("results")
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is not None:
            out[mteb_name] = value
    return out
