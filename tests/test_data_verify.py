"""`embeval data verify` and `embeval data list`, and the consistency of the source and checksum
tables shipped in data/."""

import shutil
from pathlib import Path

import pytest

from embeval.datasets.sources import (
    check_covers_all_tasks,
    data_folder,
    load_checksums,
    load_sources,
    mirror_files,
)
from embeval.datasets.verify import sha256_of
from embeval.tasks.registry import TASKS


def test_verify_passes_on_the_test_data_for_every_task_it_holds(cli, data_dir):
    result = cli("data", "verify", data_dir)
    assert result.exit_code == 0, result.output
    states = dict(line.split(None, 1) for line in result.stdout.splitlines()[:-1])
    held = [t for t in TASKS if not TASKS[t].missing_files(data_dir)]
    assert len(held) == 17  # every downstream task but SNLI (no train split) and COCO, and STSBenchmarkRaw
    for task in held:
        assert states[task] == "ok", task
    assert states["SNLI"].startswith("missing: downstream/SNLI/labels.train")
    assert states["ImageCaptionRetrieval"] == "not present"
    named = cli("data", "verify", data_dir, "--tasks", ",".join(held))
    assert named.exit_code == 0, named.output


def test_every_test_data_file_is_recorded_and_matches(data_dir):
    table = load_checksums()
    present = {
        str(p.relative_to(data_dir))
        for folder in ("downstream", "raw")
        for p in (data_dir / folder).rglob("*")
        if p.is_file()
    }
    assert present == set(table)
    for rel in ("downstream/MR/rt-polarity.pos", "downstream/STS/STS16-en-test/LICENSE.txt"):
        assert sha256_of(data_dir / rel) == table[rel]


@pytest.fixture
def copy_of_sick(data_dir, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(data_dir / "downstream/SICK", root / "downstream/SICK")
    return root


def test_verify_names_the_first_differing_file(cli, copy_of_sick):
    path = copy_of_sick / "downstream/SICK/SICK_trial.txt"
    path.write_bytes(path.read_bytes().replace(b"NEUTRAL", b"ENTAILMENT", 1))
    result = cli("data", "verify", copy_of_sick, "--tasks", "SICKEntailment")
    assert result.exit_code == 2
    assert (
        "SICKEntailment           differs: downstream/SICK/SICK_trial.txt does not match its recorded sha256"
        in result.stdout
    )
    assert result.stderr.count("\n") == 1 and "not usable: SICKEntailment" in result.stderr
    assert cli("data", "verify", copy_of_sick).exit_code == 2


def test_verify_reports_missing_files(cli, copy_of_sick):
    (copy_of_sick / "downstream/SICK/SICK_train.txt").unlink()
    result = cli("data", "verify", copy_of_sick, "--tasks", "SICKRelatedness")
    assert result.exit_code == 2
    assert "missing: downstream/SICK/SICK_train.txt" in result.stdout
    unasked = cli("data", "verify", copy_of_sick)
    assert unasked.exit_code == 0 and "not present" in unasked.stdout


def test_files_without_recorded_checksum_are_said_so(cli, tmp_path):
    (tmp_path / "probing").mkdir()
    (tmp_path / "probing/past_present.txt").write_text("tr\tPAST\tit rained .\n")
    result = cli("data", "verify", tmp_path, "--tasks", "Tense")
    assert result.exit_code == 0
    assert "Tense                    present, no recorded checksum" in result.stdout


def test_verify_of_a_folder_that_is_not_there(cli, tmp_path):
    result = cli("data", "verify", tmp_path / "nowhere")
    assert result.exit_code == 2 and "data folder not found" in result.stderr


def test_list_shows_source_size_license_and_status(cli, data_dir):
    result = cli("data", "list", "--data", data_dir)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith("STSBenchmark "))
    assert lines[row].split()[1:] == ["1.3", "MB", "verified"]
    assert "ixa2.si.ehu.es (Stsbenchmark.tar.gz)" in lines[row + 1]
    assert "CC BY-SA 4.0" in lines[row + 2]
    assert any(line.startswith("Length ") and "unknown  not present" in line for line in lines)
    urls = cli("data", "list", "--urls")
    assert "MSRParaphraseCorpus.msi\thttps://download.microsoft.com/" in urls.stdout
    assert len(urls.stdout.splitlines()) == len(mirror_files())


def test_tables_are_consistent():
    sources = load_sources()
    assert check_covers_all_tasks() == []
    names = [d.file for ds in sources.values() for d in ds.downloads]
    urls = {d.file: d.url for ds in sources.values() for d in ds.downloads}
    assert len(set(urls.values())) == len(urls), "one mirror file name per URL"
    assert all(url.rsplit("/", 1)[1] == name for name, url in urls.items())
    assert set(names) == set(mirror_files())
    table = load_checksums()
    owned = {rel for ds in sources.values() for rel in ds.expected_files(table)}
    assert set(table) <= owned
    for dataset in sources.values():
        for step in dataset.steps:
            if "archive" in step:
                assert step["archive"] in {d.file for d in dataset.downloads}


def test_tables_ship_inside_the_package_data_folder():
    folder = data_folder()
    assert (folder / "sources.json").is_file() and (folder / "checksums.tsv").is_file()
    project = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert '"embeval._data" = "data"' in project and "package-dir" in project
