"""A union export (`--union`) scored in every order of its tasks: a task whose lists are datasets of
their own (retrieval's queries and documents) next to tasks whose rows are in /ALL, whichever comes
first, with `score` and `sweep`: the same figures as the tasks scored one by one."""

import json

import pytest
from mteb_snapshots import encode

from embeval.formats.vectors import write

RETRIEVAL = """name = "OwnRetrieval"
kind = "retrieval"
[files]
corpus = "ret/corpus.jsonl"
queries = "ret/queries.jsonl"
qrels = "ret/qrels.tsv"
"""
PAIRS = """[[task]]
name = "OwnPairsA"
kind = "sts"
[task.files]
test = "a.tsv"

[[task]]
name = "OwnPairsB"
kind = "sts"
[task.files]
test = "b.tsv"
"""
WORDS = ["cat", "dog", "bird", "fish", "tree", "rock", "lake", "hill", "road", "city", "farm", "ship"]


@pytest.fixture(scope="module")
def union(tmp_path_factory):
    """Two task files (a retrieval task, two STS tasks), their union export and its vectors."""
    from embeval import export_sentences

    root = tmp_path_factory.mktemp("union")
    (root / "ret").mkdir()
    docs = [{"_id": f"d{i}", "text": f"a {w} near the {WORDS[(i + 3) % 12]}"} for i, w in enumerate(WORDS)]
    queries = [{"_id": f"q{i}", "text": f"where is the {WORDS[2 * i]}"} for i in range(5)]
    (root / "ret/corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    (root / "ret/queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    qrels = ["query-id\tcorpus-id\tscore"] + [f"q{i}\td{2 * i}\t1" for i in range(5)]
    (root / "ret/qrels.tsv").write_text("\n".join(qrels) + "\n", encoding="utf-8")
    for name, shift in (("a", 1), ("b", 5)):
        rows = ["sentence1\tsentence2\tscore"] + [
            f"the {w} is here\tthe {WORDS[(i + shift) % 12]} is here\t{(i * shift) % 5}" for i, w in enumerate(WORDS)
        ]
        (root / f"{name}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (root / "retrieval.toml").write_text(RETRIEVAL, encoding="utf-8")
    (root / "pairs.toml").write_text(PAIRS, encoding="utf-8")
    files = [root / "retrieval.toml", root / "pairs.toml"]
    export_sentences(root / "none", root / "export", task_files=files, union=True)
    write(root / "union.h5", root / "export", encode, progress=False)
    return root, files


TASKS = ("OwnRetrieval", "OwnPairsA", "OwnPairsB")
ORDERS = [TASKS, ("OwnPairsA", "OwnRetrieval", "OwnPairsB"), ("OwnPairsB", "OwnPairsA", "OwnRetrieval")]


def options(union):
    root, files = union
    return ["--data", root / "none", "--bootstrap", "0", *[arg for path in files for arg in ("--task-file", path)]]


@pytest.fixture(scope="module")
def alone(union, tmp_path_factory):
    """Each task's results scored alone from the union file."""
    from click.testing import CliRunner

    from embeval.cli.main import cli

    out, found = tmp_path_factory.mktemp("alone"), {}
    for task in TASKS:
        args = ["score", union[0] / "union.h5", *options(union), "--tasks", task, "--out", out / f"{task}.json"]
        done = CliRunner().invoke(cli, [str(a) for a in args])
        assert done.exit_code == 0, done.stderr
        found[task] = json.loads((out / f"{task}.json").read_text())["tasks"][task]["results"]
    return found


@pytest.mark.parametrize("order", ORDERS, ids="-".join)
def test_every_order_of_a_union_scores_as_each_task_alone(union, alone, cli, tmp_path, order):
    vectors = union[0] / "union.h5"
    done = cli("score", vectors, *options(union), "--tasks", ",".join(order), "--out", tmp_path / "all.json")
    assert done.exit_code == 0, done.stderr
    together = json.loads((tmp_path / "all.json").read_text())["tasks"]
    assert list(together) == list(order)
    assert {task: entry["results"] for task, entry in together.items()} == alone
    done = cli("sweep", vectors, *options(union), "--tasks", ",".join(order), "--out-dir", tmp_path / "sweep")
    assert done.exit_code == 0, done.stderr
    swept = json.loads((tmp_path / "sweep" / "union.results.json").read_text())["tasks"]
    assert {task: entry["results"] for task, entry in swept.items()} == alone
