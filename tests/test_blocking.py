"""Figures that do not depend on how the work is cut: a retrieval task whose vectors are hashed word
counts with copies (most similarities exactly 0, many exactly equal) gives the same figures, bit
for bit, under any memory budget and with --ray; and --memory-budget is parsed, checked and
recorded."""

import json
import os
import zlib

import numpy as np
import pytest
from test_mteb_retrieval import write_task

from embeval.formats.vectors import write
from embeval.settings import parse_size

TASK_FILE = """name = "Ties"
kind = "retrieval"
depth = 100
[files]
corpus = "data/corpus.jsonl"
queries = "data/queries.jsonl"
qrels = "data/qrels/test.tsv"
"""
DIM = 64


def counts(texts):
    """Hashed word counts (DIM buckets) of each text: integers, with collisions."""
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    for row, text in zip(out, texts):
        for word in text.split():
            row[zlib.crc32(word.encode()) % DIM] += 1
    return out


def tie_heavy_task(seed=0, n_docs=600, n_queries=20, vocabulary=200):
    """Documents of 1-4 words (a third repeat an earlier text), queries of 1-2 words, and judgments
    that include documents sharing no word with their query (scored exactly 0)."""
    rng = np.random.default_rng(seed)
    texts = []
    for i in range(n_docs):
        if i > 10 and rng.random() < 0.33:
            texts.append(texts[int(rng.integers(0, i))])
        else:
            texts.append(" ".join(f"w{w}" for w in rng.integers(0, vocabulary, int(rng.integers(1, 5)))))
    docs = [{"_id": f"d{i}", "text": text} for i, text in enumerate(texts)]
    queries = [
        {"_id": f"q{i}", "text": " ".join(f"w{w}" for w in rng.integers(0, vocabulary, int(rng.integers(1, 3))))}
        for i in range(n_queries)
    ]
    qrels = [(q["_id"], f"d{d}", int(rng.integers(1, 3))) for q in queries for d in rng.choice(n_docs, 8, False)]
    return {"docs": docs, "queries": queries, "qrels": qrels, "candidates": []}


@pytest.fixture
def ties(tmp_path, cli):
    """(task file, vectors file) of the tie-heavy task."""
    write_task(tmp_path / "data", tie_heavy_task())
    (tmp_path / "task.toml").write_text(TASK_FILE, encoding="utf-8")
    export = tmp_path / "sentences"
    result = cli(
        "export-sentences", "--data", tmp_path / "none", "--out", export, "--task-file", tmp_path / "task.toml"
    )
    assert result.exit_code == 0, result.stderr
    write(tmp_path / "v.h5", export, counts, progress=False)
    return tmp_path / "task.toml", tmp_path / "v.h5"


def score(cli, tmp_path, ties, name, *extra):
    task_file, vectors = ties
    out = tmp_path / f"{name}.json"
    result = cli(
        "score",
        vectors,
        "--data",
        tmp_path / "none",
        "--task-file",
        task_file,
        "--out",
        out,
        "--bootstrap",
        "0",
        *extra,
    )
    assert result.exit_code == 0, result.stderr
    return json.loads(out.read_text())


def test_tie_heavy_figures_are_the_same_for_any_memory_budget(tmp_path, cli, ties):
    """A budget that searches a few hundred documents at a time, one that forces several sweeps of
    the queries, and the default: the same figures, bit for bit; the budget is recorded."""
    runs = {budget: score(cli, tmp_path, ties, budget, "--memory-budget", budget) for budget in ("1MiB", "3MB")}
    runs["default"] = score(cli, tmp_path, ties, "default")
    assert runs["1MiB"]["memory_budget"] == 1 << 20 and runs["3MB"]["memory_budget"] == 3_000_000
    assert runs["default"]["memory_budget"] is None
    figures = {name: run["tasks"]["Ties"]["results"] for name, run in runs.items()}
    assert figures["1MiB"] == figures["default"] == figures["3MB"]
    assert 0 < figures["default"]["ndcg_at_10"] < 1


@pytest.mark.slow
def test_tie_heavy_figures_are_the_same_with_ray(tmp_path, cli, ties):
    """--ray searches the corpus in shards (a local Ray, stopped after the run): the same figures,
    bit for bit, as one search in this process."""
    if os.environ.get("EMBEVAL_REQUIRE_RAY") != "1":  # CI requires Ray: there a missing Ray fails
        pytest.importorskip("ray")
    import ray

    try:
        sharded = score(cli, tmp_path, ties, "ray", "--ray")
    finally:
        if ray.is_initialized():
            ray.shutdown()
    assert not ray.is_initialized()
    alone = score(cli, tmp_path, ties, "alone")
    assert sharded["tasks"]["Ties"]["results"] == alone["tasks"]["Ties"]["results"]


@pytest.mark.parametrize(
    "text, size",
    [("512MiB", 512 << 20), ("2GiB", 2 << 30), ("1.5GB", 1_500_000_000), (" 4 mib ", 4 << 20), ("1048576", 1 << 20)],
)
def test_sizes_are_parsed(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize(
    "value, problem",
    [("lots", "not a size: 'lots'"), ("12XB", "not a size"), ("100kB", "below the smallest memory budget, 1MiB")],
)
def test_a_bad_memory_budget_is_one_line(tmp_path, cli, value, problem):
    """Refused before anything is read: one line naming the option, exit 2, no results."""
    result = cli("score", tmp_path / "absent.h5", "--memory-budget", value, "--out", tmp_path / "r.json")
    errors = [line for line in result.stderr.splitlines() if line.startswith("embeval: error:")]
    assert result.exit_code == 2 and len(errors) == 1 and "--memory-budget" in errors[0], result.stderr
    assert problem in errors[0]
    assert not (tmp_path / "r.json").exists()
