"""Probing tasks on small files in SentEval's format: learnable labels, random labels, classifiers."""

import json

import numpy as np
import pytest

from embeval.formats.vectors import write

NCLASSES = 3
SIZES = {"tr": 450, "va": 150, "te": 150}


def probing_folder(root, filename, learnable, seed):
    """A probing file whose label is (learnable) or is not (random) what the vectors encode."""
    rng = np.random.default_rng(seed)
    lines, codes = [], {}
    for split, n in SIZES.items():
        for i in range(n):
            sentence = f"{split} sentence number {i} of {filename}"
            code = int(rng.integers(NCLASSES))
            codes[sentence] = code
            label = code if learnable else int(rng.integers(NCLASSES))
            lines.append(f"{split}\t{['10', '5', '7'][label]}\tignored\t{sentence}")
    folder = root / "probing"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / filename).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return codes


@pytest.fixture(scope="module")
def probing_run(tmp_path_factory):
    """Length has learnable labels, Depth random ones, WordContent learnable; vectors encode `code`."""
    from click.testing import CliRunner

    from embeval.cli.main import cli

    root = tmp_path_factory.mktemp("probing")
    data = root / "data"
    codes = {}
    codes.update(probing_folder(data, "sentence_length.txt", True, 1))
    codes.update(probing_folder(data, "tree_depth.txt", False, 2))
    codes.update(probing_folder(data, "word_content.txt", True, 3))
    rng = np.random.default_rng(0)

    def encode(sentences):
        return np.stack([np.eye(8)[codes[s]] * 2.0 + rng.normal(0, 0.3, 8) for s in sentences]).astype(np.float32)

    runner = CliRunner()
    tasks = "Length,Depth,WordContent"
    result = runner.invoke(
        cli, ["export-sentences", "--data", str(data), "--out", str(root / "sent"), "--tasks", tasks]
    )
    assert result.exit_code == 0, result.output
    write(root / "v.h5", root / "sent", encode, progress=False)
    out = root / "r.json"
    result = runner.invoke(
        cli,
        [
            "score",
            str(root / "v.h5"),
            "--data",
            str(data),
            "--tasks",
            tasks,
            "--out",
            str(out),
            "--probing-classifier",
            "both",
            "--classifier",
            '{"tenacity": 3, "epoch_size": 2}',
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text()), result.stdout


def test_learnable_labels_near_100_with_both_classifiers(probing_run):
    record, _ = probing_run
    length = record["tasks"]["Length"]["results"]
    assert length["logreg"]["acc"] >= 97 and length["mlp"]["acc"] >= 97
    assert length["classifier"] == "mlp" and length["acc"] == length["mlp"]["acc"]
    assert length["ndev"] == 150 and length["ntest"] == 150
    assert length["mlp"]["nhid"] in (50, 100, 200) and length["mlp"]["dropout"] in (0.0, 0.1, 0.2)


def test_random_labels_near_chance(probing_run):
    record, _ = probing_run
    depth = record["tasks"]["Depth"]["results"]
    for classifier in ("logreg", "mlp"):
        assert 100 / NCLASSES - 15 <= depth[classifier]["acc"] <= 100 / NCLASSES + 15, depth


def test_word_content_is_always_logistic_regression(probing_run):
    record, stdout = probing_run
    word = record["tasks"]["WordContent"]["results"]
    assert word["classifier"] == "logreg" and "mlp" not in word and word["acc"] >= 97
    assert record["config"]["probing_classifier"] == "both"
    assert "Length" in stdout and "WordContent" in stdout


def test_lbfgs_probing_logreg(tmp_path, cli):
    data = tmp_path / "data"
    codes = probing_folder(data, "past_present.txt", True, 4)
    rng = np.random.default_rng(1)
    assert cli("export-sentences", "--data", data, "--out", tmp_path / "sent", "--tasks", "Tense").exit_code == 0
    write(
        tmp_path / "v.h5",
        tmp_path / "sent",
        lambda s: np.stack([np.eye(4)[codes[x]] + rng.normal(0, 0.2, 4) for x in s]),
        progress=False,
    )
    result = cli(
        "score",
        tmp_path / "v.h5",
        "--data",
        data,
        "--tasks",
        "Tense",
        "--solver",
        "lbfgs",
        "--out",
        tmp_path / "r.json",
    )
    assert result.exit_code == 0, result.output
    tense = json.loads((tmp_path / "r.json").read_text())["tasks"]["Tense"]["results"]
    assert tense["acc"] == 100.0 and tense["classifier"] == "configured" and tense["nhid"] == 0
    bad = cli("score", tmp_path / "v.h5", "--data", data, "--solver", "lbfgs", "--probing-classifier", "mlp")
    assert bad.exit_code == 2 and "needs --solver senteval" in bad.stderr


def test_malformed_probing_line_names_file_and_line(tmp_path, cli):
    folder = tmp_path / "data" / "probing"
    folder.mkdir(parents=True)
    (folder / "odd_man_out.txt").write_text("tr\tO\tx\ta b\ntr\tC\n", encoding="utf-8")
    result = cli("export-sentences", "--data", tmp_path / "data", "--out", tmp_path / "o", "--tasks", "OddManOut")
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert "odd_man_out.txt:2" in line and "OddManOut" in line and len(line.splitlines()) == 1


def test_configured_classifier_is_used_for_probing(tmp_path, cli):
    """As SentEval's probing code: --classifier '{"nhid": 50, ...}' trains an MLP with the configured
    optimizer on the probing tasks (labels the XOR of two coordinates: an MLP learns them, logistic
    regression cannot) and logistic regression on WordContent. (Adam's default step stops early on
    XOR's plateau at this size, so the step is 0.01.)"""
    data = tmp_path / "data"
    codes = {}
    for filename, seed in (("bigram_shift.txt", 5), ("word_content.txt", 6)):
        codes.update(probing_folder(data, filename, True, seed))
    rng = np.random.default_rng(2)
    signs = {s: rng.choice([-1.0, 1.0], 2) for s in codes}
    label = {s: int(signs[s][0] != signs[s][1]) for s in codes}
    for filename in ("bigram_shift.txt", "word_content.txt"):
        path = data / "probing" / filename
        lines = path.read_text(encoding="utf-8").splitlines()
        path.write_text(
            "".join(
                f"{f[0]}\t{['I', 'O'][label[f[3]]]}\t{f[2]}\t{f[3]}\n" for f in (line.split("\t") for line in lines)
            ),
            encoding="utf-8",
        )
    assert (
        cli(
            "export-sentences", "--data", data, "--out", tmp_path / "sent", "--tasks", "BigramShift,WordContent"
        ).exit_code
        == 0
    )
    write(
        tmp_path / "v.h5",
        tmp_path / "sent",
        lambda s: np.stack([np.concatenate([2 * signs[x], rng.normal(0, 0.2, 2)]) for x in s]),
        progress=False,
    )
    runs = {}
    for name, classifier in (
        ("mlp", '{"nhid": 50, "optim": "adam,lr=0.01"}'),
        ("logreg", '{"nhid": 0, "optim": "adam,lr=0.01"}'),
    ):
        out = tmp_path / f"{name}.json"
        result = cli(
            "score",
            tmp_path / "v.h5",
            "--data",
            data,
            "--tasks",
            "BigramShift,WordContent",
            "--classifier",
            classifier,
            "--bootstrap",
            "0",
            "--out",
            out,
        )
        assert result.exit_code == 0, result.output
        runs[name] = json.loads(out.read_text())
    mlp = runs["mlp"]["tasks"]["BigramShift"]["results"]
    assert runs["mlp"]["config"]["probing_classifier"] == "configured"
    assert mlp["classifier"] == "configured" and mlp["nhid"] == 50 and mlp["optim"] == "adam,lr=0.01"
    assert mlp["acc"] >= 95 and runs["logreg"]["tasks"]["BigramShift"]["results"]["acc"] <= 75
    for name in ("mlp", "logreg"):
        word = runs[name]["tasks"]["WordContent"]["results"]
        assert word["nhid"] == 0 and word["acc"] <= 75
