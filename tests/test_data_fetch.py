"""`embeval data fetch` end to end against a loopback HTTP server (and file:// mirrors) serving
archives built from SentEval's task data; resumption, corruption and every bad-input path."""

import errno
import hashlib
import os
import shutil
import socket
from pathlib import Path

import pytest

from embeval.datasets import files
from embeval.datasets.sources import load_checksums, load_sources
from tests.data_helpers import (
    EXPECTED_TEST,
    EXPECTED_TRAIN,
    SYNTHETIC_TEST,
    SYNTHETIC_TRAIN,
    TEST_KEY,
    TRAIN_KEY,
    MirrorServer,
    build_mirror,
    build_msi,
)

REBUILT = "CR,MR,MPQA,SUBJ,SST2,SST5,TREC,STSBenchmark,SNLI,ImageCaptionRetrieval,Tense"


@pytest.fixture(scope="module")
def mirror(data_dir, raw_sts_benchmark, tmp_path_factory):
    return build_mirror(data_dir, tmp_path_factory.mktemp("mirror"))


@pytest.fixture
def server(mirror):
    with MirrorServer(mirror).running() as running:
        yield running


@pytest.fixture
def own_mirror(mirror, tmp_path):
    """A private copy of the mirror that a test may damage."""
    return Path(shutil.copytree(mirror, tmp_path / "own-mirror"))


def _error_lines(result):
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert "Traceback" not in result.stderr
    return lines


def _one_error(result, *fragments):
    assert result.exit_code == 2, result.output
    lines = _error_lines(result)
    assert len(lines) == 1, lines
    assert lines[0].startswith("embeval: error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def _no_partial_state(dest, tasks, cli):
    """Nothing half-written: no staging folder left, and verify does not accept the tasks."""
    assert not list(Path(dest).glob(".staging-*"))
    result = cli("data", "verify", dest, "--tasks", tasks)
    assert result.exit_code == 2
    assert "ok" not in result.stdout.split()


def test_fetch_over_http_builds_sentevals_layout_file_for_file(cli, server, data_dir, tmp_path):
    dest = tmp_path / "data"
    result = cli("data", "fetch", "--tasks", REBUILT, "--dest", dest, "--mirror", server.url, "--quiet")
    assert result.exit_code == 0, result.output
    assert not result.stderr
    table = load_checksums()
    compared = 0
    for dataset in load_sources().values():
        if not set(dataset.tasks) & set(REBUILT.split(",")):
            continue
        for rel in dataset.expected_files(table):
            assert (dest / rel).is_file(), rel
            if (data_dir / rel).is_file():
                assert (dest / rel).read_bytes() == (data_dir / rel).read_bytes(), rel
                compared += 1
    assert compared == 27
    assert (dest / "downstream/SNLI/s1.train").read_bytes().endswith(b"A man said `` hello '' ... \n")
    assert (dest / "downstream/SNLI/s2.train").read_bytes().endswith(b"He ca n't stop . \n")
    assert not (dest / ".downloads").exists()
    assert not list(dest.glob(".staging-*"))
    check = cli("data", "verify", dest, "--tasks", REBUILT)
    assert check.exit_code == 0, check.output
    assert "SNLI                     ok, 3 of 9 files without recorded checksum" in check.stdout
    assert "Tense                    present, no recorded checksum" in check.stdout
    again = cli("data", "fetch", "--tasks", "TREC", "--dest", dest, "--mirror", server.url, "--quiet")
    assert again.exit_code == 0 and "TREC                     ok" in again.stdout


def test_fetch_from_file_mirror_and_environment(cli, mirror, data_dir, tmp_path, monkeypatch):
    dest = tmp_path / "data"
    result = cli("data", "fetch", "--tasks", "SST2", "--dest", dest, "--mirror", mirror.as_uri(), "--quiet")
    assert result.exit_code == 0, result.output
    monkeypatch.setenv("EMBEVAL_MIRROR", str(mirror))
    result = cli("data", "fetch", "--tasks", "TREC", "--dest", dest, "--quiet")
    assert result.exit_code == 0, result.output
    for rel in ("downstream/SST/binary/sentiment-train", "downstream/TREC/TREC_10.label"):
        assert (dest / rel).read_bytes() == (data_dir / rel).read_bytes()


def test_interrupted_download_resumes_where_it_stopped(cli, server, mirror, tmp_path):
    dest = tmp_path / "data"
    server.cut["snli_1.0.zip"] = 300_000
    first = cli("data", "fetch", "--tasks", "SNLI", "--dest", dest, "--mirror", server.url, "--quiet")
    _one_error(first, "snli_1.0.zip", "SNLI", "download interrupted after 300000 of", "run the same command again")
    part = dest / ".downloads" / "snli_1.0.zip.part"
    assert part.stat().st_size == 300_000
    _no_partial_state(dest, "SNLI", cli)
    second = cli("data", "fetch", "--tasks", "SNLI", "--dest", dest, "--mirror", server.url, "--quiet")
    assert second.exit_code == 0, second.output
    assert server.requests[-1] == ("snli_1.0.zip", "bytes=300000-")
    assert cli("data", "verify", dest, "--tasks", "SNLI").exit_code == 0


def test_corrupt_archive_is_detected_removed_and_named(cli, own_mirror, tmp_path):
    archive = own_mirror / "datasmall_NB_ACL12.zip"
    data = bytearray(archive.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(64)
    archive.write_bytes(bytes(data))
    dest = tmp_path / "data"
    with MirrorServer(own_mirror).running() as server:
        result = cli("data", "fetch", "--tasks", "MR", "--dest", dest, "--mirror", server.url, "--quiet")
    line = _one_error(result, "datasmall_NB_ACL12.zip", "MR", "corrupt", "removed it")
    assert str(dest / ".downloads" / "datasmall_NB_ACL12.zip") in line
    assert not (dest / ".downloads" / "datasmall_NB_ACL12.zip").exists()
    assert not (dest / "downstream" / "MR").exists()
    _no_partial_state(dest, "MR", cli)


def test_corrupt_plain_download_fails_verification_and_is_removed(cli, own_mirror, tmp_path):
    label = own_mirror / "TREC_10.label"
    label.write_bytes(label.read_bytes().replace(b"What", b"Whet", 1))
    dest = tmp_path / "data"
    result = cli("data", "fetch", "--tasks", "TREC", "--dest", dest, "--mirror", own_mirror, "--quiet")
    _one_error(result, "downstream/TREC", "TREC", "TREC_10.label differs from SentEval's file", "removed the download")
    assert not (dest / ".downloads" / "TREC_10.label").exists()
    _no_partial_state(dest, "TREC", cli)


def test_unrecorded_download_in_the_wrong_format_is_refused(cli, own_mirror, tmp_path):
    """Files without a recorded checksum (here a probing task) are parsed by the task's loader."""
    (own_mirror / "past_present.txt").write_bytes(b"<html><body>Rate limit exceeded</body></html>\n")
    dest = tmp_path / "data"
    result = cli("data", "fetch", "--tasks", "Tense", "--dest", dest, "--mirror", own_mirror, "--quiet")
    _one_error(result, "Tense", "not in the task's format", "SPLIT<TAB>LABEL", "removed the download past_present.txt")
    assert not (dest / "probing" / "past_present.txt").exists()
    _no_partial_state(dest, "Tense", cli)


def test_truncated_archive(cli, own_mirror, tmp_path):
    archive = own_mirror / "Stsbenchmark.tar.gz"
    archive.write_bytes(archive.read_bytes()[:50_000])
    dest = tmp_path / "data"
    with MirrorServer(own_mirror).running() as server:
        result = cli("data", "fetch", "--tasks", "STSBenchmark", "--dest", dest, "--mirror", server.url, "--quiet")
    _one_error(result, "Stsbenchmark.tar.gz", "STSBenchmark", "corrupt or truncated tar archive", "removed it")
    assert not (dest / ".downloads" / "Stsbenchmark.tar.gz").exists()
    _no_partial_state(dest, "STSBenchmark", cli)


def test_unreachable_mirror(cli, tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dest = tmp_path / "data"
    result = cli(
        "data", "fetch", "--tasks", "SST2,TREC", "--dest", dest, "--mirror", f"http://127.0.0.1:{port}", "--quiet"
    )
    _one_error(
        result,
        f"http://127.0.0.1:{port}/sentiment-train",
        "SST2",
        "cannot reach the server",
        "--mirror URL",  # the ways on, as quickstart names them
        "point --data / EMBEVAL_DATA at an existing SentEval data/ folder",
    )
    _no_partial_state(dest, "SST2", cli)
    assert not (dest / ".downloads").exists()  # nothing was downloaded: no empty folder left behind


def test_missing_file_in_mirror_is_a_404(cli, own_mirror, tmp_path):
    (own_mirror / "TREC_10.label").unlink()
    dest = tmp_path / "data"
    with MirrorServer(own_mirror).running() as server:
        result = cli("data", "fetch", "--tasks", "TREC", "--dest", dest, "--mirror", server.url, "--quiet")
        _one_error(result, "/TREC_10.label", "TREC", "HTTP 404")
    _no_partial_state(dest, "TREC", cli)
    file_result = cli("data", "fetch", "--tasks", "TREC", "--dest", dest, "--mirror", own_mirror, "--quiet")
    _one_error(file_result, "TREC_10.label", "not found in the mirror")


class _DiskFillsUp:
    """files.create that raises ENOSPC once `budget` bytes have been written to matching paths."""

    def __init__(self, budget, where=""):
        self.left, self.where, self.real = budget, where, files.create

    def __call__(self, path, append=False):
        handle = self.real(path, append)
        if self.where not in str(path):
            return handle
        fills = self

        class Limited:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                handle.close()

            def write(self, data):
                if len(data) > fills.left:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
                fills.left -= len(data)
                return handle.write(data)

            def flush(self):
                handle.flush()

            def close(self):
                handle.close()

        return Limited()


@pytest.mark.parametrize("where, budget", [(".downloads", 10_000), (".staging-", 100_000)])
def test_full_disk(cli, server, tmp_path, monkeypatch, where, budget):
    monkeypatch.setattr(files, "create", _DiskFillsUp(budget, where))
    dest = tmp_path / "data"
    result = cli("data", "fetch", "--tasks", "SUBJ", "--dest", dest, "--mirror", server.url, "--quiet")
    _one_error(result, "SUBJ", "no space left on the device", where)
    _no_partial_state(dest, "SUBJ", cli)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_full_disk_for_real_with_dev_full(cli, server, tmp_path):
    """Writes that really fail with ENOSPC: the download's .part file is /dev/full."""
    dest = tmp_path / "data"
    (dest / ".downloads").mkdir(parents=True)
    (dest / ".downloads" / "sentiment-train.part").symlink_to("/dev/full")
    result = cli("data", "fetch", "--tasks", "SST2", "--dest", dest, "--mirror", server.url, "--quiet")
    _one_error(result, "sentiment-train.part", "SST2", "no space left on the device")
    _no_partial_state(dest, "SST2", cli)


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES])
def test_read_only_destination(cli, server, tmp_path, monkeypatch, code):
    """A read-only file system or a folder without write permission (injected: root ignores
    permission bits, so a chmod would test nothing under CI)."""
    dest = tmp_path / "data"

    def refuse(path, *args, **kwargs):
        raise OSError(code, os.strerror(code), str(path))

    monkeypatch.setattr(files, "make_dirs", refuse)
    monkeypatch.setattr(files, "create", refuse)
    result = cli("data", "fetch", "--tasks", "TREC", "--dest", dest, "--mirror", server.url, "--quiet")
    _one_error(result, str(dest), "not writable (permission denied or read-only file system)")
    assert not dest.exists() or not any(dest.iterdir())


def test_present_but_different_data_is_kept_unless_forced(cli, server, data_dir, tmp_path):
    dest = tmp_path / "data"
    folder = dest / "downstream" / "TREC"
    folder.mkdir(parents=True)
    (folder / "train_5500.label").write_bytes(b"mine\n")
    (folder / "TREC_10.label").write_bytes((data_dir / "downstream/TREC/TREC_10.label").read_bytes())
    result = cli("data", "fetch", "--tasks", "TREC", "--dest", dest, "--mirror", server.url, "--quiet")
    _one_error(result, "TREC", "differs: downstream/TREC/train_5500.label", "--force")
    assert (folder / "train_5500.label").read_bytes() == b"mine\n"
    forced = cli("data", "fetch", "--tasks", "TREC", "--dest", dest, "--mirror", server.url, "--quiet", "--force")
    assert forced.exit_code == 0, forced.output
    assert (folder / "train_5500.label").read_bytes() == (data_dir / "downstream/TREC/train_5500.label").read_bytes()


def test_mrpc_from_the_installer(cli, tmp_path, monkeypatch):
    """MRPC comes out of Microsoft's installer format with SentEval's post-processing; the result
    is verified against the table (here the checksums of the synthetic texts' expected output)."""
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "MSRParaphraseCorpus.msi").write_bytes(build_msi({TRAIN_KEY: SYNTHETIC_TRAIN, TEST_KEY: SYNTHETIC_TEST}))
    dest = tmp_path / "data"
    refused = cli("data", "fetch", "--tasks", "MRPC", "--dest", dest, "--mirror", mirror, "--quiet")
    _one_error(refused, "MRPC", "msr_paraphrase_test.txt differs from SentEval's file")
    _no_partial_state(dest, "MRPC", cli)
    table = dict(load_checksums())
    for name, data in (("train", EXPECTED_TRAIN), ("test", EXPECTED_TEST)):
        table[f"downstream/MRPC/msr_paraphrase_{name}.txt"] = (len(data), hashlib.sha256(data).hexdigest())
    monkeypatch.setattr("embeval.datasets.verify.load_checksums", lambda: table)
    monkeypatch.setattr("embeval.datasets.sources.load_checksums", lambda: table)
    result = cli("data", "fetch", "--tasks", "MRPC", "--dest", dest, "--mirror", mirror, "--quiet")
    assert result.exit_code == 0, result.output
    assert (dest / "downstream/MRPC/msr_paraphrase_train.txt").read_bytes() == EXPECTED_TRAIN


def test_fetch_help_documents_the_hint_users_are_given(cli):
    from embeval.errors import DATA_HINT

    assert "embeval data fetch --data DIR" in DATA_HINT
    result = cli("data", "fetch", "--help")
    assert result.exit_code == 0 and "--data DIR" in result.stdout and "--mirror URL" in result.stdout
