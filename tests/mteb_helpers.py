"""mteb's own evaluators run in memory on fixed vectors: the mteb client (skipped with a reason when absent,
failing under EMBEVAL_REQUIRE_REPORT=1), an encoder of mteb's protocol that looks texts up in tables, and
the task metadata mteb requires."""

import importlib.util
import os

import numpy as np
import pytest
from report_helpers import need


def mteb_client():
    if importlib.util.find_spec("mteb") is None:
        need("the mteb package", "pip install '.[mteb]'")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import mteb

    return mteb


class TableEncoder:
    """mteb's encoder protocol over fixed vectors: each text's vector from the table of its prompt type
    ("query", "document", or None when mteb gives none); the similarity is the float64 dot product, or the
    cosine with `cosine`, returned as a torch tensor."""

    mteb_model_meta = None

    def __init__(self, tables, cosine=False):
        self.tables = tables
        self.cosine = cosine

    def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):
        table = self.tables[None if prompt_type is None else prompt_type.value]
        return np.array([table[text] for batch in inputs for text in batch["text"]])

    def _unit(self, x):
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        return x / np.linalg.norm(x, axis=1, keepdims=True) if self.cosine else x

    def similarity(self, a, b):
        import torch

        return torch.as_tensor(self._unit(a) @ self._unit(b).T)  # a torch tensor, as mteb's protocol says

    def similarity_pairwise(self, a, b):
        return (self._unit(a) * self._unit(b)).sum(-1)


def metadata(name, task_type, main_score):
    from mteb.abstasks.task_metadata import TaskMetadata

    return TaskMetadata(
        name=name,
        type=task_type,
        main_score=main_score,
        description="synthetic",
        reference=None,
        dataset={"path": "NA", "revision": "NA"},
        category="t2t",
        eval_splits=["test"],
        eval_langs=["eng-Latn"],
        date=None,
        dialect=[],
        domains=[],
        task_subtypes=[],
        license="cc-by-4.0",
        annotations_creators="derived",
        modalities=["text"],
        sample_creation="found",
        bibtex_citation="",
    )


# embeval's AMI sums the expected mutual information per distinct pair of sizes (mutual_info.py): equal to
# scikit-learn's to its own rounding error (test_adjusted_mutual_info_is_scikit_learns); v-measures exactly.
AMI_AGREEMENT = 1e-11


def assert_clustering_figures_equal(ours, theirs):
    """The clustering figures of embeval and mteb: v-measures bit for bit, AMI to AMI_AGREEMENT."""
    for key in ("v_measure", "v_measure_std", "v_measures"):
        assert ours[key] == theirs[key], key
    assert ours["ami_scores"].keys() == theirs["ami_scores"].keys()
    for level, scores in ours["ami_scores"].items():
        assert scores == pytest.approx(theirs["ami_scores"][level], rel=0, abs=AMI_AGREEMENT), level
    for key in ("ami", "ami_std"):
        assert ours[key] == pytest.approx(theirs[key], rel=0, abs=AMI_AGREEMENT), key
