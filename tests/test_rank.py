"""`embeval rank`: a leaderboard of results files with rank intervals.

- The numbers against an independent computation: a direct implementation of the same bootstrap on a
  tiny case (each resample built as a data set of repeated items, the benchmark aggregated with loops,
  Borda's points counted one task at a time, the step-down tests run hypothesis by hypothesis), and
  analytic cases (identical runs, runs far apart).
- Results files end to end: each task's figure and interval equal the ones its results file records,
  the benchmark's means, intervals and Borda ranks equal `report`'s, reading the runs in groups of any
  size gives the same numbers, a run that scored other test items is refused for that task in one
  line, a run missing a task has no aggregate; the command, its formats and errors, the report's
  section, and the HTML page in headless Chromium (a screenshot).
"""

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from reliability_helpers import refused
from report_helpers import need

from embeval import stats
from embeval.formats.results import plain
from embeval.reports import rank
from embeval.tasks import benchmarks as bm

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "docs" / "example"
RANK_EXAMPLE = EXAMPLE / "rank"


# ---------------------------------------------------------------------------------------------- by hand


def _tiny_case(seed=5):
    """Four runs, three tasks (two accuracies, one mean of per-item values) of 40 to 60 items."""
    rng = np.random.default_rng(seed)
    tasks = {}
    for name, n, kind in (("T1", 40, "acc"), ("T2", 60, "acc"), ("T3", 50, "mean")):
        item = rng.normal(size=n)
        runs = []
        for r in range(4):
            z = item + rng.normal(size=n) + 0.3 * r
            if kind == "acc":
                runs.append({"gold": np.zeros(n, dtype=np.int64), "pred": (z < 0.2).astype(np.int64)})
            else:
                runs.append({"value": 1 / (1 + np.exp(-z))})
        tasks[name] = (kind, runs)
    return tasks


def _naive_resamples(kind, runs, seed, task, B):
    """(runs, B) figures, each resample built as the data set of its items repeated as often as drawn."""
    n = len(next(iter(runs[0].values())))
    counts = stats.resample_counts(stats.rng_for(seed, task, "all"), n, B).astype(int)  # the task's stream
    out = np.empty((len(runs), B))
    for b in range(B):
        idx = np.repeat(np.arange(n), counts[b])
        for r, arrays in enumerate(runs):
            if kind == "acc":
                out[r, b] = np.mean(arrays["pred"][idx] == arrays["gold"][idx])
            else:
                out[r, b] = np.mean(arrays["value"][idx])
    return out


def _naive_borda(per_task):
    """Borda's points of each run from {task: [figure per run]}, one task at a time, average ranks by hand."""
    runs = len(next(iter(per_task.values())))
    points = [0.0] * runs
    for figures in per_task.values():
        for i in range(runs):
            above = sum(1 for j in range(runs) if figures[j] > figures[i])
            tied = sum(1 for j in range(runs) if figures[j] == figures[i])
            points[i] += runs - (above + (tied + 1) / 2)
    return points


def _naive_tests(observed, values, alpha):
    """The step-down max-T from its definition: (p_adjusted {(i, j)}, rank_low, rank_high)."""
    k, B = values.shape
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    t, t_star = {}, {}
    for i, j in pairs:
        d_star = values[i] - values[j]
        centre = d_star.mean()
        se = np.sqrt(np.mean((d_star - centre) ** 2))
        t[i, j] = abs(observed[i] - observed[j]) / se
        t_star[i, j] = np.abs(d_star - centre) / se
    order = sorted(pairs, key=lambda pair: -t[pair])
    p, running = {}, 0.0
    for position, pair in enumerate(order):
        rest = order[position:]
        count = sum(1 for b in range(B) if max(t_star[q][b] for q in rest) >= t[pair])
        running = max(running, (1 + count) / (B + 1))
        p[pair] = running
    low, high = [], []
    for i in range(k):
        better = sum(1 for j in range(k) if j != i and p[min(i, j), max(i, j)] < alpha and observed[j] > observed[i])
        worse = sum(1 for j in range(k) if j != i and p[min(i, j), max(i, j)] < alpha and observed[i] > observed[j])
        low.append(1 + better)
        high.append(k - worse)
    return p, low, high


def test_rank_intervals_equal_a_naive_computation_on_a_tiny_case():
    seed, B, level = 3, 200, 0.95
    tasks = _tiny_case()
    statistic = {"acc": stats.STATISTICS["labels"]["acc"], "mean": stats.STATISTICS["values"]["mean"]}
    scale = {"acc": 0.01, "mean": 1.0}
    observed, values, naive = {}, {}, {}
    for name, (kind, runs) in tasks.items():
        observed[name] = scale[kind] * np.array([stats.observed(statistic[kind], a) for a in runs])
        values[name] = scale[kind] * stats.resampled(statistic[kind], runs, seed, name, B)
        naive[name] = _naive_resamples(kind, runs, seed, name, B)
        assert values[name] == pytest.approx(naive[name], abs=1e-12)
    types = {"T1": "Classification", "T2": "Classification", "T3": "Retrieval"}
    rankings = rank.aggregate_rankings(list(tasks), types, observed, values)
    assert [r.name for r in rankings] == [rank.BORDA, *bm.MEANS, "Classification", "Retrieval"]
    # the aggregates, resample by resample, with loops
    expected = {name: np.empty((4, B)) for name in (*bm.MEANS, "Classification", "Retrieval", rank.BORDA)}
    for b in range(B):
        for r in range(4):
            classification = (naive["T1"][r, b] + naive["T2"][r, b]) / 2
            expected["Classification"][r, b] = classification
            expected["Retrieval"][r, b] = naive["T3"][r, b]
            expected[bm.MEAN_TASK][r, b] = (naive["T1"][r, b] + naive["T2"][r, b] + naive["T3"][r, b]) / 3
            expected[bm.MEAN_TASK_TYPE][r, b] = (classification + naive["T3"][r, b]) / 2
        # (from the engine's figures, equal to the naive ones to 1e-12 but exact: equal figures tie)
        spread = {t: observed[t] + rank.BORDA_SPREAD * (values[t][:, b] - observed[t]) for t in tasks}
        expected[rank.BORDA][:, b] = _naive_borda(spread)
    labels = ["a", "b", "c", "d"]
    observed_points = _naive_borda(observed)
    report_borda = bm.borda([{t: observed[t][r] for t in tasks} for r in range(4)], list(tasks))
    assert list(rank.ranks_of(np.array(observed_points))) == report_borda
    for ranking in rankings:
        assert ranking.values == pytest.approx(expected[ranking.name], abs=1e-12), ranking.name
        summary = rank.summarize(ranking, level, labels)
        p, low, high = _naive_tests(ranking.observed, expected[ranking.name], 1 - level)
        for (i, j), value in p.items():
            assert summary["matrix"]["p_adjusted"][i][j] == pytest.approx(value, abs=1e-12)
            assert summary["matrix"]["diff"][i][j] == pytest.approx(ranking.observed[i] - ranking.observed[j])
        assert [r["rank_low"] for r in summary["runs"]] == low, ranking.name
        assert [r["rank_high"] for r in summary["runs"]] == high, ranking.name
        ranks = [1 + sum(v > x for v in ranking.observed) for x in ranking.observed]
        assert [r["rank"] for r in summary["runs"]] == ranks
        assert summary["best"] == [labels[r] for r in range(4) if low[r] == 1]
        if ranking.family != "borda":
            for r, run in enumerate(summary["runs"]):
                low_r, high_r = np.percentile(expected[ranking.name][r], [2.5, 97.5])
                assert (run["low"], run["high"]) == pytest.approx((low_r, high_r), abs=1e-12)
    some = rank.summarize(rankings[1], level, labels)  # this case has decided pairs and undecided ones
    flat = [p for row in some["matrix"]["p_adjusted"] for p in row]
    assert min(flat) < 0.05 < max(flat)


def test_borda_points_rank_as_mtebs_borda():
    """Borda's points give the report's Borda ranks (mteb's), with ties and missing tasks."""
    rng = np.random.default_rng(11)
    for _ in range(50):
        runs, tasks = int(rng.integers(2, 7)), int(rng.integers(1, 6))
        values = np.round(rng.uniform(0, 1, size=(tasks, runs)), 1)  # one decimal: ties
        values[rng.uniform(size=values.shape) < 0.15] = np.nan  # a run missing a task
        names = [f"t{t}" for t in range(tasks)]
        per_run = [{names[t]: values[t, r] for t in range(tasks) if np.isfinite(values[t, r])} for r in range(runs)]
        expected = bm.borda(per_run, names)
        found = rank.ranks_of(rank.borda_points(values[:, :, None])[:, 0])
        assert [None if np.isnan(x) else int(x) for x in found] == expected


def test_identical_runs_tie_and_runs_far_apart_are_ordered():
    """Identical predictions: every rank 1, every interval [1, 3], no decision. Accuracies 10%, 50% and 90%
    on 500 items: each run's rank known, [k, k]."""
    rng = np.random.default_rng(0)
    gold = np.zeros(500, dtype=np.int64)
    pred = (rng.uniform(size=500) < 0.3).astype(np.int64)
    same = [{"gold": gold, "pred": pred} for _ in range(3)]
    acc = stats.STATISTICS["labels"]["acc"]
    observed = np.array([stats.observed(acc, a) for a in same])
    summary = rank.summarize(rank.Ranking("T", "task", 1.0, observed, stats.resampled(acc, same, 1, "T")), 0.95, "abc")
    assert [(r["rank"], r["rank_low"], r["rank_high"]) for r in summary["runs"]] == [(1, 1, 3)] * 3
    assert summary["best"] == ["a", "b", "c"] and all(p == 1.0 for row in summary["matrix"]["p_adjusted"] for p in row)
    apart = [{"gold": gold, "pred": (rng.uniform(size=500) > p).astype(np.int64)} for p in (0.9, 0.1, 0.5)]
    observed = np.array([stats.observed(acc, a) for a in apart])
    summary = rank.summarize(rank.Ranking("T", "task", 1.0, observed, stats.resampled(acc, apart, 1, "T")), 0.95, "abc")
    assert [(r["rank"], r["rank_low"], r["rank_high"]) for r in summary["runs"]] == [(1, 1, 1), (3, 3, 3), (2, 2, 2)]
    assert summary["best"] == ["a"] and summary["top"] == "a"


def test_a_run_without_figure_in_a_ranking_is_not_ranked():
    values = np.array([[0.5, 0.6, 0.55], [np.nan] * 3, [0.1, 0.2, 0.15]])
    summary = rank.summarize(rank.Ranking("M", "mean", 100.0, np.array([0.55, np.nan, 0.15]), values), 0.95, "abc")
    assert summary["runs"][1] is None and summary["ranked"] == 2
    assert [summary["runs"][r]["rank"] for r in (0, 2)] == [1, 2]
    assert summary["matrix"]["diff"][1] == [None, None, None]


# ---------------------------------------------------------------------------------------------- files


def _copy_runs(folder, names=("results-bow.json", "results-minilm.json")):
    paths = []
    for name in names:  # a run's predictions are read beside it
        shutil.copy(EXAMPLE / name, folder)
        shutil.copy(EXAMPLE / name.replace(".json", ".predictions.npz"), folder)
        paths.append(folder / name)
    return paths


def test_each_tasks_figure_and_interval_are_its_results_files_own(tmp_path):
    """On the task's own resamples (the run's seed and resample count), a task's figure and interval in
    the leaderboard are the ones its results file records."""
    paths = _copy_runs(tmp_path)
    result = rank.rank(paths, labels=["BoW", "MiniLM"], tasks=["MRPC", "STS12", "MR"])
    records = [json.loads(p.read_text()) for p in paths]
    assert result["resamples"] == records[0]["config"]["bootstrap"] and result["benchmarks"] == []
    for task in result["tasks"]:
        for run, record in zip(task["runs"], records):
            entry = record["tasks"][task["name"]]
            path = next(iter(entry["ci"]["figures"]))  # the headline figure comes first
            own = entry["ci"]["figures"][path]
            assert (run["value"], run["low"], run["high"]) == pytest.approx(
                (own["value"], own["low"], own["high"]), abs=1e-12
            ), task["name"]
        assert task["best"] == ["MiniLM"] and [r["rank"] for r in task["runs"]] == [2, 1]
    assert result["order"] == [1, 0]  # no benchmark: the runs by their mean rank over the tasks


DOCS_DIMS = (16, 64, 256, 512, 1024)  # docs/ranking.md's example


@pytest.fixture(scope="module")
def toy_runs(tmp_path_factory):
    """docs/ranking.md's example: the tasks of docs/example/rank scored by the hashing bag of words at
    16 to 1024 dimensions (bow-DIM.json); and two more runs: of 1024 dimensions on three of the four
    tasks (three-tasks.json), and of 256 on a copy whose ToySimilarity data has one score edited
    (other-data.json)."""
    from click.testing import CliRunner
    from embeval.exporters.bow_numpy import HashingBagOfWords
    from threadpoolctl import threadpool_limits

    from embeval import export_sentences
    from embeval.cli.main import cli
    from embeval.formats.vectors import write

    root = tmp_path_factory.mktemp("toy")
    shutil.copytree(RANK_EXAMPLE, root / "tasks")
    other = root / "other"
    shutil.copytree(RANK_EXAMPLE, other)
    lines = (other / "similarity.tsv").read_text().splitlines(keepends=True)
    fields = lines[1].rstrip("\n").split("\t")
    lines[1] = "\t".join(fields[:2] + [str(float(fields[2]) + 1.0)]) + "\n"
    (other / "similarity.tsv").write_text("".join(lines))
    runner = CliRunner()
    paths = {}
    runs = [(f"bow-{dim}", root / "tasks", dim, None) for dim in DOCS_DIMS]
    runs += [
        ("three-tasks", root / "tasks", 1024, "ToyDuplicates,ToyTopics,ToyRetrieval"),
        ("other-data", other, 256, None),
    ]
    for name, folder, dim, only in runs:
        sentences = root / f"sentences-{folder.name}"
        if not sentences.exists():
            export_sentences(root / "none", sentences, task_files=[folder / "tasks.toml"])
        vectors = root / f"{name}.h5"
        write(vectors, sentences, HashingBagOfWords(dim).encode, progress=False)
        out = root / f"{name}.json"
        args = ["score", vectors, "--task-file", folder / "tasks.toml", "--data", root / "none", "--out", out]
        args += ["--quiet"] + (["--tasks", only] if only else [])
        with threadpool_limits(1):
            result = runner.invoke(cli, [str(a) for a in args])
        assert result.exit_code == 0, result.output
        paths[name] = out
    return root, paths


def test_the_example_data_is_what_its_script_writes(tmp_path):
    spec = importlib.util.spec_from_file_location("make_data", RANK_EXAMPLE / "make_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(tmp_path)
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert len(written) == 7
    for path in written:
        assert (tmp_path / path).read_bytes() == (RANK_EXAMPLE / path).read_bytes(), path


def test_the_docs_example_prints_the_leaderboard_the_docs_show(toy_runs, cli):
    _, paths = toy_runs
    docs = (REPO / "docs" / "ranking.md").read_text(encoding="utf-8")
    shown = docs.split("The leaderboard it prints first", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    files = sorted(str(paths[f"bow-{dim}"]) for dim in DOCS_DIMS)  # as the shell's bow-*.json
    printed = cli("rank", *files).stdout.splitlines()
    assert printed[1 : 2 + len(DOCS_DIMS) + 1] == shown.splitlines()


def test_benchmark_figures_equal_the_reports_and_reading_in_groups_changes_nothing(toy_runs):
    from embeval.reports import tables as rep

    _, paths = toy_runs
    files = [paths[n] for n in ("bow-16", "bow-64", "bow-1024", "three-tasks")]
    result = rank.rank(files, resamples=300)
    (benchmark,) = result["benchmarks"]
    assert benchmark["name"] == bm.IMPLICIT and benchmark["types"] == [
        "PairClassification",
        "STS",
        "Classification",
        "Retrieval",
    ]
    by = {r["name"]: r for r in benchmark["rankings"]}
    full = {r["name"]: r["runs"] for r in rank.rank(files[:3])["benchmarks"][0]["rankings"]}
    records = [json.loads(p.read_text()) for p in files]
    aggregates = bm.aggregate(bm.Benchmark(bm.IMPLICIT), [bm.task_scores(r["tasks"]) for r in records])
    for r, (record, aggregate) in enumerate(zip(records, aggregates)):
        assert (by[rank.BORDA]["runs"][r]["rank"]) == aggregate.borda
        for name in (*bm.MEANS, *benchmark["types"]):
            value = aggregate.means.get(name) if name in bm.MEANS else aggregate.types.get(name)
            run = by[name]["runs"][r]
            if value is None:
                assert run is None, (name, r)
                continue
            assert run["value"] == pytest.approx(value, abs=1e-12)
            if r < 3:  # the run's own interval (1000 resamples): the same as ranked on those resamples
                own = record["benchmarks"][bm.IMPLICIT]["ci"][name]
                assert (full[name][r]["low"], full[name][r]["high"]) == pytest.approx(
                    (own["low"], own["high"]), abs=1e-12
                ), name
    assert by[bm.MEAN_TASK]["runs"][3] is None and benchmark["missing"] == {"three-tasks": ["ToySimilarity"]}
    assert by[rank.BORDA]["runs"][3] is not None  # Borda counts the tasks a run scored
    assert benchmark["order"][:1] == [2] and by[bm.MEAN_TASK]["best"] == ["bow-1024"]
    tables, _ = rep.build(files)
    (table,) = [t for t in tables if t.key == f"benchmark-{bm.IMPLICIT}"]
    assert [row[-1].text for row in table.rows] == [str(a.borda) for a in aggregates]
    one_by_one = rank.rank(files, resamples=300, budget=1)  # every run's arrays read alone, on the same resamples
    assert json.dumps(one_by_one, sort_keys=True) == json.dumps(result, sort_keys=True)


def test_a_run_of_other_test_items_is_refused_for_that_task_in_one_line(toy_runs, cli, tmp_path):
    _, paths = toy_runs
    files = [paths[n] for n in ("bow-16", "bow-64", "other-data")]
    shown = cli("rank", *files, "--json", tmp_path / "r.json")
    assert shown.exit_code == 0, shown.stderr
    line = (
        f"{paths['other-data']}: ToySimilarity: left out of the ranking: it scored other task data than "
        "bow-16.json (data sha256 differs)"
    )
    assert shown.stderr.splitlines() == [f"embeval: warning: {line}"] and line in shown.stdout
    result = json.loads((tmp_path / "r.json").read_text())
    assert [n for n in result["notes"] if "left out" in n] == [line]
    similarity = next(t for t in result["tasks"] if t["name"] == "ToySimilarity")
    assert similarity["runs"][2] is None and similarity["ranked"] == 2
    topics = next(t for t in result["tasks"] if t["name"] == "ToyTopics")
    assert topics["ranked"] == 3  # its other tasks are ranked
    by = {r["name"]: r for r in result["benchmarks"][0]["rankings"]}
    assert by[bm.MEAN_TASK]["runs"][2] is None and by[bm.MEAN_TASK]["ranked"] == 2


def test_command_formats_json_and_report_section(toy_runs, cli, tmp_path):
    _, paths = toy_runs
    files = [paths[n] for n in ("bow-16", "bow-64", "bow-1024")]
    result = cli(
        "rank", *files, "--label", "small", "--label", "medium", "--label", "large", "--json", tmp_path / "r.json"
    )
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"{bm.IMPLICIT}: leaderboard with rank intervals"
    assert lines[3].split()[:4] == ["large", "1024", "4", "of"]
    saved = json.loads((tmp_path / "r.json").read_text())
    assert [r["label"] for r in saved["runs"]] == ["small", "medium", "large"] and saved["resamples"] == 1000
    import embeval

    assert saved == plain(embeval.rank(files, labels=["small", "medium", "large"]))  # the Python API
    markdown = cli("rank", *files, "--format", "markdown").stdout
    assert (
        f"### {bm.IMPLICIT}: leaderboard with rank intervals" in markdown and "| bow-1024 | 1024 | 4 of 4 |" in markdown
    )
    report = cli("report", *files).stdout
    assert f"### {bm.IMPLICIT} (MTEB's means), x100" in report and "leaderboard with rank intervals" in report
    alone = cli("report", files[0]).stdout
    assert "rank intervals" not in alone


def test_bad_input_is_one_line(cli, tmp_path):
    paths = _copy_runs(tmp_path)
    refused(cli("rank", paths[0]), "give 2 to 100 results files to rank (1 given)")
    refused(cli("rank", *[paths[0]] * 101), "give 2 to 100 results files to rank (101 given)")
    refused(cli("rank", *paths, "--label", "a"), "1 labels for 2 results files")
    refused(cli("rank", *paths, "--label", "a", "--label", "a"), "each run needs a label of its own (a given twice)")
    refused(cli("rank", *paths, "--tasks", "STS16,SST2"), "--tasks", "no results file scored SST2")
    record = json.loads(paths[1].read_text())
    del record["predictions"]
    (tmp_path / "bare.json").write_text(json.dumps(record))
    refused(cli("rank", paths[0], tmp_path / "bare.json"), "bare.json", "has no saved predictions")
    paths[1].with_name("results-minilm.predictions.npz").write_bytes(b"not a zip")
    refused(cli("rank", *paths), "results-minilm", "does not match its results file")


def test_html_page_renders_in_chromium(toy_runs, tmp_path):
    """The page's picture (each run's rank interval as a bar) and tables render with no console error,
    no request outside the page and nothing scrolling sideways at 1,400 px; a screenshot is taken."""
    if importlib.util.find_spec("matplotlib") is None:
        need("matplotlib", "pip install '.[report]'")
    spec = importlib.util.spec_from_file_location("chromium_check", REPO / "scripts" / "chromium_check.py")
    browser = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(browser)
    if browser.chromium() is None:
        need("chromium", "apt-get install chromium (or set EMBEVAL_CHROMIUM)")
    _, paths = toy_runs
    files = [paths[n] for n in ("bow-16", "bow-64", "bow-1024", "three-tasks")]
    page = tmp_path / "rank.html"
    from embeval.reports import html

    page.write_text(html.render_rank(rank.rank(files)), encoding="utf-8")
    text = page.read_text()
    assert "<script" not in text.lower() and text.count("<img ") == 1
    seen = browser.check(page, screenshot=tmp_path / "rank.png", width=1400, height=1200)
    assert seen["console"] == [] and seen["requests"] == []
    assert seen["page_width"] <= seen["viewport_width"] <= 1400 and seen["scrolling"] == []
    tables = {t["id"]: t for t in seen["tables"]}
    assert tables["table-rank-MTEB-tasks"]["rows"] == 5  # the header and four runs
    assert tables["table-rank-tasks"]["rows"] == 5
    (image,) = seen["images"]
    assert image["alt"] == "rank intervals" and image["complete"] and image["natural_width"] > 600
    assert image["width"] > 600 and image["height"] > 150
    assert (tmp_path / "rank.png").stat().st_size > 20_000
