"""--classifiers logreg,mlp: each classifier reported, each equal to a run with that classifier alone."""

import json

import pytest
from reliability_helpers import refused, task_file

from embeval.errors import EmbevalError
from embeval.run.config import build

OPTIONS = ["--config", "prototype", "--bootstrap", "200"]


def test_config():
    assert build().probing_classifier == "configured" and "classifiers" not in build().to_record()
    both = build(classifiers="logreg,mlp")
    assert both.classifiers == ("logreg", "mlp") and both.probing_classifier == "both"
    assert both.to_record()["classifiers"] == ["logreg", "mlp"]
    assert build(classifiers="mlp").probing_classifier == "mlp"
    assert build(classifiers="logreg,mlp", probing_classifier="logreg").probing_classifier == "logreg"
    with pytest.raises(EmbevalError, match="--classifiers"):
        build(classifiers="svm")
    with pytest.raises(EmbevalError, match="MLP needs --solver senteval"):
        build(classifiers="logreg,mlp", solver="lbfgs")


def test_both_classifiers_equal_runs_with_each_alone(cli, data_dir, tmp_path):
    vectors = task_file(tmp_path / "v.h5", data_dir, ["SICKEntailment", "MRPC"], dim=6)

    def run(name, *extra):
        out = tmp_path / f"{name}.json"
        result = cli(
            "score", vectors, "--data", data_dir, "--tasks", "SICKEntailment,MRPC", "--out", out, *OPTIONS, *extra
        )
        assert result.exit_code == 0, result.stderr
        return json.loads(out.read_text())["tasks"], result.stdout

    both, stdout = run("both", "--classifiers", "logreg,mlp")
    logreg, _ = run("logreg")
    mlp, _ = run("mlp", "--classifier", '{"nhid": 50}')
    for task in ("SICKEntailment", "MRPC"):
        r = both[task]["results"]
        assert r["classifier"] == "logreg"
        assert r["logreg"] == logreg[task]["results"] and r["mlp"] == mlp[task]["results"]
        assert r["acc"] == r["logreg"]["acc"] and r["devacc"] == r["logreg"]["devacc"]
        figures = both[task]["ci"]["figures"]
        assert figures["mlp.acc"] == mlp[task]["ci"]["figures"]["acc"]
        assert figures["logreg.acc"] == figures["acc"] == logreg[task]["ci"]["figures"]["acc"]
    assert "logreg accuracy % dev / test" in stdout and "mlp accuracy % dev / test" in stdout


def test_bad_classifiers_option(cli, data_dir, tmp_path):
    vectors = task_file(tmp_path / "v.h5", data_dir, ["STS16"], dim=6)
    refused(cli("score", vectors, "--data", data_dir, "--classifiers", "logreg,svm"), "--classifiers", "svm")
