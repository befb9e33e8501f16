"""Shared fixtures: SentEval's task data, the devbow reference encoder, and vectors-file builders.

Tests that need SentEval's task data read it from $EMBEVAL_TEST_DATA, else from the data folder
`embeval data fetch` fills ($EMBEVAL_DATA, else the per-user data folder). Without it they are
skipped with one reason; with EMBEVAL_REQUIRE_DATA=1 (set by CI) the run stops at once instead.
"""
import os
import tarfile
from pathlib import Path

import devbow as devbow_module
import pytest
from click.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]
REFERENCE = Path(__file__).resolve().parent / "reference"

# The tasks the tests score on SentEval's real data. Files the tests must not see even when the
# data folder holds them (the tests make their own small SNLI train, COCO and probing files).
TEST_TASKS = ("CR", "MR", "MPQA", "SUBJ", "SST2", "SST5", "TREC", "MRPC", "SICKEntailment", "SICKRelatedness",
              "STSBenchmark", "STS12", "STS13", "STS14", "STS15", "STS16")
HIDDEN = ("SNLI/s1.train", "SNLI/s2.train", "SNLI/labels.train", "COCO")
RAW_STSB = "raw/STSBenchmark"
STSB_ARCHIVE = ".downloads/Stsbenchmark.tar.gz"


def data_source():
    """The data folder the tests read: $EMBEVAL_TEST_DATA, else the one `embeval data fetch` fills."""
    if os.environ.get("EMBEVAL_TEST_DATA"):
        return Path(os.environ["EMBEVAL_TEST_DATA"])
    from embeval.tasks.loaders import resolve_data_dir

    return resolve_data_dir()


def data_required():
    return os.environ.get("EMBEVAL_REQUIRE_DATA") == "1"


def missing_test_tasks(root):
    from embeval.tasks.registry import TASKS

    return [name for name in TEST_TASKS if TASKS[name].missing_files(root)]


SOURCE = data_source()
MISSING = missing_test_tasks(SOURCE)
NO_DATA = (f"SentEval's task data is not in {SOURCE} ({len(MISSING)} of the {len(TEST_TASKS)} tasks the tests use "
           f"are missing, e.g. {MISSING[0] if MISSING else ''}): run `embeval data fetch`, or set EMBEVAL_TEST_DATA "
           f"to a data folder it made")


def pytest_configure(config):
    if MISSING and data_required():
        raise pytest.UsageError(f"{NO_DATA} (EMBEVAL_REQUIRE_DATA=1)")


def pytest_report_header(config):
    if MISSING:
        return f"SentEval task data: none; the tests that need it are skipped ({NO_DATA})"
    return f"SentEval task data: {SOURCE}"


def build_view(source, view):
    """A read-only view (symlinks) of the source's downstream files, less the HIDDEN ones, plus the
    untokenized STS Benchmark when the source has it (raw/STSBenchmark or the kept download)."""
    downstream = source / "downstream"
    for path in sorted(downstream.rglob("*")):
        rel = path.relative_to(downstream).as_posix()
        if path.is_file() and not any(rel == h or rel.startswith(h + "/") for h in HIDDEN):
            target = view / "downstream" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path.resolve())
    raw = view / RAW_STSB
    if (source / RAW_STSB).is_dir():
        raw.parent.mkdir(parents=True)
        raw.symlink_to((source / RAW_STSB).resolve(), target_is_directory=True)
    elif (source / STSB_ARCHIVE).is_file():
        raw.mkdir(parents=True)
        with tarfile.open(source / STSB_ARCHIVE) as archive:
            for member in archive.getmembers():
                if member.isfile() and member.name.startswith("stsbenchmark/") and member.name.count("/") == 1:
                    (raw / Path(member.name).name).write_bytes(archive.extractfile(member).read())
    return view


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
    """SentEval's downstream data (read-only): the TEST_TASKS' files, as the tests expect them."""
    if MISSING:
        pytest.skip(NO_DATA)
    return build_view(SOURCE, tmp_path_factory.mktemp("senteval_data"))


@pytest.fixture(scope="session")
def raw_sts_benchmark(data_dir):
    """The untokenized, cased STS Benchmark csv files (the data STSBenchmark is built from)."""
    folder = data_dir / RAW_STSB
    if not folder.is_dir():
        reason = (f"the untokenized STS Benchmark is not in {SOURCE}: put its csv files in {RAW_STSB}/ there, or "
                  f"fetch with `embeval data fetch --keep-downloads` (keeps {STSB_ARCHIVE})")
        if data_required():
            pytest.fail(f"{reason} (EMBEVAL_REQUIRE_DATA=1)")
        pytest.skip(reason)
    return folder


@pytest.fixture(scope="session")
def reference_dir():
    """Recorded outputs of the original SentEval on devbow vectors (tests/reference/README.md)."""
    return REFERENCE


@pytest.fixture(scope="session")
def devbow():
    """The deterministic 128-d encoder behind the recorded SentEval outputs."""
    return devbow_module


@pytest.fixture
def cli():
    """Run the embeval command in-process: cli(*args) -> click Result (exit_code, stdout, stderr)."""
    from embeval.cli.main import cli as command

    def run(*args):
        return CliRunner().invoke(command, [str(a) for a in args], catch_exceptions=False)

    return run


@pytest.fixture(scope="session")
def devbow_vectors(tmp_path_factory, data_dir):
    """An export of every test task, and its devbow vectors file: (export dir, vectors path)."""
    from embeval.formats import sentences as export
    from embeval.formats.vectors import write
    from embeval.tasks.registry import TASKS

    root = tmp_path_factory.mktemp("devbow")
    export.export([TASKS[n].load(data_dir) for n in TEST_TASKS], root / "sentences")
    write(root / "devbow.h5", root / "sentences", devbow_module.encode, batch_size=4096, progress=False)
    return root / "sentences", root / "devbow.h5"
