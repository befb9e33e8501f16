"""Each task's headline figures, declared once: the bootstrap, `compare`, `report` and the terminal
table all read them from here.

A figure is named by its path in the task's results (see embeval.formats.predictions). The first figure
of an evaluator is the task's headline; the others are reported with intervals beside it.
"""
from dataclasses import dataclass

from embeval.tasks.registry import TASKS


@dataclass(frozen=True)
class Figure:
    path: str
    label: str
    percent: bool  # the JSON holds a percentage (True) or a fraction (False, a correlation)


ACCURACY = Figure("acc", "test accuracy %", True)

HEADLINES = {
    "inner_kfold": (ACCURACY,),
    "kfold": (ACCURACY,),
    "split": (ACCURACY,),
    "probing": (ACCURACY,),
    "cosine_sts": (Figure("all.spearman.pooled", "cosine Spearman, all pairs pooled", False),
                   Figure("all.spearman.wmean", "cosine Spearman, n-weighted mean over subsets", False),
                   Figure("all.spearman.mean", "cosine Spearman, mean over subsets", False),
                   Figure("all.pearson.pooled", "cosine Pearson, all pairs pooled", False)),
    "relatedness": (Figure("cosine.spearman", "cosine Spearman (test)", False),
                    Figure("pearson", "regressor Pearson (test)", False),
                    Figure("spearman", "regressor Spearman (test)", False)),
    "retrieval": (Figure("acc.mean_recall", "mean of R@1, R@5, R@10 both ways %", True),),
}

EXTRA = {"MRPC": (Figure("f1", "test F1 of paraphrase %", True),)}

# The dev figure that --normalize tune maximizes (cosine STS tunes on STSBenchmark's dev split itself).
SELECTION = {"inner_kfold": "devacc", "kfold": "devacc", "split": "devacc", "probing": "devacc",
             "relatedness": "devpearson", "retrieval": "devacc"}

CLASSIFIER_SETS = ("logreg", "mlp")


def figures(task):
    """The task's headline figures, headline first."""
    return HEADLINES[TASKS[task].evaluator] + EXTRA.get(task, ())


def headline(task):
    return figures(task)[0]


def lookup(results, path):
    """The value at a dotted path of a results dict (None when absent)."""
    value = results
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def variants(results):
    """Prefixes under which a task's figures also appear: each classifier that ran ('logreg.',
    'mlp.'), and the normalized cosine figures ('normalized.', 'cosine_normalized' for relatedness)."""
    out = [""]
    if isinstance(results, dict):
        out += [f"{name}." for name in CLASSIFIER_SETS if isinstance(results.get(name), dict)]
        if isinstance(results.get("normalized"), dict):
            out.append("normalized.")
    return out
