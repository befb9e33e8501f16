"""Results of declared tasks stand alone: each entry records its task's declaration, so `embeval
report`, `compare` and `export-mteb` show the task in a fresh process without its task file or its
data (EMBEVAL_TASKS empty). A task of a kind this version does not know is named in one warning
line, never dropped silently, and a report with nothing else to show exits with 2. Sweeps and
--resume work with declared tasks; --resume recomputes a declared task whose declaration changed."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO

from embeval.formats.vectors import write

PAIRS = """name = "MyPairs"
short_name = "Pairs"
kind = "sts"
[files]
test = "data/pairs.tsv"
[mteb]
name = "MyPairsSTS"
revision = "r1"
protocol = "cosine, every pair"
"""
LABELS = """name = "MyLabels"
kind = "classification"
protocol = "kfold"
[files]
train = "data/train.tsv"
test = "data/test.tsv"
"""
WORDS = ["sun", "moon", "star", "rain", "snow", "wind", "tree", "leaf", "rock", "sand", "sea", "sky"]


def encoder(seed):
    """Each word a fixed random vector (seeded); a sentence the mean of its words'."""

    def encode(texts):
        out = np.zeros((len(texts), 12), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.split():
                out[i] += np.random.default_rng([seed, *word.encode()]).standard_normal(12).astype(np.float32)
        return out

    return encode


@pytest.fixture
def declared(tmp_path):
    """Two task files (an sts task with an [mteb] table, a kfold classification task) and their data."""
    rng = np.random.default_rng(5)
    data = tmp_path / "tasks" / "data"
    data.mkdir(parents=True)
    rows = ["sentence1\tsentence2\tscore"]
    for _ in range(60):
        a, b = (" ".join(rng.choice(WORDS, 3)) for _ in range(2))
        rows.append(f"{a}\t{b}\t{len(set(a.split()) & set(b.split()))}")
    (data / "pairs.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    for split, count in (("train", 60), ("test", 30)):
        rows = ["text\tlabel"]
        for i in range(count):
            label = i % 2
            rows.append(f"{' '.join(rng.choice(WORDS[label * 6 : label * 6 + 6], 3))} {split}{i}\t{label}")
        (data / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (tmp_path / "tasks" / "pairs.toml").write_text(PAIRS, encoding="utf-8")
    (tmp_path / "tasks" / "labels.toml").write_text(LABELS, encoding="utf-8")
    return tmp_path / "tasks"


def score_options(tasks):
    return ("--task-file", tasks, "--data", tasks / "none", "--config", "prototype", "--solver", "lbfgs", "--quiet")


def scored(cli, folder, tasks, seeds=(1, 2)):
    """Export both declared tasks, embed them with one encoder per seed and score each: the vectors
    and results paths."""
    export = folder / "sentences"
    result = cli("export-sentences", "--task-file", tasks, "--data", tasks / "none", "--out", export)
    assert result.exit_code == 0, result.stderr
    vectors, results = [], []
    for seed in seeds:
        vectors.append(folder / f"enc{seed}.h5")
        write(vectors[-1], export, encoder(seed), progress=False)
        results.append(folder / f"enc{seed}.json")
        result = cli("score", vectors[-1], *score_options(tasks), "--out", results[-1])
        assert result.exit_code == 0, result.stderr
    return vectors, results


def fresh(folder, *args):
    """`python -m embeval ARGS` (this checkout's) in a new process, without task files (EMBEVAL_TASKS empty)."""
    return subprocess.run(
        [sys.executable, "-m", "embeval", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=folder,
        env=dict(os.environ, EMBEVAL_TASKS="", PYTHONPATH=str(REPO)),
    )


def test_report_compare_and_export_mteb_need_neither_the_task_file_nor_the_data(cli, tmp_path, declared):
    _, results = scored(cli, tmp_path, declared)
    records = [json.loads(p.read_text()) for p in results]
    shutil.rmtree(declared)
    report = fresh(tmp_path, "report", *results, "--format", "csv")
    assert report.returncode == 0, report.stderr
    assert report.stderr == ""
    lines = report.stdout.splitlines()
    for record, label in zip(records, ("enc1", "enc2")):
        pooled = record["tasks"]["MyPairs"]["results"]["all"]["spearman"]["pooled"]
        accuracy = record["tasks"]["MyLabels"]["results"]["acc"]
        assert any(line.startswith(f"sts,{label},12,Pairs,Spearman x100,{round(100 * pooled, 6)!r},") for line in lines)
        assert any(line.startswith(f"transfer,{label},12,MyLabels,accuracy %,{accuracy!r},") for line in lines)
    compared = fresh(tmp_path, "compare", *results)
    assert compared.returncode == 0, compared.stderr
    assert "MyPairs" in compared.stdout and "MyLabels" in compared.stdout
    exported = fresh(tmp_path, "export-mteb", results[0], "--model", "me/enc1", "--out", tmp_path / "mteb")
    assert exported.returncode == 0, exported.stderr
    written = json.loads((tmp_path / "mteb/results/me__enc1/no_revision_available/MyPairsSTS.json").read_text())
    assert written["task_name"] == "MyPairsSTS" and written["dataset_revision"] == "r1"
    main_score = written["scores"]["test"][0]["main_score"]
    assert main_score == records[0]["tasks"]["MyPairs"]["results"]["all"]["spearman"]["pooled"]


def future_kind(path, task, out):
    """The results file with the declaration of `task` moved to a kind this version does not know."""
    record = json.loads(path.read_text())
    record["tasks"][task]["declaration"]["declaration"]["kind"] = "future-kind"
    record["tasks"][task]["kind"] = "future-kind"
    out.write_text(json.dumps(record), encoding="utf-8")
    return out


def test_a_task_of_an_unknown_kind_is_named_in_one_warning(cli, tmp_path, declared):
    _, results = scored(cli, tmp_path, declared, seeds=(1,))
    later = future_kind(results[0], "MyLabels", tmp_path / "later.json")
    report = fresh(tmp_path, "report", later)
    assert report.returncode == 0, report.stderr
    (warning,) = report.stderr.splitlines()
    assert warning.startswith(f"embeval: warning: {later}: MyLabels: not shown: ")
    assert "unknown kind 'future-kind'" in warning
    assert "Pairs" in report.stdout and "MyLabels" not in report.stdout
    compared = fresh(tmp_path, "compare", later, results[0])
    assert compared.returncode == 0, compared.stderr
    assert [line for line in compared.stderr.splitlines() if "MyLabels" in line] == [
        line for line in compared.stderr.splitlines() if line.startswith(f"embeval: warning: {later}: MyLabels")
    ]
    assert "MyPairs" in compared.stdout
    exported = fresh(tmp_path, "export-mteb", later, "--model", "me/later", "--out", tmp_path / "mteb")
    assert exported.returncode == 0, exported.stderr
    assert (tmp_path / "mteb/results/me__later/no_revision_available/MyPairsSTS.json").is_file()
    (note,) = [line for line in exported.stdout.splitlines() if "MyLabels" in line]
    assert note.startswith(f"not exported: {later}: MyLabels: not shown: ") and "future-kind" in note

    record = json.loads(later.read_text())
    del record["tasks"]["MyPairs"]
    alone = tmp_path / "alone.json"
    alone.write_text(json.dumps(record), encoding="utf-8")
    refused = fresh(tmp_path, "report", alone)
    assert refused.returncode == 2
    warning, error = refused.stderr.splitlines()
    assert warning.startswith(f"embeval: warning: {alone}: MyLabels: not shown: ") and "future-kind" in warning
    assert error.startswith(f"embeval: error: {alone}: no scored task to report") and "future-kind" in error
    assert refused.stdout == ""


def test_a_sweep_and_its_resume_with_declared_tasks(cli, tmp_path, declared):
    vectors, results = scored(cli, tmp_path, declared)
    sweep = tmp_path / "sweep"
    result = cli("sweep", *vectors, *score_options(declared), "--out-dir", sweep)
    assert result.exit_code == 0, result.stderr
    summary = json.loads((sweep / "sweep.json").read_text())
    assert list(summary["tasks"]) == ["MyLabels", "MyPairs"]  # registry order: the files of a folder, sorted
    for path, alone in zip(vectors, results):
        swept = json.loads((sweep / f"{path.stem}.results.json").read_text())["tasks"]
        single = json.loads(alone.read_text())["tasks"]
        assert {t: e["results"] for t, e in swept.items()} == {t: e["results"] for t, e in single.items()}
        assert swept["MyLabels"]["declaration"] == single["MyLabels"]["declaration"]
    again = cli("sweep", *vectors, *score_options(declared), "--out-dir", sweep, "--resume")
    assert again.exit_code == 0, again.stderr
    assert again.stderr.count("reused MyLabels, MyPairs") == 2
    assert "recomputing" not in again.stderr


def test_resume_recomputes_a_declared_task_whose_declaration_changed(cli, tmp_path, declared):
    vectors, results = scored(cli, tmp_path, declared, seeds=(1,))
    out = results[0]
    again = cli("score", vectors[0], *score_options(declared), "--out", out, "--resume")
    assert again.exit_code == 0, again.stderr
    assert "reused MyLabels, MyPairs" in again.stderr
    first = json.loads(out.read_text())["tasks"]["MyLabels"]
    (declared / "labels.toml").write_text(LABELS.replace("[files]", 'regularization = "none"\n[files]'))
    changed = cli("score", vectors[0], *score_options(declared), "--out", out, "--resume")
    assert changed.exit_code == 0, changed.stderr
    assert "reused MyPairs" in changed.stderr and "recomputing MyLabels (task declaration changed)" in changed.stderr
    entry = json.loads(out.read_text())["tasks"]["MyLabels"]
    assert entry["declaration"]["declaration"]["regularization"] == "none"
    assert len(entry["results"]["dev_scores"]) == 1 < len(first["results"]["dev_scores"])


def test_a_failing_evaluation_in_a_sweep_is_logged_with_its_traceback_and_not_retried(
    cli, tmp_path, declared, monkeypatch
):
    """An evaluation that raises (a bug, not bad input) fails its (file, task) only: the error line
    names them, OUT_DIR/sweep.log keeps the traceback, it is run once, and the rest is scored."""
    from embeval.evaluate import sts
    from embeval.tasks.kind import TEXT

    vectors, _ = scored(cli, tmp_path, declared)
    evaluate, calls = sts.evaluate_cosine_sts, []

    def broken(ctx):
        calls.append(ctx.sources[TEXT].vf.path.name)
        if ctx.sources[TEXT].vf.path.name == "enc2.h5":
            raise ZeroDivisionError("a planted bug")
        return evaluate(ctx)

    monkeypatch.setattr(sts, "evaluate_cosine_sts", broken)
    sweep = tmp_path / "sweep"
    result = cli("sweep", *vectors, *score_options(declared), "--out-dir", sweep)
    assert result.exit_code == 2
    assert sorted(calls) == ["enc1.h5", "enc2.h5"]  # once each: a failure that would fail again is not retried
    errors = [line for line in result.stderr.splitlines() if line.startswith("embeval: error: ")]
    assert errors == [
        f"embeval: error: {vectors[1]}: MyPairs: ZeroDivisionError: a planted bug (not scored)",
        "embeval: error: sweep: incomplete enc2 (see the errors above)",
    ]
    log = (sweep / "sweep.log").read_text(encoding="utf-8")
    assert log.count("Traceback (most recent call last):") == 1
    assert "enc2: MyPairs: " in log and "in broken" in log and 'raise ZeroDivisionError("a planted bug")' in log
    summary = json.loads((sweep / "sweep.json").read_text())
    sources = {source["label"]: source for source in summary["sources"]}
    assert sources["enc1"]["complete"] and not sources["enc2"]["complete"]
    assert list(sources["enc2"]["failed"]) == ["MyPairs"]
    assert set(json.loads((sweep / "enc1.results.json").read_text())["tasks"]) == {"MyLabels", "MyPairs"}
    partial = json.loads((sweep / "enc2.results.json.partial").read_text())
    assert set(partial["tasks"]) == {"MyLabels"}
