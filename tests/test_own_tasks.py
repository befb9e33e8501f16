"""A task file declaring SentEval's own data in the generic format gives exactly the built-in task's
figures: SST2 rewritten as text<TAB>label TSV (a `split` classification task, both solvers), STS-B's
raw test pairs (an `sts` task, against STSBenchmarkRaw), TREC with its coarse labels (a `kfold`
classification task) and a probing file (a `probing` task, against Depth). The task files of the
issue are used exactly as written (comments included).

Each test exports the built-in task and the declared one together (`embeval export-sentences
--task-file`), embeds both lists with the devbow encoder (tests/devbow.py, the encoder of the
recorded SentEval outputs), scores both in one `embeval score` run and requires the whole results
entry of each (accuracies, dev accuracy, the chosen regularization and every dev score; every
correlation of every aggregation) to be equal: the two paths share no loader, so equality means the
generic reader, the label ids and SentEval's sample order agree with SentEval's own files.
"""

import json

import devbow
import numpy as np
import pytest

from embeval.formats.vectors import write
from embeval.tasks.registry import TASKS

OWN_SST2 = """name = "OwnSST2"
kind = "classification"
protocol = "split"              # classification: split | kfold | nested-kfold (SentEval's protocols)
[files]
train = "sst2/train.tsv"        # header: text<TAB>label
dev = "sst2/dev.tsv"
test = "sst2/test.tsv"
"""
OWN_STSB = """name = "OwnSTSB"
kind = "sts"
[files]
test = "stsb/test.tsv"          # header: sentence1<TAB>sentence2<TAB>score
"""
OWN_TREC = """name = "OwnTREC"
kind = "classification"
protocol = "kfold"
[files]
train = "trec/train.tsv"
test = "trec/test.tsv"
"""


def write_tsv(path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["\t".join(header)] + ["\t".join(map(str, row)) for row in rows]
    for line in lines:
        assert line.count("\t") == len(header) - 1, line  # SentEval's texts hold no tab
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def labelled_files(data, folder, label_text):
    """Each split of a single-sentence task as text<TAB>label TSV (label_text: class id -> label)."""
    for name, split in data.splits.items():
        write_tsv(folder / f"{name}.tsv", ("text", "label"), [(t, label_text(y)) for t, y in zip(split.a, split.y)])


def export_embed_score(cli, tmp_path, data_dir, task_file, builtin, own, *options):
    """Export both tasks, embed them with devbow and score them in one run: (builtin's entry, own's
    entry, the manifest)."""
    export = tmp_path / "sentences"
    tasks = f"{builtin},{own}"
    result = cli("export-sentences", "--data", data_dir, "--out", export, "--tasks", tasks, "--task-file", task_file)
    assert result.exit_code == 0, result.stderr
    manifest = json.loads((export / "manifest.json").read_text())
    write(tmp_path / "devbow.h5", export, devbow.encode, progress=False)
    out = tmp_path / "results.json"
    result = cli(
        "score",
        tmp_path / "devbow.h5",
        "--data",
        data_dir,
        "--task-file",
        task_file,
        "--tasks",
        tasks,
        "--bootstrap",
        "0",
        "--out",
        out,
        "--quiet",
        *options,
    )
    assert result.exit_code == 0, result.stderr
    assert own in result.stdout
    record = json.loads(out.read_text())
    return record["tasks"][builtin], record["tasks"][own], manifest


def same_sentences(manifest, builtin, own):
    """The declared task exports the very list of the built-in one (same sentences, same order)."""
    a, b = manifest["tasks"][builtin], manifest["tasks"][own]
    assert (a["count"], a["sha256"]) == (b["count"], b["sha256"])


@pytest.mark.parametrize(
    "solver, options",
    [
        ("lbfgs", ()),
        # SentEval's PyTorch solver, with a shorter training (the same for both tasks) to save time.
        ("senteval", ("--classifier", '{"epoch_size": 1, "tenacity": 1, "max_epoch": 2}')),
    ],
)
def test_sst2_as_a_split_classification_task_file(cli, tmp_path, data_dir, solver, options):
    labelled_files(TASKS["SST2"].load(data_dir), tmp_path / "tasks" / "sst2", int)
    task_file = tmp_path / "tasks" / "own.toml"
    task_file.write_text(OWN_SST2, encoding="utf-8")
    builtin, own, manifest = export_embed_score(
        cli, tmp_path, data_dir, task_file, "SST2", "OwnSST2", "--config", "prototype", "--solver", solver
    )
    same_sentences(manifest, "SST2", "OwnSST2")
    assert own["results"] == builtin["results"]
    assert set(own["results"]) >= {"acc", "devacc", "reg", "dev_scores", "ntest"}
    assert own["results"]["ntest"] == 1821 and own["results"]["ndev"] == 872 and len(own["results"]["dev_scores"]) > 1
    assert own["declaration"]["declaration"]["name"] == "OwnSST2" and "declaration" not in builtin


def test_sts_benchmark_raw_as_an_sts_task_file(cli, tmp_path, data_dir, raw_sts_benchmark):
    rows = []
    for line in (raw_sts_benchmark / "sts-test.csv").read_text(encoding="utf-8").splitlines():
        fields = line.rstrip("\r").split("\t")
        rows.append((fields[5].strip(), fields[6].strip(), fields[4]))
    write_tsv(tmp_path / "tasks" / "stsb" / "test.tsv", ("sentence1", "sentence2", "score"), rows)
    task_file = tmp_path / "tasks" / "own.toml"
    task_file.write_text(OWN_STSB, encoding="utf-8")
    builtin, own, manifest = export_embed_score(cli, tmp_path, data_dir, task_file, "STSBenchmarkRaw", "OwnSTSB")
    same_sentences(manifest, "STSBenchmarkRaw", "OwnSTSB")
    assert own["results"] == builtin["results"]
    assert own["results"]["test"]["nsamples"] == 1379
    assert isinstance(own["results"]["all"]["spearman"]["pooled"], float)


def test_trec_as_a_kfold_classification_task_file(cli, tmp_path, data_dir):
    data = TASKS["TREC"].load(data_dir)
    labelled_files(data, tmp_path / "tasks" / "trec", lambda y: data.classes[y])
    task_file = tmp_path / "tasks" / "own.toml"
    task_file.write_text(OWN_TREC, encoding="utf-8")
    builtin, own, manifest = export_embed_score(
        cli,
        tmp_path,
        data_dir,
        task_file,
        "TREC",
        "OwnTREC",
        "--config",
        "prototype",
        "--solver",
        "lbfgs",
        "--kfold",
        "3",
    )
    same_sentences(manifest, "TREC", "OwnTREC")
    assert own["results"] == builtin["results"]
    assert own["results"]["ntest"] == 500 and len(own["results"]["dev_scores"]) > 1


def test_the_issues_task_files_are_listed_and_checked(cli, tmp_path):
    """`embeval tasks --task-file` reads both files of the issue, loads their data and says so."""
    for split, size in (("train", 4), ("dev", 3), ("test", 2)):
        write_tsv(tmp_path / "sst2" / f"{split}.tsv", ("text", "label"), [(f"s{split}{i}", i % 2) for i in range(size)])
    write_tsv(
        tmp_path / "stsb" / "test.tsv", ("sentence1", "sentence2", "score"), [("a b", "a c", "4.2"), ("x", "y", 0)]
    )
    (tmp_path / "sst2.toml").write_text(OWN_SST2, encoding="utf-8")
    (tmp_path / "stsb.toml").write_text(OWN_STSB, encoding="utf-8")
    result = cli("tasks", "--task-file", tmp_path, "--tasks", "OwnSST2,OwnSTSB", "--data", tmp_path)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("OwnSST2") and "classification (split)" in line for line in lines)
    assert any(line.startswith("OwnSTSB") and "sts" in line for line in lines)
    assert "train 4, dev 3, test 2; 9 sentences to embed" in result.stdout
    assert "test 2; 4 sentences to embed" in result.stdout
    assert "2 declared tasks, all valid" in result.stdout
    listed = cli("tasks", "--tasks", "STSBenchmarkRaw,SST2", "--no-load").stdout.splitlines()
    assert listed[0].startswith("STSBenchmarkRaw") and "sts" in listed[0] and "built-in" in listed[0]
    assert listed[1].strip() == TASKS["STSBenchmarkRaw"].description and listed[1].startswith(" ")
    assert listed[2].startswith("SST2") and "classification (split)" in listed[2] and len(listed) == 3


OWN_DEPTH = """name = "OwnDepth"
kind = "probing"
[files]
train = "depth/train.tsv"
dev = "depth/dev.tsv"
test = "depth/test.tsv"
"""


def test_a_probing_task_file_gives_the_built_in_probing_figures(cli, tmp_path):
    """A probing file in SentEval's format (Depth) and the same samples as text<TAB>label TSV files:
    integer labels get SentEval's ids (sorted as strings: "10" before "5"), so the data and the
    figures are the same."""
    from embeval.tasks.registry import registry

    rng = np.random.default_rng(7)
    data = tmp_path / "data"
    (data / "probing").mkdir(parents=True)
    lines, rows, codes = [], {"tr": [], "va": [], "te": []}, {}
    for split, count in (("tr", 300), ("va", 100), ("te", 100)):
        for i in range(count):
            code = int(rng.integers(3))
            sentence = f"{split} sentence {i} " + " ".join(["word"] * int(rng.integers(1, 4)))
            codes[sentence] = code
            label = ["10", "5", "7"][code]
            lines.append(f"{split}\t{label}\tignored\t{sentence}")
            rows[split].append((sentence, label))
    (data / "probing" / "tree_depth.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for split, name in (("tr", "train"), ("va", "dev"), ("te", "test")):
        write_tsv(tmp_path / "tasks" / "depth" / f"{name}.tsv", ("text", "label"), rows[split])
    task_file = tmp_path / "tasks" / "own.toml"
    task_file.write_text(OWN_DEPTH, encoding="utf-8")
    known = registry([task_file])
    builtin, own = known["Depth"].load(data), known["OwnDepth"].load(data)
    assert builtin.classes == own.classes == ["10", "5", "7"]
    for split in ("train", "dev", "test"):
        assert builtin.splits[split].a == own.splits[split].a
        assert builtin.splits[split].y.tolist() == own.splits[split].y.tolist()

    export = tmp_path / "sentences"
    result = cli("export-sentences", "--data", data, "--out", export, "--task-file", task_file)
    assert result.exit_code == 0, result.stderr

    def encode(texts):  # the class, plus noise that depends on the sentence only
        return np.stack(
            [np.eye(6)[codes[t]] + np.random.default_rng(list(t.encode())).normal(0, 1.5, 6) for t in texts]
        )

    write(tmp_path / "v.h5", export, encode, progress=False)
    out = tmp_path / "r.json"
    result = cli(
        "score", tmp_path / "v.h5", "--data", data, "--task-file", task_file, "--solver", "lbfgs", "--out", out
    )
    assert result.exit_code == 0, result.stderr
    tasks = json.loads(out.read_text())["tasks"]
    assert set(tasks) == {"Depth", "OwnDepth"}
    assert tasks["OwnDepth"]["results"] == tasks["Depth"]["results"]
