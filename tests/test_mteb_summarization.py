"""MTEB's summarization protocol (embeval.evaluate.summarization) against mteb 2.26's own evaluators, both the
fixed one (SummEvalSummarization.v2) and the deprecated one SummEval keeps, on the same vectors.

Synthetic SummEval: 25 texts with 2-6 human and 6-16 machine summaries each, integer grades 0-5 (ties),
a text with equal grades and one whose machine summaries are identical (both left out by mteb's rule).
Both compute the similarities in float32 with mteb's operations: the figures agree to the last bits
(the tests allow 1e-12).
"""

import numpy as np
import pytest
from mteb_helpers import TableEncoder, metadata, mteb_client

from embeval import stats
from embeval.evaluate import summarization

TOL = 1e-12


@pytest.fixture(scope="module")
def client():
    return mteb_client()


def synthetic(seed=0, n_texts=25, dim=16):
    rng = np.random.default_rng(seed)
    rows = {"text": [], "human_summaries": [], "machine_summaries": [], "relevance": []}
    vectors = {}
    human, machine, human_text, machine_text, gold = [], [], [], [], []
    for t in range(n_texts):
        n_h, n_m = int(rng.integers(2, 7)), int(rng.integers(6, 17))
        h = rng.normal(size=(n_h, dim))
        m = h[rng.integers(0, n_h, n_m)] * 0.5 + rng.normal(size=(n_m, dim))
        if t == 1:
            m[:] = m[0]  # identical machine summaries: equal best scores, left out
        grades = rng.integers(0, 6, n_m) if t != 0 else np.full(n_m, 3)  # text 0: equal grades, left out
        rows["text"].append(f"text {t}")
        rows["human_summaries"].append([f"human {t}.{j}" for j in range(n_h)])
        rows["machine_summaries"].append([f"machine {t}.{j}" for j in range(n_m)])
        rows["relevance"].append(grades.tolist())
        vectors.update(zip(rows["human_summaries"][-1], h))
        vectors.update(zip(rows["machine_summaries"][-1], m))
        human.append(h)
        machine.append(m)
        human_text += [t] * n_h
        machine_text += [t] * n_m
        gold += grades.tolist()
    arrays = {
        "human": np.concatenate(human),
        "machine": np.concatenate(machine),
        "human_text": np.array(human_text),
        "machine_text": np.array(machine_text),
        "gold": np.array(gold),
    }
    return rows, vectors, arrays


def run_mteb(rows, vectors, deprecated):
    from datasets import Dataset, DatasetDict
    from mteb._evaluators.text.summarization_evaluator import (
        DeprecatedSummarizationEvaluator,
        SummarizationEvaluator,
    )
    from mteb.abstasks.text.summarization import AbsTaskSummarization

    class Synthetic(AbsTaskSummarization):
        metadata = metadata("EmbevalSyntheticSummarization", "Summarization", "cosine_spearman")
        evaluator = DeprecatedSummarizationEvaluator if deprecated else SummarizationEvaluator
        min_score, max_score = 0, 5

        def load_data(self, **kwargs):
            self.dataset = DatasetDict({"test": Dataset.from_dict(rows)})
            self.data_loaded = True

    class Cosine(TableEncoder):  # the similarity mteb gives a cosine model
        def similarity(self, a, b):
            from mteb.similarity_functions import cos_sim

            return cos_sim(a, b)

    encoder = Cosine({None: vectors})
    return Synthetic().evaluate(encoder, split="test", encode_kwargs={"batch_size": 32})["default"]


@pytest.mark.filterwarnings("ignore:The used Evaluator is deprecated:DeprecationWarning")
@pytest.mark.parametrize("deprecated", [False, True], ids=["v2", "SummEval-deprecated"])
def test_figures_equal_mteb(client, deprecated):
    rows, vectors, a = synthetic()
    scores = summarization.best_scores(a["machine"], a["human"], a["machine_text"], a["human_text"])
    values = summarization.per_text(scores, a["gold"], a["machine_text"])
    assert values["kept"].tolist() == [False, False] + [True] * 23
    ours = summarization.mteb_scores(values, deprecated=deprecated)
    reported = run_mteb(rows, vectors, deprecated)
    for name, value in ours.items():
        assert abs(value - reported[name]) <= TOL, (name, value, reported[name])
    assert set(ours) <= set(reported)


def test_best_scores_are_mtebs_float32_maxima(client):
    from mteb.similarity_functions import cos_sim, dot_score

    _, _, a = synthetic(seed=1, n_texts=4)
    scores = summarization.best_scores(a["machine"], a["human"], a["machine_text"], a["human_text"])
    machine, human = a["machine"].astype(np.float32), a["human"].astype(np.float32)
    for i, t in enumerate(a["machine_text"]):
        humans = human[a["human_text"] == t]
        assert scores["cosine"][i] == cos_sim(machine[i], humans).max().item()
        assert scores["dot"][i] == dot_score(machine[i], humans).max().item()


def test_per_text_values_bootstrap_as_a_mean():
    _, _, a = synthetic(seed=2)
    scores = summarization.best_scores(a["machine"], a["human"], a["machine_text"], a["human_text"])
    values = summarization.item_values(summarization.per_text(scores, a["gold"], a["machine_text"]))
    figure = summarization.mteb_scores(summarization.per_text(scores, a["gold"], a["machine_text"]))["main_score"]
    mean = stats.STATISTICS["values"]["mean"]
    assert stats.observed(mean, {"value": values["cosine_spearman"]}) == pytest.approx(figure, abs=1e-15)
