"""MTEB's summarization protocol (SummEval), as mteb 2.26.24 computes it, per text and averaged.

mteb/_evaluators/text/summarization_evaluator.py: each machine summary of a text is scored by its
largest cosine (and, separately, its largest dot product) with the human summaries of the same text;
per text, the Spearman and Pearson correlations of those scores with the human relevance grades are
computed (scipy), and the figures are their means over texts. A text is left out when its grades are
all equal, or its machine summaries' best cosines are all equal, or their best dot products are all
equal. mteb rescales grades to [0, 1] first ((x - min) / (max - min)), which changes no correlation.
Keys: cosine_spearman (main score), cosine_pearson, dot_spearman, dot_pearson, and spearman/pearson
for the model's own similarity (the task's `similarity`: cosine or dot).

SummEval (the original task, type Summarization) is scored by mteb's DeprecatedSummarizationEvaluator,
which keeps a bug for comparability (mteb issue 1156): it averages each text's (correlation, p-value)
pair together, i.e. the figure is the mean over texts of (r + p) / 2. SummEvalSummarization.v2 uses the
fixed evaluator. `mteb_scores(values, deprecated=True)` gives the former.

The cosines and dot products are computed as mteb computes them (embeval.evaluate.mteb_similarity:
float32 torch, one machine summary against its text's human summaries; the model's similarity one
pair at a time), so identical summaries tie and a text is left out exactly when mteb leaves it out.
"""

import numpy as np
import torch
from scipy.stats import pearsonr, spearmanr

from embeval.evaluate import mteb_similarity

KINDS = ("cosine", "dot")


def best_scores(
    machine: np.ndarray,
    human: np.ndarray,
    machine_text: np.ndarray,
    human_text: np.ndarray,
    similarity: str = "cosine",
) -> dict[str, np.ndarray]:
    """{"cosine", "dot", "similarity"}: (machine summaries,) each machine summary's largest cosine / dot
    product / model similarity (`similarity`) with the human summaries of its text (machine_text,
    human_text: the text index of each summary), computed as mteb computes them: float32, one machine
    summary against its text's human summaries (the model's similarity one pair at a time)."""
    machines, human_rows = mteb_similarity.tensor(machine), mteb_similarity.tensor(human)
    # each row normalized once (its bits depend on the row alone): the products below are mteb's
    # matrix(one machine summary, ...) on the same values and shapes
    ready = {kind: (mteb_similarity.normalized(machines, kind), mteb_similarity.normalized(human_rows, kind))
             for kind in {*KINDS, similarity}}  # fmt: skip
    out = {kind: np.full(len(machines), np.nan) for kind in (*KINDS, "similarity")}
    for text in np.unique(machine_text):
        m, h = np.flatnonzero(machine_text == text), np.flatnonzero(human_text == text)
        if len(h) == 0:
            raise ValueError(f"text {text} has machine summaries but no human summary")
        rows = torch.as_tensor(h)
        for kind in KINDS:
            summaries, humans = ready[kind][0], ready[kind][1].index_select(0, rows).transpose(0, 1)
            for i in m.tolist():
                out[kind][i] = torch.max(summaries[i : i + 1] @ humans).item()
        summaries, humans = ready[similarity][0], ready[similarity][1]
        for i in m.tolist():
            pairs = [(summaries[i : i + 1] @ humans[j : j + 1].transpose(0, 1)).item() for j in h.tolist()]
            out["similarity"][i] = torch.max(torch.tensor(pairs)).item()
    return out


def per_text(scores: dict[str, np.ndarray], gold: np.ndarray, machine_text: np.ndarray) -> dict[str, np.ndarray]:
    """Per text (ascending text index): "kept" (bool, mteb's rule) and for each kind its Spearman and
    Pearson correlation with the grades and their p-values ("cosine_spearman", "cosine_spearman_p", ...);
    NaN for texts left out."""
    gold = np.asarray(gold, dtype=np.float64)
    texts = np.unique(machine_text)
    out = {"kept": np.zeros(len(texts), dtype=bool)}
    kinds = tuple(kind for kind in (*KINDS, "similarity") if kind in scores)
    for kind in kinds:
        for name in ("spearman", "pearson"):
            out[f"{kind}_{name}"] = np.full(len(texts), np.nan)
            out[f"{kind}_{name}_p"] = np.full(len(texts), np.nan)
    for i, text in enumerate(texts):
        member = machine_text == text
        constant = [np.all(values[member] == values[member][0]) for values in (gold, scores["cosine"], scores["dot"])]
        if any(constant):
            continue
        out["kept"][i] = True
        for kind in kinds:
            for name, correlation in (("spearman", spearmanr), ("pearson", pearsonr)):
                result = correlation(gold[member], scores[kind][member])
                out[f"{kind}_{name}"][i], out[f"{kind}_{name}_p"][i] = result.statistic, result.pvalue
    return out


def item_values(values: dict[str, np.ndarray], deprecated: bool = False) -> dict[str, np.ndarray]:
    """Each kept text's value of every figure (the figure is their mean): the correlation, or with
    `deprecated` (SummEval v1) the mean of the correlation and its p-value."""
    kept = values["kept"]
    out = {}
    for kind in (*KINDS, "similarity"):
        if f"{kind}_spearman" not in values:
            continue
        for name in ("spearman", "pearson"):
            key = f"{kind}_{name}"
            out[key] = (values[key] + values[key + "_p"]) / 2 if deprecated else values[key]
            out[key] = out[key][kept]
    return out


def mteb_scores(values: dict[str, np.ndarray], deprecated: bool = False) -> dict[str, float]:
    """The figures as mteb reports them (`pearson` and `spearman`: the model's similarity, the cosine
    when the scores hold no "similarity")."""
    means = {name: float(np.mean(v)) for name, v in item_values(values, deprecated).items()}
    model = "similarity" if "similarity_spearman" in means else "cosine"
    return {
        "pearson": means.pop(f"{model}_pearson") if model == "similarity" else means["cosine_pearson"],
        "spearman": means.pop(f"{model}_spearman") if model == "similarity" else means["cosine_spearman"],
        **means,
        "main_score": means["cosine_spearman"],
    }
