"""Alignment, uniformity and the singular-value spectrum: formulas on hand-made vectors, and the
STS-B diagnostics of a scored run against a direct computation."""

import json

import h5py
import numpy as np
import pytest
import torch
from reliability_helpers import task_file

from embeval.evaluate import geometry
from embeval.formats import sentences as export
from embeval.tasks.registry import TASKS


def test_alignment_of_known_pairs():
    u = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0]])
    assert geometry.alignment(u, u * 5) == pytest.approx(0.0)
    assert geometry.alignment(u, -u) == pytest.approx(4.0)
    assert geometry.alignment(u[:1], torch.tensor([[0.0, 7.0]])) == pytest.approx(2.0)


def test_uniformity_against_brute_force():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 5))
    z = x / np.linalg.norm(x, axis=1, keepdims=True)
    values = [np.exp(-2 * np.sum((z[i] - z[j]) ** 2)) for i in range(40) for j in range(i + 1, 40)]
    value, sampled = geometry.uniformity(torch.from_numpy(x).float(), sample=2000)
    assert sampled == 40 and value == pytest.approx(np.log(np.mean(values)), abs=1e-5)
    same = torch.ones((10, 3))
    assert geometry.uniformity(same)[0] == pytest.approx(0.0, abs=1e-12)
    a, _ = geometry.uniformity(torch.from_numpy(x).float(), sample=10, seed=3)
    b, _ = geometry.uniformity(torch.from_numpy(x).float(), sample=10, seed=3)
    assert a == b


def test_spectrum_and_effective_rank():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(30, 4)) * [5, 2, 1, 0.5]
    expected = np.linalg.svd(x - x.mean(0), compute_uv=False)
    assert np.allclose(geometry.spectrum(torch.from_numpy(x)), expected)
    assert geometry.effective_rank([2, 2, 2, 2]) == pytest.approx(4.0)
    assert geometry.effective_rank([3, 0, 0]) == pytest.approx(1.0)


def test_stsb_geometry_in_the_results(cli, data_dir, tmp_path):
    vectors = task_file(tmp_path / "v.h5", data_dir, ["STSBenchmark"], dim=5)
    out = tmp_path / "r.json"
    result = cli("score", vectors, "--data", data_dir, "--tasks", "STSBenchmark", "--out", out, "--bootstrap", "0")
    assert result.exit_code == 0, result.stderr
    geo = json.loads(out.read_text())["tasks"]["STSBenchmark"]["geometry"]
    data = TASKS["STSBenchmark"].load(data_dir)
    texts = export.task_sentences(data)
    row = {s: i for i, s in enumerate(texts)}
    with h5py.File(vectors) as f:
        table = f["STSBenchmark"][()].astype(np.float64)
    z = table / np.linalg.norm(table, axis=1, keepdims=True)
    distances = [
        np.sum((z[row[a]] - z[row[b]]) ** 2)
        for split in data.splits.values()
        for a, b, g in zip(split.a, split.b, split.y)
        if g >= 4
    ]
    assert geo["positive_pairs"] == len(distances) > 1000
    assert geo["alignment"] == pytest.approx(np.mean(distances), rel=1e-6)
    assert geo["uniformity_sample"] == 2000 and geo["sentences"] == len(texts) and geo["dim"] == 5
    assert len(geo["singular_values"]) == 5 and geo["singular_values"] == sorted(geo["singular_values"], reverse=True)
    assert "alignment | uniformity" in result.stdout
