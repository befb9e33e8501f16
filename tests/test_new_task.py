"""Adding a task is one registry entry: a synthetic binary classification task, registered in one
place with its own small data files, is exported, scored, shown in the terminal table, in
`embeval report` and in `embeval compare`, with no other edit."""

import json

import numpy as np
import pytest

from embeval.formats.vectors import write
from embeval.tasks import loaders
from embeval.tasks.figures import ACCURACY
from embeval.tasks.registry import ACCURACY_COLUMN, CLASSIFICATION_METRICS, TASKS, Task

WORDS = {1: ["good", "great", "fine", "nice", "superb"], 0: ["bad", "awful", "poor", "dull", "worse"]}
NEUTRAL = ["the", "a", "film", "plot", "actor", "scene", "was", "is", "very", "quite"]


def toy_task():
    return Task(
        name="ToySentiment",
        short_name="Toy",
        kind="classification",
        files=("downstream/Toy/toy.pos", "downstream/Toy/toy.neg"),
        encoding="utf-8",
        loader=loaders.load_binary,
        evaluator="inner_kfold",
        sort="single",
        classes=("neg", "pos"),
        metrics=CLASSIFICATION_METRICS,
        figures=(ACCURACY,),
        selection="devacc",
        columns=(ACCURACY_COLUMN,),
    )


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The task registered, its data folder and two vectors files of different encoders."""
    monkeypatch.setitem(TASKS, "ToySentiment", toy_task())
    rng = np.random.default_rng(0)
    folder = tmp_path / "data" / "downstream" / "Toy"
    folder.mkdir(parents=True)
    for label, name in ((1, "toy.pos"), (0, "toy.neg")):
        lines = [
            " ".join(list(rng.choice(NEUTRAL, 3)) + list(rng.choice(WORDS[label], 3)) + [f"n{i}"]) for i in range(60)
        ]
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


def encoder(seed):
    """A hashing bag of words: each token a fixed random vector (seeded), a sentence their mean."""

    def encode(sentences):
        out = np.zeros((len(sentences), 32), dtype=np.float32)
        for i, sentence in enumerate(sentences):
            for token in sentence.split():
                rng = np.random.default_rng([seed, *token.encode()])
                out[i] += rng.standard_normal(32).astype(np.float32)
        return out

    return encode


def test_a_task_registered_in_one_place_goes_through_every_command(toy, cli):
    data, export = toy / "data", toy / "sentences"
    result = cli("export-sentences", "--data", data, "--out", export, "--tasks", "toysentiment")
    assert result.exit_code == 0, result.stderr
    assert list(json.loads((export / "manifest.json").read_text())["tasks"]) == ["ToySentiment"]
    outputs = []
    for seed in (1, 2):
        vectors = toy / f"v{seed}.h5"
        write(vectors, export, encoder(seed), progress=False)
        out = toy / f"r{seed}.json"
        result = cli("score", vectors, "--data", data, "--config", "prototype", "--bootstrap", "200", "--out", out)
        assert result.exit_code == 0, result.stderr
        assert "ToySentiment" in result.stdout and "accuracy % dev / test" in result.stdout
        record = json.loads(out.read_text())
        assert list(record["tasks"]) == ["ToySentiment"] and record["tasks"]["ToySentiment"]["results"]["acc"] > 75
        outputs.append(out)
    report = cli("report", *outputs)
    assert report.exit_code == 0, report.stderr
    header = next(line for line in report.stdout.splitlines() if line.startswith("| encoder"))
    assert "Toy" in header
    compared = cli("compare", *outputs)
    assert compared.exit_code == 0, compared.stderr
    assert "ToySentiment" in compared.stdout


def test_the_registry_refuses_an_inconsistent_entry():
    with pytest.raises(ValueError, match="evaluator"):
        Task(**{**toy_task().__dict__, "evaluator": "nearest_neighbour"})
    with pytest.raises(ValueError, match="selection"):
        Task(**{**toy_task().__dict__, "selection": "devpearson"})
