"""MSI (OLE compound file + cabinet) extraction in Python, and the archive checks of downloads."""

import struct
from pathlib import Path

import pytest

from embeval.datasets import msi
from embeval.datasets.archives import Archive, ArchiveError
from embeval.datasets.preprocess import run_steps
from embeval.datasets.sources import load_sources
from tests.data_helpers import (
    EXPECTED_TEST,
    EXPECTED_TRAIN,
    SYNTHETIC_TEST,
    SYNTHETIC_TRAIN,
    TEST_KEY,
    TRAIN_KEY,
    build_cab,
    build_msi,
    build_ole,
    targz_bytes,
    zip_bytes,
)

FIXTURES = Path(__file__).parent / "fixtures"


def test_real_installer_built_by_wixl_is_read():
    """tests/fixtures/synthetic_mrpc.msi was built by msitools' wixl (a real Windows Installer
    database with an MSZIP cabinet in its mini stream) from the two synthetic texts above."""
    files = msi.extract_msi((FIXTURES / "synthetic_mrpc.msi").read_bytes())
    assert files == {TRAIN_KEY: SYNTHETIC_TRAIN, TEST_KEY: SYNTHETIC_TEST}
    names = {msi.msi_stream_name(n) for n in msi.read_ole((FIXTURES / "synthetic_mrpc.msi").read_bytes())}
    assert "Data1.cab" in names and "!File" in names


def test_installer_holding_sentevals_mrpc_files_gives_them_back(data_dir):
    train = (data_dir / "downstream/MRPC/msr_paraphrase_train.txt").read_bytes()
    test = (data_dir / "downstream/MRPC/msr_paraphrase_test.txt").read_bytes()
    for compress in (True, False):
        package = build_msi({TRAIN_KEY: train, TEST_KEY: test}, compress=compress)
        assert msi.extract_msi(package) == {TRAIN_KEY: train, TEST_KEY: test}


def test_mrpc_steps_reproduce_sentevals_post_processing(tmp_path):
    """SentEval's MRPC recipe on the installer's files: carriage returns removed, header kept,
    sentences Moses-tokenized (no lowercasing), train/test named as SentEval names them."""
    path = tmp_path / "MSRParaphraseCorpus.msi"
    path.write_bytes((FIXTURES / "synthetic_mrpc.msi").read_bytes())
    dataset = load_sources()["MRPC"]
    run_steps(dataset, {path.name: Archive(path)}, tmp_path / "out")
    folder = tmp_path / "out" / dataset.folder
    assert (folder / "msr_paraphrase_train.txt").read_bytes() == EXPECTED_TRAIN
    assert (folder / "msr_paraphrase_test.txt").read_bytes() == EXPECTED_TEST


def test_ole_reader_handles_mini_and_regular_streams():
    streams = {"small": b"x" * 100, "edge": b"y" * 4095, "big": bytes(range(256)) * 40, "empty": b""}
    assert msi.read_ole(build_ole(streams)) == streams


def test_cab_checksum_matches_the_format(tmp_path):
    members = {"a.txt": b"hello world\n" * 5000, "b.txt": b"second file"}
    assert msi.read_cab(build_cab(members)) == members
    assert msi.read_cab(build_cab(members, compress=False, checksums=False)) == members


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_damaged_installer_is_an_archive_error(data_dir, damage):
    package = bytearray(build_msi({TRAIN_KEY: (data_dir / "downstream/MRPC/msr_paraphrase_test.txt").read_bytes()}))
    if damage == "flip":
        start = package.index(b"CK") + 100
        package[start : start + 20] = bytes(20)
    else:
        package = package[: len(package) // 2]
    with pytest.raises(msi.ArchiveError):
        msi.extract_msi(bytes(package))


def test_lzx_cabinet_is_refused_with_a_clear_message():
    cab = bytearray(build_cab({"a": b"data"}))
    struct.pack_into("<H", cab, 36 + 6, 3)
    with pytest.raises(msi.ArchiveError, match="LZX"):
        msi.read_cab(bytes(cab))


def test_not_an_installer():
    with pytest.raises(msi.ArchiveError, match="not an OLE"):
        msi.extract_msi(b"<html>not found</html>" * 40)


@pytest.mark.parametrize(
    "name, payload",
    [
        ("x.zip", zip_bytes({"d/a.txt": b"a" * 5000, "d/b.txt": b"b"})),
        ("x.tar.gz", targz_bytes({"d/a.txt": b"a" * 5000, "d/b.txt": b"b"})),
    ],
    ids=["zip", "tar.gz"],  # the archives' bytes hold the time they were made: every test process must agree
)
def test_archive_check_and_tree(tmp_path, name, payload):
    path = tmp_path / name
    path.write_bytes(payload)
    archive = Archive(path)
    archive.check()
    assert archive.tree("d") == {"a.txt": b"a" * 5000, "b.txt": b"b"}
    path.write_bytes(payload[: len(payload) - 30])
    with pytest.raises(ArchiveError, match=name):
        Archive(path).check()


def test_zip_crc_error_is_found(tmp_path):
    payload = bytearray(zip_bytes({"d/a.txt": bytes(range(256)) * 50}))
    payload[60:70] = b"\xff" * 10
    path = tmp_path / "x.zip"
    path.write_bytes(bytes(payload))
    with pytest.raises(ArchiveError, match="corrupt or truncated zip archive"):
        Archive(path).check()


def test_unsafe_member_paths_are_refused(tmp_path):
    path = tmp_path / "evil.zip"
    path.write_bytes(zip_bytes({"d/../../escape.txt": b"x"}))
    with pytest.raises(ArchiveError, match="unsafe member path"):
        Archive(path).tree("d")
