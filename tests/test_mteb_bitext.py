"""MTEB's bitext mining protocol (embeval.evaluate.bitext) against mteb 2.26's own evaluator on the same
vectors, and its weighted figures against scikit-learn with sample weights (a bootstrap resample).

Synthetic: 300 sentence pairs whose second side is the first plus noise of growing size, so some
sentences choose a wrong match and several choose the same one (precision and F1 then differ from
accuracy). Agreement measured: 0.0 (same predictions; scikit-learn and embeval sum alike here); the tests allow
1e-12, a few ulps of another summation order.
"""

import numpy as np
import pytest
from mteb_helpers import TableEncoder, metadata, mteb_client
from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score

from embeval.evaluate import bitext

TOL = 1e-12


@pytest.fixture(scope="module")
def client():
    return mteb_client()


def synthetic(seed=0, n=300, dim=12):
    rng = np.random.default_rng(seed)
    first = rng.normal(size=(n, dim))
    second = first + rng.normal(size=(n, dim)) * np.linspace(0.1, 2.0, n)[:, None]
    return first, second


@pytest.mark.filterwarnings("ignore:To copy construct from a tensor:UserWarning")
def test_figures_equal_mteb(client):
    from datasets import Dataset, DatasetDict
    from mteb.abstasks.text.bitext_mining import AbsTaskBitextMining

    first, second = synthetic()
    sentences = {
        "sentence1": [f"one {i}" for i in range(len(first))],
        "sentence2": [f"two {i}" for i in range(len(first))],
    }

    class Synthetic(AbsTaskBitextMining):
        metadata = metadata("EmbevalSyntheticBitext", "BitextMining", "f1")

        def load_data(self, **kwargs):
            self.dataset = DatasetDict({"test": Dataset.from_dict(sentences)})
            self.data_loaded = True

    table = dict(zip(sentences["sentence1"], first)) | dict(zip(sentences["sentence2"], second))
    reported = Synthetic().evaluate(TableEncoder({None: table}, cosine=True), encode_kwargs={"batch_size": 64})
    predicted = bitext.nearest(first, second)
    gold = np.arange(len(first))
    ours = bitext.mteb_scores(gold, predicted)
    assert 0.3 < ours["accuracy"] < 0.95 and ours["precision"] < ours["accuracy"]
    assert max(abs(value - reported["default"][name]) for name, value in ours.items()) <= TOL


@pytest.mark.parametrize("seed", range(4))
def test_weighted_figures_equal_sklearn_with_sample_weights(seed):
    rng = np.random.default_rng(seed)
    n = 80
    gold = np.arange(n) if seed % 2 == 0 else rng.integers(0, 60, n)  # BUCC-like gold on odd seeds
    predicted = np.where(rng.random(n) < 0.6, gold, rng.integers(0, 90, n))
    W = np.vstack([np.ones(n), np.bincount(rng.integers(0, n, n), minlength=n), rng.integers(0, 3, n)])
    figures = bitext.weighted_figures(W, gold, predicted)
    for row, w in enumerate(W):
        expected = {
            "accuracy": accuracy_score(gold, predicted, sample_weight=w),
            "precision": precision_score(gold, predicted, average="weighted", zero_division=0, sample_weight=w),
            "recall": recall_score(gold, predicted, average="weighted", zero_division=0, sample_weight=w),
            "f1": f1_score(gold, predicted, average="weighted", zero_division=0, sample_weight=w),
        }
        for name, value in expected.items():
            assert figures[name][row] == pytest.approx(value, abs=TOL), (name, row)


@pytest.mark.parametrize("similarity", ["cosine", "dot"])
def test_nearest_is_mtebs_choice_among_ties(client, similarity):
    """mteb's own search (its chunks of 100 first sentences, float32 similarities, torch.topk) on
    vectors with duplicated second sentences: the same match for every first sentence."""
    from types import SimpleNamespace

    from mteb._evaluators.text.bitext_mining_evaluator import BitextMiningEvaluator
    from mteb.models.model_meta import ScoringFunction
    from mteb.similarity_functions import select_similarity

    first, second = synthetic(seed=3, n=250)
    second[7] = second[3]
    second[60:70] = second[50]  # exact ties
    first[100:110] = first[5]  # the same first sentence in another chunk
    first, second = first.astype(np.float32), second.astype(np.float32)
    model = SimpleNamespace(similarity=lambda a, b: select_similarity(a, b, ScoringFunction(similarity)))
    found = BitextMiningEvaluator._similarity_search(None, first, second, model)
    ours = bitext.nearest(first, second, similarity)
    assert ours.tolist() == [match["corpus_id"] for match in found]
    assert len({int(ours[i]) for i in range(100, 110)} | {int(ours[5])}) == 1
