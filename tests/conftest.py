"""Shared fixtures: SentEval's task data, the devbow reference encoder, and vectors-file builders."""
import importlib.util
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("EMBEVAL_SHARED", REPO.parent / "shared"))
DATA = Path(os.environ.get("EMBEVAL_TEST_DATA", SHARED / "senteval_data"))
REFERENCE = Path(os.environ.get("EMBEVAL_REFERENCE", SHARED / "reference"))


def pytest_configure(config):
    if not (DATA / "downstream").is_dir():
        raise pytest.UsageError(f"SentEval test data not found at {DATA}; set EMBEVAL_TEST_DATA")


@pytest.fixture(scope="session")
def data_dir():
    """SentEval's downstream data (read-only)."""
    return DATA


@pytest.fixture(scope="session")
def reference_dir():
    return REFERENCE


@pytest.fixture(scope="session")
def devbow():
    """The deterministic 128-d encoder behind the recorded SentEval outputs."""
    spec = importlib.util.spec_from_file_location("devbow", REFERENCE / "devbow.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def cli():
    """Run the embeval command in-process: cli(*args) -> click Result (exit_code, stdout, stderr)."""
    from embeval.cli.main import cli as command

    def run(*args):
        return CliRunner().invoke(command, [str(a) for a in args], catch_exceptions=False)

    return run


@pytest.fixture(scope="session")
def devbow_vectors(tmp_path_factory, data_dir, devbow):
    """An export of every task with data, and its devbow vectors file: (export dir, vectors path)."""
    from embeval.formats import sentences as export
    from embeval.formats.vectors import write
    from embeval.tasks.registry import TASKS

    root = tmp_path_factory.mktemp("devbow")
    names = [n for n, t in TASKS.items() if not t.missing_files(data_dir)]
    export.export([TASKS[n].load(data_dir) for n in names], root / "sentences")
    write(root / "devbow.h5", root / "sentences", devbow.encode, batch_size=4096, progress=False)
    return root / "sentences", root / "devbow.h5"
