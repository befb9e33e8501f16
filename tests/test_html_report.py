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
    text = html.render([folder / r.name for r in RUNS], labels=LABELS, published=["simcse-unsup-bert-base"],
                       compare_tasks=["MRPC", "STS12"])
    path = folder / "report.html"
    path.write_text(text, encoding="utf-8")
    return path, text


def test_page_is_self_contained(page):
    _, text = page
    assert "<script" not in text.lower() and "@import" not in text and "url(" not in text
    sources = re.findall(r'(?:src|href)="([^"]*)"', text)
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources)
    for heading in ("Transfer tasks (logistic regression)", "STS12-16: the three aggregations side by side",
                    "Paired comparison", "Geometry (STS-B)"):
        assert heading in text
    assert "unsup. SimCSE-BERT-base [published]" in text and "Gao, Yao and Chen (2021)" in text


def test_page_renders_in_chromium(browser, page):
    path, text = page
    seen = browser.check(path)
    assert seen["console"] == [] and seen["requests"] == []
    tables = {t["id"]: t for t in seen["tables"]}
    for key, rows in (("table-transfer-logreg", 5), ("table-transfer-mlp", 5), ("table-sts", 5),
                      ("table-sts-normalized", 5), ("table-geometry", 4), ("table-sts-aggregations-spearman", 5),
                      ("table-sts-aggregations-pearson", 5)):
        assert tables[key]["rows"] == rows, key
    assert tables["table-compare"]["rows"] > 1
    assert all(t["width"] > 100 and t["height"] > 40 for t in seen["tables"])
    assert len(seen["images"]) == text.count("<img ") == 8
    for image in seen["images"]:
        assert image["complete"] and image["natural_width"] > 200 and image["natural_height"] > 100, image["alt"]
        assert image["width"] > 200 and image["height"] > 100, image["alt"]


def test_the_check_sees_console_errors_and_broken_images(browser, tmp_path):
    """The same check on a page with a console error and an image that does not load fails."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><table id="t"><tr><td>1</td></tr></table>'
                   '<img src="missing.png" alt="missing"><script>console.error("boom")</script></body></html>')
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


def test_command_writes_the_page(cli, tmp_path):
    if importlib.util.find_spec("matplotlib") is None:
        need("matplotlib", "pip install '.[report]'")
    out = tmp_path / "report.html"
    result = cli("report", RUNS[1], "--format", "html", "--out", out, "--baselines", "sbert")
    assert result.exit_code == 0, result.stderr
    text = out.read_text()
    assert text.startswith("<!DOCTYPE html>") and "SBERT-NLI-large [published]" in text
    assert "Paired comparison" not in text  # one file: nothing to compare
