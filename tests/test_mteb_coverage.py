"""docs/mteb-by-name.md's figures of what `--mteb` scores (text tasks per type, benchmarks scored whole,
in part or not at all) are the installed mteb's, counted by embeval.tasks.mteb_coverage (which
scripts/mteb_coverage.py prints): the docs cannot drift from mteb or from embeval's refusals."""

import re
import runpy
from pathlib import Path

import pytest
from mteb_helpers import mteb_client

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def found():
    mteb_client()
    from embeval.tasks.mteb_coverage import coverage

    return coverage()


def paragraph():
    text = (ROOT / "docs" / "mteb-by-name.md").read_text(encoding="utf-8")
    start = text.index("With mteb 2.")
    return " ".join(text[start : text.index("\n\n", start)].split())


def number(text):
    return int(text.replace(",", ""))


@pytest.mark.slow
def test_the_docs_coverage_is_the_installed_mtebs(found):
    said = paragraph()
    assert said.startswith(f"With mteb {found.version},"), said[:40]
    tasks = re.search(r"scores every one of mteb's ([\d,]+) text tasks", said)
    assert tasks and number(tasks[1]) == found.tasks and not found.refused, found.refused
    types = re.search(r"of (\d+) types: (.*?)\. ", said)
    listed = {name: int(count) for name, count in re.findall(r"(\w+) (\d+)", types[2])}
    assert int(types[1]) == len(found.types) and listed == found.types
    whole = re.search(
        r"(\d+) of mteb's (\d+) benchmarks hold only text tasks and are scored whole, among them (.*?)\.", said
    )
    assert (int(whole[1]), int(whole[2])) == (len(found.whole), found.benchmarks)
    named = [n.strip() for n in re.split(r", (?![^()]*\))| and ", whole[3].replace("and the RTEB benchmarks", ""))]
    assert set(filter(None, named)) <= set(found.whole), set(named) - set(found.whole)
    assert [b for b in found.whole if b.startswith("RTEB")], "the RTEB benchmarks are scored whole"
    assert {"MTEB(eng, v2)", "MTEB(Multilingual, v2)"} <= set(found.whole)
    partial = re.search(r"(\S+) and (\S+) hold one text task each among image tasks", said)
    assert found.partial == {
        partial[1]: (1, found.partial[partial[1]][1]),
        partial[2]: (1, found.partial[partial[2]][1]),
    }
    none = re.search(r"the other (\d+) hold no text task", said)
    assert int(none[1]) == len(found.none) == found.benchmarks - len(found.whole) - len(found.partial)
    from embeval.tasks.mteb_coverage import lines as printed  # what the script the docs name prints

    runpy.run_path(str(ROOT / "scripts" / "mteb_coverage.py"), run_name="not_main")  # it imports and runs
    lines = printed(found)
    assert lines[0] == f"mteb {found.version}: {found.tasks} text tasks, {found.tasks} scored by name"
    assert f"benchmarks: {found.benchmarks}; scored whole: {len(found.whole)}" in lines


@pytest.mark.slow
def test_mmteb_resolves_with_no_task_left_out(cli, tmp_path):
    """`embeval tasks --mteb "MTEB(Multilingual, v2)" --no-load`: its 131 tasks, none refused (its
    parallel bitext mining and its other former exceptions included), each with its fetch command."""
    done = cli("tasks", "--mteb", "MTEB(Multilingual, v2)", "--mteb-data", tmp_path, "--no-load")
    assert done.exit_code == 0, done.stderr
    assert "not scored" not in done.stdout
    assert done.stdout.strip().splitlines()[-1] == f"131 tasks: 131 datasets not in {tmp_path}"
    flores = next(line for line in done.stdout.splitlines() if line.startswith("FloresBitextMining"))
    assert "41412 language pairs of parallel subsets, split devtest" in flores
