"""Per-item predictions: they reproduce every reported figure, are saved deterministically beside the
results, survive --resume, and drive `embeval compare`."""

import importlib.util
import json
import shutil

import h5py
import numpy as np
import pytest
from coco_helpers import caption_encoder, write_coco
from reliability_helpers import comparable, refused, task_file
from report_helpers import need

from embeval.formats import predictions
from embeval.reports import compare
from embeval.reports import tables as report
from embeval.tasks.figures import lookup
from embeval.tasks.registry import TASKS

TASK_LIST = ["CR", "MRPC", "SICKEntailment", "STSBenchmark", "STS15", "STS16"]
OPTIONS = ["--config", "prototype", "--kfold", "3", "--bootstrap", "200"]


def run_score(cli, vectors, data_dir, out, *extra, tasks=TASK_LIST):
    result = cli("score", vectors, "--data", data_dir, "--tasks", ",".join(tasks), "--out", out, *OPTIONS, *extra)
    assert result.exit_code == 0, result.stderr
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_dir):
    """Two encoders (random vectors of two seeds), each scored with --save-predictions, and the first
    scored twice."""
    from click.testing import CliRunner

    from embeval.cli.main import cli as command

    def cli(*args):
        return CliRunner().invoke(command, [str(a) for a in args], catch_exceptions=False)

    root = tmp_path_factory.mktemp("predictions")
    a = task_file(root / "a.h5", data_dir, TASK_LIST, dim=8, seed=0)
    b = task_file(root / "b.h5", data_dir, TASK_LIST, dim=8, seed=50)
    return {
        "root": root,
        "a": a,
        "b": b,
        "ra": (run_score(cli, a, data_dir, root / "ra.json", "--save-predictions"), root / "ra.json"),
        "ra2": (run_score(cli, a, data_dir, root / "ra2.json", "--save-predictions"), root / "ra2.json"),
        "rb": (run_score(cli, b, data_dir, root / "rb.json", "--save-predictions"), root / "rb.json"),
    }


def tolerance(task, path):
    if TASKS[task].protocol == "nested-kfold":
        return 0.0101  # SentEval rounds each outer fold's accuracy before averaging
    if path in ("acc", "f1"):
        return 0.00501  # rounded to 2 decimals in the results
    return 1e-9


def test_predictions_reproduce_every_reported_figure(runs):
    record, _ = runs["ra"]
    checked = 0
    for task, entry in record["tasks"].items():
        ci = entry["ci"]
        assert ci["resamples"] == 200 and ci["seed"] == 1111 and ci["level"] == 0.95
        for path, figure in ci["figures"].items():
            reported = lookup(entry["results"], path)
            assert reported is not None, (task, path)
            assert figure["value"] == pytest.approx(reported, abs=tolerance(task, path)), (task, path)
            assert figure["low"] <= figure["value"] + 1e-9 and figure["value"] <= figure["high"] + 1e-9
            checked += 1
    assert checked == 1 + 2 + 1 + 4 + 4 + 4  # CR, MRPC (acc, f1), SICK-E, STS-B, STS15, STS16
    assert report.load(runs["ra"][1]) == record  # the report's checks of figures against intervals pass


def test_predictions_are_test_items_in_file_order(runs, data_dir):
    record, out = runs["ra"]
    saved = predictions.read(predictions.sidecar_path(out), record["predictions"]["sha256"])["encoder"]
    cr = saved["CR"]["sets"][""]
    assert cr.kind == "labels" and cr.items == record["tasks"]["CR"]["results"]["ntest"]
    assert np.array_equal(cr.arrays["gold"], TASKS["CR"].load(data_dir).splits["all"].y)
    assert sorted(set(cr.arrays["group"])) == [0, 1, 2]
    sick = saved["SICKEntailment"]["sets"][""]
    assert np.array_equal(sick.arrays["gold"], TASKS["SICKEntailment"].load(data_dir).splits["test"].y)
    assert "group" not in sick.arrays
    stsb = saved["STSBenchmark"]["sets"]
    assert set(stsb) == {"", "cosine"} and stsb[""].items == stsb["cosine"].items == 1379
    assert np.array_equal(stsb[""].arrays["gold"], stsb["cosine"].arrays["gold"])
    sts16 = saved["STS16"]["sets"]["all"]
    assert sts16.items == sum(v["nsamples"] for k, v in record["tasks"]["STS16"]["results"].items() if k != "all")
    assert saved["STS16"]["data_sha256"] == record["tasks"]["STS16"]["data_sha256"]


def test_sidecar_is_written_beside_the_results_and_is_deterministic(runs):
    (record, out), (_record2, out2) = runs["ra"], runs["ra2"]
    assert record["predictions"]["file"] == "ra.predictions.npz" and (out.parent / "ra.predictions.npz").is_file()
    assert not (out.parent / "ra.predictions.npz.partial").exists() and not (out.parent / "ra.json.partial").exists()
    assert (out.parent / "ra.predictions.npz").read_bytes() == (out.parent / "ra2.predictions.npz").read_bytes()
    assert comparable(out).replace("ra.predictions", "X") == comparable(out2).replace("ra2.predictions", "X")


def test_compare_two_identical_runs_finds_no_difference(runs, cli):
    (_, a), (_, a2) = runs["ra"], runs["ra2"]
    out = runs["root"] / "same.json"
    result = cli("compare", a, a2, "--json", out)
    assert result.exit_code == 0, result.stderr
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 1 + 2 + 1 + 3 + 4 + 4
    assert all(r["diff"] == 0 and r["p"] == 1 and not r["significant"] for r in rows)
    assert "Significant" in result.stdout and "Holm p" in result.stdout


def test_compare_two_encoders(runs, cli):
    (ra, a), (rb, b) = runs["ra"], runs["rb"]
    out = runs["root"] / "ab.json"
    result = cli("compare", a, b, "--label", "A", "--label", "B", "--json", out, "--format", "markdown")
    assert result.exit_code == 0, result.stderr
    compared = json.loads(out.read_text())
    # The runs drew 200 resamples; compare raises them so that Holm's adjustment can reach significance.
    needed = compare.resamples_for(len(compared["rows"]))
    assert compared["seed"] == 1111 and compared["resamples"] == needed >= 2 * len(compared["rows"]) / 0.05 - 1
    floor = 1 / (needed + 1)
    assert all(r["p_holm"] < 0.05 for r in compared["rows"] if r["p"] <= floor * (1 + 1e-9))
    assert [e["dim"] for e in compared["encoders"]] == [8, 8]
    by = {(r["task"], r["figure"]): r for r in compared["rows"]}
    sts = by[("STS16", "all.spearman.pooled")]
    assert sts["a"] == pytest.approx(ra["tasks"]["STS16"]["results"]["all"]["spearman"]["pooled"])
    assert sts["b"] == pytest.approx(rb["tasks"]["STS16"]["results"]["all"]["spearman"]["pooled"])
    assert sts["low"] <= sts["diff"] <= sts["high"] and 0 < sts["p"] <= 1
    assert by[("MRPC", "f1")]["n"] == 1725
    assert result.stdout.startswith("### Paired comparison") and "| task | figure | A | B | Delta |" in result.stdout
    assert "| STS16 | cosine Spearman, all pairs pooled | " in result.stdout


def copy_with_tasks(source, target, tasks):
    """A copy of a results file (and its predictions beside it) keeping only `tasks` in its record."""
    record = json.loads(source.read_text())
    record["tasks"] = {name: entry for name, entry in record["tasks"].items() if name in tasks}
    target.write_text(json.dumps(record))
    shutil.copy(predictions.sidecar_path(source), predictions.sidecar_path(target))
    return target


def test_compare_of_results_with_no_task_in_common_is_refused(runs, cli, tmp_path):
    a = copy_with_tasks(runs["ra"][1], tmp_path / "a.json", ["CR", "MRPC"])
    b = copy_with_tasks(runs["rb"][1], tmp_path / "b.json", ["STS16"])
    refused(
        cli("compare", a, b),
        "b.json: no task in common with a.json (a.json has CR, MRPC; b.json has STS16): nothing to compare",
    )
    refused(
        cli("compare", runs["ra"][1], b, "--tasks", "CR"),
        "b.json: none of the requested tasks (CR) was scored by both ra.json and b.json",
    )
    assert cli("compare", runs["ra"][1], b).exit_code == 0


def test_compare_says_which_run_scored_a_task_the_other_did_not(runs, cli, tmp_path):
    a = copy_with_tasks(runs["ra"][1], tmp_path / "a.json", ["CR", "MRPC"])
    b = copy_with_tasks(runs["rb"][1], tmp_path / "b.json", ["CR", "STS16"])
    result = cli("compare", a, b)
    assert result.exit_code == 0, result.stderr
    assert "not compared: MRPC (b: scored by a only)" in result.stdout
    assert "not compared: STS16 (b: scored by b only)" in result.stdout


def test_compare_leaves_out_figures_without_a_value(runs, cli, data_dir, tmp_path):
    """A figure undefined for either run (all of STS15's vectors identical: its correlations are undefined)
    is listed as not compared and left out of the table and of Holm's adjustment; the HTML page counts the
    same comparisons."""
    path = task_file(tmp_path / "c.h5", data_dir, ["STS15", "STS16"], dim=8, seed=7)
    with h5py.File(path, "a") as f:
        f["STS15"][...] = 0.5
    constant = tmp_path / "c.json"
    run_score(cli, path, data_dir, constant, tasks=["STS15", "STS16"])
    result = cli("compare", runs["ra"][1], constant, "--json", tmp_path / "cmp.json")
    assert result.exit_code == 0, result.stderr
    compared = json.loads((tmp_path / "cmp.json").read_text())
    assert {r["task"] for r in compared["rows"]} == {"STS16"} and len(compared["rows"]) == 4
    assert all(np.isfinite([r["a"], r["b"], r["diff"], r["p"], r["p_holm"]]).all() for r in compared["rows"])
    undefined = [n for n in compared["not_compared"] if n["task"] == "STS15"]
    assert undefined == [
        {
            "task": "STS15",
            "b": "c",
            "why": "undefined for c (constant scores): cosine Spearman, all pairs pooled; cosine Spearman, "
            "n-weighted mean over subsets; cosine Spearman, mean over subsets; cosine Pearson, all pairs pooled",
        }
    ]
    flat = " ".join(result.stdout.split())  # the caption is wrapped at 100 columns
    assert "adjusted for the 4 comparisons" in flat and "not compared: STS15 (c: undefined" in result.stdout
    markdown = cli("compare", runs["ra"][1], constant, "--format", "markdown").stdout
    assert "Not compared: STS15 (c: undefined for c (constant scores)" in markdown
    if importlib.util.find_spec("matplotlib") is None:
        need("matplotlib", "pip install '.[report]'")
    from embeval.reports import html

    page = html.render([runs["ra"][1], constant])
    assert "adjusted for the 4 comparisons" in page and "Not compared: STS15 (c: undefined" in page
    comparison = page[page.index('<h2 id="compare">') :]  # the results tables above do show STS15
    assert comparison.count("<td>STS15</td>") == 0


def test_compare_needs_saved_predictions(runs, cli, data_dir, tmp_path):
    plain = tmp_path / "plain.json"
    result = cli(
        "score",
        runs["a"],
        "--data",
        data_dir,
        "--tasks",
        "STS16",
        "--out",
        plain,
        "--bootstrap",
        "0",
        "--no-save-predictions",
    )
    assert result.exit_code == 0 and "ci" not in json.loads(plain.read_text())["tasks"]["STS16"]
    refused(cli("compare", runs["ra"][1], plain), plain, "no saved predictions", "--save-predictions")
    refused(cli("compare", runs["ra"][1]), "at least two")
    refused(cli("compare", runs["ra"][1], runs["a"]), runs["a"], "not an embeval results file")


def test_compare_refuses_a_changed_or_missing_sidecar(runs, cli, tmp_path):
    record, out = runs["rb"]
    copy = tmp_path / "rb.json"
    copy.write_text(out.read_text())
    refused(cli("compare", runs["ra"][1], copy), "rb.predictions.npz", "predictions file not found")
    data = bytearray((out.parent / "rb.predictions.npz").read_bytes())
    data[-30] ^= 0xFF
    (tmp_path / "rb.predictions.npz").write_bytes(bytes(data))
    refused(cli("compare", runs["ra"][1], copy), "rb.predictions.npz", "does not match its results file")


def test_compare_refuses_runs_on_different_test_items(runs, cli, tmp_path):
    record, out = runs["rb"]
    saved = predictions.read(predictions.sidecar_path(out))
    saved["encoder"]["STS16"]["data_sha256"] = "0" * 64
    record["predictions"] = {
        "file": "other.predictions.npz",
        "sha256": predictions.write(tmp_path / "other.predictions.npz", saved),
    }
    (tmp_path / "other.json").write_text(json.dumps(record))
    refused(cli("compare", runs["ra"][1], tmp_path / "other.json"), "STS16", "different task data")
    saved["encoder"]["STS16"]["data_sha256"] = record["tasks"]["STS16"]["data_sha256"]
    gold = saved["encoder"]["STS16"]["sets"]["all"].arrays["gold"]
    gold[[0, 1]] = gold[[1, 0]] + 0.5
    record["predictions"]["sha256"] = predictions.write(tmp_path / "other.predictions.npz", saved)
    (tmp_path / "other.json").write_text(json.dumps(record))
    refused(cli("compare", runs["ra"][1], tmp_path / "other.json"), "STS16", "test items differ")


def test_resume_reuses_saved_predictions(runs, cli, data_dir, tmp_path, monkeypatch):
    from embeval.run import execute as execute_module

    out = tmp_path / "r.json"
    calls = []
    real = execute_module.evaluate

    def wrapped(ctx):
        calls.append(ctx.task.name)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return (yield from real(ctx))

    monkeypatch.setattr(execute_module, "evaluate", wrapped)
    result = cli(
        "score",
        runs["a"],
        "--data",
        data_dir,
        "--tasks",
        ",".join(TASK_LIST),
        "--out",
        out,
        *OPTIONS,
        "--save-predictions",
    )
    assert result.exit_code == 130
    assert (tmp_path / "r.predictions.npz.partial").is_file() and not (tmp_path / "r.predictions.npz").exists()
    monkeypatch.undo()
    calls.clear()
    result = cli(
        "score",
        runs["a"],
        "--data",
        data_dir,
        "--tasks",
        ",".join(TASK_LIST),
        "--out",
        out,
        *OPTIONS,
        "--save-predictions",
        "--resume",
    )
    assert result.exit_code == 0, result.stderr
    assert "reused CR, MRPC" in result.stderr
    assert (tmp_path / "r.predictions.npz").read_bytes() == (runs["root"] / "ra.predictions.npz").read_bytes()
    assert not (tmp_path / "r.predictions.npz.partial").exists()


def test_resume_recomputes_tasks_without_saved_predictions(runs, cli, data_dir, tmp_path):
    out = tmp_path / "r.json"
    tasks = ["STS15", "STS16"]
    run_score(cli, runs["a"], data_dir, out, "--no-save-predictions", tasks=tasks)
    result = cli(
        "score",
        runs["a"],
        "--data",
        data_dir,
        "--tasks",
        "STS15,STS16",
        "--out",
        out,
        *OPTIONS,
        "--save-predictions",
        "--resume",
    )
    assert result.exit_code == 0, result.stderr
    assert "recomputing STS15, STS16 (no saved predictions)" in result.stderr
    saved = predictions.read(tmp_path / "r.predictions.npz")["encoder"]
    assert set(saved) == set(tasks)


def test_coco_ranks_reproduce_recalls(cli, tmp_path):
    data = tmp_path / "data"
    features = write_coco(data, (40, 25, 25))
    result = cli("export-sentences", "--data", data, "--out", tmp_path / "s", "--tasks", "ImageCaptionRetrieval")
    assert result.exit_code == 0, result.stderr
    from embeval.formats.vectors import write

    write(tmp_path / "v.h5", tmp_path / "s", caption_encoder(features), progress=False)
    result = cli(
        "score",
        tmp_path / "v.h5",
        "--data",
        data,
        "--tasks",
        "ImageCaptionRetrieval",
        "--out",
        tmp_path / "r.json",
        "--save-predictions",
        "--device",
        "cpu",
    )
    assert result.exit_code == 0, result.stderr
    entry = json.loads((tmp_path / "r.json").read_text())["tasks"]["ImageCaptionRetrieval"]
    figures = entry["ci"]["figures"]
    for direction in ("i2t", "t2i"):
        for k in (1, 5, 10):
            assert figures[f"acc.{direction}.r{k}"]["value"] == pytest.approx(
                entry["results"]["acc"][direction][f"r{k}"]
            )
    six = [entry["results"]["acc"][d][f"r{k}"] for d in ("i2t", "t2i") for k in (1, 5, 10)]
    assert figures["acc.mean_recall"]["value"] == pytest.approx(np.mean(six))
    # The headline is recorded in the results (the report never reads a figure from its interval).
    assert entry["results"]["acc"]["mean_recall"] == pytest.approx(np.mean(six), abs=1e-12)
    report = cli("report", tmp_path / "r.json", "--no-ci")
    assert report.exit_code == 0 and f" | {np.mean(six):.2f} |" in report.stdout, report.stderr
    saved = predictions.read(tmp_path / "r.predictions.npz")["encoder"]["ImageCaptionRetrieval"]["sets"]["acc"]
    assert saved.arrays["i2t"].shape == (25,) and saved.arrays["t2i"].shape == (25, 5)
    assert "mean of the six R@K %" in result.stdout


def test_quickstart_passes_the_comparison_options(cli, data_dir, tmp_path):
    result = cli(
        "quickstart",
        "--data",
        data_dir,
        "--workdir",
        tmp_path / "qs",
        "--encoder",
        "bow",
        "--tasks",
        "STS16",
        "--save-predictions",
        "--bootstrap",
        "200",
    )
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "qs" / "results-bow.json").read_text())
    assert record["predictions"]["file"] == "results-bow.predictions.npz" and record["config"]["bootstrap"] == 200
    assert (tmp_path / "qs" / "results-bow.predictions.npz").is_file()


def test_compare_resamples_given_are_kept_and_too_few_are_said(runs, cli):
    (_, a), (_, b) = runs["ra"], runs["rb"]
    out = runs["root"] / "few.json"
    result = cli("compare", a, b, "--resamples", "100", "--json", out)
    assert result.exit_code == 0, result.stderr
    compared = json.loads(out.read_text())
    assert compared["resamples"] == 100
    assert f"use --resamples {compared['resamples_needed']} or more" in " ".join(result.stdout.split())


@pytest.fixture(scope="module")
def small_runs(tmp_path_factory, data_dir):
    """Two encoders scored on STS15 and STS16 with their predictions, in a folder tests copy from."""
    from click.testing import CliRunner

    from embeval.cli.main import cli as command

    def cli(*args):
        return CliRunner().invoke(command, [str(a) for a in args], catch_exceptions=False)

    root = tmp_path_factory.mktemp("small")
    for name, seed in (("a", 0), ("b", 50)):
        task_file(root / f"{name}.h5", data_dir, ["STS15", "STS16"], dim=8, seed=seed)
        run_score(cli, root / f"{name}.h5", data_dir, root / f"r{name}.json", tasks=["STS15", "STS16"])
    return root


def compared_rows(cli, a, b, out):
    result = cli("compare", a, b, "--json", out)
    assert result.exit_code == 0, result.stderr
    return [
        {k: v for k, v in row.items() if k not in ("a_label", "b_label")} for row in json.loads(out.read_text())["rows"]
    ]


def test_compare_finds_the_predictions_of_renamed_or_moved_results(small_runs, cli, tmp_path):
    """A results file renamed (or moved elsewhere) together with its predictions file: compare reads the
    predictions named like the results file first, then the name stored inside it; the sha256 stored in
    the results must match either way."""
    expected = compared_rows(cli, small_runs / "ra.json", small_runs / "rb.json", tmp_path / "expected.json")
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    for old, new in (("rb.json", "mine.json"), ("rb.predictions.npz", "mine.predictions.npz")):
        shutil.copy(small_runs / old, moved / new)
    assert json.loads((moved / "mine.json").read_text())["predictions"]["file"] == "rb.predictions.npz"
    assert compared_rows(cli, small_runs / "ra.json", moved / "mine.json", tmp_path / "c.json") == expected

    # Only the results renamed: the stored name is found beside it.
    shutil.copy(small_runs / "rb.json", moved / "only.json")
    shutil.copy(small_runs / "rb.predictions.npz", moved / "rb.predictions.npz")
    assert compared_rows(cli, small_runs / "ra.json", moved / "only.json", tmp_path / "c.json") == expected

    # A file named like the results that belongs to another run is passed over for the stored name.
    shutil.copy(small_runs / "ra.predictions.npz", moved / "only.predictions.npz")
    assert compared_rows(cli, small_runs / "ra.json", moved / "only.json", tmp_path / "c.json") == expected

    # With the stored one gone, that file does not match: refused, not used.
    (moved / "rb.predictions.npz").unlink()
    refused(cli("compare", small_runs / "ra.json", moved / "only.json"), "only.predictions.npz", "sha256 differs")
    (moved / "only.predictions.npz").unlink()
    refused(
        cli("compare", small_runs / "ra.json", moved / "only.json"),
        moved / "only.json",
        "predictions file not found: neither only.predictions.npz nor rb.predictions.npz is beside it",
    )


def test_resume_finds_the_predictions_of_renamed_results(small_runs, cli, data_dir, tmp_path):
    for old, new in (("ra.json", "mine.json"), ("ra.predictions.npz", "mine.predictions.npz")):
        shutil.copy(small_runs / old, tmp_path / new)
    out = tmp_path / "mine.json"
    result = cli(
        "score", small_runs / "a.h5", "--data", data_dir, "--tasks", "STS15,STS16", "--out", out, *OPTIONS, "--resume"
    )
    assert result.exit_code == 0, result.stderr
    assert f"resuming from {out}: reused STS15, STS16" in result.stderr
    record = json.loads(out.read_text())
    assert record["predictions"]["file"] == "mine.predictions.npz"
    saved = predictions.read(tmp_path / "mine.predictions.npz", record["predictions"]["sha256"])
    assert saved["encoder"].keys() == {"STS15", "STS16"}
    assert (tmp_path / "mine.predictions.npz").read_bytes() == (small_runs / "ra.predictions.npz").read_bytes()
