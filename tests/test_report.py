"""`embeval report`: one row per encoder with its dimension, captions that name metric and
aggregation, markdown / LaTeX / CSV, and the geometry plots."""

import csv
import io
import json
import sys
from pathlib import Path

import pytest
from exporter_helpers import need
from reliability_helpers import refused

from embeval.errors import EmbevalError
from embeval.formats.results import FORMAT
from embeval.reports import tables as report

STS = ("STS12", "STS13", "STS14", "STS15", "STS16")


def ci(value, width=0.02):
    return {"value": value, "low": value - width, "high": value + width}


def entry(kind, results, figures, dim, geometry=None):
    out = {
        "kind": kind,
        "results": results,
        "ci": {"resamples": 1000, "seed": 1111, "figures": figures},
        "vectors": {"dim": dim},
        "data_sha256": "0" * 64,
    }
    if geometry:
        out["geometry"] = geometry
    return out


def record(dim, shift, classifiers=False, baseline=None):
    tasks = {}
    for i, name in enumerate(STS):
        value = 0.6 + shift + i / 100
        tasks[name] = entry(
            "sts",
            {
                "all": {
                    "spearman": {"mean": value - 0.05, "wmean": value - 0.03, "pooled": value},
                    "pearson": {"mean": 0, "wmean": 0, "pooled": 0},
                }
            },
            {"all.spearman.pooled": ci(value)},
            dim,
        )
    geo = {
        "alignment": 0.5 - shift,
        "uniformity": -2.0 - shift,
        "effective_rank": 10.0 * dim,
        "positive_pairs": 2000,
        "positive_threshold": 4.0,
        "uniformity_sample": 2000,
        "sentences": 15000,
        "singular_values": [4.0 / (k + 1) for k in range(dim)],
    }
    tasks["STSBenchmark"] = entry(
        "relatedness",
        {"pearson": 0.7 + shift, "spearman": 0.69 + shift, "cosine": {"spearman": 0.8 + shift, "pearson": 0.79}},
        {"pearson": ci(0.7 + shift), "cosine.spearman": ci(0.8 + shift)},
        dim,
        geo,
    )
    mr = {"devacc": 75.0, "acc": 74.0 + 100 * shift, "ntest": 10662}
    figures = {"acc": ci(mr["acc"], 0.8)}
    if classifiers:
        mr = dict(mr, classifier="logreg", logreg=dict(mr), mlp=dict(mr, acc=76.5))
        figures.update({"logreg.acc": ci(mr["acc"], 0.8), "mlp.acc": ci(76.5, 0.8)})
    tasks["MR"] = entry("classification", mr, figures, dim)
    tasks["MRPC"] = entry(
        "pair-classification", {"devacc": 70, "acc": 71.5, "f1": 80.25}, {"acc": ci(71.5, 1), "f1": ci(80.25, 1)}, dim
    )
    tasks["Length"] = entry("probing", {"devacc": 80, "acc": 81.0, "classifier": "logreg"}, {"acc": ci(81.0, 1)}, dim)
    rec = {
        "format": FORMAT,
        "format_version": 1,
        "vectors": {"file": f"/x/vectors-{dim}.h5", "dim": dim},
        "config": {
            "preset": "literature",
            "kfold": 10,
            "solver": "senteval",
            "seed": 1111,
            "bootstrap": 1000,
            "classifier": {"nhid": 0, "optim": "adam", "batch_size": 64, "tenacity": 5, "epoch_size": 4},
        },
        "tasks": tasks,
    }
    if baseline:
        rec["baseline"] = {
            "encoder": "hashing bag of words",
            "dim": baseline,
            "tasks": {k: dict(v, vectors={"dim": baseline}) for k, v in tasks.items()},
        }
    return rec


@pytest.fixture
def files(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(record(384, 0.0, baseline=384)))
    b.write_text(json.dumps(record(1024, -0.1)))
    return a, b


def test_markdown_report(files, cli):
    result = cli("report", *files, "--label", "MiniLM", "--label", "BoW")
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert "| encoder | dim | MR | MRPC | MRPC F1 | STS-B |" in text
    assert (
        "| MiniLM | 384 | 74.00 [73.2, 74.8] | 71.50 [70.5, 72.5] | 80.25 [79.2, 81.2] | 70.00 [68.0, 72.0] |" in text
    )
    assert "| encoder | dim | STS12 | STS13 | STS14 | STS15 | STS16 | STS-B | Avg. |" in text
    assert "| BoW | 1024 | 50.00 [48.0, 52.0] |" in text
    assert "| hashing bag of words (baseline) | 384 |" in text
    sts_caption = next(line for line in text.splitlines() if line.startswith("Semantic textual similarity"))
    for phrase in (
        "Spearman's correlation x100",
        "cosine",
        "pooled",
        'SimCSE\'s "all"',
        "not SentEval's mean",
        "the mean of the 6 columns (not the 7 of SimCSE's table)",
        "95% percentile bootstrap",
    ):
        assert phrase in sts_caption, phrase
    assert "| encoder | dim | Length |" in text and "Probing tasks" in text
    assert "| MiniLM | 384 | 0.500 | -2.000 | 3840.000 |" in text
    assert text.count("\n| MiniLM |") == 4  # transfer, STS, probing, geometry: one row each


def test_average_needs_every_column(files, tmp_path, cli):
    partial = json.loads(files[1].read_text())
    del partial["tasks"]["STS12"]
    (tmp_path / "c.json").write_text(json.dumps(partial))
    text = cli("report", files[0], tmp_path / "c.json", "--no-ci").stdout
    row = next(line for line in text.splitlines() if line.startswith("| vectors-1024 | 1024 | –"))
    assert row.endswith("| – |") and "[" not in text.split("### STS")[1].split("###")[0]


def test_both_classifiers_make_two_tables(tmp_path, cli):
    path = tmp_path / "a.json"
    path.write_text(json.dumps(record(384, 0.0, classifiers=True)))
    text = cli("report", path).stdout
    assert "### Transfer tasks (logistic regression)" in text and "### Transfer tasks (MLP)" in text
    mlp = text.split("### Transfer tasks (MLP)")[1].split("###")[0]
    assert "| vectors-384 | 384 | 76.50 [75.7, 77.3] |" in mlp and "an MLP (50 hidden units, sigmoid)" in mlp


def test_latex_and_csv(files, cli):
    latex = cli("report", *files, "--format", "latex").stdout
    assert latex.count("\\begin{table}") == 4 and "\\toprule" in latex and "\\caption{" in latex
    assert "74.00\\,{\\scriptsize [73.2, 74.8]}" in latex and "accuracy (\\%)" in latex
    assert "tab:embeval-sts" in latex and "epoch\\_size" in latex
    rows = list(csv.DictReader(io.StringIO(cli("report", *files, "--format", "csv").stdout)))
    sts12 = [r for r in rows if r["table"] == "sts" and r["column"] == "STS12"]
    assert [(r["encoder"], r["dim"], float(r["value"])) for r in sts12] == [
        ("vectors-384", "384", 60.0),
        ("vectors-1024", "1024", 50.0),
        ("hashing bag of words (baseline)", "384", 60.0),
    ]
    assert float(sts12[0]["ci_low"]) == pytest.approx(58.0) and "pooled" in sts12[0]["caption"]


def test_plots(files, tmp_path, cli):
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        need("matplotlib", "pip install '.[report]'")
    out = tmp_path / "doc" / "report.md"
    result = cli("report", *files, "--out", out, "--plots", tmp_path / "doc" / "figures")
    assert result.exit_code == 0, result.stderr
    for name in ("alignment_uniformity.png", "spectrum.png"):
        data = (tmp_path / "doc" / "figures" / name).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 5000
        assert f"](figures/{name})" in out.read_text()


def test_plots_without_matplotlib(files, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    tables, rows = report.build(list(files))
    with pytest.raises(EmbevalError, match=r"matplotlib: pip install 'embeval\[report\]'"):
        report.plots(rows, tmp_path / "figs")


def test_bad_input(files, tmp_path, cli):
    (tmp_path / "x.json").write_text("{}")
    refused(cli("report", tmp_path / "x.json"), "x.json", "not an embeval results file")
    refused(cli("report", tmp_path / "missing.json"), "missing.json", "not found")
    refused(cli("report", *files, "--label", "only-one"), "--label", "2 results files")


@pytest.mark.parametrize(
    "tasks, message",
    [
        ({"MR": {}}, "MR: not a valid embeval results file: the task's entry has no 'results' object"),
        ({"MR": {"results": "x"}}, "MR: not a valid embeval results file: the task's entry has no 'results' object"),
        ({"MR": []}, "MR: not a valid embeval results file: the task's entry has no 'results' object"),
        ({"MR": {"results": {}, "ci": []}}, "MR: not a valid embeval results file: 'ci' is not an object"),
        (
            {"STSBenchmark": {"results": {}, "geometry": {"alignment": 1}}},
            "STSBenchmark: not a valid embeval results file: 'geometry' lacks a figure",
        ),
    ],
)
def test_damaged_results_are_one_line_errors(tmp_path, cli, tasks, message):
    """A hand-edited or truncated results file is refused by report and compare, never a traceback."""
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"format": FORMAT, "format_version": 1, "tasks": tasks}))
    refused(cli("report", path), "bad.json", message)
    refused(cli("compare", path, path), "bad.json", message)


def test_non_numeric_interval_is_left_out(files, tmp_path, cli):
    record = json.loads(Path(files[0]).read_text())
    task = next(t for t, e in record["tasks"].items() if e.get("ci"))
    figures = record["tasks"][task]["ci"]["figures"]
    for path in figures:
        figures[path] = {"value": figures[path]["value"], "low": "?", "high": None}
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(record))
    result = cli("report", edited)
    assert result.exit_code == 0, result.stderr
