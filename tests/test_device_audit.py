"""The device audit: it catches what would break or stall a GPU run, and every evaluator and solver
passes it on tiny data with its budget of host synchronizations and host-to-device copies."""

import inspect

import numpy as np
import pytest
import torch

from embeval.audit import DeviceAudit
from embeval.evaluate import classify, geometry, probing, relatedness, sts
from embeval.evaluate import ranking as retrieval
from embeval.evaluate.classify import drive
from embeval.evaluate.context import Context
from embeval.run.config import build
from embeval.tasks.registry import TASKS
from embeval.tasks.samples import Split, TaskData
from embeval.train import batched, lbfgs
from embeval.train.optimizers import BatchedOptimizer

DEVICE = torch.device("cpu")
HERE = "tests/test_device_audit.py"


def _line():
    """The place of the statement after the caller's (the statement the audit should name)."""
    return f"{HERE}:{inspect.currentframe().f_back.f_lineno + 1}"


def test_audit_catches_four_injected_bugs():
    """A host tensor in device math, .numpy() of a device tensor, an .item() per step and a copy
    to the device per step: each is reported at its own line, as often as it ran."""
    steps = 5
    with DeviceAudit(DEVICE) as audit:
        weights = torch.zeros(3, device=DEVICE)
        host = torch.ones(3)
        mixed = _line()
        weights + host  # noqa: E702
        numpy = _line()
        weights.numpy()  # noqa: E702
        for _ in range(steps):
            weights.add_(1.0)
            item = _line()
            weights.sum().item()  # noqa: E702
            copy = _line()
            weights.add_(torch.as_tensor(np.ones(3, dtype=np.float32), device=DEVICE))  # noqa: E702
    assert audit.counts["cross_device"] == {f"{mixed} add": 1}
    assert audit.counts["numpy_of_device"] == {numpy: 1}
    assert audit.counts["sync"] == {item: steps}
    assert audit.counts["copy_to_device"] == {copy: steps}


def test_audit_passes_device_resident_code_and_sees_the_other_syncs():
    """Code that keeps its work on the device shows nothing but its one copy back; data-dependent
    shapes, bool() and .tolist() of device tensors and host indices are seen."""
    with DeviceAudit(DEVICE) as audit:
        x = torch.arange(6.0, device=DEVICE)
        y = torch.where(x > 2, x * 2, x).sum(dim=0, keepdim=True)
        out = _line()
        y.cpu().numpy()  # noqa: E702
    assert audit.counts["sync"] == {out: 1} and audit.total("copy_to_device") == 0
    assert audit.total("cross_device") == 0 and audit.total("numpy_of_device") == 0
    with DeviceAudit(DEVICE) as audit:
        x = torch.arange(6.0, device=DEVICE)
        mask = _line()
        x[x > 2]  # noqa: E702
        nonzero = _line()
        (x > 2).nonzero()  # noqa: E702
        truth = _line()
        bool((x > 2).any())  # noqa: E702
        listed = _line()
        x.tolist()  # noqa: E702
        indexed = _line()
        x[np.array([0, 1])]  # noqa: E702
        moved = _line()
        torch.ones(2).to(DEVICE)  # noqa: E702
    assert audit.counts["sync"] == {mask: 1, nonzero: 1, truth: 1, listed: 1}
    assert audit.counts["copy_to_device"] == {indexed: 1, moved: 1}


def test_audit_tracks_module_moves_and_autograd():
    """nn.Module.to(device) moves parameters; their gradients and torch.optim's state follow them."""
    with DeviceAudit(DEVICE) as audit:
        model = torch.nn.Linear(4, 2).to(DEVICE)
        optimizer = torch.optim.Adam(model.parameters())
        x = torch.ones(3, 4, device=DEVICE)
        for _ in range(3):
            optimizer.zero_grad()
            model(x).pow(2).sum().backward()
            optimizer.step()
    assert audit.total("cross_device") == 0 and audit.total("sync") == 0
    assert audit.total("copy_to_device") == 2  # the weight and the bias, once


class Counts:
    """How many times functions ran while the audit watched (steps and early-stopping rounds)."""

    def __init__(self, monkeypatch):
        self.calls = {}
        self.monkeypatch = monkeypatch

    def watch(self, owner, name, label):
        original = getattr(owner, name)
        self.calls[label] = 0

        def counted(*args, **kwargs):
            self.calls[label] += 1
            return original(*args, **kwargs)

        self.monkeypatch.setattr(owner, name, counted)

    def __getitem__(self, label):
        return self.calls[label]


def _audit(run):
    with DeviceAudit(DEVICE) as audit:
        result = run()
    report = audit.report()
    assert audit.total("cross_device") == 0, report["cross_device"]
    assert audit.total("numpy_of_device") == 0, report["numpy_of_device"]
    return audit, result


def _context(task, splits, dim=6, config=None, seed=0, separation=2.0):
    """A Context of a classification task with random vectors: {split: labels}; each sample its own
    sentence (pair tasks: two). The table is made on the device inside the audit."""
    rng = np.random.default_rng(seed)
    pair = TASKS[task].params.features != "single"
    data_splits, rows, vectors, start = {}, {}, [], 0
    for name, labels in splits.items():
        labels = np.asarray(labels)
        n = len(labels)
        a = [f"{name} a{i}" + " x" * (i % 3) for i in range(n)]
        b = [f"{name} b{i}" for i in range(n)] if pair else None
        data_splits[name] = Split(name, a, labels, b=b)
        centre = np.eye(dim)[labels % dim] * separation
        vectors.append(centre + rng.normal(size=(n, dim)))
        ia = np.arange(start, start + n)
        if pair:
            vectors.append(rng.normal(size=(n, dim)) * 0.1 + centre)
            rows[name] = (ia, np.arange(start + n, start + 2 * n))
            start += 2 * n
        else:
            rows[name] = (ia, None)
            start += n
    classes = sorted({int(y) for labels in splits.values() for y in labels})
    table = torch.as_tensor(np.concatenate(vectors).astype(np.float32), device=DEVICE)
    config = config or build()
    return Context(
        TASKS[task], TaskData(task, data_splits, [str(c) for c in classes]), table, rows, DEVICE, config, config.seed
    )


SMALL = {"tenacity": 2, "epoch_size": 2, "max_epoch": 8, "batch_size": 16}
ROUND_SYNCS = 3  # per early-stopping round of the batched trainer: its dev accuracy, at most twice more
CALL_SYNCS = 12  # per call of a solver: its initial weights and early-stopping sets in, its results out
SETUP_SYNCS = 20  # per task: labels and predictions to and from the host, once per fold or stage


def _labels(n, classes, seed):
    return np.random.default_rng(seed).integers(0, classes, n)


def _within_trainer_budget(audit, counts):
    """Zero syncs per trainer step: a constant number per round (steps far outnumber rounds)."""
    rounds, steps, calls = counts["rounds"], counts["steps"], counts["calls"]
    assert rounds > 0 and steps >= 4 * rounds
    budget = ROUND_SYNCS * rounds + CALL_SYNCS * calls + SETUP_SYNCS
    assert audit.total("sync") <= budget, audit.report()["sync"]
    assert audit.total("copy_to_device") <= budget, audit.report()["copy_to_device"]


def _watch_trainer(monkeypatch):
    counts = Counts(monkeypatch)
    counts.watch(BatchedOptimizer, "step", "steps")
    counts.watch(batched, "_accuracy", "rounds")
    counts.watch(batched, "train", "calls")
    return counts


@pytest.mark.parametrize(
    "task,protocol",
    [("SST5", "split"), ("TREC", "kfold"), ("MRPC", "kfold"), ("SICKEntailment", "split"), ("SNLI", "split")],
)
def test_batched_trainer_protocols_pass_the_audit(monkeypatch, task, protocol):
    """The SentEval solver on single, pair and SNLI features: no per-step sync or copy."""
    counts = _watch_trainer(monkeypatch)
    config = build(kfold=3, classifier=SMALL)
    if protocol == "split":
        splits = {"train": _labels(96, 3, 1), "dev": _labels(24, 3, 2), "test": _labels(24, 3, 3)}
    else:
        splits = {"train": _labels(96, 2, 1), "test": _labels(24, 2, 3)}
    audit, result = _audit(lambda: drive(getattr(classify, protocol)(_context(task, splits, config=config))))
    assert 0 <= result["acc"] <= 100
    _within_trainer_budget(audit, counts)


@pytest.mark.parametrize("method", ["none", "l2", "zscore", "zscore+l2"])
def test_inner_kfold_under_every_normalization_passes_the_audit(monkeypatch, method):
    counts = _watch_trainer(monkeypatch)
    config = build(kfold=3, classifier=SMALL, normalize=method)

    def run():
        ctx = _context("CR", {"all": _labels(90, 2, 4)}, config=config)
        ctx.normalize = method
        return drive(classify.inner_kfold(ctx))

    audit, result = _audit(run)
    assert len(result["fold_acc"]) == 3
    _within_trainer_budget(audit, counts)


def test_mlp_with_dropout_passes_the_audit(monkeypatch):
    counts = _watch_trainer(monkeypatch)
    config = build(classifier=dict(SMALL, nhid=8, dropout=0.2))
    splits = {"train": _labels(96, 3, 1), "dev": _labels(24, 3, 2), "test": _labels(24, 3, 3)}
    audit, _ = _audit(lambda: drive(classify.split(_context("SST5", splits, config=config))))
    _within_trainer_budget(audit, counts)


def test_probing_mlp_grid_passes_the_audit(monkeypatch):
    counts = _watch_trainer(monkeypatch)
    config = build(classifier=dict(SMALL, max_epoch=4), probing_classifier="mlp")
    splits = {"train": _labels(80, 2, 1), "dev": _labels(20, 2, 2), "test": _labels(20, 2, 3)}
    audit, result = _audit(lambda: drive(probing.evaluate_probing(_context("Length", splits, config=config))))
    assert result["classifier"] == "mlp"
    _within_trainer_budget(audit, counts)


@pytest.mark.parametrize("task,protocol", [("SST5", "split"), ("MRPC", "kfold")])
def test_lbfgs_passes_the_audit_with_two_syncs_per_iteration(monkeypatch, task, protocol):
    """L-BFGS keeps its masks and convergence tests on the device: at most 2 syncs per iteration."""
    counts = Counts(monkeypatch)
    counts.watch(lbfgs, "_two_loop", "iterations")
    counts.watch(lbfgs, "minimize", "calls")
    config = build(kfold=3, solver="lbfgs")
    if protocol == "split":
        splits = {"train": _labels(96, 3, 1), "dev": _labels(24, 3, 2), "test": _labels(24, 3, 3)}
    else:
        splits = {"train": _labels(96, 2, 1), "test": _labels(24, 2, 3)}
    audit, _ = _audit(lambda: drive(getattr(classify, protocol)(_context(task, splits, config=config, separation=1.0))))
    iterations = counts["iterations"]
    assert iterations >= 10
    solver_syncs = audit.total("sync", "embeval/train/lbfgs.py")
    assert solver_syncs <= 2 * iterations + CALL_SYNCS * counts["calls"], audit.report()["sync"]
    assert audit.total("sync") - solver_syncs <= SETUP_SYNCS
    assert audit.total("copy_to_device") <= SETUP_SYNCS, audit.report()["copy_to_device"]


def _relatedness_context(n=(120, 40, 40), dim=5, seed=0):
    rng = np.random.default_rng(seed)
    splits, tables, rows, offset = {}, [], {}, 0
    for name, size in zip(relatedness.SPLITS, n):
        a = rng.normal(size=(size, dim))
        b = a + rng.normal(size=(size, dim))
        y = np.clip(5 - np.linalg.norm(a - b, axis=1), 0, 5)
        splits[name] = Split(name, [f"{name}a{i}" for i in range(size)], y, b=[f"{name}b{i}" for i in range(size)])
        tables += [a, b]
        rows[name] = (np.arange(offset, offset + size), np.arange(offset + size, offset + 2 * size))
        offset += 2 * size
    table = torch.as_tensor(np.concatenate(tables).astype(np.float32), device=DEVICE)
    data = TaskData("STSBenchmark", splits, None, [f"{s}.file" for s in splits])
    return Context(TASKS["STSBenchmark"], data, table, rows, DEVICE)


def test_relatedness_regressor_passes_the_audit(monkeypatch):
    """No sync or copy per regressor step; a constant number per round of 50 passes."""
    counts = Counts(monkeypatch)
    counts.watch(relatedness.SoftmaxRegressor, "step", "steps")
    counts.watch(relatedness, "dev_pearson", "rounds")
    audit, result = _audit(lambda: relatedness.evaluate_relatedness(_relatedness_context()))
    assert -1 <= result["pearson"] <= 1
    rounds = counts["rounds"]
    assert counts["steps"] >= 100 * rounds
    assert audit.total("sync") <= 2 * rounds + SETUP_SYNCS, audit.report()["sync"]
    assert audit.total("copy_to_device") <= rounds + SETUP_SYNCS, audit.report()["copy_to_device"]


def _coco_context(images=(60, 10, 10), dim=6, feat_dim=8, seed=0):
    rng = np.random.default_rng(seed)
    splits, tables, rows, offset = {}, [], {}, 0
    mix = rng.normal(size=(feat_dim, dim))
    for name, m in zip(retrieval.SPLITS, images):
        features = rng.normal(size=(m, feat_dim)).astype(np.float32)
        captions = np.repeat(features @ mix, 5, axis=0) + rng.normal(size=(5 * m, dim))
        splits[name] = Split(name, [f"{name} {i}" for i in range(5 * m)], np.repeat(np.arange(m), 5), images=features)
        tables.append(captions)
        rows[name] = (np.arange(offset, offset + 5 * m), None)
        offset += 5 * m
    table = torch.as_tensor(np.concatenate(tables).astype(np.float32), device=DEVICE)
    task = TASKS["ImageCaptionRetrieval"]
    return Context(task, TaskData(task.name, splits, None, []), table, rows, DEVICE)


def test_coco_ranker_passes_the_audit(monkeypatch):
    """No sync or copy per ranker step; per epoch one copy of its batches and one of the dev ranks, and
    per fold of an evaluation four syncs of SentEval's tie rule (the distinct images and captions, and
    whether any relevant item ties, for each direction): a constant number per early-stopping round."""
    counts = Counts(monkeypatch)
    counts.watch(retrieval, "train_step", "steps")
    counts.watch(retrieval, "evaluate_split", "rounds")
    audit, result = _audit(lambda: retrieval.evaluate_ranking(_coco_context()))
    assert result["ntest"] == 50
    rounds = counts["rounds"]
    assert counts["steps"] >= 2 * rounds
    assert audit.total("sync") <= (4 * retrieval.NFOLDS + 1) * rounds + 10, audit.report()["sync"]
    assert audit.total("copy_to_device") <= rounds + 20, audit.report()["copy_to_device"]


def test_cosine_sts_and_geometry_pass_the_audit():
    rng = np.random.default_rng(0)

    def diagnostics():
        ctx = _relatedness_context()
        return geometry.diagnostics(ctx.table, ctx.data, ctx.rows, 1111)

    audit, result = _audit(diagnostics)
    assert result["positive_pairs"] > 0
    assert audit.total("sync") <= 4 and audit.total("copy_to_device") <= 16  # once per task
    n = 30
    splits = {
        s: Split(s, [f"{s}a{i}" for i in range(n)], rng.uniform(0, 5, n), b=[f"{s}b{i}" for i in range(n)])
        for s in ("MSRpar", "SMTeuroparl")
    }
    rows = {
        s: (np.arange(2 * n * k, 2 * n * k + n), np.arange(2 * n * k + n, 2 * n * (k + 1)))
        for k, s in enumerate(splits)
    }

    def run():
        table = torch.as_tensor(rng.normal(size=(4 * n, 5)).astype(np.float32), device=DEVICE)
        return sts.evaluate_cosine_sts(Context(TASKS["STS12"], TaskData("STS12", splits), table, rows, DEVICE))

    audit, result = _audit(run)
    assert set(result) >= {"MSRpar", "SMTeuroparl", "all"}
    assert audit.total("sync") <= len(splits) and audit.total("copy_to_device") == 1


def test_runs_leave_the_global_random_state_alone(monkeypatch):
    """The MLP with dropout, the regressor and the ranker seed only local generators: the global
    CPU, numpy and Python states are unchanged, and nothing seeds CUDA's global generators (which
    torch.manual_seed would do even before CUDA is initialised)."""
    import random

    torch.manual_seed(7)
    np.random.seed(7)
    random.seed(7)
    seeded_cuda = []
    for name in ("manual_seed", "manual_seed_all", "seed", "seed_all", "set_rng_state", "set_rng_state_all"):
        monkeypatch.setattr(torch.cuda, name, lambda *args, name=name: seeded_cuda.append(name))
    before = (torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())
    config = build(classifier=dict(SMALL, nhid=8, dropout=0.2))
    splits = {"train": _labels(96, 3, 1), "dev": _labels(24, 3, 2), "test": _labels(24, 3, 3)}
    drive(classify.split(_context("SST5", splits, config=config)))
    relatedness.evaluate_relatedness(_relatedness_context(n=(64, 20, 20)))
    retrieval.evaluate_ranking(_coco_context(images=(30, 10, 10)))
    assert torch.equal(torch.get_rng_state(), before[0])
    assert np.array_equal(np.random.get_state()[1], before[1]) and random.getstate() == before[2]
    assert seeded_cuda == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_runs_leave_cudas_random_state_alone():
    torch.cuda.manual_seed_all(7)
    before = torch.cuda.get_rng_state_all()
    config = build(classifier=dict(SMALL, nhid=8, dropout=0.2))
    splits = {"train": _labels(96, 3, 1), "dev": _labels(24, 3, 2), "test": _labels(24, 3, 3)}
    ctx = _context("SST5", splits, config=config)
    ctx = Context(ctx.task, ctx.data, ctx.table.cuda(), ctx.rows, torch.device("cuda"), ctx.config, ctx.seed)
    drive(classify.split(ctx))
    assert all(torch.equal(a, b) for a, b in zip(torch.cuda.get_rng_state_all(), before))
