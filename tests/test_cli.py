"""The command line: export, check and score end to end, and the one-line errors for bad input."""

import json
import subprocess
import sys

import h5py
import numpy as np
import pytest

from embeval._version import __version__
from embeval.formats import sentences as export
from embeval.tasks.registry import TASKS


def one_line_error(result, *fragments):
    """Exit code 2, exactly one error line on stderr (the last; progress lines may precede it), naming
    every fragment, no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert [line for line in lines if line.startswith("embeval: error: ")] == lines[-1:], result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[-1], (fragment, lines[-1])


def test_version_and_help(cli):
    version = cli("--version").stdout.strip()
    assert version.startswith(f"embeval, version {__version__}; bootstrap kernels: ")
    assert __version__ == "0.2.0"
    # the compiled kernels where this install built them (CI's does), numpy's otherwise
    from embeval import stats

    assert version.endswith("compiled" if stats._kernels is not None else "numpy (installed without a C compiler)")
    for command in ([], ["export-sentences"], ["score"], ["vectors"], ["vectors", "check"]):
        result = cli(*command, "--help")
        assert result.exit_code == 0 and "Usage:" in result.stdout


def test_export_check_score_end_to_end(cli, data_dir, devbow, tmp_path):
    result = cli("export-sentences", "--data", data_dir, "--out", tmp_path / "sent", "--tasks", "STS16,STS13")
    assert result.exit_code == 0, result.stderr
    manifest = json.loads((tmp_path / "sent" / "manifest.json").read_text())
    assert list(manifest["tasks"]) == ["STS13", "STS16"]
    assert manifest["tasks"]["STS16"] == {
        "file": "STS16.txt",
        "count": 1867,
        "sha256": export.fingerprint(export.task_sentences(TASKS["STS16"].load(data_dir))),
    }
    assert manifest["format"] == "embeval-sentences" and manifest["format_version"] == 1
    from embeval.formats.vectors import write

    write(tmp_path / "v.h5", tmp_path / "sent", devbow.encode, progress=False)
    result = cli("vectors", "check", tmp_path / "v.h5", "--export", tmp_path / "sent")
    assert result.exit_code == 0 and "all 2 datasets ok" in result.stdout
    out = tmp_path / "results.json"
    result = cli("score", tmp_path / "v.h5", "--data", data_dir, "--out", out)
    assert result.exit_code == 0, result.stderr
    assert "STS13" in result.stdout and "pooled" in result.stdout
    assert "skipped (absent from the vectors file)" in result.stdout and "CR" in result.stdout
    record = json.loads(out.read_text())
    assert set(record["tasks"]) == {"STS13", "STS16"}
    for key in ("embeval", "data", "vectors", "config", "seed", "device", "versions", "seconds"):
        assert key in record
    assert record["tasks"]["STS16"]["seconds"] >= 0
    assert record["vectors"]["fingerprints"]["STS16"] == record["tasks"]["STS16"]["vectors"]["vectors_sha256"]
    assert "CR" in record["skipped"]["absent_from_file"]


def test_export_without_tasks_lists_skipped(cli, data_dir, tmp_path):
    result = cli("export-sentences", "--data", data_dir, "--out", tmp_path / "all")
    assert result.exit_code == 0, result.stderr
    assert "skipped (no data" in result.stdout and "SNLI" in result.stdout
    manifest = json.loads((tmp_path / "all" / "manifest.json").read_text())
    assert len(manifest["tasks"]) == 17  # every task with data, STSBenchmarkRaw included


def test_export_errors(cli, data_dir, tmp_path):
    one_line_error(
        cli("export-sentences", "--data", tmp_path / "nope", "--out", tmp_path / "o"), "nope", "data folder not found"
    )
    one_line_error(
        cli("export-sentences", "--data", data_dir, "--out", tmp_path / "o", "--tasks", "STS99"),
        "--tasks",
        "unknown task STS99",
    )
    one_line_error(
        cli("export-sentences", "--data", data_dir, "--out", tmp_path / "o", "--tasks", "SNLI"),
        "s1.train",
        "SNLI",
        "embeval data fetch",
    )
    assert not (tmp_path / "o").exists()


@pytest.fixture(scope="module")
def sts16(tmp_path_factory, data_dir, devbow):
    root = tmp_path_factory.mktemp("bad")
    sentences = export.task_sentences(TASKS["STS16"].load(data_dir))
    return root, devbow.encode(sentences), export.fingerprint(sentences)


def make_file(path, values, sha, name="STS16"):
    with h5py.File(path, "w") as f:
        f.create_dataset(name, data=values)
        if sha is not None:
            f[name].attrs["sha256"] = sha
    return path


BAD = {
    "one_d": lambda v, s: (v[:, 0], s, "STS16", "expected 2-D"),
    "three_d": lambda v, s: (v[:, :, None], s, "STS16", "expected 2-D"),
    "integer": lambda v, s: (v.astype(np.int32), s, "STS16", "dtype int32"),
    "complex": lambda v, s: (v.astype(np.complex64), s, "STS16", "dtype complex64"),
    "too_few_rows": lambda v, s: (v[:-1], s, "STS16", "1866 rows, the task has 1867"),
    "too_many_rows": lambda v, s: (np.vstack([v, v[:1]]), s, "STS16", "1868 rows"),
    "fingerprint": lambda v, s: (v, "f" * 64, "STS16", "fingerprint"),
    "nan": lambda v, s: (
        np.where(np.arange(len(v))[:, None] % 100 == 7, np.nan, v),
        s,
        "STS16",
        "19 of 1867 vectors contain NaN or Inf (first at row 7)",
    ),
    "inf": lambda v, s: (
        np.where(np.arange(len(v))[:, None] == 3, np.inf, v),
        s,
        "STS16",
        "1 of 1867 vectors contain NaN or Inf",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_score_bad_vectors(cli, data_dir, sts16, case):
    root, values, sha = sts16
    bad_values, bad_sha, task, message = BAD[case](values, sha)
    path = make_file(root / f"{case}.h5", bad_values, bad_sha)
    out = root / f"{case}.json"
    one_line_error(cli("score", path, "--data", data_dir, "--tasks", "STS16", "--out", out), str(path), task, message)
    assert not out.exists()


def test_score_missing_fingerprint_is_a_loud_warning(cli, data_dir, sts16):
    root, values, _ = sts16
    path = make_file(root / "nosha.h5", values, None)
    result = cli("score", path, "--data", data_dir, "--tasks", "STS16", "--out", root / "nosha.json")
    assert result.exit_code == 0
    assert "embeval: warning:" in result.stderr and "no sha256 attribute" in result.stderr


@pytest.mark.parametrize(
    "content,message",
    [(None, "vectors file not found"), (b"", "empty file"), (b"not an hdf5 file at all" * 10, "not an HDF5 file")],
)
def test_score_unreadable_vectors(cli, data_dir, tmp_path, content, message):
    path = tmp_path / "v.h5"
    if content is not None:
        path.write_bytes(content)
    one_line_error(cli("score", path, "--data", data_dir, "--out", tmp_path / "r.json"), str(path), message)
    assert not (tmp_path / "r.json").exists()


def test_score_truncated_hdf5(cli, data_dir, sts16, tmp_path):
    root, values, sha = sts16
    good = make_file(tmp_path / "good.h5", values, sha).read_bytes()
    path = tmp_path / "trunc.h5"
    path.write_bytes(good[: len(good) // 2])
    result = cli("score", path, "--data", data_dir, "--tasks", "STS16", "--out", tmp_path / "r.json")
    one_line_error(result, str(path))
    assert not (tmp_path / "r.json").exists()


def test_score_missing_data_file(cli, data_dir, sts16, tmp_path):
    import shutil

    root, values, sha = sts16
    path = make_file(tmp_path / "v.h5", values, sha)
    data = tmp_path / "data"
    shutil.copytree(data_dir / "downstream" / "STS" / "STS16-en-test", data / "downstream/STS/STS16-en-test")
    (data / "downstream/STS/STS16-en-test/STS.gs.plagiarism.txt").unlink()
    one_line_error(
        cli("score", path, "--data", data, "--tasks", "STS16", "--out", tmp_path / "r.json"),
        "STS.gs.plagiarism.txt",
        "STS16",
        "missing data file",
    )
    assert not (tmp_path / "r.json").exists()


def test_real_process_exit_code_and_stderr(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "embeval", "score", str(tmp_path / "missing.h5"), "--data", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"embeval: error: {tmp_path / 'missing.h5'}: vectors file not found"]
