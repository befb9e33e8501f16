"""The tables of `embeval report`: each group of columns (a kind's columns name their group), its
title and what its caption says. A kind may declare groups of its own (Kind.groups); a group a task
file names that neither lists gets a table of its own, titled by its name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Group:
    """A report table. `intro` opens the caption ({who}: the classifier, {vectors}: raw or
    normalized vectors); `who` words each classifier variant (None: the configured classifier);
    `average`: an Avg. column (and how many columns the published table it mirrors averages, 0: none);
    `normalized`: a second table of the figures on normalized vectors, when they were scored."""

    key: str
    title: str
    intro: str
    who: dict = field(default_factory=dict)
    average: bool = False
    published_average_of: int = 0
    normalized: bool = False


CLASSIFIER_WORDS = {"logreg": "logistic regression", "mlp": "MLP", None: "configured classifier"}

GROUPS = {
    "transfer": Group(
        "transfer",
        "Transfer tasks",
        "SentEval transfer tasks. Classification: test accuracy (%) of {who}, the regularization chosen by "
        "SentEval's protocols",
        who={
            "logreg": "logistic regression",
            "mlp": "an MLP ({nhid} hidden units, sigmoid)",
            None: "the configured classifier",
        },
    ),
    "sts": Group(
        "sts",
        "STS, cosine Spearman x100",
        "Semantic textual similarity without training (SimCSE's protocol): Spearman's correlation x100 between "
        "the cosine of the two sentence vectors ({vectors}) and the gold score",
        average=True,
        published_average_of=7,
        normalized=True,
    ),
    "probing": Group(
        "probing",
        "Probing tasks",
        "Probing tasks (Conneau et al., 2018): test accuracy (%) of {who}, regularization tuned on the dev split",
        who={
            "logreg": "logistic regression",
            "mlp": "the MLP grid (nhid 50/100/200 x dropout 0/0.1/0.2, tuned on dev)",
            None: "the configured classifier",
        },
    ),
    "mteb-pair-classification": Group(
        "mteb-pair-classification",
        "Pair classification (MTEB), x100",
        "Pair classification as MTEB scores it, no training (mteb 2.26.24's AbsTaskPairClassification, "
        "figures equal to its evaluator's): the best over five scores of each pair (the model's similarity, "
        "cosine, Manhattan, Euclidean, dot product) of the average precision (max AP, MTEB's main score) or "
        "of the accuracy or F1 at the best threshold, x100",
    ),
    "mteb-classification": Group(
        "mteb-classification",
        "Classification (MTEB), x100",
        "Classification as MTEB scores it (mteb 2.26.24's AbsTaskClassification, figures equal to its "
        "evaluator's under its seeds): scikit-learn's logistic regression trained on a few sentences per "
        "label drawn from the train split, tested on the test split, mean over the experiments, x100",
    ),
    "mteb-clustering": Group(
        "mteb-clustering",
        "Clustering (MTEB), v-measure x100",
        "Clustering as MTEB scores it (mteb 2.26.24's AbsTaskClustering, or AbsTaskClusteringLegacy for "
        "the per-set protocol; figures equal to its evaluators' under their seeds): scikit-learn's "
        "MiniBatchKMeans with as many clusters as labels, v-measure x100, mean over the experiments and "
        "levels (or over the sets)",
    ),
    "mteb-summarization": Group(
        "mteb-summarization",
        "Summarization (MTEB), Spearman x100",
        "Summarization as MTEB scores it (mteb 2.26.24's SummarizationEvaluator; figures equal to its "
        "evaluator's to about 1e-8): per text, Spearman's correlation between each machine summary's "
        "best cosine with the human summaries and its human grade, mean over the texts, x100",
    ),
    "retrieval": Group(
        "retrieval",
        "Retrieval (MTEB), x100",
        "Retrieval as MTEB scores it (mteb 2.26.24's retrieval evaluator, figures equal to its): each "
        "query's documents ranked by an exact search of the whole corpus by the similarity of the vectors, "
        "each task's headline figure (nDCG@10 unless the task file chooses another), mean over the queries, x100",
    ),
    "reranking": Group(
        "reranking",
        "Reranking (MTEB), x100",
        "Reranking as MTEB scores it (mteb 2.26.24's evaluator, figures equal to its): each query's candidate "
        "documents ranked by the similarity of the vectors, each task's headline figure (MAP@1000 unless the "
        "task file chooses another), mean over the queries, x100",
    ),
    "mteb-bitext": Group(
        "mteb-bitext",
        "Bitext mining (MTEB), F1 x100",
        "Bitext mining as MTEB scores it (mteb 2.26.24's BitextMiningEvaluator, figures equal to its "
        "evaluator's): each sentence matched with its most cosine-similar translation candidate, "
        "support-weighted F1 of the matches x100",
    ),
}


def group(key: str, declared: Mapping[str, Group] | None = None) -> Group:
    """The group named `key`: embeval's, else one a kind declares (its `groups`), else a group of its
    own, titled by its name, whose caption names the classifier only when a classifier variant is shown."""
    found = GROUPS.get(key) or (declared or {}).get(key)
    if found is not None:
        return found
    return Group(
        key,
        key,
        f"{key}{{who}}",
        who={None: "", "logreg": ": logistic regression", "mlp": ": an MLP"},
    )
