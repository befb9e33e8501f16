"""Bad task files and bad data files of declared tasks: through `embeval tasks --task-file`,
`embeval export-sentences` and `embeval score`, each is one line on stderr naming the task file and
the key (or the data file and the line), exit code 2, and nothing written (no export folder, no
results file, no .partial). Also: sentences holding a line break or a tab are exported losslessly
(JSON lines) and score, and a data file changed after the export is called a change of the data."""

import json
import pathlib

import h5py
import numpy as np
import pytest
from reliability_helpers import refused, untouched

from embeval.formats.vectors import write

CLASSIFICATION = """name = "Mine"
kind = "classification"
protocol = "split"
[files]
train = "d/train.tsv"
dev = "d/dev.tsv"
test = "d/test.tsv"
"""
STS = """name = "Mine"
kind = "sts"
[files]
test = "d/test.tsv"
"""
GOOD = {
    "d/train.tsv": "text\tlabel\ngood film\tpos\nbad film\tneg\nfine plot\tpos\n",
    "d/dev.tsv": "text\tlabel\nnice\tpos\nawful\tneg\n",
    "d/test.tsv": "text\tlabel\ngreat\tpos\npoor\tneg\n",
}
PAIRS = {"d/test.tsv": "sentence1\tsentence2\tscore\na b\ta c\t4.5\nx y\tx z\t1\nsun\tmoon\t0\n"}


def case(toml, files=GOOD, expect=(), second=None):
    """A task file (text), its data files (relative path: text or bytes), what the error line must
    hold ({task}, {data:PATH} and {second} are filled in) and an optional second task file."""
    return toml, files, expect, second


def replace(files, path, text):
    return dict(files, **{path: text})


CASES = {
    "malformed TOML": case('name = "Mine"\nkind = \n', expect=("{task}", "not valid TOML", "line 2")),
    "unknown kind": case(
        CLASSIFICATION.replace('"classification"', '"clasification"'),
        expect=("{task}", "Mine", "kind: unknown kind 'clasification' (did you mean classification?)"),
    ),
    "unknown protocol": case(
        CLASSIFICATION.replace('"split"', '"holdout"'),
        expect=("{task}", "Mine", "protocol: 'holdout' is not one of split, kfold, nested-kfold"),
    ),
    "misspelt key": case(
        CLASSIFICATION.replace("[files]", 'labelz = ["neg", "pos"]\n[files]'),
        expect=("{task}", "Mine", "unknown key labelz (did you mean labels?)"),
    ),
    "misspelt protocol key, whose default does not fit the files": case(
        'name = "Mine"\nkind = "classification"\nprotocl = "nested-kfold"\n[files]\nall = "d/test.tsv"\n',
        expect=("{task}", "Mine", "unknown key protocl (did you mean protocol?)"),
    ),
    "unknown key": case(
        CLASSIFICATION.replace("[files]", 'colour = "blue"\n[files]'),
        expect=("{task}", "Mine", "unknown key colour"),
    ),
    "unknown file key": case(
        CLASSIFICATION.replace('dev = "d/dev.tsv"', 'validation = "d/dev.tsv"'),
        expect=("{task}", "Mine", "files.validation: is not a file of a classification task (split)"),
    ),
    "missing data file": case(CLASSIFICATION.replace("d/dev.tsv", "d/valid.tsv"), expect=("{data:d/valid.tsv}",)),
    "header without the text column": case(
        CLASSIFICATION,
        replace(GOOD, "d/dev.tsv", "sentence\tlabel\nnice\tpos\n"),
        expect=("{data:d/dev.tsv}:1", "Mine", "the header has no column 'text'"),
    ),
    "ragged row": case(
        CLASSIFICATION,
        replace(GOOD, "d/train.tsv", "text\tlabel\ngood\tpos\nbad\tfilm\tneg\n"),
        expect=("{data:d/train.tsv}:3", "Mine", "3 fields, the header has 2"),
    ),
    "bytes that are not UTF-8": case(
        CLASSIFICATION,
        replace(GOOD, "d/test.tsv", b"text\tlabel\ngr\xe9at\tpos\npoor\tneg\n"),
        expect=("{data:d/test.tsv}:2", "Mine", "not valid UTF-8 text (byte 13)"),
    ),
    "one class": case(
        CLASSIFICATION,
        {path: text.replace("neg", "pos") for path, text in GOOD.items()},
        expect=("{data:d/train.tsv}", "Mine", "the label column has one class ('pos')"),
    ),
    "a test label never seen in training": case(
        CLASSIFICATION,
        replace(GOOD, "d/test.tsv", "text\tlabel\ngreat\tmaybe\npoor\tneg\n"),
        expect=("{data:d/test.tsv}:2", "Mine", "label 'maybe' of the test split is not in the train split"),
    ),
    "an empty split": case(
        CLASSIFICATION,
        replace(GOOD, "d/dev.tsv", "text\tlabel\n"),
        expect=("{data:d/dev.tsv}", "Mine", "no rows (an empty split)"),
    ),
    "the name of a built-in task": case(
        CLASSIFICATION.replace('"Mine"', '"sst2"'), expect=("{task}", "sst2", "the name 'sst2' is already 'SST2'")
    ),
    "the alias of a built-in task": case(
        CLASSIFICATION.replace('"Mine"', '"STS-B"'),
        expect=("{task}", "the name 'STS-B' is already 'STSBenchmark', a built-in task"),
    ),
    "a name declared in two files": case(
        CLASSIFICATION,
        second=STS,
        expect=("{second}", "Mine", "the name 'Mine' is already 'Mine', declared in {task}"),
    ),
    "a score that is not a number": case(
        STS,
        {"d/test.tsv": "sentence1\tsentence2\tscore\na b\ta c\thigh\n"},
        expect=("{data:d/test.tsv}:2", "Mine", "score 'high' is not a number"),
    ),
    "a score that is not finite": case(
        STS,
        {"d/test.tsv": "sentence1\tsentence2\tscore\na b\ta c\tnan\n"},
        expect=("{data:d/test.tsv}:2", "Mine", "score 'nan' is not a finite number"),
    ),
}
COMMANDS = ("tasks", "export-sentences", "score")


def build(folder, toml, files, second):
    """The task file(s) and data files of a case in `folder`: the --task-file options."""
    for rel, content in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    (folder / "task.toml").write_text(toml, encoding="utf-8")
    options = ["--task-file", folder / "task.toml"]
    if second is not None:
        (folder / "more").mkdir()
        (folder / "more" / "second.toml").write_text(second, encoding="utf-8")
        options += ["--task-file", folder / "more" / "second.toml"]
    return options


def run(cli, command, folder, options):
    """Run one command on a case; return (result, what it must not have written)."""
    if command == "tasks":
        return cli("tasks", *options, "--tasks", "Mine", "--data", folder / "none"), []
    if command == "export-sentences":
        out = folder / "sentences"
        return cli("export-sentences", *options, "--tasks", "Mine", "--data", folder / "none", "--out", out), [out]
    with h5py.File(folder / "v.h5", "w") as f:
        f["Mine"] = np.ones((6, 4), dtype=np.float32)
    out = folder / "r.json"
    result = cli("score", folder / "v.h5", *options, "--tasks", "Mine", "--data", folder / "none", "--out", out)
    return result, [out, out.with_name(out.name + ".partial")]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_task_or_data_file(cli, tmp_path, name, command):
    toml, files, expect, second = CASES[name]
    options = build(tmp_path, toml, files, second)
    result, outputs = run(cli, command, tmp_path, options)
    fills = {"{task}": str(tmp_path / "task.toml"), "{second}": str(tmp_path / "more" / "second.toml")}
    fragments = []
    for fragment in expect:
        for key, value in fills.items():
            fragment = fragment.replace(key, value)
        if fragment.startswith("{data:"):
            rel, rest = fragment[len("{data:") :].split("}", 1)
            fragment = str(tmp_path / rel) + rest
        fragments.append(fragment)
    refused(result, *fragments)
    for path in outputs:
        assert not path.exists(), path


@pytest.mark.parametrize("command", COMMANDS)
def test_an_unreadable_data_file(cli, tmp_path, command, monkeypatch):
    """A file that cannot be read (the tests run as root, where permissions do not stop reading: the
    read is made to fail as it fails for a file without read permission)."""
    options = build(tmp_path, CLASSIFICATION, GOOD, None)
    locked = tmp_path / "d" / "dev.tsv"
    read_bytes = pathlib.Path.read_bytes

    def refuse(path):
        if path == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return read_bytes(path)

    monkeypatch.setattr(pathlib.Path, "read_bytes", refuse)
    result, outputs = run(cli, command, tmp_path, options)
    refused(result, str(locked), "Mine", "cannot read: Permission denied")
    for path in outputs:
        assert not path.exists(), path


def test_the_good_case_passes_every_command(cli, tmp_path):
    """The cases above differ from a task every command accepts."""
    options = build(tmp_path, CLASSIFICATION, GOOD, None)
    assert cli("tasks", *options, "--tasks", "Mine", "--data", tmp_path / "none").exit_code == 0
    result = cli("export-sentences", *options, "--tasks", "Mine", "--data", tmp_path, "--out", tmp_path / "s")
    assert result.exit_code == 0, result.stderr
    write(tmp_path / "v.h5", tmp_path / "s", lambda texts: np.eye(len(texts), 8, dtype=np.float32), progress=False)
    result = cli("score", tmp_path / "v.h5", *options, "--data", tmp_path / "none", "--out", tmp_path / "r.json")
    assert result.exit_code == 0, result.stderr
    assert "Mine" in json.loads((tmp_path / "r.json").read_text())["tasks"]


SPECIAL = [
    ("a line\nbreak", "one line"),
    ("a\ttab inside", "no tab"),
    ("carriage\rreturn", "plain"),
    ("tab\tand\nbreak", "plain words"),
]


def test_sentences_with_line_breaks_and_tabs_round_trip(cli, tmp_path):
    """A CSV (quoted fields) holding sentences with line breaks and tabs: the export writes the list as
    JSON lines, embeval.formats.vectors.write reads it back sentence for sentence, and the vectors score."""
    rows = ["sentence1,sentence2,score"]
    rows += [f'"{a}","{b}",{i}' for i, (a, b) in enumerate(SPECIAL)]
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "test.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (tmp_path / "task.toml").write_text(STS.replace("d/test.tsv", "d/test.csv"), encoding="utf-8")
    options = ["--task-file", tmp_path / "task.toml", "--data", tmp_path / "none"]
    result = cli("export-sentences", *options, "--out", tmp_path / "s", "--tasks", "Mine")
    assert result.exit_code == 0, result.stderr
    entry = json.loads((tmp_path / "s" / "manifest.json").read_text())["tasks"]["Mine"]
    assert (entry["file"], entry["format"], entry["count"]) == ("Mine.jsonl", "jsonl", 8)
    seen = []

    def encode(texts):
        seen.extend(texts)
        rng = np.random.default_rng(len(seen))
        return rng.standard_normal((len(texts), 8)).astype(np.float32)

    write(tmp_path / "v.h5", tmp_path / "s", encode, progress=False)
    assert seen == [a for a, _ in SPECIAL] + [b for _, b in SPECIAL]
    out = tmp_path / "r.json"
    result = cli("score", tmp_path / "v.h5", *options, "--out", out, "--bootstrap", "0")
    assert result.exit_code == 0, result.stderr
    assert json.loads(out.read_text())["tasks"]["Mine"]["results"]["test"]["nsamples"] == 4


def test_a_data_file_changed_after_the_export_is_called_a_change_of_the_data(cli, tmp_path):
    (tmp_path / "task.toml").write_text(STS, encoding="utf-8")
    build(tmp_path, STS, PAIRS, None)
    options = ["--task-file", tmp_path / "task.toml", "--data", tmp_path / "none"]
    assert cli("export-sentences", *options, "--out", tmp_path / "s").exit_code == 0
    write(tmp_path / "v.h5", tmp_path / "s", lambda t: np.eye(len(t), 8, dtype=np.float32), progress=False)
    out = tmp_path / "r.json"
    for changed in (
        PAIRS["d/test.tsv"].replace("sun", "stars"),  # the same number of sentences, one of them edited
        PAIRS["d/test.tsv"] + "rain\tsnow\t2\n",  # a pair added
    ):
        (tmp_path / "d" / "test.tsv").write_text(changed, encoding="utf-8")
        refused(
            cli("score", tmp_path / "v.h5", *options, "--out", out),
            str(tmp_path / "v.h5"),
            "Mine",
            "the task's data changed since the vectors were computed (or they come from another export); "
            "export and embed again",
        )
        untouched(out, None)


@pytest.mark.parametrize("command", ("export-sentences", "score"))
def test_a_declared_tasks_missing_data_is_an_error_even_unnamed(cli, tmp_path, command):
    """Without --tasks a built-in task without data is skipped (its data may simply not be fetched), but
    a declared task without its data is a broken task file: an error naming the file, not a skip that
    points at the SentEval data folder."""
    options = build(tmp_path, CLASSIFICATION.replace("d/dev.tsv", "d/valid.tsv"), GOOD, None)
    out = tmp_path / ("sentences" if command == "export-sentences" else "r.json")
    if command == "export-sentences":
        result = cli("export-sentences", *options, "--data", tmp_path / "none", "--out", out)
    else:
        with h5py.File(tmp_path / "v.h5", "w") as f:
            f["Mine"] = np.ones((6, 4), dtype=np.float32)
        result = cli("score", tmp_path / "v.h5", *options, "--data", tmp_path / "none", "--out", out)
    refused(
        result,
        str(tmp_path / "d" / "valid.tsv"),
        "Mine",
        f"missing data file, files.dev of {tmp_path / 'task.toml'} (paths are relative to the task file's folder)",
    )
    assert not out.exists()


def test_a_declared_tasks_dataset_inside_a_group_is_named(cli, tmp_path):
    options = build(tmp_path, STS, PAIRS, None)
    with h5py.File(tmp_path / "g.h5", "w") as f:
        f["vectors/Mine"] = np.ones((6, 4), dtype=np.float32)
    out = tmp_path / "r.json"
    result = cli("score", tmp_path / "g.h5", *options, "--data", tmp_path / "none", "--out", out)
    refused(result, "nothing to score", "Mine absent from the file", "inside /vectors (/vectors/Mine)")
    assert not out.exists()
