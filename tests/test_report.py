"""`embeval report`: one row per encoder with its dimension, captions that name metric and
aggregation, markdown / LaTeX / CSV, and the geometry plots."""

import csv
import io
import json
import re
import sys
from pathlib import Path

import pytest
from exporter_helpers import need
from reliability_helpers import refused

from embeval.errors import EmbevalError
from embeval.formats.results import FORMAT, UNDEFINED_NOTE
from embeval.reports import tables as report

STS = ("STS12", "STS13", "STS14", "STS15", "STS16")
REPO = Path(__file__).resolve().parents[1]


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
    with pytest.raises(EmbevalError, match=r"matplotlib: pip install 'embeval-offline\[report\]'"):
        report.plots(rows, tmp_path / "figs")


def test_bad_input(files, tmp_path, cli):
    (tmp_path / "x.json").write_text("{}")
    refused(cli("report", tmp_path / "x.json"), "x.json", "not an embeval results file")
    refused(cli("report", tmp_path / "missing.json"), "missing.json", "not found")
    refused(cli("report", *files, "--label", "only-one"), "--label", "2 results files")


MR = {"kind": "classification", "vectors": {"dim": 8}}
STSB = {"kind": "relatedness", "vectors": {"dim": 8}}


@pytest.mark.parametrize(
    "tasks, message",
    [
        ({"MR": {}}, "MR: not a valid embeval results file: the task's entry has no 'results' object"),
        ({"MR": {"results": "x"}}, "MR: not a valid embeval results file: the task's entry has no 'results' object"),
        ({"MR": []}, "MR: not a valid embeval results file: the task's entry has no 'results' object"),
        ({"MR": dict(MR, results={}, ci=[])}, "MR: not a valid embeval results file: 'ci' is not an object"),
        (
            {"STSBenchmark": dict(STSB, results={}, geometry={"alignment": 1})},
            "STSBenchmark: not a valid embeval results file: 'geometry' lacks a figure",
        ),
        (
            {"MR": {"results": {}, "vectors": {}}},
            "MR: not a valid embeval results file: the task's entry has no 'kind'",
        ),
        (
            {"MR": {"results": {}, "kind": "classification"}},
            "MR: not a valid embeval results file: the task's entry has no 'vectors' object",
        ),
    ],
)
def test_damaged_results_are_one_line_errors(tmp_path, cli, tasks, message):
    """A hand-edited or truncated results file is refused by report and compare, never a traceback."""
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"format": FORMAT, "format_version": 1, "config": {}, "tasks": tasks}))
    refused(cli("report", path), "bad.json", message)
    refused(cli("compare", path, path), "bad.json", message)


@pytest.mark.parametrize(
    "path",
    sorted((REPO / "docs" / "example").glob("results-*.json")) + sorted((REPO / "tests" / "regression").glob("*.json")),
    ids=lambda p: p.name,
)
def test_results_embeval_wrote_pass_the_checks(path):
    """Every figure of real runs (SentEval's rounded accuracies, nested k-fold, both solvers) agrees with its
    interval within the tolerance of the checks."""
    record = report.load(path)
    assert sum(len((e.get("ci") or {}).get("figures") or {}) for e in record["tasks"].values()) > 10


def test_results_without_config_are_refused(files, tmp_path, cli):
    record = json.loads(Path(files[0]).read_text())
    del record["config"]
    path = tmp_path / "no-config.json"
    path.write_text(json.dumps(record))
    refused(cli("report", path), "no-config.json", "not a valid embeval results file: no 'config'")
    refused(cli("compare", path, files[1]), "no-config.json", "no 'config'")


def edited(tmp_path, source, change, name="edited.json"):
    record = json.loads(Path(source).read_text())
    change(record)
    path = tmp_path / name
    path.write_text(json.dumps(record))
    return path


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda r: r["tasks"]["MR"]["results"].update(acc=80.0),
            "MR: not a valid embeval results file: acc is 80, its interval's value 74 (edited by hand?)",
        ),
        (
            lambda r: r["baseline"]["tasks"]["STS12"]["results"]["all"]["spearman"].update(pooled=0.61),
            "STS12: not a valid embeval results file: all.spearman.pooled is 0.61, its interval's value 0.6",
        ),
        (
            lambda r: r["tasks"]["STSBenchmark"]["results"].update(pearson=None),
            "STSBenchmark: not a valid embeval results file: pearson is null, its interval's value 0.7",
        ),
    ],
)
def test_figures_that_disagree_with_their_interval_are_refused(files, tmp_path, cli, change, message):
    """A figure edited by hand no longer agrees with its interval's record: refused in one line naming the
    file, the task and the figure (report and compare read results the same way)."""
    path = edited(tmp_path, files[0], change)
    refused(cli("report", path), "edited.json", message)
    refused(cli("compare", path, files[1]), "edited.json", message)


def test_figures_rounded_to_two_decimals_agree_with_their_unrounded_interval(files, tmp_path, cli):
    """SentEval's accuracies are rounded to two decimals (for nested k-fold, each fold's before their mean),
    their intervals' values are not: within one unit of the second decimal they agree; a correlation (a
    fraction, never rounded) must agree to float noise, however few its decimals."""

    def rounded(record):
        record["tasks"]["MR"]["ci"]["figures"]["acc"].update(value=74.0100)
        record["tasks"]["STSBenchmark"]["ci"]["figures"]["pearson"].update(value=0.7 + 1e-12)

    assert cli("report", edited(tmp_path, files[0], rounded)).exit_code == 0

    def beyond(record):
        record["tasks"]["MR"]["ci"]["figures"]["acc"].update(value=74.0102)

    refused(cli("report", edited(tmp_path, files[0], beyond, "b.json")), "acc is 74, its interval's value 74.0102")

    def correlation(record):
        record["tasks"]["STSBenchmark"]["results"].update(pearson=0.701)

    refused(cli("report", edited(tmp_path, files[0], correlation, "x.json")), "pearson is 0.701")


def test_a_figure_only_in_its_interval_is_not_shown_as_scored(files, tmp_path, cli):
    """The report never takes a missing figure from its interval (earlier versions recorded COCO's mean R@K
    only there): the cell is not scored, and a warning says why."""
    path = edited(tmp_path, files[0], lambda r: r["tasks"]["MR"]["results"].pop("acc"))
    result = cli("report", path, "--no-ci")
    assert result.exit_code == 0, result.stderr
    assert "| vectors-384 | 384 | – | 71.50 |" in result.stdout
    assert "edited.json: MR: acc is recorded only in its interval, not in the results" in result.stderr


def undefined_sts(record):
    """STS12's figures as embeval records them for constant vectors: null, and so are their intervals."""
    entry = record["tasks"]["STS12"]
    entry["results"]["all"]["spearman"] = {"mean": None, "wmean": None, "pooled": None}
    entry["ci"]["figures"]["all.spearman.pooled"] = {"value": None, "low": None, "high": None}


def test_undefined_figures_show_the_same_mark_and_say_why_once(files, tmp_path, cli):
    """A figure recorded as null (a correlation of constant scores) is n/a in every format, a figure not
    scored a dash; each table with an n/a has one note saying why; the average of a row with an n/a is n/a."""
    path = edited(tmp_path, files[0], undefined_sts)
    partial = edited(tmp_path, files[1], lambda r: r["tasks"].pop("STS12"), "partial.json")
    markdown = cli("report", path, partial, "--no-ci").stdout
    sts = markdown.split("### STS")[1].split("###")[0]
    rows = {line.split(" | ")[0]: line for line in sts.splitlines() if line.startswith("| vectors-")}
    assert rows["| vectors-384"].startswith("| vectors-384 | 384 | n/a | 61.00 |") and rows["| vectors-384"].endswith(
        "| n/a |"
    )
    assert rows["| vectors-1024"].startswith("| vectors-1024 | 1024 | – | 51.00 |")
    assert rows["| vectors-1024"].endswith("| – |")
    assert sts.count(UNDEFINED_NOTE) == 1 and markdown.count(UNDEFINED_NOTE) == 1
    latex = cli("report", path, "--format", "latex").stdout
    assert " & n/a & " in latex and latex.count("n/a: the figure is undefined") == 1
    rows = list(csv.DictReader(io.StringIO(cli("report", path, partial, "--format", "csv").stdout)))
    sts12 = {r["encoder"]: r for r in rows if r["table"] == "sts" and r["column"] == "STS12"}
    assert sts12["vectors-384"]["value"] == "n/a" and sts12["vectors-1024"]["value"] == ""
    assert UNDEFINED_NOTE in sts12["vectors-384"]["caption"]


def test_undefined_figures_in_the_html_page(files, tmp_path):
    """The HTML page shows the same mark as the other formats and says why once per table, and its STS
    aggregations (STS12's are all undefined) once under them."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        need("matplotlib", "pip install '.[report]'")
    from embeval.reports import html

    def undefined_everywhere(record):
        undefined_sts(record)
        record["tasks"]["STS12"]["results"]["all"]["pearson"] = {"mean": None, "wmean": None, "pooled": None}

    page = html.render([edited(tmp_path, files[0], undefined_everywhere), files[1]])
    sts = page.split('id="table-sts"')[1].split("</table>")[0]
    text = re.sub(r"data:image/png;base64,[^\"]*", "", page)
    assert "<td>n/a</td>" in sts and "nan" not in text.lower()
    note = UNDEFINED_NOTE.replace("'", "&#x27;")
    assert page.count(note) == 2  # under the STS table, and under the two aggregation tables
    aggregations = page.split('id="table-sts-aggregations-spearman"')[1].split("</table>")[0]
    assert aggregations.count("<td>n/a</td>") == 3


def test_model_attribute_names_the_row(files, tmp_path, cli):
    """The vectors file's `model` (recorded as vectors.model) names the row; --label still wins; two files
    of one model are told apart by their file names."""
    a = edited(tmp_path, files[0], lambda r: r["vectors"].update(model="MiniLM-L6"), "ckpt-a.json")
    b = edited(tmp_path, files[1], lambda r: r["vectors"].update(model="MiniLM-L6"), "ckpt-b.json")
    c = edited(tmp_path, files[1], lambda r: r["vectors"].update(model="BERT base"), "c.json")
    text = cli("report", a, c).stdout
    assert "\n| MiniLM-L6 | 384 |" in text and "\n| BERT base | 1024 |" in text and "vectors-384" not in text
    text = cli("report", a, b).stdout
    assert "\n| MiniLM-L6 (ckpt-a) | 384 |" in text and "\n| MiniLM-L6 (ckpt-b) | 1024 |" in text
    assert "\n| mine | 384 |" in cli("report", a, c, "--label", "mine", "--label", "other").stdout
    truncated = edited(tmp_path, files[0], lambda r: r["vectors"].update(model="MiniLM-L6", truncated_to=64), "t.json")
    assert "\n| MiniLM-L6@64 | 384 |" in cli("report", truncated).stdout


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


def test_a_figure_outside_its_interval_is_said_in_one_warning(files, tmp_path, cli):
    """A figure edited together with its interval's value lies outside the interval: the report says so in
    one warning line (a biased figure's percentile interval may exclude it too, so it is not refused)."""
    path = edited(
        tmp_path,
        files[0],
        lambda r: (
            r["tasks"]["MR"]["results"].update(acc=80.0),
            r["tasks"]["MR"]["ci"]["figures"]["acc"].update(value=80.0),
        ),
    )
    result = cli("report", path)
    assert result.exit_code == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "outside its 95% interval" in line]
    assert len(warnings) == 1 and "edited.json: MR: acc is 80" in warnings[0]


def test_captions_state_only_what_their_table_holds(files):
    """A table of cosine figures (no training) does not state the classifier's configuration, a table of
    one column has no Avg., and the CSV gives each table's caption once, not on every row."""
    tables, _ = report.build(list(files))
    by_key = {t.key: t for t in tables}
    for t in tables:
        trains = t.key.startswith(("transfer", "probing"))
        assert ("tenacity" in t.caption) == trains, t.key
        assert "the mean of the 1 columns" not in t.caption
        assert "\x00" not in t.caption
    assert "sts" in by_key and "Configuration" not in by_key["sts"].caption
    rows = list(csv.reader(io.StringIO(report.render(tables, "csv"))))
    captions = [row[8] for row in rows[1:] if row[8]]
    assert len(captions) == len(tables) and all(len(c) > 50 for c in captions)
