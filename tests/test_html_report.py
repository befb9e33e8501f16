"""`embeval report --format html`: one self-contained page, loaded in headless Chromium (Debian's
`chromium`): no console error, no request outside the page, every table and figure rendered."""

import importlib.util
import json
import re
import shutil
from pathlib import Path

import pytest
from report_helpers import need

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "docs" / "example"
RUNS = [EXAMPLE / "results-bow.json", EXAMPLE / "results-minilm.json"]
LABELS = ["hashing BoW", "all-MiniLM-L6-v2"]


def checker():
    spec = importlib.util.spec_from_file_location("chromium_check", REPO / "scripts" / "chromium_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def browser():
    module = checker()
    if module.chromium() is None:
        need("chromium", "apt-get install chromium (or set EMBEVAL_CHROMIUM)")
    return module


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    if importlib.util.find_spec("matplotlib") is None:
        need("matplotlib", "pip install '.[report]'")
    from embeval.reports import html

    folder = tmp_path_factory.mktemp("html")
    for run in RUNS:  # the comparison reads each file's predictions beside it
        shutil.copy(run, folder)
        shutil.copy(run.with_suffix(".predictions.npz"), folder)
    text = html.render(
        [folder / r.name for r in RUNS],
        labels=LABELS,
        published=["simcse-unsup-bert-base"],
        compare_tasks=["MRPC", "STS12"],
    )
    path = folder / "report.html"
    path.write_text(text, encoding="utf-8")
    return path, text


def test_page_is_self_contained(page):
    _, text = page
    assert "<script" not in text.lower() and "@import" not in text and "url(" not in text
    sources = re.findall(r'(?:src|href)="([^"]*)"', text)
    anchors = {f"#{key}" for key in re.findall(r' id="([^"]*)"', text)}
    assert sources and all(s.startswith("data:image/png;base64,") or s in anchors for s in sources)
    for heading in (
        "Transfer tasks (logistic regression)",
        "Cosine STS: the three aggregations side by side",
        "Leaderboard with rank intervals",
        "Paired comparison",
        "Geometry (STS-B)",
    ):
        assert heading in text
    assert "unsup. SimCSE-BERT-base [published]" in text and "Gao, Yao and Chen (2021)" in text


def test_page_renders_in_chromium(browser, page, tmp_path):
    """At 1,400 px (a laptop's browser window) nothing scrolls sideways: neither the page nor a table."""
    path, text = page
    seen = browser.check(path, screenshot=tmp_path / "report.png", width=1400, height=1000)
    assert seen["console"] == [] and seen["requests"] == []
    assert seen["page_width"] <= seen["viewport_width"] <= 1400 and seen["scrolling"] == []
    tables = {t["id"]: t for t in seen["tables"]}
    assert list(tables)[0] == "table-summary" and tables["table-summary"]["rows"] == 4  # 3 encoders
    for key, rows in (
        ("table-transfer-logreg", 5),  # the header, 3 encoders, the published row
        ("table-transfer-mlp", 5),
        ("table-sts", 5),
        ("table-sts-normalized", 5),
        ("table-geometry", 4),
        ("table-sts-aggregations-spearman", 1 + 5 * 3),  # a row per task (STS12-16) and encoder
        ("table-sts-aggregations-pearson", 1 + 5 * 3),
    ):
        assert tables[key]["rows"] == rows, key
    assert tables["table-compare"]["rows"] > 1
    assert tables["table-rank-tasks"]["rows"] == 1 + 11  # the leaderboard: a row per task (more tasks than runs)
    assert all(t["width"] > 100 and t["height"] > 40 for t in seen["tables"])
    assert len(seen["images"]) == text.count("<img ") == 9  # the rank intervals' picture among them
    assert [i["alt"] for i in seen["images"]].count("rank intervals") == 1
    assert (tmp_path / "report.png").stat().st_size > 10_000
    for image in seen["images"]:
        assert image["complete"] and image["natural_width"] > 200 and image["natural_height"] > 100, image["alt"]
        assert image["width"] > 200 and image["height"] > 100, image["alt"]


def test_the_check_sees_console_errors_and_broken_images(browser, tmp_path):
    """The same check on a page with a console error and an image that does not load fails."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!DOCTYPE html><html><body><table id="t"><tr><td>1</td></tr></table>'
        '<img src="missing.png" alt="missing"><script>console.error("boom")</script></body></html>'
    )
    seen = browser.check(bad)
    assert any("boom" in line for line in seen["console"])
    assert any(r.endswith("/missing.png") for r in seen["requests"])
    assert seen["images"][0]["natural_width"] == 0


def test_comparison_needs_saved_predictions(tmp_path):
    if importlib.util.find_spec("matplotlib") is None:
        need("matplotlib", "pip install '.[report]'")
    from embeval.reports import html

    record = json.loads(RUNS[1].read_text())
    del record["predictions"]
    copies = []
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps(record))
        copies.append(tmp_path / name)
    text = html.render(copies)
    assert "Not available: " in text and "has no saved predictions" in text and "table-compare" not in text
    assert "rank intervals" not in text  # the leaderboard needs saved predictions: not shown without them


def test_command_writes_the_page(cli, tmp_path):
    if importlib.util.find_spec("matplotlib") is None:
        need("matplotlib", "pip install '.[report]'")
    out = tmp_path / "report.html"
    result = cli("report", RUNS[1], "--format", "html", "--out", out, "--baselines", "sbert")
    assert result.exit_code == 0, result.stderr
    text = out.read_text()
    assert text.startswith("<!DOCTYPE html>") and "SBERT-NLI-large [published]" in text
    assert "Paired comparison" not in text  # one file: nothing to compare


SWEEP_TASKS = ["STS12", "TREC"]  # cosine STS (no training, no dev figure) and a classifier (best on devacc)


def sweep_of(cli, folder, data_dir, steps, broken=None):
    """A real sweep of small vectors files (with a root attribute `step` each, when given); the file numbered
    `broken` has a NaN, so the sweep leaves it out."""
    import h5py
    import numpy as np
    from reliability_helpers import task_file

    folder.mkdir()
    for i, step in enumerate(steps):
        path = task_file(folder / f"ckpt{i}.h5", data_dir, SWEEP_TASKS, dim=8, seed=100 * i)
        with h5py.File(path, "a") as f:
            if step is not None:
                f.attrs["step"] = step
            if i == broken:
                f["TREC"][5, 1] = np.nan
    out = folder / "sweep"
    result = cli(
        "sweep",
        *sorted(folder.glob("ckpt*.h5")),
        "--data",
        data_dir,
        "--tasks",
        ",".join(SWEEP_TASKS),
        "--config",
        "prototype",
        "--kfold",
        "3",
        "--bootstrap",
        "100",
        "--device",
        "cpu",
        "--out-dir",
        out,
        "--quiet",
    )
    assert result.exit_code == (0 if broken is None else 2), result.stderr
    return out


@pytest.fixture(scope="module")
def sweep_page(tmp_path_factory, data_dir):
    if importlib.util.find_spec("matplotlib") is None:
        need("matplotlib", "pip install '.[report]'")
    from click.testing import CliRunner

    from embeval.cli.main import cli as command

    def cli(*args):
        return CliRunner().invoke(command, [str(a) for a in args], catch_exceptions=False)

    root = tmp_path_factory.mktemp("sweep")
    out = sweep_of(cli, root / "stepped", data_dir, (300, 100, 200))
    page = root / "sweep.html"
    result = cli("report", out, "--format", "html", "--out", page)
    assert result.exit_code == 0, result.stderr
    return out, page, page.read_text(encoding="utf-8")


def cells_of(text, table_id):
    """The cells of an HTML table of the page, row by row, tags stripped."""
    body = text.split(f'<table id="{table_id}">', 1)[1].split("</table>", 1)[0]
    return [
        [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row)]
        for row in re.findall(r"<tr>(.*?)</tr>", body)
    ]


def test_sweep_page_shows_each_files_figures_and_the_best_on_dev(sweep_page):
    """The table against the results files themselves: each file's headline figures and intervals, and the
    file marked best on TREC is the one with the highest dev accuracy."""
    out, _, text = sweep_page
    assert "<script" not in text.lower() and "url(" not in text
    assert all(s.startswith("data:image/png;base64,") for s in re.findall(r'(?:src|href)="([^"]*)"', text))
    rows = cells_of(text, "table-sweep")
    assert rows[0] == ["file", "step", "STS12", "TREC"]
    assert [(r[0], r[1]) for r in rows[1:]] == [("ckpt0", "300"), ("ckpt1", "100"), ("ckpt2", "200")]
    dev = {}
    for row in rows[1:]:
        record = json.loads((out / f"{row[0]}.results.json").read_text())
        sts, trec = record["tasks"]["STS12"], record["tasks"]["TREC"]
        ci = sts["ci"]["figures"]["all.spearman.pooled"]
        assert row[2] == (f"{sts['results']['all']['spearman']['pooled']:.4f} [{ci['low']:.4f}, {ci['high']:.4f}]")
        ci = trec["ci"]["figures"]["acc"]
        assert row[3].removesuffix(" *") == f"{trec['results']['acc']:.2f} [{ci['low']:.2f}, {ci['high']:.2f}]"
        dev[row[0]] = trec["results"]["devacc"]
    best = [row[0] for row in rows[1:] if row[3].endswith(" *")]
    assert best == [max(dev, key=lambda label: (dev[label], -list(dev).index(label)))]
    assert text.count('class="best"') == 1 and not any(row[2].endswith("*") for row in rows[1:])


def test_sweep_page_renders_its_curves_in_chromium(browser, sweep_page):
    _, page, text = sweep_page
    seen = browser.check(page)
    assert seen["console"] == [] and seen["requests"] == []
    (table,) = seen["tables"]
    assert table["id"] == "table-sweep" and table["rows"] == 4 and table["width"] > 100 and table["height"] > 40
    assert [image["alt"] for image in seen["images"]] == ["STS12 against step", "TREC against step"]
    for image in seen["images"]:
        assert image["complete"] and image["natural_width"] > 200 and image["natural_height"] > 100, image["alt"]
        assert image["width"] > 200 and image["height"] > 100, image["alt"]
    assert text.count("band: its 95% bootstrap interval") == 2


def test_sweep_json_or_its_folder_give_the_same_page(cli, sweep_page, tmp_path):
    out, _, text = sweep_page
    page = tmp_path / "again.html"
    result = cli("report", out / "sweep.json", "--format", "html", "--out", page)
    assert result.exit_code == 0, result.stderr
    assert page.read_text(encoding="utf-8") == text


def test_sweep_without_steps_has_no_curves_and_says_so(cli, data_dir, tmp_path, browser):
    """No curves without steps; a file the sweep left out is named on the page with its error."""
    if importlib.util.find_spec("matplotlib") is None:
        need("matplotlib", "pip install '.[report]'")
    out = sweep_of(cli, tmp_path / "plain", data_dir, (None, None, None, None), broken=3)
    page = tmp_path / "plain.html"
    assert cli("report", out, "--format", "html", "--out", page).exit_code == 0
    text = page.read_text(encoding="utf-8")
    assert "No curves: no file of this sweep carries a <code>step</code> attribute" in text
    (left_out,) = re.findall(r'<p class="note">Left out: (.*?)</p>', text)
    assert "ckpt3.h5" in left_out and "TREC" in left_out and "NaN" in left_out
    assert "<img" not in text and cells_of(text, "table-sweep")[0] == ["file", "STS12", "TREC"]
    seen = browser.check(page)
    assert seen["console"] == [] and seen["requests"] == [] and seen["images"] == []
    assert seen["tables"][0]["rows"] == 4


def test_wrong_sweep_input_is_one_line(cli, sweep_page, tmp_path):
    from reliability_helpers import refused

    out, _, _ = sweep_page
    refused(cli("report", tmp_path, "--format", "html"), str(tmp_path), "not a sweep's: it holds no sweep.json")
    summary = out / "sweep.json"
    refused(cli("report", out), str(summary), "a sweep's report is the HTML page (--format html)")
    refused(cli("report", out, out / "ckpt0.results.json", "--format", "html"), "a sweep is reported on its own")
    refused(cli("report", out, "--format", "html", "--baselines", "sbert"), "--baselines does not apply")
    record = json.loads(summary.read_text())
    for name, edit, problem in (
        ("version.json", lambda r: r.update(format_version=7), "sweep format version 7; this embeval reads "),
        (
            "task.json",
            lambda r: r["tasks"].update(NOPE={k: v for k, v in r["tasks"]["TREC"].items() if k != "percent"}),
            "NOPE: not a valid sweep summary: a task this summary does not describe",
        ),
        (
            "figures.json",
            lambda r: r["tasks"]["TREC"]["values"]["ckpt1"].update(value="high"),
            "TREC: not a valid sweep summary: the figures of 'ckpt1' must be",
        ),
        ("sources.json", lambda r: r.update(sources={}), "'sources' must be a list"),
        ("left_out.json", lambda r: r.update(left_out=["x"]), "each item of 'left_out' needs its 'error'"),
    ):
        edited = json.loads(json.dumps(record))
        edit(edited)
        (tmp_path / name).write_text(json.dumps(edited))
        refused(
            cli("report", tmp_path / name, "--format", "html", "--out", tmp_path / "x.html"),
            str(tmp_path / name),
            problem,
        )
        assert not (tmp_path / "x.html").exists()


def test_every_series_has_a_colour_of_its_own():
    """16 series (two encoders, a baseline and 13 published rows): no two share a colour, and the
    colours are the colour-blind-safe sets (Okabe-Ito, then Tol's muted)."""
    from embeval.reports.html import PALETTE, series_style

    styles = [series_style(k) for k in range(16)]
    assert len({colour for colour, _ in styles}) == 16
    assert PALETTE[:8] == ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442")
    assert len(set(styles + [series_style(k) for k in range(16, 40)])) == 40  # (colour, marker) beyond


def _table(header, rows, key="t"):
    from embeval.reports.cells import Cell, Table

    return Table(
        key,
        "T",
        "caption",
        ["encoder", "dim"] + header,
        rows=[[Cell(text=label), Cell(text="8")] + [Cell(v, mark=m) for v, m in values] for label, values in rows],
        metrics=["x"] * len(header),
    )


def test_a_table_of_one_column_has_no_chart_and_diamonds_are_said_only_when_drawn():
    if importlib.util.find_spec("matplotlib") is None:
        need("matplotlib", "pip install '.[report]'")
    from embeval.reports import html

    plt = html._pyplot()
    one = _table(["STS16"], [("a", [(70.0, False)]), ("b", [(75.0, False)])])
    assert html.table_plot(one, plt) is None and html.summary_table([one]) is not None
    two = _table(["A", "B"], [("a", [(70.0, False), (71.0, False)]), ("p [published]", [(80.0, True), (81.0, True)])])
    assert html.table_plot(two, plt) is not None and not html.has_published(two)  # every published figure †
    drawn = _table(
        ["A", "B"], [("a", [(70.0, False), (71.0, False)]), ("p [published]", [(80.0, False), (None, False)])]
    )
    assert html.has_published(drawn)
    summary = html.summary_table([two])
    assert "mean of 2 columns" in summary and "70.50" in summary and "p [published]" not in summary
