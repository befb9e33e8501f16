"""`embeval sweep`: stacked files score exactly as alone, best-on-dev, --dims, --resume, bad files."""

import importlib.util
import json

import h5py
import numpy as np
import pytest
from reliability_helpers import task_file
from report_helpers import need

from embeval.evaluate import stack
from embeval.evaluate.stack import fit_together
from embeval.formats.results import UNDEFINED_NOTE
from embeval.run import sweep_report
from embeval.run.config import build
from embeval.run.score import score
from embeval.run.sweep import LocalRunner, sweep

TASKS = ["CR", "TREC", "SICKEntailment"]  # inner k-fold, k-fold (6 classes), split (pair features)


def config(solver="senteval", normalize="none"):
    return build("prototype", solver=solver, kfold=3, bootstrap=100, normalize=normalize)


def comparable(entry):
    """A task's entry without what differs between two runs of equal results (timing, device)."""
    return {k: v for k, v in entry.items() if k not in ("seconds", "device")}


def files(folder, data_dir, tasks, count=3, dim=8):
    return [task_file(folder / f"enc{i}.h5", data_dir, tasks, dim=dim, seed=100 * i) for i in range(count)]


def quiet(message):
    pass


@pytest.mark.parametrize("solver, normalize", [("senteval", "none"), ("lbfgs", "none"), ("senteval", "zscore+l2")])
def test_stacked_files_score_exactly_as_each_alone(tmp_path, data_dir, solver, normalize, monkeypatch):
    """Each file's job runs once per fit it asks for (run_together): a normalization of its table on
    the way must not leak from one run into the next."""
    paths = files(tmp_path, data_dir, TASKS)
    stacked = []

    def spy(calls):
        stacked.append(len(calls))
        return fit_together(calls)

    monkeypatch.setattr(stack, "fit_together", spy)
    summary = sweep(
        [str(p) for p in paths], data_dir, TASKS, tmp_path / "sweep", "cpu", config(solver, normalize), log=quiet
    )
    assert stacked == [3] * 5  # two stages of CR and of TREC, one of SICK-E: every fit of the three files together
    assert [s["label"] for s in summary["sources"]] == ["enc0", "enc1", "enc2"] and not summary["left_out"]
    for path in paths:
        alone = score(
            path,
            data_dir,
            TASKS,
            out=tmp_path / f"{path.stem}.alone.json",
            device="cpu",
            config=config(solver, normalize),
            progress=False,
            log=quiet,
        )
        swept = json.loads((tmp_path / "sweep" / f"{path.stem}.results.json").read_text())
        assert list(swept["tasks"]) == TASKS
        for task in TASKS:
            assert comparable(swept["tasks"][task]) == json.loads(json.dumps(comparable(alone["tasks"][task])))
        alone_predictions = np.load(tmp_path / f"{path.stem}.alone.predictions.npz")
        swept_predictions = np.load(tmp_path / "sweep" / f"{path.stem}.results.predictions.npz")
        assert len(alone_predictions.files) > 1 and alone_predictions.files == swept_predictions.files
        for name in alone_predictions.files:
            assert np.array_equal(alone_predictions[name], swept_predictions[name]), name


def test_the_files_differ_so_stacking_is_tested(tmp_path, data_dir):
    paths = files(tmp_path, data_dir, ["TREC"])
    summary = sweep([str(p) for p in paths], data_dir, ["TREC"], tmp_path / "s", "cpu", config(), log=quiet)
    values = [v["value"] for v in summary["tasks"]["TREC"]["values"].values()]
    assert len(set(values)) == len(values)


def test_best_file_is_chosen_on_dev_never_on_test():
    values = {
        "a": {"value": 90.0, "low": 1, "high": 2, "dev": 70.0},
        "b": {"value": 80.0, "low": 1, "high": 2, "dev": 75.0},
        "c": {"value": 85.0, "low": 1, "high": 2, "dev": 75.0},
        "d": {"value": 99.0, "low": None, "high": None, "dev": None},
    }
    assert sweep_report.best_on_dev(values) == "b"  # highest dev; first on ties; test figures ignored
    assert sweep_report.best_on_dev({"x": {"value": 1.0, "low": None, "high": None, "dev": None}}) is None


def test_sweep_json_marks_the_file_with_the_best_dev_figure(tmp_path, data_dir):
    paths = files(tmp_path, data_dir, ["TREC"], count=3)
    summary = sweep([str(p) for p in paths], data_dir, ["TREC"], tmp_path / "s", "cpu", config(), log=quiet)
    records = {p.stem: json.loads((tmp_path / "s" / f"{p.stem}.results.json").read_text()) for p in paths}
    dev = {name: r["tasks"]["TREC"]["results"]["devacc"] for name, r in records.items()}
    best = max(dev, key=lambda name: (dev[name], -list(dev).index(name)))
    written = json.loads((tmp_path / "s" / "sweep.json").read_text())
    assert summary["tasks"]["TREC"]["best"] == written["tasks"]["TREC"]["best"] == best
    assert written["tasks"]["TREC"]["values"][best]["dev"] == dev[best]
    lines = sweep_report.table(summary).splitlines()
    assert lines[1 + list(dev).index(best)].endswith("*")
    assert lines[-1].startswith("headline figure (accuracies in %, correlations as fractions) [95% interval]; * best")
    assert "()" not in lines[-1]


def test_dims_equal_files_truncated_by_hand(tmp_path, data_dir):
    tasks = ["CR", "TREC"]
    (path,) = files(tmp_path, data_dir, tasks, count=1, dim=8)
    sweep([str(path)], data_dir, tasks, tmp_path / "s", "cpu", config(), dims=[3, 8], log=quiet)
    for dims in (3, 8):
        by_hand = tmp_path / f"cut{dims}.h5"
        with h5py.File(path, "r") as full, h5py.File(by_hand, "w") as cut:
            for name in tasks:
                cut.create_dataset(name, data=full[name][:, :dims])
                cut[name].attrs["sha256"] = full[name].attrs["sha256"]
        alone = score(
            by_hand,
            data_dir,
            tasks,
            out=tmp_path / f"cut{dims}.json",
            device="cpu",
            config=config(),
            progress=False,
            log=quiet,
        )
        swept = json.loads((tmp_path / "s" / f"enc0.d{dims}.results.json").read_text())
        assert swept["vectors"]["truncated_to"] == dims
        for task in tasks:
            entry = comparable(swept["tasks"][task])
            assert entry["vectors"].pop("truncated_from") == 8
            assert entry == json.loads(json.dumps(comparable(alone["tasks"][task])))


class Interrupting(LocalRunner):
    """Stops the sweep (Ctrl-C) after `after` groups; records the groups it ran."""

    def __init__(self, device, ran, after=None):
        super().__init__(device)
        self.ran, self.after = ran, after

    def run(self, groups):
        for group, results in super().run(groups):
            self.ran.append([(u.source.path, u.task) for u in group])
            yield group, results
            if self.after is not None and len(self.ran) >= self.after:
                raise KeyboardInterrupt


def test_resume_after_an_interruption_redoes_nothing_finished(tmp_path, data_dir):
    tasks = ["TREC", "CR"]
    paths = [str(p) for p in files(tmp_path, data_dir, tasks, count=2)]
    first, second = [], []
    with pytest.raises(KeyboardInterrupt):
        sweep(
            paths,
            data_dir,
            tasks,
            tmp_path / "s",
            "cpu",
            config(),
            log=quiet,
            runner=Interrupting("cpu", first, after=1),
        )
    assert first == [[(p, "TREC") for p in paths]]
    sweep(
        paths,
        data_dir,
        tasks,
        tmp_path / "s",
        "cpu",
        config(),
        resume=True,
        log=quiet,
        runner=Interrupting("cpu", second),
    )
    assert second == [[(p, "CR") for p in paths]]
    sweep(paths, data_dir, tasks, tmp_path / "full", "cpu", config(), log=quiet)
    for p in paths:
        stem = p.rsplit("/", 1)[1][:-3]
        resumed = json.loads((tmp_path / "s" / f"{stem}.results.json").read_text())
        whole = json.loads((tmp_path / "full" / f"{stem}.results.json").read_text())
        assert {t: comparable(e) for t, e in resumed["tasks"].items()} == {
            t: comparable(e) for t, e in whole["tasks"].items()
        }
    third = []
    sweep(
        paths,
        data_dir,
        tasks,
        tmp_path / "s",
        "cpu",
        config(),
        resume=True,
        log=quiet,
        runner=Interrupting("cpu", third),
    )
    assert third == []


def test_one_bad_file_among_four_is_left_out(tmp_path, data_dir, cli):
    tasks = ["TREC"]
    paths = files(tmp_path, data_dir, tasks, count=4)
    with h5py.File(paths[2], "a") as f:
        f["TREC"][5, 1] = np.nan
    out = tmp_path / "s"
    result = cli(
        "sweep",
        *paths,
        "--data",
        data_dir,
        "--tasks",
        "TREC",
        "--config",
        "prototype",
        "--kfold",
        "3",
        "--bootstrap",
        "0",
        "--device",
        "cpu",
        "--out-dir",
        out,
        "--quiet",
    )
    assert result.exit_code == 2
    assert "Traceback" not in result.stderr
    bad = [line for line in result.stderr.splitlines() if "enc2.h5" in line and "left out of the sweep" in line]
    assert len(bad) == 1 and "TREC" in bad[0] and "NaN" in bad[0], result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("embeval: error: sweep: left out ")
    assert sorted(p.name for p in out.glob("*.results.json")) == [
        "enc0.results.json",
        "enc1.results.json",
        "enc3.results.json",
    ]
    assert not list(out.glob("enc2*"))
    summary = json.loads((out / "sweep.json").read_text())
    assert [s["label"] for s in summary["sources"]] == ["enc0", "enc1", "enc3"]
    assert summary["left_out"][0]["file"] == str(paths[2])
    assert "enc2" not in result.stdout and "enc3" in result.stdout


def test_globs_are_expanded_and_steps_plotted(tmp_path, data_dir, cli):
    tasks = ["TREC"]
    paths = files(tmp_path, data_dir, tasks, count=3)
    for step, path in zip((300, 100, 300), paths):
        with h5py.File(path, "a") as f:
            f.attrs["step"] = step
    out = tmp_path / "s"
    result = cli(
        "sweep",
        str(tmp_path / "enc*.h5"),
        "--data",
        data_dir,
        "--tasks",
        "TREC",
        "--config",
        "prototype",
        "--kfold",
        "3",
        "--bootstrap",
        "100",
        "--device",
        "cpu",
        "--out-dir",
        out,
        "--quiet",
    )
    assert result.exit_code == 0, result.stderr
    summary = json.loads((out / "sweep.json").read_text())
    assert [(s["label"], s["step"]) for s in summary["sources"]] == [("enc0", 300), ("enc1", 100), ("enc2", 300)]
    assert summary["plots"] == ["plots/TREC.png"]
    assert (out / "plots" / "TREC.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_model_attribute_names_each_file_of_a_sweep(tmp_path, data_dir, cli):
    """The sweep's table, sweep.json, page and results files name a file by its `model`; files of one model
    (checkpoints) are told apart by their file names; truncations add @DIMS. A task whose vectors are all
    identical is n/a, with the note saying why."""
    paths = files(tmp_path, data_dir, ["STS16"], count=3)
    for path, model in zip(paths, ("MiniLM", "BERT", "BERT")):
        with h5py.File(path, "a") as f:
            f.attrs["model"] = model
    with h5py.File(paths[2], "a") as f:
        f["STS16"][...] = 1.0
    out = tmp_path / "s"
    result = cli(
        "sweep", *paths, "--data", data_dir, "--tasks", "STS16", "--bootstrap", "0", "--out-dir", out, "--quiet"
    )
    assert result.exit_code == 0, result.stderr
    summary = json.loads((out / "sweep.json").read_text())
    assert [s["label"] for s in summary["sources"]] == ["MiniLM", "BERT (enc1)", "BERT (enc2)"]
    table = result.stdout.splitlines()
    assert table[3].split() == ["BERT", "(enc2)", "n/a"] and table[-2] == UNDEFINED_NOTE
    assert summary["tasks"]["STS16"]["values"]["BERT (enc2)"] == {
        "value": None,
        "low": None,
        "high": None,
        "dev": None,
        "undefined": True,
    }
    assert json.loads((out / "enc0.results.json").read_text())["vectors"]["model"] == "MiniLM"
    assert sweep_report.load(out / "sweep.json")["tasks"]["STS16"]["values"]["BERT (enc2)"]["undefined"]
    report = cli("report", out / "enc0.results.json", out / "enc1.results.json").stdout
    assert "\n| MiniLM | 8 |" in report and "\n| BERT | 8 |" in report
    truncated = cli(
        "sweep",
        paths[0],
        "--data",
        data_dir,
        "--tasks",
        "STS16",
        "--bootstrap",
        "0",
        "--out-dir",
        tmp_path / "t",
        "--dims",
        "4",
        "--quiet",
    )
    assert truncated.exit_code == 0, truncated.stderr
    assert [s["label"] for s in json.loads((tmp_path / "t" / "sweep.json").read_text())["sources"]] == ["MiniLM@4"]
    assert "\n| MiniLM@4 | 4 |" in cli("report", tmp_path / "t" / "enc0.d4.results.json").stdout
    if importlib.util.find_spec("matplotlib") is None:
        need("matplotlib", "pip install '.[report]'")
    from embeval.reports import html

    page = html.render_sweep(out / "sweep.json")
    assert "<tr><td>BERT (enc2)</td><td>n/a</td></tr>" in page and "<li>MiniLM: enc0.h5</li>" in page
    assert page.count(UNDEFINED_NOTE.replace("'", "&#x27;")) == 1


def test_dims_larger_than_the_file_leave_that_truncation_out(tmp_path, data_dir, cli):
    (path,) = files(tmp_path, data_dir, ["TREC"], count=1, dim=8)
    result = cli(
        "sweep",
        path,
        "--data",
        data_dir,
        "--tasks",
        "TREC",
        "--config",
        "prototype",
        "--kfold",
        "3",
        "--bootstrap",
        "0",
        "--device",
        "cpu",
        "--out-dir",
        tmp_path / "s",
        "--dims",
        "4,16",
        "--quiet",
    )
    assert result.exit_code == 2
    assert any(
        "--dims 16 exceeds the file's 8 dimensions" in line and "TREC" in line for line in result.stderr.splitlines()
    )
    assert (tmp_path / "s" / "enc0.d4.results.json").exists()
    assert not (tmp_path / "s" / "enc0.d16.results.json").exists()


def test_stacked_features_are_each_part_at_its_offset():
    import torch

    from embeval.evaluate.stack import StackedFeatures, stack_features
    from embeval.train.features import DenseFeatures, Features, materialize

    rng = np.random.default_rng(0)
    parts = [
        Features(
            torch.as_tensor(rng.standard_normal((n, 3)), dtype=torch.float32),
            rng.integers(0, n, 7 + n),
            rng.integers(0, n, 7 + n),
            "pair",
        )
        for n in (5, 9, 4)
    ]
    stacked = stack_features(parts)
    assert isinstance(stacked, StackedFeatures) and len(stacked) == sum(len(p) for p in parts)
    whole = torch.cat([materialize(p).matrix for p in parts])
    idx = torch.as_tensor(rng.integers(0, len(stacked), (4, 6)))
    assert torch.equal(stacked(idx), whole[idx])
    buffer = torch.empty((idx.numel(), stacked.dim))
    assert torch.equal(stacked(idx, out=buffer), whole[idx])
    dense = stack_features([DenseFeatures(materialize(p).matrix) for p in parts])
    assert isinstance(dense, DenseFeatures) and torch.equal(dense.matrix, whole)


def test_files_beyond_the_memory_budget_go_in_further_groups(tmp_path, data_dir, monkeypatch):
    from embeval.run import sweep as sweep_module
    from embeval.run.execute import Workspace

    paths = [str(p) for p in files(tmp_path, data_dir, ["TREC"], count=3)]
    sweep(paths, data_dir, ["TREC"], tmp_path / "one", "cpu", config(), log=quiet)
    ran = []
    monkeypatch.setattr(sweep_module, "memory_budget", lambda device: 2 * sweep_module.unit_bytes(probe[0]))
    probe = sweep_module.plan_sources(paths[:1], data_dir, ["TREC"], config(), None, tmp_path / "x", Workspace())[0][
        0
    ].units
    sweep(paths, data_dir, ["TREC"], tmp_path / "two", "cpu", config(), log=quiet, runner=Interrupting("cpu", ran))
    assert [len(group) for group in ran] == [2, 1]
    for p in paths:
        name = p.rsplit("/", 1)[1].replace(".h5", ".results.json")
        one, two = (json.loads((tmp_path / d / name).read_text())["tasks"]["TREC"] for d in ("one", "two"))
        assert comparable(one) == comparable(two)
