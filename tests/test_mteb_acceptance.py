"""The documented workflow of MTEB by name (docs/mteb-by-name.md), end to end, as a user runs it: the
whole of MTEB(eng, v2) by name, on copies of its 41 datasets written here (bench/mteb_copies.py, a
few hundred rows each) in the layouts real copies have (parquet, JSON lines and gzipped JSON lines
with README configs, mteb's one-row layout of pair classification, sets of documents for clustering,
queries named like their documents; judgments naming documents that are not in the corpus, documents
listed twice, a copy that records no revision), then

    embeval export-sentences --mteb "MTEB(eng, v2)" --mteb-data datasets/ --out sentences/ --union
    python my_encoder.py sentences/ vectors.h5   (embeval.vectors.write, hashed word counts: many exact ties)
    embeval score vectors.h5 --mteb "MTEB(eng, v2)" --mteb-data datasets/ --out results.json
    embeval export-mteb results.json --model my-org/my-encoder --out mteb-results/

run as docs/mteb-by-name.md's own shell block writes it (bash, `embeval` on the PATH; the docs' other
blocks run too), and mteb's ResultCache loads the export; every task's main score equals
`mteb.evaluate`'s on the same copies and vectors. The `hf download` the docs show is a command of the
installed huggingface_hub with the options shown.

Agreement measured with mteb 2.26.24: every main score equal within 1e-6 (retrieval, reranking,
classification, clustering, pair classification and summarization exactly; STS within float32)."""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from mteb_helpers import mteb_client
from mteb_snapshots import words
from test_mteb_by_name import HashedCounts
from threadpoolctl import threadpool_limits

REPO = Path(__file__).resolve().parents[1]
BENCHMARK = "MTEB(eng, v2)"
NO_REVISION = "BIOSSES"  # its copy records no revision
ONE_ROW = "TwitterURLCorpus"  # pair classification in mteb's one-row layout
TOLERANCE = 1e-6


def copies_module():
    spec = importlib.util.spec_from_file_location("mteb_copies", REPO / "bench" / "mteb_copies.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def small(module, task):
    """A task's sizes for the test: a few hundred rows (ArXiv's clustering: the 2,048 documents mteb
    samples, and a few more), at most 20 labels for clustering."""
    size = module.shape(task, scale=0, least=120)
    if task.metadata.type in module.SEARCH:
        size.update(documents=150, queries=12, relevant=min(size["relevant"], 4))
        if "distinct_queries" in size:
            size["distinct_queries"] = 8
        if "candidates" in size:
            size["candidates"] = 15
    if task.metadata.type == "Clustering" and size["documents"] < 2048:
        size["labels"] = min(size["labels"], 20)
    return size


@pytest.fixture(scope="module")
def client():
    return mteb_client()


@pytest.fixture(scope="module")
def workspace(client, tmp_path_factory):
    """A user's folder: datasets/ with a copy of every dataset of the benchmark; embeval's and
    datasets' caches of its own (the environment the module's tests run with)."""
    module = copies_module()
    root = tmp_path_factory.mktemp("user")
    rng = np.random.default_rng(45)
    tasks = list(client.get_benchmark(BENCHMARK).tasks)
    for i, task in enumerate(tasks):
        module.write_copy(
            task,
            root / "datasets",
            small(module, task),
            lambda n, role: words(rng, n, 40),
            rng,
            form=module.FORMS[i % len(module.FORMS)],
            revision=task.metadata.name != NO_REVISION,
            one_row=task.metadata.name == ONE_ROW,
            quirks=task.metadata.type == "Retrieval",
        )
    return root, tasks


@pytest.fixture(autouse=True)
def environment(workspace, monkeypatch):
    root, _ = workspace
    monkeypatch.setenv("EMBEVAL_CACHE", str(root / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", root / "hf-datasets")


@pytest.fixture(scope="module")
def theirs(client, workspace):
    """{task: TaskResult} of mteb.evaluate on the same copies (each task's path pointed at its copy),
    an encoder serving the same vectors (hashed word counts, mteb's cosine)."""
    root, tasks = workspace
    # The benchmark's own objects (its subsets and splits), which mteb keeps for the whole process:
    # each pointed at its copy for this evaluation only, its metadata restored after it.
    pointed = list(client.get_benchmark(BENCHMARK).tasks)
    originals = [task.metadata for task in pointed]
    for task in pointed:
        meta = task.metadata.model_copy(deep=True)
        meta.dataset["path"] = str(root / "datasets" / task.metadata.dataset["path"])
        task.metadata = meta
    import datasets

    saved = datasets.config.HF_DATASETS_CACHE
    datasets.config.HF_DATASETS_CACHE = root / "hf-mteb"
    try:
        with threadpool_limits(1):
            result = client.evaluate(HashedCounts(), pointed, cache=None, show_progress_bar=False)
    finally:
        datasets.config.HF_DATASETS_CACHE = saved
        for task, meta in zip(pointed, originals, strict=True):
            task.metadata = meta
    return {r.task_name: r for r in result.task_results}


def shell_blocks(path):
    """The shell blocks of a markdown file, with the reason of a `<!-- not run: ... -->` before them."""
    from test_docs import SHELL, blocks

    return [b for b in blocks(path.read_text(encoding="utf-8"), path) if b.lang in SHELL]


MY_ENCODER = """import sys
sys.path.insert(0, {tests!r})
from mteb_snapshots import encode
from embeval.formats.vectors import write
write(sys.argv[2], sys.argv[1], encode, progress=False)
"""


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")
def test_the_documented_workflow_on_the_whole_benchmark_equals_mteb(client, workspace, theirs, tmp_path):
    """Every shell block of docs/mteb-by-name.md that runs embeval runs as written (bash, in a folder
    holding datasets/ and the docs' my_encoder.py, `embeval` on the PATH): the workflow on the whole
    benchmark, whose every task's main score, in the results and in the export mteb's ResultCache
    loads, equals mteb.evaluate's on the same copies and vectors. The one block that downloads is a
    command of the installed huggingface_hub with the options it shows."""
    root, tasks = workspace
    names = [t.metadata.name for t in tasks]
    assert tasks[0].metadata.type == "Retrieval" and len(names) == 41  # retrieval first, as mteb lists it
    here = tmp_path / "user"
    here.mkdir()
    (here / "datasets").symlink_to(root / "datasets")
    (here / "my_encoder.py").write_text(MY_ENCODER.format(tests=str(REPO / "tests")), encoding="utf-8")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "embeval").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m embeval "$@"\n')
    (bin_dir / "embeval").chmod(0o755)
    env = dict(
        os.environ,
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        PYTHONPATH=str(REPO),
        EMBEVAL_CACHE=str(root / "cache"),
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        OMP_NUM_THREADS="1",
    )
    ran, downloads, workflow = 0, [], None
    for block in shell_blocks(REPO / "docs" / "mteb-by-name.md"):
        if re.search(r"^\s*(hf|huggingface-cli) download", block.text, re.M):
            downloads.append(block)
            continue
        if "embeval " not in block.text:
            continue
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", block.text], cwd=here, env=env, capture_output=True, text=True,
            timeout=900,
        )  # fmt: skip
        assert done.returncode == 0, f"{block.where}:\n{block.text}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        if "embeval export-mteb" in block.text:
            workflow = (block, done)
        ran += 1
    assert ran >= 2 and workflow is not None
    block, done = workflow
    for step in ("export-sentences --mteb", "python my_encoder.py", "embeval score", "embeval export-mteb"):
        assert step in block.text, (step, block.where)  # the whole workflow in one block: its output is checked
    assert f'--mteb "{BENCHMARK}"' in block.text and "--union" in block.text

    # export-sentences: the union, the copy without a revision, the judgments naming missing documents
    assert "the union saves" in done.stdout
    assert f"{NO_REVISION}: " in done.stderr and "records no revision" in done.stderr
    assert "documents not in the corpus" in done.stderr and str(root / "cache") not in done.stderr
    record = json.loads((here / "results.json").read_text())
    assert list(record["mteb"]) == names
    assert {s["type"] for s in record["mteb"].values()} == {t.metadata.type for t in tasks}
    assert "revision_unverified" in record["mteb"][NO_REVISION]
    for name, summary in record["mteb"].items():
        assert summary["value"] == pytest.approx(theirs[name].get_score(), abs=TOLERANCE), name
        if summary["type"] in ("Retrieval", "Reranking"):
            assert summary["tie_exposure"]["queries"] > 0, name
    arguana = record["mteb"]["ArguAna"]["parts"]["ArguAna"]["notes"]
    assert any("documents not in the corpus" in note and "/datasets/mteb/arguana/" in note for note in arguana)
    loaded = client.ResultCache(cache_path=here / "mteb-results").load_results(
        tasks=BENCHMARK, include_remote=False, validate_and_filter=True, require_model_meta=True
    )
    exported = {r.task_name: r for r in loaded.model_results[0].task_results}
    assert sorted(exported) == sorted(names)
    for name, result in exported.items():
        assert result.get_score() == pytest.approx(theirs[name].get_score(), abs=1e-5), name  # MTEB's rounding
    notes = exported[NO_REVISION].scores["test"][0]["embeval_notes"]
    assert "not verified" in notes["revision_unverified"]

    assert downloads, "the docs show how to download a dataset"
    hf = shutil.which("hf")
    assert hf is not None, "huggingface_hub's hf command"
    usage = subprocess.run([hf, "download", "--help"], capture_output=True, text=True, env=env, timeout=120)
    for block in downloads:
        command = re.sub(r"\\\n\s*", " ", block.text).split()
        assert command[:2] == ["hf", "download"], block.text
        for option in (w for w in command if w.startswith("--")):
            assert option in usage.stdout, (option, block.where)
