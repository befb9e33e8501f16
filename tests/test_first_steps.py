"""What a new user reads while scoring a task of their own: the built-in tasks a run of declared tasks
skipped in one line, and the --task-file a declared task's vectors need."""

import json

import h5py
import numpy as np
import pytest

WORDS = ["good", "bad", "great", "awful", "fine", "poor", "nice", "dull", "bright", "dark"]


@pytest.fixture
def own_task(tmp_path, cli):
    """A small cosine-STS task file beside its data, its export and a vectors file of it: (task file,
    vectors, empty data folder)."""
    folder = tmp_path / "my-tasks"
    (folder / "pairs").mkdir(parents=True)
    rng = np.random.default_rng(0)
    rows = ["sentence1\tsentence2\tscore"]
    for i in range(30):
        a, b = rng.choice(WORDS, 3), rng.choice(WORDS, 3)
        rows.append(f"{' '.join(a)} {i}\t{' '.join(b)} {i}\t{len(set(a) & set(b)) * 1.5:.1f}")
    (folder / "pairs" / "test.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    toml = folder / "pairs.toml"
    toml.write_text('name = "MyPairs"\nkind = "sts"\n[files]\ntest = "pairs/test.tsv"\n', encoding="utf-8")
    data = tmp_path / "data"
    data.mkdir()
    export = tmp_path / "sentences"
    result = cli("export-sentences", "--task-file", toml, "--tasks", "MyPairs", "--data", data, "--out", export)
    assert result.exit_code == 0, result.output
    manifest = json.loads((export / "manifest.json").read_text())
    vectors = tmp_path / "vectors.h5"
    with h5py.File(vectors, "w") as f:
        for task, entry in manifest["tasks"].items():
            f[task] = rng.normal(size=(entry["count"], 16)).astype("float32")
            f[task].attrs["sha256"] = entry["sha256"]
    return toml, vectors, data


def test_a_run_of_declared_tasks_says_the_built_ins_it_skipped_in_one_line(own_task, cli, tmp_path):
    toml, vectors, data = own_task
    result = cli("score", vectors, "--task-file", toml, "--data", data, "--out", tmp_path / "r.json", "--quiet")
    assert result.exit_code == 0, result.output
    skipped = [line for line in result.output.splitlines() if line.startswith("skipped")]
    assert skipped == [f"skipped: 29 built-in tasks (29 with no task data in {data}; `embeval tasks` lists them)"]
    record = json.loads((tmp_path / "r.json").read_text())
    assert len(record["skipped"]["no_data"]) == 29  # the JSON still names each


def test_a_declared_tasks_vectors_without_the_task_file_suggest_it(own_task, cli, tmp_path):
    toml, vectors, data = own_task
    result = cli("score", vectors, "--data", data, "--out", tmp_path / "r.json")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"embeval: error: {vectors}: nothing to score: /MyPairs matches no task; a task of your own is scored "
        "with the task file that declares it: --task-file FILE"
    ]
    assert not (tmp_path / "r.json").exists()
