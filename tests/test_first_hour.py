"""What a new user meets first: a run that scores nothing fails loudly, one writer per results file,
errors that point to the fix, task names as people write them, visible progress, predictions kept."""

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import pytest
from reliability_helpers import (
    PREVIOUS,
    refused,
    sentences,
    task_file,
    untouched,
    vectors_for,
)

from embeval.formats import sentences as export
from embeval.run.progress import TaskProgress, duration
from embeval.tasks.registry import canonical_name, parse_task_list

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def sts16(data_dir, tmp_path):
    return task_file(tmp_path / "v.h5", data_dir, ["STS16"])


# A run that scores nothing is exit code 2, one line saying why, and no results file.


def test_no_data_folder(cli, sts16, tmp_path):
    out = tmp_path / "r.json"
    out.write_bytes(PREVIOUS)
    refused(
        cli("score", sts16, "--data", tmp_path / "nowhere", "--out", out),
        f"the data folder {tmp_path / 'nowhere'} does not exist",
        "embeval data fetch",
    )
    untouched(out, PREVIOUS)


def test_empty_data_folder(cli, sts16, tmp_path):
    (tmp_path / "empty").mkdir()
    out = tmp_path / "r.json"
    refused(
        cli("score", sts16, "--data", tmp_path / "empty", "--out", out),
        "nothing to score",
        f"no data for STS16 in {tmp_path / 'empty'}",
    )
    untouched(out, None)


def test_datasets_inside_a_group_are_named_with_the_layout_to_use(cli, data_dir, tmp_path):
    texts = sentences(data_dir, "STS16")
    with h5py.File(tmp_path / "g.h5", "w") as f:
        f.create_dataset("vectors/STS16", data=vectors_for(texts))
        f["vectors/STS16"].attrs["sha256"] = export.fingerprint(texts)
    out = tmp_path / "r.json"
    refused(
        cli("score", tmp_path / "g.h5", "--data", data_dir, "--out", out),
        "g.h5",
        "nothing to score",
        "inside /vectors",
        "/vectors/STS16",
        "at the file's root",
    )
    untouched(out, None)


def test_a_named_task_absent_from_the_file(cli, sts16, data_dir, tmp_path):
    out = tmp_path / "r.json"
    refused(
        cli("score", sts16, "--data", data_dir, "--tasks", "STS12", "--out", out),
        "v.h5",
        "nothing to score",
        "STS12 absent from the file",
        "it holds /STS16",
    )
    untouched(out, None)


def test_skipped_tasks_are_listed_and_strict_refuses_them(cli, sts16, data_dir, tmp_path):
    out = tmp_path / "r.json"
    result = cli("score", sts16, "--data", data_dir, "--tasks", "STS16,STS12", "--out", out, "--bootstrap", "0")
    assert result.exit_code == 0, result.stderr
    assert "skipped (absent from the vectors file): STS12" in result.stdout
    assert json.loads(out.read_text())["skipped"]["absent_from_file"] == ["STS12"]
    strict = tmp_path / "strict.json"
    refused(
        cli("score", sts16, "--data", data_dir, "--tasks", "STS16,STS12", "--out", strict, "--strict"),
        "STS12",
        "--strict",
    )
    untouched(strict, None)


def test_each_skipped_task_is_listed_once_under_its_own_reason(cli, data_dir, tmp_path):
    """A task without data is skipped for that reason whether or not the file has its vectors (SNLI: its
    train split is not in the tests' data; a named task without data whose vectors are in the file is an
    error); a task with data but no vectors is absent from the file. The terminal lines say which is which."""
    path = task_file(tmp_path / "v.h5", data_dir, ["STS16"])
    out = tmp_path / "r.json"
    result = cli("score", path, "--data", data_dir, "--out", out, "--bootstrap", "0", "--tasks", "STS16,STS12,SNLI")
    assert result.exit_code == 0, result.stderr
    skipped = [line for line in result.stdout.splitlines() if line.startswith("skipped")]
    assert skipped == [
        "skipped (absent from the vectors file): STS12",
        f"skipped (no task data in {data_dir}): SNLI",
    ]
    assert json.loads(out.read_text())["skipped"] == {"absent_from_file": ["STS12"], "no_data": ["SNLI"]}
    with h5py.File(path, "a") as f:
        f["SNLI"] = vectors_for(["x"] * 10)
    result = cli("score", path, "--data", data_dir, "--out", tmp_path / "all.json", "--bootstrap", "0")
    assert result.exit_code == 0, result.stderr
    skipped = dict(line.split(": ", 1) for line in result.stdout.splitlines() if line.startswith("skipped"))
    absent = skipped["skipped (absent from the vectors file)"].split(", ")
    no_data = skipped[f"skipped (no task data in {data_dir})"].split(", ")
    assert "SNLI" in no_data and "ImageCaptionRetrieval" in no_data and "STS12" in absent
    assert not set(absent) & set(no_data)


def test_datasets_named_like_no_task_are_named_with_the_task_meant(cli, data_dir, tmp_path):
    """A dataset whose name matches no task (another case, a near spelling, an alias) is named, with the task
    it is likely meant for: a warning when other tasks are scored, in the error when nothing is."""
    path = task_file(tmp_path / "v.h5", data_dir, ["STS16"])
    with h5py.File(path, "a") as f:
        for name in ("Trec", "STS-12", "stsb"):
            f[name] = vectors_for(["x"] * 3)
    result = cli("score", path, "--data", data_dir, "--out", tmp_path / "r.json", "--bootstrap", "0")
    assert result.exit_code == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "match no task" in line]
    assert warnings == [
        f"embeval: warning: {path}: /STS-12 (did you mean STS12?), /Trec (did you mean TREC?), "
        "/stsb (did you mean STSBenchmark?) match no task; not scored (a task of your own is declared with --task-file)"
    ]
    with h5py.File(tmp_path / "t.h5", "w") as f:
        f["Trec"] = vectors_for(["x"] * 3)
        f.create_group("notes")
    out = tmp_path / "t.json"
    refused(
        cli("score", tmp_path / "t.h5", "--data", data_dir, "--tasks", "TREC", "--out", out),
        "t.h5: nothing to score: TREC absent from the file (it holds /notes; /Trec (did you mean TREC?) matches "
        "no task)",
    )
    refused(
        cli("score", tmp_path / "t.h5", "--data", data_dir, "--tasks", "TREC,STS16", "--strict", "--out", out),
        "absent from the file (it holds /notes; /Trec (did you mean TREC?) matches no task); --strict",
    )
    untouched(out, None)


def test_the_model_attribute_names_the_vectors(cli, data_dir, tmp_path):
    """The root attribute `model` is recorded in the results and names the row of every table; one that is
    not text is refused before anything is written."""
    path = task_file(tmp_path / "v.h5", data_dir, ["STS16"])
    with h5py.File(path, "a") as f:
        f.attrs["model"] = "all-MiniLM-L6-v2 (fine-tuned)"
    out = tmp_path / "r.json"
    result = cli("score", path, "--data", data_dir, "--out", out, "--bootstrap", "0")
    assert result.exit_code == 0, result.stderr
    assert "(model all-MiniLM-L6-v2 (fine-tuned), dimension 8)" in result.stdout.splitlines()[0]
    assert json.loads(out.read_text())["vectors"]["model"] == "all-MiniLM-L6-v2 (fine-tuned)"
    report = cli("report", out).stdout
    assert "\n| all-MiniLM-L6-v2 (fine-tuned) | 8 |" in report and "| v |" not in report
    assert "\n| mine | 8 |" in cli("report", out, "--label", "mine").stdout
    with h5py.File(path, "a") as f:
        f.attrs["model"] = [1, 2]
    bad = tmp_path / "bad.json"
    refused(
        cli("score", path, "--data", data_dir, "--out", bad), "v.h5: the root attribute `model` must be text, got '1,2'"
    )
    untouched(bad, None)


# Errors that point to the fix.


def test_a_transposed_matrix_is_called_transposed(cli, data_dir, tmp_path):
    texts = sentences(data_dir, "STS16")
    with h5py.File(tmp_path / "t.h5", "w") as f:
        f["STS16"] = vectors_for(texts, dim=32).T
        f["STS16"].attrs["sha256"] = export.fingerprint(texts)
    refused(
        cli("score", tmp_path / "t.h5", "--data", data_dir, "--out", tmp_path / "r.json"),
        "STS16",
        f"has 32 rows, the task has {len(texts)} sentences",
        "looks transposed",
    )


def test_task_names_as_people_write_them():
    assert parse_task_list("sts-b,SICK-E,sick-r,coco,mr") == [
        "STSBenchmark",
        "SICKEntailment",
        "SICKRelatedness",
        "ImageCaptionRetrieval",
        "MR",
    ]
    assert parse_task_list("STS16,STS12,sts16") == ["STS16", "STS12"]
    assert canonical_name("stsbenchmark") == "STSBenchmark"


def test_an_unknown_task_gets_a_suggestion(cli, sts16, data_dir):
    refused(
        cli("score", sts16, "--data", data_dir, "--tasks", "STS61"),
        "--tasks",
        "unknown task STS61",
        "did you mean STS16?",
    )
    refused(cli("score", sts16, "--data", data_dir, "--tasks", "SICKEntailmnt"), "did you mean SICKEntailment?")


def test_tasks_run_in_the_order_given(cli, data_dir, tmp_path):
    path = task_file(tmp_path / "v.h5", data_dir, ["STS13", "STS16"])
    result = cli(
        "score", path, "--data", data_dir, "--tasks", "sts16,sts13", "--out", tmp_path / "r.json", "--bootstrap", "0"
    )
    assert result.exit_code == 0, result.stderr
    assert list(json.loads((tmp_path / "r.json").read_text())["tasks"]) == ["STS16", "STS13"]
    assert result.stderr.index("scoring STS16") < result.stderr.index("scoring STS13")


def test_vectors_check_gives_the_verdict_score_gives(cli, data_dir, devbow, tmp_path):
    from embeval.formats.vectors import write
    from embeval.tasks.registry import TASKS

    export.export([TASKS[n].load(data_dir) for n in ("STS13", "STS16")], tmp_path / "sent")
    write(tmp_path / "both.h5", tmp_path / "sent", devbow.encode, progress=False)
    with h5py.File(tmp_path / "both.h5") as src, h5py.File(tmp_path / "one.h5", "w") as dst:
        src.copy("STS16", dst)
    result = cli("vectors", "check", tmp_path / "one.h5", "--export", tmp_path / "sent")
    assert result.exit_code == 0, result.stderr
    assert "skipped (absent from the file): STS13" in result.stdout and "all 1 dataset ok" in result.stdout
    assert (
        cli("vectors", "check", tmp_path / "one.h5", "--export", tmp_path / "sent", "--tasks", "sts16").exit_code == 0
    )
    refused(
        cli("vectors", "check", tmp_path / "one.h5", "--export", tmp_path / "sent", "--tasks", "STS13"),
        "one.h5",
        "STS13",
        "absent from the file",
    )
    refused(
        cli("vectors", "check", tmp_path / "one.h5", "--export", tmp_path / "sent", "--strict"),
        "STS13",
        "absent from the file (--strict)",
    )


def test_the_data_folder_option_is_data_everywhere(cli, tmp_path):
    for command in (
        ["export-sentences"],
        ["score"],
        ["quickstart"],
        ["data", "fetch"],
        ["data", "verify"],
        ["data", "list"],
    ):
        result = cli(*command, "--help")
        assert result.exit_code == 0 and "--data DIR" in result.stdout, command
    assert "--dest" not in cli("data", "fetch", "--help").stdout


# Predictions are kept by default.


def test_predictions_are_saved_by_default(cli, sts16, data_dir, tmp_path):
    result = cli("score", sts16, "--data", data_dir, "--out", tmp_path / "r.json", "--bootstrap", "0")
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "r.predictions.npz").is_file()
    assert json.loads((tmp_path / "r.json").read_text())["predictions"]["file"] == "r.predictions.npz"
    result = cli("score", sts16, "--data", data_dir, "--out", tmp_path / "n.json", "--no-save-predictions")
    assert result.exit_code == 0 and not (tmp_path / "n.predictions.npz").exists()


# Progress a person can see.


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_progress_off_a_terminal_is_a_plain_line_at_most_every_30_seconds():
    clock, stream = Clock(), io.StringIO()
    progress = TaskProgress("MR", stream=stream, tty=False, clock=clock)
    progress.stage("choosing the regularization", total=200, unit="pass")
    for passes in range(1, 101):
        clock.now += 1.5
        progress.step(passes, f"{200 - passes} of 400 fits still training")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1 + int(150 // 30)
    assert lines[0] == "MR, stage 1: choosing the regularization, pass 0 of at most 200; 0 s elapsed"
    assert lines[1] == (
        "MR, stage 1: choosing the regularization, pass 20 of at most 200, 180 of 400 fits still training; "
        "30 s elapsed, this stage ends within 4 min 30 s at the present pace"
    )


def test_progress_on_a_terminal_redraws_one_line_with_a_bar():
    clock, stream = Clock(), io.StringIO()
    progress = TaskProgress("COCO", stream=stream, tty=True, clock=clock)
    progress.stage("training the ranker", total=22, unit="epoch")
    clock.now += 10
    progress.step(11, "dev score 300.00")
    progress.close()
    text = stream.getvalue()
    assert "\n" not in text and text.count("\r") == 4 and text.endswith("\r")
    assert "[##########..........], epoch 11 of at most 22, dev score 300.00; 10 s elapsed" in text
    assert duration(3725) == "1 h 02 min" and duration(65) == "1 min 05 s"


def test_progress_reaches_a_log_file(data_dir, tmp_path):
    """Off a terminal (nohup, CI), the run says what it is doing before the table."""
    path = task_file(tmp_path / "v.h5", data_dir, ["SICKEntailment"], dim=16)
    with open(tmp_path / "log.txt", "w") as log:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "embeval",
                "score",
                str(path),
                "--data",
                str(data_dir),
                "--config",
                "prototype",
                "--bootstrap",
                "0",
                "--out",
                str(tmp_path / "r.json"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
            cwd=REPO,
            env=dict(os.environ, PYTHONPATH=str(REPO)),
        )
    assert done.returncode == 0
    text = (tmp_path / "log.txt").read_text()
    assert "scoring SICKEntailment (1 of 1) ..." in text
    assert (
        "SICKEntailment, stage 1: logistic regression: training, selected on dev, 4 fits at once, pass 0 of at most "
        "200; 0 s elapsed" in text
    )
    assert "SICKEntailment done in" in text


# One writer per results file.


def test_a_second_writer_of_the_same_results_file_stops_at_once(data_dir, tmp_path):
    path = task_file(tmp_path / "v.h5", data_dir, ["MR", "SICKEntailment"], dim=64)
    out = tmp_path / "r.json"
    command = [
        sys.executable,
        "-m",
        "embeval",
        "score",
        str(path),
        "--data",
        str(data_dir),
        "--bootstrap",
        "0",
        "--config",
        "prototype",
        "--tasks",
        "SICKEntailment,MR",
        "--out",
        str(out),
    ]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    first = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lock = tmp_path / "r.json.lock"
    deadline = time.monotonic() + 120
    while not lock.exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lock.exists(), "the first run never took the lock"
    # The first run is held (stopped, still holding the lock) while the second starts and is refused:
    # however loaded the machine, the first cannot finish in between, so its scoring can be short.
    first.send_signal(signal.SIGSTOP)
    try:
        second = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        assert first.poll() is None, "the first run finished before the second was refused"
    finally:
        first.send_signal(signal.SIGCONT)
    assert second.returncode == 2
    assert second.stderr.strip().splitlines() == [
        f"embeval: error: {out}: is being written by embeval process {first.pid} on {os.uname().nodename} "
        f"(since {json.loads(lock.read_text())['started']}); wait for it to finish or choose another --out "
        "(if no such process runs, delete r.json.lock)"
    ]
    stdout, stderr = first.communicate(timeout=600)
    assert first.returncode == 0, stderr
    record = json.loads(out.read_text())
    assert list(record["tasks"]) == ["SICKEntailment", "MR"] and not lock.exists()


def test_a_lock_left_by_a_dead_process_is_taken_over(cli, sts16, data_dir, tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / "r.json.lock").write_text(
        json.dumps({"pid": int(dead.stdout), "host": os.uname().nodename, "started": "earlier"})
    )
    result = cli("score", sts16, "--data", data_dir, "--out", tmp_path / "r.json", "--bootstrap", "0")
    assert result.exit_code == 0, result.stderr
    assert not (tmp_path / "r.json.lock").exists()


def test_sigterm_stops_like_ctrl_c(data_dir, tmp_path):
    """SIGTERM (kill, a batch scheduler, docker stop) mid-run: the finished task stays in OUT.partial (and its
    predictions in theirs), the lock is released, one line says how to resume, exit code 143 (128 + 15)."""
    import shlex

    path = task_file(tmp_path / "v.h5", data_dir, ["STS16", "MR"], dim=64)
    out = tmp_path / "r.json"
    command = [sys.executable, "-m", "embeval", "score", str(path), "--data", str(data_dir), "--tasks", "STS16,MR"]
    command += ["--bootstrap", "0", "--out", str(out)]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    run = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    partial = tmp_path / "r.json.partial"
    deadline = time.monotonic() + 120
    while not partial.exists() and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert partial.exists() and run.poll() is None, "STS16 never finished, or MR finished too: make MR longer"
    run.send_signal(signal.SIGTERM)
    stdout, stderr = run.communicate(timeout=120)
    assert run.returncode == 143, stderr
    assert "Traceback" not in stderr and stdout == ""
    lines = stderr.strip().splitlines()
    assert lines[-1].startswith(
        f"embeval: terminated; the results of STS16 are kept in {partial}; finish the run with: embeval score "
    ), stderr
    assert [line for line in lines if line.startswith("embeval: terminated")] == lines[-1:]
    again = shlex.split(lines[-1].split("finish the run with: ")[1])
    assert again[-1] == "--resume" and again[again.index("--bootstrap") + 1] == "0"
    assert not (tmp_path / "r.json.lock").exists() and not out.exists()
    assert list(json.loads(partial.read_text())["tasks"]) == ["STS16"]
    assert (tmp_path / "r.predictions.npz.partial").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json.partial", "r.predictions.npz.partial", "v.h5"]


def test_the_readme_lists_every_exit_code():
    """The README's exit-code table names every code the command exits with."""
    from embeval.cli.common import EXIT_TERMINATED
    from embeval.errors import EXIT_BAD_INPUT

    table = (REPO / "README.md").read_text(encoding="utf-8").split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    listed = {int(line.split("|")[1]) for line in table.splitlines() if line.startswith("| ") and line[2].isdigit()}
    assert listed == {0, EXIT_BAD_INPUT, 130, EXIT_TERMINATED}
