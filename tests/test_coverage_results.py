"""bench/coverage.py's committed results (the 95% intervals' coverage per kind, by simulation) and the
table docs/comparison.md shows: the same figures, every kind of the bench measured."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def bench():
    spec = importlib.util.spec_from_file_location("coverage_bench", ROOT / "bench" / "coverage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_table_is_the_committed_results():
    module = bench()
    result = json.loads((ROOT / "bench" / "results" / "coverage.json").read_text())
    assert [row["kind"] for row in result["kinds"]] == list(module.KINDS)
    for row in result["kinds"]:
        assert row["within_target"] == (module.TARGET[0] <= row["coverage"] <= module.TARGET[1])
        assert row["datasets"] >= 300 and row["figure_inside_own_interval"] >= 0.99, row["kind"]
    docs = (ROOT / "docs" / "comparison.md").read_text()
    assert module.table(result) in docs
