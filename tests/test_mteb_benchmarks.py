"""Benchmark means (Mean (Task), Mean (TaskType), each type's mean) and the Borda rank over results files,
held to mteb 2.26.24's own leaderboard table code: on mteb's long results frame, and on the MTEB result
files `embeval export-mteb` writes of three encoders' results, read back by mteb's ResultCache."""

import json

import numpy as np
import pytest
from mteb_helpers import mteb_client

from embeval import stats
from embeval.formats import predictions
from embeval.tasks import benchmarks as bm
from embeval.tasks.registry import recorded_spec

# Models mteb's table keeps (it joins the results with its model registry).
MODELS = [
    "sentence-transformers/all-MiniLM-L6-v2",
    "sentence-transformers/all-mpnet-base-v2",
    "intfloat/e5-small-v2",
    "BAAI/bge-small-en-v1.5",
]
AGREEMENT = 1e-12  # measured: equal, or 1 ulp (polars sums in another order)


def _summary(mteb, rows, benchmark):
    import polars as pl
    from mteb.benchmarks._create_table import _create_summary_table

    table = _create_summary_table(pl.DataFrame(rows), aggregations=benchmark.aggregations).df
    return {row["Model"]: row for row in table.to_dicts()}


def _check(theirs, ours):
    assert theirs["Rank (Borda)"] == ours.borda
    for name, value in [*ours.means.items(), *ours.types.items()]:
        if value is None:
            assert theirs[name] is None, name
        else:
            assert theirs[name] == pytest.approx(value, abs=AGREEMENT, rel=0), name


@pytest.mark.slow
def test_means_and_borda_equal_mtebs_table_on_its_benchmark():
    """MTEB(eng, v2)'s 41 tasks, four models: subsets averaged into a task, tasks a model misses (its
    means undefined, its Borda points from the rest), and tied scores (Borda's average ranks)."""
    mteb = mteb_client()
    benchmark = mteb.get_benchmark("MTEB(eng, v2)")
    rng = np.random.default_rng(7)
    rows, runs = [], [{} for _ in MODELS]
    names = [t.metadata.name for t in benchmark.tasks]
    for i, task in enumerate(benchmark.tasks):
        name = task.metadata.name
        for m, model in enumerate(MODELS):
            if m == 3 and i < 4:
                continue
            values = []
            for subset in ("a", "b", "c")[: 1 + i % 3]:
                value = float(np.round(rng.uniform(0.2, 0.9), 1))  # one decimal: many ties
                rows.append({"model_name": model, "task_name": name, "subset": subset, "split": "test", "score": value})
                values.append(value)
            runs[m][name] = bm.TaskScore(name, task.metadata.type, task.metadata.main_score, float(np.mean(values)))
    theirs = _summary(mteb, rows, benchmark)
    ours = bm.aggregate(bm.Benchmark("MTEB(eng, v2)", tuple(names)), runs)
    assert ours[3].means[bm.MEAN_TASK] is None and ours[3].types["Classification"] is not None
    assert len({a.borda for a in ours}) > 1
    for model, agg in zip(MODELS, ours):
        _check(theirs[model], agg)


TASKS = """
[[task]]
name = "Sprint"
kind = "pair-classification"
protocol = "mteb"
files = {test = "pairs.tsv"}
mteb = {name = "SprintDuplicateQuestions", revision = "d66bd1f72af766a5cc4b0ca5e00c162f89e8cc46"}
[[task]]
name = "Twitter"
kind = "pair-classification"
protocol = "mteb"
files = {test = "pairs2.tsv"}
mteb = {name = "TwitterSemEval2015", revision = "70970daeab8776df92f5ea462b6173c0b46fd2d1"}
[[task]]
name = "News"
kind = "clustering"
embed_all = true
documents_per_experiment = 48
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
"""
SCORED = {"Sprint": "SprintDuplicateQuestions", "Twitter": "TwitterSemEval2015", "Bank": "Banking77Classification"}


def _files(folder):
    texts = []

    def text(name):
        texts.append(name)
        return name

    files = {
        "pairs.tsv": ["sentence1\tsentence2\tlabel"]
        + [f"{text(f'a{i}')}\t{text(f'b{i}')}\t{i % 2}" for i in range(40)],
        "pairs2.tsv": ["sentence1\tsentence2\tlabel"]
        + [f"{text(f'c{i}')}\t{text(f'd{i}')}\t{(i // 2) % 2}" for i in range(40)],
        "documents.tsv": ["text\tlabel"] + [f"{text(f'n{i}')}\t{i % 3}" for i in range(48)],
        "train.tsv": ["text\tlabel"] + [f"{text(f'r{i}')}\t{i % 3}" for i in range(48)],
        "test.tsv": ["text\tlabel"] + [f"{text(f'e{i}')}\t{i % 3}" for i in range(30)],
        "summaries.jsonl": [
            json.dumps(
                {
                    "human_summaries": [text(f"h{t}.{j}") for j in range(2)],
                    "machine_summaries": [text(f"m{t}.{j}") for j in range(4)],
                    "relevance": [1, 2, 3, 4],
                }
            )
            for t in range(6)
        ],
    }
    for name, lines in files.items():
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "mteb.toml").write_text(TASKS, encoding="utf-8")
    return texts


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """Three encoders' results of the task file (the third scored three of its five tasks), saved
    predictions, 200 bootstrap resamples."""
    from click.testing import CliRunner
    from threadpoolctl import threadpool_limits

    from embeval.cli.main import cli
    from embeval.formats.vectors import write

    folder = tmp_path_factory.mktemp("bench")
    texts = _files(folder)
    runner = CliRunner()
    common = ("--data", str(folder / "none"), "--task-file", str(folder / "mteb.toml"))
    assert runner.invoke(cli, ["export-sentences", *common, "--out", str(folder / "sentences")]).exit_code == 0
    paths = []
    for k in range(3):
        rng = np.random.default_rng(k)
        table = {t: rng.normal(size=6).astype(np.float32) for t in texts}
        vectors = folder / f"v{k}.h5"
        write(vectors, folder / "sentences", lambda s, table=table: np.stack([table[x] for x in s]), progress=False)
        out = folder / f"r{k}.json"
        only = ["--tasks", ",".join(SCORED)] if k == 2 else []
        with threadpool_limits(1):
            result = runner.invoke(
                cli, ["score", str(vectors), *common, "--out", str(out), "--bootstrap", "200", *only]
            )
        assert result.exit_code == 0, result.output
        assert f"benchmark {bm.IMPLICIT}: {5 if k < 2 else 3} of {5 if k < 2 else 3} tasks" in result.output
        paths.append(out)
    return folder, paths


@pytest.mark.slow
def test_results_json_and_report_equal_mtebs_table_on_exported_files(scored):
    """Each encoder's exported MTEB result files, read by mteb's ResultCache and aggregated by mteb's
    table code over the same benchmark, give embeval's benchmark figures: of each results file alone
    (its JSON and terminal table) and of the three files together (the report, with the Borda rank)."""
    mteb = mteb_client()
    from click.testing import CliRunner

    from embeval.cli.main import cli
    from embeval.reports import tables as rep

    folder, paths = scored
    runner = CliRunner()
    for model, path in zip(MODELS, paths):
        exported = runner.invoke(cli, ["export-mteb", str(path), "--model", model, "--out", str(folder / "cache")])
        assert exported.exit_code == 0, exported.output
    loaded = mteb.ResultCache(cache_path=folder / "cache").load_results(include_remote=False, require_model_meta=True)
    names = list(dict.fromkeys(SCORED.values())) + ["TwentyNewsgroupsClustering.v2", "SummEvalSummarization.v2"]
    benchmark = mteb.Benchmark(name="five", tasks=mteb.get_tasks(tasks=names))
    frame = loaded._to_results_df(benchmark.tasks)
    records = [json.loads(p.read_text()) for p in paths]
    runs = [bm.task_scores(r["tasks"]) for r in records]
    together = bm.aggregate(bm.Benchmark(bm.IMPLICIT), runs)
    theirs = _summary(mteb, frame.to_dicts(), benchmark)
    for model, agg in zip(MODELS, together):
        _check(theirs[model], agg)
    assert together[2].means[bm.MEAN_TASK] is None and together[2].missing
    for model, record in zip(MODELS, records):  # each file alone: its results JSON
        alone = _summary(mteb, [row for row in frame.to_dicts() if row["model_name"] == model], benchmark)[model]
        body = record["benchmarks"][bm.IMPLICIT]
        for name in bm.MEANS:
            assert body[name] == pytest.approx(alone[name], abs=AGREEMENT, rel=0)
        for name, value in body["types"].items():
            assert value == pytest.approx(alone[name], abs=AGREEMENT, rel=0)
        low, high = body["ci"][bm.MEAN_TASK]["low"], body["ci"][bm.MEAN_TASK]["high"]
        assert low < body[bm.MEAN_TASK] < high
    tables, _ = rep.build(paths, labels=["a", "b", "c"])
    (table,) = [t for t in tables if t.key == f"benchmark-{bm.IMPLICIT}"]
    mean_task = table.header.index(bm.MEAN_TASK)
    for row, agg in zip(table.rows, together):
        value = agg.means[bm.MEAN_TASK]
        assert row[mean_task].value == (None if value is None else pytest.approx(100 * value, abs=1e-9))
        assert row[-1].text == str(agg.borda)
    html = runner.invoke(cli, ["report", *map(str, paths), "--format", "html", "--out", str(folder / "r.html")])
    assert html.exit_code == 0 and "Mean (TaskType)" in (folder / "r.html").read_text()
    shown = runner.invoke(cli, ["report", str(paths[0])])
    assert f"{bm.IMPLICIT} (MTEB's means)" in shown.output


@pytest.mark.slow
def test_benchmark_resamples_are_each_tasks_own(scored):
    """A task's resampled main scores, as the benchmark interval aggregates them, give that task's
    own recorded interval: the benchmark resamples each task's items exactly as its interval does."""
    _, paths = scored
    record = json.loads(paths[0].read_text())
    sets = predictions.read_beside(paths[0], record["predictions"])["encoder"]
    scores = bm.task_scores(record["tasks"])
    for name, task in (("Sprint", "SprintDuplicateQuestions"), ("Bank", "Banking77Classification")):
        values = bm.resampled_values(
            {task: scores[task]}, record["tasks"], [sets], [scores], record["config"]["seed"], 200
        )
        low, high = stats.interval(values[0][task])
        path = recorded_spec(name, record["tasks"][name]).figures[0].path
        own = record["tasks"][name]["ci"]["figures"][path]
        assert (low, high) == pytest.approx((own["low"], own["high"]), abs=1e-12)


@pytest.mark.slow
def test_compare_tests_benchmark_means_with_the_tasks_holm_adjusted(scored):
    from embeval.reports import compare as cmp

    _, paths = scored
    result = cmp.compare(paths[:2])
    rows = [r for r in result["rows"] if r["task"] == bm.IMPLICIT]
    assert [r["figure"] for r in rows] == list(bm.MEANS)
    record = [json.loads(p.read_text())["benchmarks"][bm.IMPLICIT] for p in paths[:2]]
    for row in rows:
        assert row["diff"] == pytest.approx(record[1][row["figure"]] - record[0][row["figure"]], abs=1e-12)
        assert row["low"] <= row["diff"] <= row["high"]
    pvalues = [r["p"] for r in result["rows"]]
    assert [r["p_holm"] for r in result["rows"]] == stats.holm(pvalues)
    assert len(result["rows"]) > len(rows)
    skipped = cmp.compare([paths[0], paths[2]])
    assert any(n["task"] == bm.IMPLICIT for n in skipped["not_compared"])


def test_a_recorded_mteb_entry_is_taken_as_recorded():
    """Results entries of MTEB tasks scored by name record their task, type, main score and value."""
    entries = {
        "A": {"mteb": {"task": "A", "type": "Retrieval", "main_score": "ndcg_at_10", "value": 0.5}},
        "B": {"mteb": {"task": "B", "type": "Retrieval", "main_score": "ndcg_at_10", "value": 0.3}},
        "C": {"mteb": {"task": "C", "type": "STS", "main_score": "cosine_spearman", "value": 0.8}},
    }
    (agg,) = bm.aggregate(bm.Benchmark("x", ("A", "B", "C", "D")), [bm.task_scores(entries)])
    assert agg.means == {bm.MEAN_TASK: pytest.approx(1.6 / 3), bm.MEAN_TASK_TYPE: pytest.approx(0.6)}
    assert agg.types == {"Retrieval": pytest.approx(0.4), "STS": 0.8} and agg.tasks == ["A", "B", "C"]


def test_benchmarks_named_by_the_entries_mteb_rows():
    """Entries of tasks scored by name record the benchmarks each was asked through: each is a
    benchmark of the tasks naming it, its (subset, split) rows averaged into the task."""
    row = {"type": "Classification", "main_score": "accuracy", "benchmarks": ["B"]}
    record = {
        "tasks": {
            "X.en": {"mteb": dict(row, task="X", value=0.6, subset="en", split="test")},
            "X.de": {"mteb": dict(row, task="X", value=0.4, subset="de", split="test")},
            "Y": {"mteb": dict(row, task="Y", type="STS", value=0.9, benchmarks=["B", "C"])},
        }
    }
    assert bm.declared(record) == [bm.Benchmark("B", ("X", "Y")), bm.Benchmark("C", ("Y",))]
    body = bm.section(record)
    assert body["B"][bm.MEAN_TASK] == pytest.approx(0.7) and body["B"]["types"]["Classification"] == 0.5
    assert body["C"]["tasks"] == ["Y"] and body["C"][bm.MEAN_TASK_TYPE] == 0.9
