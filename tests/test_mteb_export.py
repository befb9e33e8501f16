"""`embeval export-mteb`: MTEB's result files, read back by the real mteb client (no network, no model)."""

import copy
import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest
from reliability_helpers import refused
from report_helpers import need

from embeval.formats.results import figures_digest
from embeval.reports import mteb as export
from embeval.tasks.registry import TASKS

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "example" / "results-minilm.json"
MODEL = "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def client():
    if importlib.util.find_spec("mteb") is None:
        need("the mteb package", "pip install '.[mteb]'")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import mteb

    return mteb


def with_mteb_figures(tmp_path, sick_pairs=9927):
    """The example results with MTEB-protocol figures for STS-B and SICK-R added, as embeval records them:
    the task STSBenchmarkRaw (raw cased test sentences, cosine) and SICK-R's `mteb` figures (all pairs)."""
    record = json.loads(EXAMPLE.read_text())
    raw = {
        "test": {"pearson": 0.8301, "spearman": 0.8203, "nsamples": 1379},
        "all": {
            coef: {"mean": value, "wmean": value, "pooled": value}
            for coef, value in (("pearson", 0.8301), ("spearman", 0.8203))
        },
    }
    record["tasks"]["STSBenchmarkRaw"] = {"kind": "sts", "results": raw, "vectors": {"dim": 384}, "seconds": 0.5}
    sick = record["tasks"]["SICKRelatedness"]
    if sick["results"]["mteb"]["nsamples"] != sick_pairs:  # as a run on fewer pairs would record it
        sick["results"]["mteb"]["nsamples"] = sick_pairs
        sick["figures_sha256"] = figures_digest(sick)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(record))
    return path, record


def test_every_file_loads_in_mteb_with_the_same_main_scores(client, tmp_path):
    path, record = with_mteb_figures(tmp_path)
    folder, written, notes = export.export(path, MODEL, tmp_path / "cache", revision="8b3219a")
    assert notes == [] and len(written) == 7
    assert folder == tmp_path / "cache" / "results" / "sentence-transformers__all-MiniLM-L6-v2" / "8b3219a"
    expected = {
        "STS12": record["tasks"]["STS12"]["results"]["all"]["spearman"]["pooled"],
        "STS16": record["tasks"]["STS16"]["results"]["all"]["spearman"]["pooled"],
        "STSBenchmark": 0.8203,
        "SICK-R": record["tasks"]["SICKRelatedness"]["results"]["mteb"]["spearman"],
    }
    loaded = client.ResultCache(cache_path=tmp_path / "cache").load_results(
        include_remote=False, validate_and_filter=True, require_model_meta=True
    )
    assert [(m.model_name, m.model_revision) for m in loaded.model_results] == [(MODEL, "8b3219a")]
    results = {t.task_name: t for t in loaded.model_results[0].task_results}
    assert sorted(results) == sorted(["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICK-R"])
    for name, value in expected.items():
        assert results[name].get_score() == pytest.approx(value, abs=1e-6)  # to_disk rounds to 6 decimals
    from mteb.models.model_meta import ModelMeta
    from mteb.results import TaskResult

    for spec in (task.mteb for task in TASKS.values() if task.mteb is not None):
        task = client.get_task(spec.name)
        meta = task.metadata
        assert (meta.dataset["path"], meta.revision, meta.main_score) == (
            spec.dataset,
            spec.revision,
            "cosine_spearman",
        )
        assert meta.eval_splits == [export.SPLIT] and task.hf_subsets == [export.SUBSET]
        assert meta.hf_subsets_to_langscripts[export.SUBSET] == export.LANGUAGES
        stats = Path(client.__file__).parent / "descriptive_stats" / "STS" / f"{spec.name}.json"
        assert json.loads(stats.read_text())[export.SPLIT]["num_samples"] == spec.pairs
        from_disk = TaskResult.from_disk(folder / f"{spec.name}.json")
        scores = from_disk.scores[export.SPLIT][0]
        assert scores["main_score"] == scores["cosine_spearman"]
        assert from_disk.main_score == pytest.approx(results[spec.name].get_score())
        assert from_disk.is_mergeable(task)
    meta = json.loads((folder / "model_meta.json").read_text())
    meta.pop("is_cross_encoder")
    assert ModelMeta.model_validate(meta).embed_dim == 384


def test_published_minilm_figures_come_back_through_mteb(client, tmp_path):
    """MTEB's published cosine Spearman of all-MiniLM-L6-v2 on STS12-16 (x100), from embeval's pooled
    figures, and on SICK-R (all 9,927 pairs)."""
    folder, _, notes = export.export(EXAMPLE, MODEL, tmp_path)
    published = {"STS12": 72.37, "STS13": 80.60, "STS14": 75.59, "STS15": 85.39, "STS16": 78.99, "SICK-R": 77.58}
    from mteb.results import TaskResult

    for name, value in published.items():
        assert 100 * TaskResult.from_disk(folder / f"{name}.json").main_score == pytest.approx(value, abs=0.01)
    assert folder.name == export.NO_REVISION
    assert sorted(n.split(":")[0] for n in notes) == ["STSBenchmark"]


def test_no_figure_of_another_protocol_is_written(tmp_path):
    record = json.loads(EXAMPLE.read_text())
    chosen, notes = export.scores(record)
    assert sorted(chosen) == ["SICK-R", "STS12", "STS13", "STS14", "STS15", "STS16"]
    assert "tokenized" in " ".join(notes) and len(notes) == 1
    older = copy.deepcopy(record)  # SICK-R scored without its MTEB-protocol figures (all pairs)
    del older["tasks"]["SICKRelatedness"]["results"]["mteb"]
    chosen, notes = export.scores(older)
    assert "SICK-R" not in chosen and "test split only" in " ".join(notes) and len(notes) == 2
    path, _ = with_mteb_figures(tmp_path, sick_pairs=4927)
    chosen, notes = export.scores(json.loads(path.read_text()))
    assert "SICK-R" not in chosen and "STSBenchmark" in chosen
    assert notes == ["SICK-R: left out: scored on 4927 pairs, MTEB's SICK-R has 9927"]
    partial = copy.deepcopy(record)
    del partial["tasks"]["STS12"]["results"]["MSRpar"]
    chosen, notes = export.scores(partial)
    assert "STS12" not in chosen and any(n.startswith("STS12:") and "2358 pairs" in n for n in notes)


def test_bad_input_is_one_line(cli, tmp_path):
    record = json.loads(EXAMPLE.read_text())
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps(dict(record, format_version=2)))
    refused(cli("export-mteb", newer, "--model", MODEL, "--out", tmp_path), str(newer), "format version 2")
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(dict(record, tasks={"STS12": {"results": [1, 2]}})))
    refused(cli("export-mteb", edited, "--model", MODEL, "--out", tmp_path), str(edited), "STS12", "'results'")
    refused(
        cli("export-mteb", EXAMPLE, "--model", "all-MiniLM-L6-v2", "--out", tmp_path), "--model", "organization/model"
    )
    only_mr = tmp_path / "mr.json"
    only_mr.write_text(json.dumps(dict(record, tasks={"MR": record["tasks"]["MR"]})))
    refused(cli("export-mteb", only_mr, "--model", MODEL, "--out", tmp_path), str(only_mr), "no task")
    assert not (tmp_path / "results").exists()


def test_command_lists_what_it_wrote(cli, tmp_path):
    result = cli("export-mteb", EXAMPLE, "--model", MODEL, "--revision", "v1", "--out", tmp_path)
    assert result.exit_code == 0, result.stderr
    assert "STS12          main_score 0.7237  (cosine, all 3108 pairs of the 5 subsets pooled)" in result.stdout
    assert "not exported: STSBenchmark: left out" in result.stdout
    assert sorted(
        p.name for p in (tmp_path / "results" / "sentence-transformers__all-MiniLM-L6-v2" / "v1").iterdir()
    ) == ["SICK-R.json", "STS12.json", "STS13.json", "STS14.json", "STS15.json", "STS16.json", "model_meta.json"]


MTEB_KINDS = """
[[task]]
name = "Sprint"
kind = "pair-classification"
protocol = "mteb"
files = {test = "pairs.tsv"}
mteb = {name = "SprintDuplicateQuestions", revision = "d66bd1f72af766a5cc4b0ca5e00c162f89e8cc46"}
[[task]]
name = "News"
kind = "clustering"
embed_all = true
documents_per_experiment = 64
n_experiments = 2
files = {test = "documents.tsv"}
mteb = {name = "TwentyNewsgroupsClustering.v2", revision = "6125ec4e24fa026cec8a478383ee943acfbd5449"}
[[task]]
name = "Bank"
kind = "classification"
protocol = "mteb"
n_experiments = 2
files = {train = "train.tsv", test = "test.tsv"}
mteb = {name = "Banking77Classification", revision = "0fd18e25b25c072e09e0d92ab615fda904d66300"}
[[task]]
name = "Summaries"
kind = "summarization"
files = {test = "summaries.jsonl"}
mteb = {name = "SummEvalSummarization.v2", revision = "cda12ad7615edc362dbf25a00fdd61d3b1eaf93c"}
[[task]]
name = "Bornholm"
kind = "bitext-mining"
files = {test = "bitext.tsv"}
mteb = {name = "BornholmBitextMining", revision = "5b02048bd75e79275aa91a1fce6cdfd3f4a391cb", languages = ["dan-Latn"]}
"""


def test_task_files_mteb_kinds_load_in_mteb(client, cli, tmp_path):
    """Tasks of a task file scored MTEB's way (pair classification, clustering, classification,
    summarization, bitext mining), each declaring its MTEB counterpart, come back through mteb's
    ResultCache and TaskResult with their main scores, mergeable into mteb's tasks."""
    from mteb.results import TaskResult
    from threadpoolctl import threadpool_limits

    from embeval.formats.vectors import write

    rng = np.random.default_rng(0)
    table = {}

    def text(name):
        table.setdefault(name, rng.normal(size=8).astype(np.float32))
        return name

    files = {
        "pairs.tsv": ["sentence1\tsentence2\tlabel"]
        + [f"{text(f'a{i}')}\t{text(f'b{i}')}\t{i % 2}" for i in range(60)],
        "documents.tsv": ["text\tlabel"] + [f"{text(f'd{i}')}\t{i % 3}" for i in range(60)],
        "train.tsv": ["text\tlabel"] + [f"{text(f'r{i}')}\t{i % 3}" for i in range(60)],
        "test.tsv": ["text\tlabel"] + [f"{text(f'e{i}')}\t{i % 3}" for i in range(30)],
        "bitext.tsv": ["sentence1\tsentence2"] + [f"{text(f'x{i}')}\t{text(f'y{i}')}" for i in range(40)],
        "summaries.jsonl": [
            json.dumps(
                {
                    "human_summaries": [text(f"h{t}.{j}") for j in range(2)],
                    "machine_summaries": [text(f"m{t}.{j}") for j in range(4)],
                    "relevance": [1, 2, 3, 4],
                }
            )
            for t in range(8)
        ],
    }
    for name, lines in files.items():
        (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    task_file = tmp_path / "mteb.toml"
    task_file.write_text(MTEB_KINDS, encoding="utf-8")
    common = ("--data", tmp_path / "none", "--task-file", task_file)
    assert cli("export-sentences", *common, "--out", tmp_path / "sentences").exit_code == 0
    write(tmp_path / "v.h5", tmp_path / "sentences", lambda s: np.stack([table[x] for x in s]), progress=False)
    with threadpool_limits(1):
        scored = cli("score", tmp_path / "v.h5", *common, "--out", tmp_path / "r.json", "--no-save-predictions")
    assert scored.exit_code == 0, scored.stderr
    record = json.loads((tmp_path / "r.json").read_text())
    exported = cli("export-mteb", tmp_path / "r.json", "--model", MODEL, "--out", tmp_path / "cache", *common[2:])
    assert exported.exit_code == 0, exported.stderr
    headline = {"Sprint": "max_ap", "News": "v_measure", "Bank": "accuracy", "Summaries": "cosine_spearman"}
    headline["Bornholm"] = "f1"
    expected = {
        task.split('"')[1]: task.split('mteb = {name = "')[1].split('"')[0] for task in MTEB_KINDS.split("[[task]]")[1:]
    }
    loaded = client.ResultCache(cache_path=tmp_path / "cache").load_results(
        include_remote=False, validate_and_filter=True, require_model_meta=True
    )
    results = {t.task_name: t for t in loaded.model_results[0].task_results}
    assert sorted(results) == sorted(expected.values())
    folder = tmp_path / "cache" / "results" / "sentence-transformers__all-MiniLM-L6-v2" / export.NO_REVISION
    for task, mteb_name in expected.items():
        ours = record["tasks"][task]["results"][headline[task]]
        assert results[mteb_name].get_score() == pytest.approx(ours, abs=1e-6)
        from_disk = TaskResult.from_disk(folder / f"{mteb_name}.json")
        theirs = client.get_task(mteb_name)
        assert theirs.metadata.main_score == headline[task] and from_disk.is_mergeable(theirs)
        subset = from_disk.scores[export.SPLIT][0]
        assert subset["languages"] == theirs.metadata.hf_subsets_to_langscripts[subset["hf_subset"]]
