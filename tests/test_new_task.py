"""Adding a task is one task file: a synthetic binary classification task, declared in a TOML file
beside its own small data file, is exported, scored, shown in the terminal table, in `embeval
report` and in `embeval compare`, with nothing else edited; the reports show it in a fresh process
without the task file (its declaration is in the results)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO

from embeval.formats.vectors import write

WORDS = {1: ["good", "great", "fine", "nice", "superb"], 0: ["bad", "awful", "poor", "dull", "worse"]}
NEUTRAL = ["the", "a", "film", "plot", "actor", "scene", "was", "is", "very", "quite"]
TASK_FILE = """name = "ToySentiment"
short_name = "Toy"
kind = "classification"
protocol = "nested-kfold"
labels = ["neg", "pos"]
[files]
all = "toy/reviews.tsv"
"""


@pytest.fixture
def toy(tmp_path):
    """The task file and its data."""
    rng = np.random.default_rng(0)
    folder = tmp_path / "tasks" / "toy"
    folder.mkdir(parents=True)
    lines = ["text\tlabel"]
    for label, name in ((1, "pos"), (0, "neg")):
        lines += [
            " ".join(list(rng.choice(NEUTRAL, 3)) + list(rng.choice(WORDS[label], 3)) + [f"n{i}"]) + f"\t{name}"
            for i in range(60)
        ]
    (folder / "reviews.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "tasks" / "toy.toml").write_text(TASK_FILE, encoding="utf-8")
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


def test_a_task_declared_in_a_file_goes_through_every_command(toy, cli):
    task_file, export = toy / "tasks" / "toy.toml", toy / "sentences"
    data = toy / "no-data-needed"
    result = cli(
        "export-sentences", "--data", data, "--out", export, "--tasks", "toysentiment", "--task-file", task_file
    )
    assert result.exit_code == 0, result.stderr
    assert list(json.loads((export / "manifest.json").read_text())["tasks"]) == ["ToySentiment"]
    outputs = []
    for seed in (1, 2):
        vectors = toy / f"v{seed}.h5"
        write(vectors, export, encoder(seed), progress=False)
        out = toy / f"r{seed}.json"
        result = cli(
            "score",
            vectors,
            "--data",
            data,
            "--task-file",
            task_file,
            "--config",
            "prototype",
            "--bootstrap",
            "200",
            "--out",
            out,
        )
        assert result.exit_code == 0, result.stderr
        assert "ToySentiment" in result.stdout and "accuracy % dev / test" in result.stdout
        record = json.loads(out.read_text())
        assert list(record["tasks"]) == ["ToySentiment"] and record["tasks"]["ToySentiment"]["results"]["acc"] > 75
        assert record["tasks"]["ToySentiment"]["declaration"]["declaration"]["name"] == "ToySentiment"
        outputs.append(out)
    task_file.unlink()  # the results carry the declaration: report and compare need no task file
    report = cli("report", *outputs)
    assert report.exit_code == 0, report.stderr
    header = next(line for line in report.stdout.splitlines() if line.startswith("| encoder"))
    assert "Toy" in header
    compared = cli("compare", *outputs)
    assert compared.exit_code == 0, compared.stderr
    assert "ToySentiment" in compared.stdout
    fresh = subprocess.run(
        [sys.executable, "-m", "embeval", "report", *map(str, outputs), "--format", "csv"],
        capture_output=True,
        text=True,
        cwd=toy,
        env=dict(os.environ, EMBEVAL_TASKS="", PYTHONPATH=str(REPO)),
    )
    assert fresh.returncode == 0, fresh.stderr
    assert ",Toy," in fresh.stdout
