"""Hostile inputs, deterministically: every writing command's output pointed at each of its inputs (the
same name, `./`, a symlink, a hard link) and at foreign files; resumed entries tampered with; special
files wherever a results, predictions, vectors or task file or an export folder is read; numbers at the
edges of float64 and of every integer setting. Each refusal: exit code 2, exactly one line on stderr,
no traceback, every input byte for byte as it was, no output written (so no figure computed from
tampered data). No SentEval data needed: a small task file of one's own stands in.

tests/test_fuzz.py draws the same classes at random (hypothesis)."""

import csv
import io
import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from hostile_helpers import (
    DECLARATIONS,
    FIGURE,
    INTEGERS,
    MTEB_FILE,
    MTEB_META,
    NAMINGS,
    ONTO,
    RESCORE,
    SCORE,
    SPECIALS,
    WORDS,
    build,
    copy_of,
    declaration,
    encode,
    invoke,
    one_line,
    special,
    spelled,
    state,
)

from embeval.formats.results import figures_digest


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return build(tmp_path_factory.mktemp("hostile"))


@pytest.fixture
def work(made, tmp_path, monkeypatch):
    """A fresh copy of `made`, the current folder."""
    folder = copy_of(made, tmp_path / "w")
    monkeypatch.chdir(folder)
    return folder


# ------------------------------------------------------------------------------------------- outputs onto inputs


# A command that names its output itself (plots, a sweep's files, model_meta.json) meets an input there
# only through a link; export-mteb's result file may be the results file itself.
ONTO_NAMED = [
    (command, source, target, naming)
    for command, source, target in ONTO
    for naming in NAMINGS
    if "OUT" in command or target == MTEB_FILE or naming in ("symlink", "hardlink")
]


@pytest.mark.parametrize(
    ("command", "source", "target", "naming"), ONTO_NAMED, ids=[f"{c[0]}-{s}-{t}-{n}" for c, s, t, n in ONTO_NAMED]
)
def test_an_output_onto_an_input_is_refused(work, command, source, target, naming):
    """Every writing command x each input it takes x each way of naming it: refused before any work."""
    if "OUT" not in command and naming in ("same", "dot"):
        (work / target).parent.mkdir(parents=True)  # the results file is itself where the output goes
        shutil.copy(work / source, work / target)
        command = tuple(target if a == source else a for a in command)
        source, out = target, target
    else:
        out = spelled(work, source, naming, target)
    before = state(work)
    one_line(invoke(*(out if a == "OUT" else a for a in command)), Path(out).name, "is an input of this command")
    assert state(work) == before


@pytest.mark.parametrize("naming", ("symlink", "hardlink"))
def test_a_sweeps_results_file_onto_its_vectors_file_leaves_the_file_out(work, naming):
    out = spelled(work, "v.h5", naming, "sw/v.results.json")
    before = state(work)
    result = invoke("sweep", "v.h5", "--task-file", "t/t.toml", "--data", "none", "--out-dir", "sw")
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith(f"embeval: error: {out}: ") and "left out of the sweep" in lines[0], lines
    assert lines[1:] == ["embeval: error: sweep: left out v.h5 (see the errors above)"]
    assert state(work) == before


def test_export_sentences_into_the_task_files_folder_never_writes_over_its_data(work):
    (work / "t" / "t.toml").write_text('name = "Mine"\nkind = "sts"\nformat = "tsv"\n[files]\ntest = "Mine.txt"\n')
    shutil.copy(work / "t" / "pairs.tsv", work / "t" / "Mine.txt")
    before = state(work)
    one_line(
        invoke("export-sentences", "--task-file", "t/t.toml", "--data", "none", "--out", "t"),
        "t/Mine.txt: is an input of this command",
    )
    assert state(work) == before
    (work / "s2").mkdir()
    os.link(work / "t" / "t.toml", work / "s2" / "manifest.json")
    before = state(work)
    line = one_line(invoke("export-sentences", "--task-file", "t/t.toml", "--data", "none", "--out", "s2"))
    assert "s2/manifest.json: is an input of this command" in line
    assert state(work) == before


@pytest.mark.parametrize("inside", (False, True), ids=("the-file", "inside-it"))
def test_a_folder_output_naming_a_file_is_one_line(work, inside):
    """export-sentences and export-mteb write folders of files: an --out that is a file (an input
    among them), or lies inside one, is refused as such before any work."""
    before = state(work)
    out = "v.h5/sub" if inside else "v.h5"
    why = "is inside v.h5, which is a file, not a folder" if inside else "is a file, not a folder"
    one_line(invoke("export-sentences", "--task-file", "t/t.toml", "--data", "none", "--out", out), why)
    results = "a.json/sub" if inside else "a.json"
    why = "is inside a.json, which is a file, not a folder" if inside else "is a file, not a folder"
    one_line(invoke("export-mteb", "a.json", "--model", "org/name", "--out", results), why)
    assert state(work) == before


def test_quickstart_never_writes_over_its_data(work):
    data = work / "data" / "downstream" / "STS" / "STS16-en-test"
    data.mkdir(parents=True)
    (data / "STS.input.answer-answer.txt").write_text("a\tb\n")
    (work / "qs").mkdir()
    (work / "qs" / ".embeval-quickstart").write_text("")
    (work / "qs" / "vectors-bow.h5").symlink_to(data / "STS.input.answer-answer.txt")
    before = state(work)
    args = ("quickstart", "--workdir", "qs", "--encoder", "bow", "--data", "data", "--tasks", "STS16")
    one_line(invoke(*args), "qs/vectors-bow.h5", "refusing to overwrite")
    (work / "qs" / "vectors-bow.h5").unlink()
    os.link(data / "STS.input.answer-answer.txt", work / "qs" / "results-bow.json")
    before = state(work)
    one_line(invoke(*args), "qs/results-bow.json", "is an input of this command")
    assert state(work) == before


@pytest.mark.parametrize("mirror", ["dd/.downloads", "dd/.downloads/sub", "dd/downstream/MR"])
def test_data_fetch_refuses_a_mirror_it_would_write_over(work, mirror):
    (work / mirror).mkdir(parents=True)
    (work / mirror / "rt-polaritydata.tar.gz").write_bytes(b"an archive")
    before = state(work)
    one_line(
        invoke("data", "fetch", "--data", "dd", "--mirror", mirror, "--tasks", "MR"), mirror, "fetching writes over"
    )
    assert state(work) == before


def test_writing_vectors_never_replaces_the_export(work):
    from embeval.errors import EmbevalError
    from embeval.formats.vectors import write

    before = state(work)
    for target in ("s/manifest.json", "s/Mine.txt"):
        with pytest.raises(EmbevalError, match="is an input of this command") as err:
            write(work / target, work / "s", encode, overwrite=True, progress=False)
        assert "\n" not in str(err.value)
    assert state(work) == before


@pytest.mark.parametrize(
    ("command", "target"),
    [
        (("report", "a.json", "--out", "OUT"), "r.md"),
        (("report", "a.json", "--format", "latex", "--out", "OUT"), "r.tex"),
        (("compare", "a.json", "b.json", "--resamples", 100, "--json", "OUT"), "c.json"),
        (SCORE + ("--out", "OUT"), "r.json"),
    ],
)
def test_a_foreign_file_is_refused_and_an_own_earlier_output_replaced(work, command, target):
    """The command's own earlier output is replaced; a file of the user's, another command's output, a
    results or vectors file where it would write, and its own output edited (a report's mark removed) are
    refused."""
    run = [a if a != "OUT" else target for a in command]
    assert invoke(*run).exit_code == 0
    first = (work / target).read_bytes()
    assert invoke(*run).exit_code == 0  # its own earlier output: replaced
    assert (work / target).read_bytes().splitlines()[0] == first.splitlines()[0]
    foreigners = [b"my notes\n", (work / "v.h5").read_bytes()[:64]]
    if command[0] != "score":  # a results file is score's own kind of output
        foreigners.append((work / "b.json").read_bytes())
    for foreign in foreigners:
        (work / target).write_bytes(foreign)
        before = state(work)
        one_line(invoke(*run), target, "refusing to overwrite it")
        assert state(work) == before


def test_export_mteb_replaces_its_own_files_and_refuses_them_edited(work):
    args = ("export-mteb", "a.json", "--model", "o/m", "--out", "mt")
    assert invoke(*args).exit_code == 0
    assert invoke(*args).exit_code == 0
    for path, edit in ((MTEB_META, {"n_parameters": 5}), (MTEB_FILE, {"embeval": None})):
        saved = (work / path).read_bytes()
        (work / path).write_text(json.dumps(dict(json.loads(saved), **edit)))
        before = state(work)
        one_line(invoke(*args), Path(path).name, "export-mteb wrote")
        assert state(work) == before
        (work / path).write_bytes(saved)


def test_two_outputs_on_one_file_are_refused(work):
    before = state(work)
    one_line(invoke("compare", "a.json", "b.json", "--out", "x.md", "--json", "x.md"), "named by --out and --json")
    assert state(work) == before


# ------------------------------------------------------------------------------------------- tampered resumes


def _edit(path, change, sign=False):
    record = json.loads(Path(path).read_text())
    entry = record["tasks"]["Mine"]
    change(entry)
    if sign:
        entry["figures_sha256"] = figures_digest(entry)
    Path(path).write_text(json.dumps(record, indent=1))


def _mean(path):
    return json.loads(Path(path).read_text())["tasks"]["Mine"]["results"]["all"]["spearman"]["pooled"]


def _set_figure(entry, value, interval=False):
    entry["results"]["all"]["spearman"]["pooled"] = value
    if interval:
        entry["ci"]["figures"][FIGURE].update(value=value, low=value, high=value)


@pytest.mark.parametrize("how", ["figure edited", "figure and interval edited, digest deleted", "digest deleted"])
def test_a_tampered_resumed_entry_is_recomputed_saying_so(work, how):
    """Reused only when its digest is present and right: otherwise recomputed (one line says why), never
    signed anew, and the figure written is the vectors', not the file's."""
    truth = _mean("a.json")

    def tamper(entry):
        if how != "digest deleted":
            _set_figure(entry, 0.987654, interval="interval" in how)
        if "digest deleted" in how:
            del entry["figures_sha256"]

    _edit("a.json", tamper)
    snapshot = {k: v for k, v in state(work).items() if not k.startswith("a.")}
    result = invoke(*RESCORE, "--out", "a.json", "--resume", "--quiet")
    assert result.exit_code == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if "resuming" in line]
    assert len(said) == 1 and "reused no task; recomputing Mine (" in said[0], result.stderr
    assert ("no digest" in said[0]) == ("digest deleted" in how), said
    assert _mean("a.json") == truth and "0.987654" not in (work / "a.json").read_text()
    assert {k: v for k, v in state(work).items() if not k.startswith("a.")} == snapshot


def test_an_untampered_entry_is_reused(work):
    result = invoke(*RESCORE, "--out", "a.json", "--resume", "--quiet")
    assert result.exit_code == 0 and "reused Mine" in result.stderr, result.stderr


@pytest.mark.parametrize("value", ["1" + "0" * 400, "NaN", "Infinity", "-Infinity", "1e400"])
def test_a_resumed_file_with_a_number_embeval_never_writes_is_refused(work, value):
    text = (work / "a.json").read_text()
    (work / "a.json").write_text(text.replace('"nsamples": 40', f'"nsamples": {value}', 1))
    before = state(work)
    one_line(invoke(*RESCORE, "--out", "a.json", "--resume"), "a.json", "edited by hand?")
    assert state(work) == before


# ------------------------------------------------------------------------------------------- special files

# (where the special file goes, the command that reads it)
READS = [
    ("a.json", ("report", "a.json")),
    ("a.json", ("report", "a.json", "--format", "html")),
    ("b.json", ("compare", "a.json", "b.json", "--resamples", 100)),
    ("b.predictions.npz", ("compare", "a.json", "b.json", "--resamples", 100)),
    ("a.json", ("export-mteb", "a.json", "--model", "o/m", "--out", "mt")),
    ("a.json", RESCORE + ("--out", "a.json", "--resume")),
    ("v.h5", SCORE + ("--out", "r.json")),
    ("v.h5", ("vectors", "check", "v.h5", "--export", "s")),
    ("t/t.toml", ("tasks", "--task-file", "t/t.toml")),
    ("t/t.toml", SCORE + ("--out", "r.json")),
    ("t/t.toml", ("report", "a.json", "--task-file", "t/t.toml")),
    ("t/pairs.tsv", ("tasks", "--task-file", "t/t.toml")),
    ("t/pairs.tsv", ("export-sentences", "--task-file", "t/t.toml", "--data", "none", "--out", "s3")),
    ("t/pairs.tsv", SCORE + ("--out", "r.json")),
    ("s/manifest.json", ("vectors", "check", "v.h5", "--export", "s")),
    ("s", ("vectors", "check", "v.h5", "--export", "s")),
]


FOLDER = ("s", "folder")  # an export folder that is a folder: no special file
SPECIAL_READS = [(where, command, kind) for where, command in READS for kind in SPECIALS if (where, kind) != FOLDER]


@pytest.mark.parametrize(
    ("where", "command", "kind"), SPECIAL_READS, ids=[f"{w}-{c[0]}-{k}" for w, c, k in SPECIAL_READS]
)
def test_a_special_file_where_a_path_is_read_is_one_line(work, where, command, kind):
    special(work / where, kind)
    before = state(work)
    one_line(invoke(*command))
    assert state(work) == before


@pytest.mark.parametrize(
    ("where", "kind"),
    [(where, kind) for where in ("s/manifest.json", "s/Mine.txt", "s") for kind in SPECIALS if (where, kind) != FOLDER],
)
def test_a_special_file_in_an_export_folder_is_one_line_when_embedding(work, where, kind):
    from embeval.errors import EmbevalError
    from embeval.formats.vectors import write

    special(work / where, kind)
    before = state(work)
    with pytest.raises(EmbevalError) as err:
        write(work / "x.h5", work / "s", encode, progress=False)
    assert "\n" not in str(err.value) and "s" in str(err.value)
    assert state(work) == before


# ------------------------------------------------------------------------------------------- edges of float64

EDGES = ["1e308", "-1e308", "5e-324", "-0.0", "Infinity", "NaN", "1" + "0" * 400]
NOT_FINITE = ("Infinity", "NaN", "1" + "0" * 400)
READERS = [
    ("report", "a.json"),
    ("compare", "b.json", "a.json", "--resamples", 100),
    ("export-mteb", "a.json", "--model", "o/m", "--out", "mt"),
    RESCORE + ("--out", "a.json", "--resume"),
]


def _figure_text(path, value, interval=False, sign=False):
    """a.json with its headline figure (and, with interval, its interval's value, low and high) written
    as the JSON text `value`, its digest recomputed when `sign`."""
    marker = 123.456789
    _edit(path, lambda entry: _set_figure(entry, marker, interval))
    text = Path(path).read_text().replace(repr(marker), value)
    if sign:
        record = json.loads(text)  # Infinity, NaN: as json reads them; 10**400 an int
        record["tasks"]["Mine"]["figures_sha256"] = figures_digest(record["tasks"]["Mine"])
        text = json.dumps(record, indent=1)
    Path(path).write_text(text)


@pytest.mark.parametrize("command", READERS, ids=[c[0] for c in READERS])
@pytest.mark.parametrize("value", EDGES)
@pytest.mark.parametrize("how", ["figure", "figure, signed"])
def test_a_tampered_figure_at_the_edges_of_float64_is_refused(work, command, value, how):
    """A figure edited alone, to any number, is refused (its digest, or its interval's value, no longer
    matches it); a number that is not finite in float64 is refused whatever else matches. --resume
    recomputes an entry that report refuses (its figure then comes from the vectors, not the file)."""
    truth = _mean("a.json")
    _figure_text(work / "a.json", value, sign="signed" in how)
    before = state(work)
    result = invoke(*command)
    if command[0] == "score" and value not in NOT_FINITE:
        assert result.exit_code == 0, result.stderr
        assert "recomputing Mine" in result.stderr and _mean("a.json") == truth
        return
    line = one_line(result, "a.json")
    assert "edited by hand?" in line, line
    assert state(work) == before


@pytest.mark.parametrize("value", ["1e308", "5e-324", "-0.0", "-1e308"])
def test_a_finite_figure_at_the_edges_edited_with_its_interval_and_signed_is_read_cleanly(work, value):
    """What embeval cannot tell from its own output (figure, interval and digest edited together) is read
    without a traceback and written as finite JSON: the MTEB file holds the number, never Infinity."""
    _figure_text(work / "a.json", value, interval=True, sign=True)
    result = invoke("export-mteb", "a.json", "--model", "o/m", "--out", "mt")
    assert result.exit_code == 0 and "Traceback" not in result.stderr, result.stderr
    written = json.loads((work / MTEB_FILE).read_text(), parse_constant=lambda name: pytest.fail(name))
    assert written["scores"]["test"][0]["main_score"] == float(value)
    for command in READERS[:1]:
        result = invoke(*command)
        assert result.exit_code == 0 and "Traceback" not in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("value", "accepted"),
    [("4.5", True), ("-0.0", True), ("5e-324", True), ("1e100", True), ("-1e100", True)]
    + [(v, False) for v in ("1e308", "1.0000001e100", "inf", "-inf", "nan", "1" + "0" * 400, "1e400")],
)
def test_a_task_datas_numbers_are_finite_and_bounded(work, value, accepted):
    lines = (work / "t" / "pairs.tsv").read_text().splitlines()
    first = lines[1].split("\t")
    lines[1] = "\t".join(first[:2] + [value])
    (work / "t" / "pairs.tsv").write_text("\n".join(lines) + "\n")
    before = state(work)
    result = invoke("export-sentences", "--task-file", "t/t.toml", "--data", "none", "--out", "s4")
    if accepted:
        assert result.exit_code == 0, result.stderr
        return
    one_line(result, "pairs.tsv:2", "Mine", "score")
    assert state(work) == before


@pytest.mark.parametrize("value", ["1" + "0" * 400, "1e400", "NaN", "Infinity", "1e300"])
def test_a_regression_value_in_json_lines_is_finite_and_bounded(work, value):
    """Refused when the task's data is loaded (export, tasks, score alike), never left for the solver."""
    rows = [{"text": f"item {i}", "value": i % 5} for i in range(12)]
    body = "".join(json.dumps(row) + "\n" for row in rows)
    (work / "t" / "train.jsonl").write_text(body.replace('"value": 3', f'"value": {value}', 1))
    (work / "t" / "test.jsonl").write_text(body)
    (work / "t" / "r.toml").write_text(
        'name = "Values"\nkind = "regression"\n[files]\ntrain = "train.jsonl"\ntest = "test.jsonl"\n'
    )
    before = state(work)
    for command in (("tasks",), ("export-sentences", "--data", "none", "--out", "s5")):
        one_line(invoke(*command, "--task-file", "t/r.toml"), "train.jsonl:4", "Values", "value")
    assert state(work) == before


# ------------------------------------------------------------------------------------------- integer settings


@pytest.mark.parametrize(("kind", "key"), INTEGERS, ids=[f"{k}-{key}" for k, key in INTEGERS])
def test_every_integer_setting_of_a_task_file_is_bounded(work, kind, key):
    from embeval.tasks.declaration import MOST

    most, why = MOST[key]
    path = work / "t" / "b.toml"
    path.write_text(declaration(kind, f"{key} = {most}"))
    result = invoke("tasks", "--no-load", "--task-file", path)
    assert result.exit_code == 0, result.stderr
    for value in (most + 1, 10**11, 2**63 - 1):
        path.write_text(declaration(kind, f"{key} = {value}"))
        before = state(work)
        one_line(invoke("tasks", "--no-load", "--task-file", path), "b.toml", f"{key}: must be at most {most:,}", why)
        assert state(work) == before


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("seeds = [1, 4294967296]", "seeds: must be a non-empty list of integers in [0, 4294967295], got 4294967296"),
        (f"seeds = {list(range(101))}", "seeds: lists 101 seeds, more than 100"),
        ("n_experiments = 1e400", "n_experiments: must be an integer, got inf"),
        ("n_experiments = -1", "n_experiments: must be an integer >= 1, got -1"),
    ],
)
def test_seeds_and_other_edges_of_a_task_files_integers(work, extra, message):
    path = work / "t" / "b.toml"
    path.write_text(declaration("classification", extra))
    one_line(invoke("tasks", "--no-load", "--task-file", path), "b.toml", message)


@pytest.mark.parametrize("table", ["[mteb]\nname = 'Bounded'\npairs = {}", "[report]\norder = {}"])
def test_any_other_integer_of_a_declaration_is_bounded(work, table):
    path = work / "t" / "b.toml"
    path.write_text(declaration("regression", "") + "\n" + table.format(2**31 - 1) + "\n")
    assert invoke("tasks", "--no-load", "--task-file", path).exit_code == 0
    path.write_text(declaration("regression", "") + "\n" + table.format(2**63 - 1) + "\n")
    one_line(invoke("tasks", "--no-load", "--task-file", path), "must be at most 2,147,483,647")


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--bootstrap", "100001", "--bootstrap: must be at most 100000, got 100001"),
        ("--seed", str(2**32), "--seed: must be at most 4294967295"),
        ("--seed", "-1", "--seed: must be an integer >= 0, got -1"),
        ("--kfold", "1001", "--kfold: must be at most 1000"),
        ("--classifier", '{"max_epoch": 100001}', "classifier setting max_epoch must be at most 100000"),
        ("--classifier", '{"nhid": 10000000000}', "classifier setting nhid must be at most 100000"),
        ("--memory-budget", "1TiB", "--memory-budget: 1024.0 GiB is more than the"),
    ],
)
def test_an_option_beyond_its_bound_is_refused_before_any_work(work, option, value, message):
    before = state(work)
    one_line(invoke(*SCORE, "--out", "r.json", option, value), message)
    assert state(work) == before


def test_threads_beyond_four_per_cpu_are_refused(work):
    from embeval import threads

    most = threads.PER_CPU * threads.available()[0]
    before = state(work)
    one_line(
        invoke(*SCORE, "--out", "r.json", "--threads", most + 1), f"--threads: {most + 1} threads", f"at most {most}"
    )
    one_line(invoke(*SCORE, "--out", "r.json", "--threads", 999999), "only slow the run")
    assert state(work) == before


@pytest.mark.parametrize("command", ("compare", "rank"))
def test_compares_and_ranks_resamples_and_seed_are_bounded(work, command):
    one_line(invoke(command, "a.json", "b.json", "--resamples", 1_000_001), "--resamples")
    one_line(invoke(command, "a.json", "b.json", "--seed", 2**32), "--seed")
    one_line(invoke(command, "a.json", "b.json", "--seed", -5), "--seed")


def test_a_memory_budget_below_what_a_search_needs_is_refused_with_the_least_that_works(work):
    rng = np.random.default_rng(0)
    folder = work / "ret"
    folder.mkdir()
    with open(folder / "c.jsonl", "w") as f:
        for i in range(1200):
            f.write(json.dumps({"_id": f"d{i}", "text": " ".join(rng.choice(WORDS, 5)) + f" {i}"}) + "\n")
    with open(folder / "q.jsonl", "w") as f:
        for i in range(200):
            f.write(json.dumps({"_id": f"q{i}", "text": " ".join(rng.choice(WORDS, 3)) + f" q{i}"}) + "\n")
    (folder / "q.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(200)))
    (folder / "t.toml").write_text(DECLARATIONS["retrieval"].replace("kind", 'name = "Ret"\nkind', 1))
    from embeval.formats.sentences import export_sentences
    from embeval.formats.vectors import write
    from embeval.tasks.registry import registry

    export_sentences(work / "none", folder / "s", ["Ret"], registry=registry([folder / "t.toml"]))
    write(folder / "v.h5", folder / "s", encode, progress=False)
    args = ("score", "ret/v.h5", "--task-file", "ret/t.toml", "--data", "none", "--out", "ret.json", "--bootstrap", 0)
    before = state(work)
    line = one_line(invoke(*args, "--memory-budget", "1MiB"), "--memory-budget: the memory budget is 1.0 MiB")
    assert "below what Ret needs: its exact search of 200 queries in 1200 documents" in line
    assert state(work) == before
    least = line.split("give --memory-budget ")[1].split()[0]
    result = invoke(*args, "--memory-budget", least, "--quiet")  # the least that works, works
    assert result.exit_code == 0, result.stderr


# ------------------------------------------------------------------------------------------- the rest


def test_the_memory_available_respects_the_address_space_limit(monkeypatch):
    import resource

    from embeval import memory

    used = next(
        int(line.split()[1]) * 1024 for line in Path("/proc/self/status").read_text().splitlines() if "VmSize" in line
    )
    real = resource.getrlimit

    def limits(which):
        if which == resource.RLIMIT_AS:
            return (used + (300 << 20), resource.RLIM_INFINITY)
        return real(which)

    monkeypatch.setattr(resource, "getrlimit", limits)
    free = memory.available_memory()
    assert free is not None and free <= 300 << 20 and free < memory.host_available()


def test_the_memory_check_says_what_the_address_space_limit_leaves(work, monkeypatch):
    import resource

    real = resource.getrlimit
    monkeypatch.setattr(
        resource, "getrlimit", lambda which: (1 << 20, 1 << 20) if which == resource.RLIMIT_DATA else real(which)
    )
    from embeval.errors import EmbevalError
    from embeval.formats.vectors import VectorsFile

    with VectorsFile(work / "v.h5") as vf, pytest.raises(EmbevalError, match="more than the 0.0 GiB of memory"):
        vf.check_memory(1000, 1000, "Mine")


def test_the_bootstrap_memory_check_counts_the_process_limits(work, monkeypatch):
    """A resample count within its bound whose values do not fit what `ulimit -d` leaves: refused before
    any data is read."""
    import resource

    data = next(
        int(line.split()[1]) * 1024 for line in Path("/proc/self/status").read_text().splitlines() if "VmData" in line
    )
    real = resource.getrlimit
    monkeypatch.setattr(
        resource,
        "getrlimit",
        lambda which: (data + (1 << 20), data + (1 << 20)) if which == resource.RLIMIT_DATA else real(which),
    )
    before = state(work)
    one_line(invoke(*SCORE, "--out", "r.json", "--bootstrap", 100_000), "--bootstrap: 100000 resamples need")
    assert state(work) == before


@pytest.mark.parametrize("integer", [np.int64, np.int32, np.uint64, np.int16])
def test_top_k_takes_numpy_integers_as_ints(integer):
    from embeval.train.search import top_k

    rng = np.random.default_rng(0)
    corpus = rng.standard_normal((300, 16), dtype=np.float32)
    queries = rng.standard_normal((7, 16), dtype=np.float32)
    want = top_k(queries, lambda a, b: corpus[a:b], 300, 10)
    got = top_k(queries, lambda a, b: corpus[a:b], integer(300), integer(10), rows=(integer(0), integer(300)))
    assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])
    with pytest.raises(TypeError, match="corpus_size must be an integer, not float"):
        top_k(queries, lambda a, b: corpus[a:b], 300.0, 10)


@pytest.mark.parametrize("integer", [np.int64, np.int32, np.uint8])
def test_threads_take_numpy_integers_as_ints(integer):
    from embeval import threads
    from embeval.errors import EmbevalError

    assert threads.choose(integer(1)).count == 1 and type(threads.choose(integer(1)).count) is int
    for bad in (True, 1.5, "1", integer(0)):
        with pytest.raises(EmbevalError, match="--threads: must be an integer >= 1"):
            threads.choose(bad)


@pytest.mark.parametrize("label", ['=HYPERLINK("http://x")', "+1", "-2+3", "@SUM(A1)", "\tcmd", "\rcmd"])
def test_the_csv_report_writes_no_formula(work, label):
    result = invoke("report", "a.json", "--format", "csv", "--label", label)
    assert result.exit_code == 0, result.stderr
    rows = list(csv.reader(io.StringIO(result.stdout)))
    numbers = {"value", "ci_low", "ci_high"}
    for row in rows[1:]:
        for header, cell in zip(rows[0], row):
            if header in numbers and cell not in ("", "n/a"):
                assert math.isfinite(float(cell))
            else:
                assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), (header, cell)
    assert any(row[1] == "'" + label.replace("\r", "\n") for row in rows[1:])
