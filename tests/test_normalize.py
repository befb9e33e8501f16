"""Normalization as a hyperparameter: the transforms, statistics from training sentences only (tests
that fail if a test item leaks into them), cosine STS raw and normalized side by side, and tune."""

import json

import h5py
import numpy as np
import pytest
import torch
from reliability_helpers import refused, task_file, write_h5
from scipy.stats import spearmanr

from embeval.evaluate import classify, normalize
from embeval.evaluate.classify import drive
from embeval.formats import sentences as export
from embeval.run.config import build
from embeval.tasks.registry import TASKS

OPTIONS = ["--config", "prototype", "--bootstrap", "0"]


def test_zscore_statistics_are_those_of_the_distinct_rows_given():
    rng = np.random.default_rng(0)
    table = torch.from_numpy(rng.normal(3, 2, (50, 6)).astype(np.float32))
    table[:, 4] = 7.0  # a constant dimension: only centred
    rows = np.array([0, 1, 2, 2, 2, 9, 30, 31])  # repeats count once
    z = normalize.fit("zscore", table, rows)
    distinct = table.numpy()[[0, 1, 2, 9, 30, 31]].astype(np.float64)
    assert z.fitted_on == 6
    assert np.allclose(z.mean.numpy(), distinct.mean(0), atol=1e-6)
    std = distinct.std(0)
    assert np.allclose(z.scale.numpy()[[0, 1, 2, 3, 5]], 1 / std[[0, 1, 2, 3, 5]], rtol=1e-5)
    assert z.scale[4] == 1.0
    out = z(table).numpy()
    assert np.allclose(out[[0, 1, 2, 9, 30, 31]].mean(0), 0, atol=1e-5)
    assert np.all(out[:, 4] == 0)


def test_l2_and_zscore_l2():
    table = torch.tensor([[3.0, 4.0], [0.0, 0.0], [1.0, -1.0]])
    l2 = normalize.fit("l2", table)(table)
    assert torch.allclose(l2[0], torch.tensor([0.6, 0.8])) and torch.equal(l2[1], torch.zeros(2))
    both = normalize.fit("zscore+l2", table)(table)
    norms = both.norm(dim=1)
    assert torch.allclose(norms[norms > 0], torch.ones_like(norms[norms > 0]))
    assert normalize.fit("none", table)(table) is table


def perturb_rows(src, dst, task, rows, scale=1000.0, shift=50.0):
    """Copy a one-task vectors file, multiplying the given rows by `scale` and adding `shift`."""
    with h5py.File(src, "r") as f:
        values, sha = f[task][()], f[task].attrs["sha256"]
    values[rows] = values[rows] * scale + shift
    write_h5(dst, {task: (values, {"sha256": sha})})
    return dst


def rows_only_in(data_dir, task, split="test"):
    """Rows (in the task's export order) of the sentences that appear in `split` and in no other split."""
    data = TASKS[task].load(data_dir)
    texts = export.task_sentences(data)
    elsewhere = {s for name, sp in data.splits.items() if name != split for s in sp.sentences()}
    only = set(data.splits[split].sentences()) - elsewhere
    return [i for i, s in enumerate(texts) if s in only]


@pytest.mark.parametrize(
    "task, dev_keys",
    [
        ("SICKEntailment", ("devacc", "dev_scores")),
        ("MRPC", ("devacc", "dev_scores")),
        ("STSBenchmark", ("devpearson",)),
    ],
)
def test_test_items_never_reach_the_statistics(task, dev_keys, cli, data_dir, tmp_path):
    """Blowing up the vectors of sentences seen only in the test split changes nothing that is
    computed before testing: the statistics, the dev scores, the chosen regularization. Were the
    test vectors part of the mean or the standard deviation, every normalized train and dev
    vector, and so the dev scores, would change."""
    clean = task_file(tmp_path / "clean.h5", data_dir, [task], dim=6)
    rows = rows_only_in(data_dir, task)
    assert len(rows) > 100
    leaky = perturb_rows(clean, tmp_path / "leaky.h5", task, rows)
    results = []
    for name, vectors in (("clean", clean), ("leaky", leaky)):
        out = tmp_path / f"{name}.json"
        result = cli(
            "score", vectors, "--data", data_dir, "--tasks", task, "--out", out, "--normalize", "zscore", *OPTIONS
        )
        assert result.exit_code == 0, result.stderr
        results.append(json.loads(out.read_text())["tasks"][task])
    clean_entry, leaky_entry = results
    assert clean_entry["normalize"] == leaky_entry["normalize"]
    assert clean_entry["normalize"]["statistics"].startswith("the train split's")
    for key in dev_keys:
        assert clean_entry["results"][key] == leaky_entry["results"][key], key
    assert clean_entry["vectors"]["vectors_sha256"] != leaky_entry["vectors"]["vectors_sha256"]


def test_inner_kfold_takes_each_folds_statistics_from_its_training_samples(monkeypatch):
    """MR/CR/SUBJ/MPQA: fold o's statistics come from fold o's outer training samples only, and the
    features the trainer sees for fold o are normalized with them."""
    rng = np.random.default_rng(0)
    n, k = 120, 3
    y = np.repeat([0, 1], n // 2)
    x = (rng.normal(0, 1, (n, 4)) + y[:, None] * 3 + 10).astype(np.float32)
    from test_classify import context

    ctx = context("CR", {"all": y}, x, build("prototype", kfold=k))
    ctx.normalize = "zscore"
    fitted, real_fit = [], normalize.fit

    def spy(method, table, rows=None, chunk=65536):
        fitted.append((np.unique(rows), real_fit(method, table, rows)))
        return fitted[-1][1]

    monkeypatch.setattr(normalize, "fit", spy)
    result = drive(classify.inner_kfold(ctx))
    samples = classify.prepare(ctx)
    outer = classify.inner_kfold_folds(samples.y("all"), k)
    assert len(fitted) == k
    for (train, test, _), (rows, normalizer) in zip(outer, fitted):
        assert set(rows) == set(samples.a_rows[train]) and not set(rows) & set(samples.a_rows[test])
        expected = x[samples.a_rows[train]].astype(np.float64)
        assert np.allclose(normalizer.mean.numpy(), expected.mean(0), atol=1e-5)
        assert np.allclose(normalizer.scale.numpy(), 1 / expected.std(0), rtol=1e-5)
    used = list(fitted)
    features = normalize.fold_features(ctx, "zscore", samples.a_rows, None, [t for t, _, _ in outer])
    for o, (_, normalizer) in enumerate(used):
        idx = torch.arange(n) + o * n
        assert torch.allclose(features(idx), normalizer(ctx.table[torch.as_tensor(samples.a_rows)]))
    assert result["acc"] > 90


def sts16_with_stsb(tmp_path, data_dir, name="v.h5"):
    return task_file(tmp_path / name, data_dir, ["STS16", "STSBenchmark"], dim=6)


def test_sts_statistics_come_from_stsb_train_and_are_reported_beside_raw(cli, data_dir, tmp_path):
    vectors = sts16_with_stsb(tmp_path, data_dir)
    out = tmp_path / "r.json"
    result = cli(
        "score", vectors, "--data", data_dir, "--tasks", "STS16", "--out", out, "--normalize", "zscore", *OPTIONS
    )
    assert result.exit_code == 0, result.stderr
    assert "zscore cosine Spearman x100 pooled | mean | wmean" in result.stdout
    r = json.loads(out.read_text())["tasks"]["STS16"]
    assert r["normalize"]["statistics"].startswith("STSBenchmark's train split")
    assert set(r["results"]["normalized"]) >= {"method", "statistics", "all", "headlines"}
    # by hand: z-score with STS-B train's distinct sentences, then cosine and the pooled Spearman
    stsb = TASKS["STSBenchmark"].load(data_dir)
    stsb_texts = export.task_sentences(stsb)
    train = sorted({stsb_texts.index(s) for s in set(stsb.splits["train"].sentences())})
    with h5py.File(vectors) as f:
        stsb_table, table = f["STSBenchmark"][()].astype(np.float64), f["STS16"][()].astype(np.float64)
    mean, std = stsb_table[train].mean(0), stsb_table[train].std(0)
    z = (table - mean) / std
    texts = export.task_sentences(TASKS["STS16"].load(data_dir))
    row = {s: i for i, s in enumerate(texts)}
    system, gold = [], []
    for split in TASKS["STS16"].load(data_dir).splits.values():
        for a, b, g in zip(split.a, split.b, split.y):
            u, v = z[row[a]], z[row[b]]
            system.append(u @ v / np.linalg.norm(u) / np.linalg.norm(v))
            gold.append(g)
    assert r["results"]["normalized"]["all"]["spearman"]["pooled"] == pytest.approx(
        spearmanr(system, gold)[0], abs=1e-5
    )
    # raw figures are untouched by the option
    raw = tmp_path / "raw.json"
    assert cli("score", vectors, "--data", data_dir, "--tasks", "STS16", "--out", raw, *OPTIONS).exit_code == 0
    raw_results = json.loads(raw.read_text())["tasks"]["STS16"]["results"]
    assert {k: v for k, v in r["results"].items() if k != "normalized"} == raw_results


def test_sts_subsets_do_not_share_statistics(cli, data_dir, tmp_path):
    """Changing one STS16 subset's vectors leaves the normalized figures of the others unchanged:
    nothing of STS16 itself (all test data) enters the statistics."""
    vectors = sts16_with_stsb(tmp_path, data_dir)
    data = TASKS["STS16"].load(data_dir)
    texts = export.task_sentences(data)
    others = {s for name, sp in data.splits.items() if name != "headlines" for s in sp.sentences()}
    rows = [i for i, s in enumerate(texts) if s in set(data.splits["headlines"].sentences()) - others]
    with h5py.File(vectors) as f:
        datasets = {name: (f[name][()], {"sha256": f[name].attrs["sha256"]}) for name in f}
    datasets["STS16"][0][rows] = datasets["STS16"][0][rows] * 100 + 7
    changed = write_h5(tmp_path / "changed.h5", datasets)
    outs = []
    for vectors_file in (vectors, changed):
        out = tmp_path / f"{vectors_file.stem}.json"
        assert (
            cli(
                "score",
                vectors_file,
                "--data",
                data_dir,
                "--tasks",
                "STS16",
                "--out",
                out,
                "--normalize",
                "zscore",
                *OPTIONS,
            ).exit_code
            == 0
        )
        outs.append(json.loads(out.read_text())["tasks"]["STS16"]["results"]["normalized"])
    for subset in ("answer-answer", "plagiarism", "postediting", "question-question"):
        assert outs[0][subset] == outs[1][subset]
    assert outs[0]["headlines"] != outs[1]["headlines"]


def test_sts_normalization_needs_stsb_vectors(cli, data_dir, tmp_path):
    vectors = task_file(tmp_path / "v.h5", data_dir, ["STS16"], dim=6)
    out = tmp_path / "r.json"
    refused(
        cli("score", vectors, "--data", data_dir, "--tasks", "STS16", "--out", out, "--normalize", "zscore"),
        vectors,
        "STS16",
        "STSBenchmark's train split",
        "--normalize none or l2",
    )
    assert not out.exists()
    result = cli("score", vectors, "--data", data_dir, "--tasks", "STS16", "--out", out, "--normalize", "l2", *OPTIONS)
    assert result.exit_code == 0, result.stderr
    r = json.loads(out.read_text())["tasks"]["STS16"]["results"]
    assert r["normalized"]["all"]["spearman"]["pooled"] == pytest.approx(r["all"]["spearman"]["pooled"], abs=1e-9)


def test_tune_keeps_the_best_dev_figure_and_equals_a_run_with_that_method(cli, data_dir, tmp_path):
    vectors = task_file(tmp_path / "v.h5", data_dir, ["SICKEntailment", "STS16", "STSBenchmark"], dim=6)
    out = tmp_path / "tune.json"
    result = cli(
        "score",
        vectors,
        "--data",
        data_dir,
        "--tasks",
        "SICKEntailment,STS16",
        "--out",
        out,
        "--normalize",
        "tune",
        *OPTIONS,
    )
    assert result.exit_code == 0, result.stderr
    record = json.loads(out.read_text())
    sick = record["tasks"]["SICKEntailment"]
    dev = sick["normalize"]["dev"]
    assert list(dev) == list(normalize.METHODS) and sick["normalize"]["requested"] == "tune"
    best = max(dev.values())
    assert sick["normalize"]["method"] == next(m for m in normalize.METHODS if dev[m] == best)
    assert sick["results"]["devacc"] == best
    again = tmp_path / "fixed.json"
    assert (
        cli(
            "score",
            vectors,
            "--data",
            data_dir,
            "--tasks",
            "SICKEntailment",
            "--out",
            again,
            "--normalize",
            sick["normalize"]["method"],
            *OPTIONS,
        ).exit_code
        == 0
    )
    assert json.loads(again.read_text())["tasks"]["SICKEntailment"]["results"] == sick["results"]
    sts = record["tasks"]["STS16"]["normalize"]
    assert sts["tuned_on"] == "STSBenchmark dev cosine Spearman" and list(sts["dev"]) == list(normalize.METHODS)
    assert sts["dev"]["none"] == pytest.approx(sts["dev"]["l2"]) and sts["method"] != "l2"
    assert "normalization" in result.stdout and "(tuned on dev)" in result.stdout


def test_normalize_option_is_validated(cli, data_dir, tmp_path):
    vectors = task_file(tmp_path / "v.h5", data_dir, ["STS16"], dim=6)
    result = cli("score", vectors, "--data", data_dir, "--normalize", "minmax")
    assert result.exit_code == 2 and "minmax" in result.stderr
    with pytest.raises(Exception, match="--bootstrap"):
        build(bootstrap=5)
