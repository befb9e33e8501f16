"""Classification engine: parity with SentEval, known answers, folds, solvers and backends."""
import json

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

from embeval.evaluate import classify
from embeval.evaluate.context import Context
from embeval.run.config import build
from embeval.run.score import score
from embeval.tasks.registry import TASKS
from embeval.tasks.samples import Split, TaskData, senteval_order
from embeval.train import batched, lbfgs
from embeval.train.features import DenseFeatures
from embeval.train.optimizers import BatchedOptimizer

CLASSIFICATION = ["CR", "SST2", "SST5", "TREC", "MRPC", "SICKEntailment"]


def quiet(message):
    pass


@pytest.fixture(scope="module")
def lbfgs_results(devbow_vectors, data_dir):
    _, vectors = devbow_vectors
    return score(vectors, data_dir, tasks=CLASSIFICATION, config=build(solver="lbfgs"), progress=False, log=quiet)


def test_lbfgs_parity_with_converged_sklearn(lbfgs_results, reference_dir):
    """--solver lbfgs equals SentEval's scikit-learn path run to convergence, up to a handful of items.

    The reference ran scikit-learn on float32 vectors to its precision limit; float32 rounding can
    flip a prediction that sits on the decision boundary, so each figure may differ by up to 3 of
    the items it counts (devacc averages over ndev items, acc over ntest).
    """
    reference = json.loads((reference_dir / "senteval_devbow_sklearn_converged.json").read_text())["tasks"]
    assert set(reference) == set(CLASSIFICATION)
    for task in CLASSIFICATION:
        ours, ref = lbfgs_results["tasks"][task]["results"], reference[task]["results"]
        assert (ours["ndev"], ours["ntest"]) == (ref["ndev"], ref["ntest"])
        assert abs(ours["devacc"] - ref["devacc"]) <= 3 * 100 / ref["ndev"] + 1e-9, task
        assert abs(ours["acc"] - ref["acc"]) <= 3 * 100 / ref["ntest"] + 1e-9, task
        if "f1" in ref:
            assert abs(ours["f1"] - ref["f1"]) <= 0.3, task


def test_senteval_solver_parity_with_pytorch_path(devbow_vectors, data_dir, reference_dir):
    """--solver senteval against SentEval's PyTorch path on the same vectors.

    It is a stochastic protocol; embeval draws the same numpy streams and initial weights as
    SentEval, so the numbers agree closely, but summation order in batched matrix products can
    move a result. SentEval itself spreads by up to 0.9 points across seeds on these tasks
    (reference README), which justifies a tolerance of one point.
    """
    _, vectors = devbow_vectors
    reference = json.loads((reference_dir / "senteval_devbow_pytorch.json").read_text())["tasks"]
    record = score(vectors, data_dir, tasks=list(reference), progress=False, log=quiet)
    for task, ref in reference.items():
        ours = record["tasks"][task]["results"]
        for key in ("devacc", "acc", "f1"):
            if key in ref["results"]:
                assert abs(ours[key] - ref["results"][key]) <= 1.0, (task, key, ours[key], ref["results"][key])


def context(task, splits, vectors, config, classes=None, device="cpu"):
    """A Context for synthetic data: `splits` maps split name -> (labels); row i of vectors is sample i."""
    data_splits, rows, start = {}, {}, 0
    for name, labels in splits.items():
        n = len(labels)
        texts = [f"s{start + i}" + " x" * (i % 3) for i in range(n)]
        pair = TASKS[task].features != "single"
        data_splits[name] = Split(name, texts, np.asarray(labels), b=list(texts) if pair else None)
        idx = np.arange(start, start + n)
        rows[name] = (idx, idx if pair else None)
        start += n
    data = TaskData(task, data_splits, classes)
    table = torch.as_tensor(np.asarray(vectors, dtype=np.float32), device=device)
    return Context(TASKS[task], data, table, rows, torch.device(device), config, config["seed"])


def separable(labels, nclasses, dim=6, seed=0):
    """Vectors whose class is the index of their largest coordinate, by a wide margin."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-0.2, 0.2, (len(labels), dim))
    x[np.arange(len(labels)), np.asarray(labels)] += 3.0
    return x


@pytest.mark.parametrize("solver", ["senteval", "lbfgs"])
def test_perfectly_separable_data_gives_100(solver):
    """Every protocol reaches 100% on separable classes. (With Adam's default step, a few hundred
    updates cannot undo an unlucky initialisation before early stopping on 5% of 400 samples
    ends training, so the stochastic solver uses a larger step here.)"""
    rng = np.random.default_rng(1)
    classifier = {"optim": "adam,lr=0.02"} if solver == "senteval" else None
    config = build(solver=solver, kfold=3, classifier=classifier)
    y = rng.integers(0, 2, 600)
    result = classify.inner_kfold(context("CR", {"all": y}, separable(y, 2), config))
    assert result["acc"] == 100.0 and result["devacc"] == 100.0
    y_train, y_test = rng.integers(0, 6, 600), rng.integers(0, 6, 60)
    x = separable(np.concatenate([y_train, y_test]), 6)
    result = classify.kfold(context("TREC", {"train": y_train, "test": y_test}, x, config))
    assert result["acc"] == 100.0 and result["devacc"] == 100.0
    splits = {"train": rng.integers(0, 2, 600), "dev": rng.integers(0, 2, 40), "test": rng.integers(0, 2, 40)}
    x = separable(np.concatenate(list(splits.values())), 2)
    result = classify.split(context("SST2", splits, x, config))
    assert result["acc"] == 100.0 and result["devacc"] == 100.0


def test_folds_equal_an_independent_construction(data_dir):
    """Folds are StratifiedKFold over SentEval's stable sort, rebuilt here from the raw files."""
    cr = TASKS["CR"].load(data_dir).splits["all"]
    independent = sorted(range(len(cr)), key=lambda i: (len(cr.a[i].split()), int(cr.y[i])))
    assert senteval_order(cr, "single").tolist() == independent
    y = cr.y[independent]
    ours = classify.inner_kfold_folds(y, 10)
    theirs = list(StratifiedKFold(10, shuffle=True, random_state=1111).split(np.zeros(len(y)), y))
    for (train, test, inner), (t_train, t_test) in zip(ours, theirs):
        assert np.array_equal(train, t_train) and np.array_equal(test, t_test)
        t_inner = StratifiedKFold(10, shuffle=True, random_state=1111).split(np.zeros(len(t_train)), y[t_train])
        for (itrain, ivalid), (j_train, j_valid) in zip(inner, t_inner):
            assert np.array_equal(itrain, t_train[j_train]) and np.array_equal(ivalid, t_train[j_valid])
    mrpc = TASKS["MRPC"].load(data_dir).splits["train"]
    independent = sorted(range(len(mrpc)), key=lambda i: (len(mrpc.a[i].split()), len(mrpc.b[i].split()),
                                                            int(mrpc.y[i])))
    assert senteval_order(mrpc, "pair").tolist() == independent
    y = mrpc.y[independent]
    for seed in (1111, 7):
        ours = classify.kfold_folds(y, 10, seed)
        theirs = StratifiedKFold(10, shuffle=True, random_state=seed).split(np.zeros(len(y)), y)
        for (a, b), (c, d) in zip(ours, theirs):
            assert np.array_equal(a, c) and np.array_equal(b, d)


def _project(devbow_vectors, tmp_path, dim):
    """The devbow vectors file mapped to `dim` dimensions by a fixed random matrix."""
    import h5py

    _, vectors = devbow_vectors
    matrix = np.random.default_rng(5).standard_normal((128, dim)).astype(np.float32) / np.sqrt(dim)
    path = tmp_path / f"devbow{dim}.h5"
    with h5py.File(vectors) as src, h5py.File(path, "w") as dst:
        for name in ("TREC", "MRPC"):
            dst[name] = src[name][:] @ matrix
            dst[name].attrs["sha256"] = src[name].attrs["sha256"]
    return path


def _sklearn_kfold(x_train, y_train, x_test, y_test, kfold, seed):
    """SentEval's k-fold protocol with scikit-learn run to convergence, written out independently."""
    folds = list(StratifiedKFold(kfold, shuffle=True, random_state=seed).split(x_train, y_train))
    grid = [2.0 ** t for t in range(-1, 6)]
    scores = []
    for c in grid:
        accs = [LogisticRegression(C=c, max_iter=10000, tol=1e-6).fit(x_train[a], y_train[a]).score(
            x_train[b], y_train[b]) for a, b in folds]
        scores.append(round(100 * np.mean(accs), 2))
    best = grid[int(np.argmax(scores))]
    final = LogisticRegression(C=best, max_iter=10000, tol=1e-6).fit(x_train, y_train)
    return max(scores), round(100 * final.score(x_test, y_test), 2)


def test_lbfgs_against_sklearn_on_the_same_folds(devbow_vectors, data_dir, tmp_path):
    """Within 0.1 point of scikit-learn (tol 1e-6: 100x its default; max_iter 10000) on TREC and MRPC, 16-d vectors."""
    path = _project(devbow_vectors, tmp_path, 16)
    record = score(path, data_dir, tasks=["TREC", "MRPC"], config=build(solver="lbfgs"), progress=False, log=quiet)
    import h5py

    from embeval.formats.sentences import task_sentences

    with h5py.File(path) as f:
        for task in ("TREC", "MRPC"):
            data = TASKS[task].load(data_dir)
            row = {s: i for i, s in enumerate(task_sentences(data))}
            table = f[task][:].astype(np.float64)
            xs, ys = {}, {}
            for name in ("train", "test"):
                split = data.splits[name]
                order = senteval_order(split, TASKS[task].sort)
                u = table[[row[split.a[i]] for i in order]]
                if split.b is not None:
                    v = table[[row[split.b[i]] for i in order]]
                    u = np.hstack([np.abs(u - v), u * v])
                xs[name], ys[name] = u, split.y[order]
            devacc, acc = _sklearn_kfold(xs["train"], ys["train"], xs["test"], ys["test"], 10, 1111)
            ours = record["tasks"][task]["results"]
            assert abs(ours["devacc"] - devacc) <= 0.1 and abs(ours["acc"] - acc) <= 0.1, (task, ours, devacc, acc)


def _problems(seed=3, n=90, dim=5, nclasses=3):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, nclasses, n)
    x = rng.standard_normal((n, dim)) + 0.8 * np.eye(dim)[y % dim]
    groups = [batched.Group(np.arange(0, 60), np.arange(60, 90)), batched.Group(np.arange(30, 90), None),
              batched.Group(np.arange(0, 59), np.arange(59, 90)), batched.Group(np.arange(0, 40), np.arange(40, 90))]
    return DenseFeatures(torch.tensor(x, dtype=torch.float32)), torch.tensor(y), groups


@pytest.mark.parametrize("classifier", [
    {"nhid": 0, "optim": "adam", "batch_size": 16, "tenacity": 2, "epoch_size": 2},
    {"nhid": 7, "optim": "rmsprop", "batch_size": 8, "tenacity": 1, "epoch_size": 1, "dropout": 0.0},
    {"nhid": 0, "optim": "sgd,lr=0.1,momentum=0.9", "batch_size": 32, "tenacity": 3, "epoch_size": 1},
])
def test_batched_equals_one_problem_at_a_time(classifier):
    config = build(classifier=classifier)["classifier"]
    features, labels, groups = _problems()
    regs = [1e-5, 1e-3, 1e-2]
    together = batched.train(features, labels, 3, groups, regs, config, 1111, torch.device("cpu"))
    for g, group in enumerate(groups):
        for r, reg in enumerate(regs):
            alone = batched.train(features, labels, 3, [group], [reg], config, 1111, torch.device("cpu"))
            assert alone.best_accuracy[0, 0] == together.best_accuracy[g, r]
            assert alone.rounds[0, 0] == together.rounds[g, r]
            idx = np.arange(90)
            assert np.array_equal(alone.predict(features, idx, 0)[:, 0], together.predict(features, idx, g)[:, r])
            for a, b in zip(alone.problem(0, 0), together.problem(g, r)):
                assert torch.allclose(a, b, atol=1e-6)


def _senteval_fit(x, y, x_dev, y_dev, nclasses, reg, seed, epoch_size=2, tenacity=2, batch_size=16, max_epoch=200):
    """SentEval's PyTorchClassifier.fit for logistic regression, written out with torch.optim."""
    np.random.seed(seed)
    torch.manual_seed(seed)
    model = torch.nn.Linear(x.shape[1], nclasses)
    optimizer = torch.optim.Adam(model.parameters(), weight_decay=reg)
    xt, yt = torch.tensor(x, dtype=torch.float32), torch.tensor(y)
    xd, yd = torch.tensor(x_dev, dtype=torch.float32), torch.tensor(y_dev)
    best, count, nepoch, stop, best_state = -1, 0, 0, False, None
    while not stop and nepoch <= max_epoch:
        for _ in range(epoch_size):
            permutation = np.random.permutation(len(xt))
            for i in range(0, len(xt), batch_size):
                idx = torch.as_tensor(permutation[i:i + batch_size])
                loss = torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        nepoch += epoch_size
        with torch.no_grad():
            accuracy = (model(xd).argmax(dim=1) == yd).float().mean().item()
        if accuracy > best:
            best, best_state = accuracy, [p.detach().clone() for p in model.parameters()]
        else:
            if count >= tenacity:
                stop = True
            count += 1
    return best, best_state, nepoch


def test_trainer_follows_senteval_fit_written_out():
    features, labels, groups = _problems(seed=11)
    x, y = features.matrix.numpy(), labels.numpy()
    config = build(classifier={"batch_size": 16, "tenacity": 2, "epoch_size": 2})["classifier"]
    for reg in (1e-5, 1e-2):
        ours = batched.train(features, labels, 3, [groups[0]], [reg], config, 1111, torch.device("cpu"))
        best, state, _ = _senteval_fit(x[:60], y[:60], x[60:], y[60:], 3, reg, 1111)
        assert abs(ours.best_accuracy[0, 0] - best) < 1e-6
        weight, bias = ours.problem(0, 0)
        assert torch.allclose(weight, state[0].t(), atol=1e-5)
        assert torch.allclose(bias, state[1], atol=1e-5)


@pytest.mark.parametrize("name,settings", [
    ("adam", "adam,lr=0.01"), ("rmsprop", "rmsprop"), ("sgd", "sgd,lr=0.1,momentum=0.5"), ("adagrad", "adagrad")])
def test_batched_optimizers_equal_torch_optim(name, settings):
    _compare_with_torch_optim(name, settings)


def _compare_with_torch_optim(name, settings):
    """Masked, unmasked and frozen steps of the batched optimizer against torch.optim's."""
    from embeval.run.config import parse_optim

    _, params = parse_optim(settings)
    rng = np.random.default_rng(0)
    start = torch.tensor(rng.standard_normal((4, 3)), dtype=torch.float32)
    grads = [torch.tensor(rng.standard_normal((4, 3)), dtype=torch.float32) for _ in range(5)]
    reference = torch.nn.Parameter(start.clone())
    torch_opt = {"adam": torch.optim.Adam, "rmsprop": torch.optim.RMSprop, "sgd": torch.optim.SGD,
                 "adagrad": torch.optim.Adagrad}[name]([reference], weight_decay=0.01, **params)
    ours = start.clone()[None, None]
    opt = BatchedOptimizer(name, [ours], torch.full((1, 1), 0.01), params)
    unmasked = start.clone()[None, None]
    opt_unmasked = BatchedOptimizer(name, [unmasked], torch.full((1, 1), 0.01), params)
    frozen = start.clone()[None, None]
    opt_frozen = BatchedOptimizer(name, [frozen], torch.full((1, 1), 0.01), params)
    for g in grads:
        reference.grad = g.clone()
        torch_opt.step()
        opt.step([ours], [g[None, None]], torch.ones((1, 1), dtype=torch.bool))
        opt_unmasked.step([unmasked], [g[None, None].clone()])
        opt_frozen.step([frozen], [g[None, None]], torch.zeros((1, 1), dtype=torch.bool))
        assert torch.allclose(ours[0, 0], reference.detach(), atol=1e-6)
        assert torch.allclose(unmasked[0, 0], reference.detach(), atol=1e-6)
    assert torch.equal(frozen[0, 0], start)


def _sklearn_objective_gradient(x, y, nclasses, w, b, c):
    """Gradient of C * sum(loss) + ||W||^2 / 2 (binomial for 2 classes, else multinomial), numpy float64."""
    z = x @ w + b
    if nclasses == 2:
        residual = 1 / (1 + np.exp(-z[:, 0])) - (y == 1)
        residual = residual[:, None]
    else:
        e = np.exp(z - z.max(axis=1, keepdims=True))
        residual = e / e.sum(axis=1, keepdims=True) - np.eye(nclasses)[y]
    return c * x.T @ residual + w, c * residual.sum(axis=0)


@pytest.mark.parametrize("preconditioner", ["eigendecomposition", "diagonal", "strided gram"])
def test_lbfgs_solution_is_the_optimum_of_sklearns_objective(preconditioner, monkeypatch):
    """The objective's gradient vanishes at the solution (binary and multinomial) and sklearn agrees,
    with either preconditioner (the diagonal one serves features wider than MAX_EIGH_DIM), and
    with X'X estimated on every 25th row (as for pools much larger than the dimension)."""
    if preconditioner == "diagonal":
        monkeypatch.setattr(lbfgs.Preconditioner, "MAX_EIGH_DIM", 2)
    if preconditioner == "strided gram":
        monkeypatch.setattr(lbfgs.Preconditioner, "GRAM_ROWS_PER_FEATURE", 1)
    rng = np.random.default_rng(2)
    for nclasses in (2, 4):
        y = rng.integers(0, nclasses, 200)
        x = (rng.standard_normal((200, 6)) + np.eye(6)[y]).astype(np.float32)
        grid = (0.5, 8.0)
        theta, _, converged = lbfgs.fit(DenseFeatures(torch.tensor(x)), torch.tensor(y), nclasses,
                                        [np.arange(150)], np.array([grid]), torch.device("cpu"))
        assert converged.all()
        x64 = x.astype(np.float64)
        for r, c in enumerate(grid):
            w, b = theta[0, r, :6, :].numpy(), theta[0, r, 6, :].numpy()
            gw, gb = _sklearn_objective_gradient(x64[:150], y[:150], nclasses, w, b, c)
            assert max(np.abs(gw).max(), np.abs(gb).max()) / (c * 150) <= 1e-6
            clf = LogisticRegression(C=c, max_iter=10000, tol=1e-10).fit(x64[:150], y[:150])
            assert np.allclose(w, clf.coef_.T, atol=1e-5)
            pred = lbfgs.predict(theta[0, r:r + 1], torch.tensor(x[150:]))[:, 0].numpy()
            assert np.array_equal(pred, clf.predict(x64[150:]))


@pytest.mark.parametrize("kind", ["single", "pair", "snli"])
def test_features_built_into_the_trainers_buffer_equal_features_by_hand(kind):
    """The trainer builds every step's features into one reused buffer; each features class must
    give, through it, what the definition gives ([|u-v|, u*v]; SNLI [u, v, u*v, |u-v|])."""
    from embeval.evaluate import normalize
    from embeval.train.features import Features

    rng = np.random.default_rng(5)
    table = rng.standard_normal((12, 3)).astype(np.float32)
    a, b = rng.integers(0, 12, 9), rng.integers(0, 12, 9)

    def by_hand(t, rows):
        u, v = t[a[rows]], t[b[rows]]
        return {"single": u, "pair": np.hstack([np.abs(u - v), u * v]),
                "snli": np.hstack([u, v, u * v, np.abs(u - v)])}[kind]

    norm = normalize.fit("zscore", torch.tensor(table), np.arange(6))
    normalized = ((table - norm.mean.numpy()) * norm.scale.numpy()).astype(np.float32)
    pairs = None if kind == "single" else b
    made = [(Features(torch.tensor(table), a, pairs, kind), table, 0),
            (Features(torch.tensor(table), a, pairs, kind).dense(), table, 0),
            (normalize.FoldFeatures(torch.tensor(table), a, pairs, kind, [norm, norm]), normalized, 9),
            (normalize.FoldFeatures(torch.tensor(table), a, pairs, kind, [norm, norm]).dense(), normalized, 9)]
    for features, source, second_view in made:
        buffer = torch.full((8, features.dim), float("nan"))
        for idx in ([[0, 3, 5, 8], [1, 1, 2, 7]], [[4, 6, 0, 2], [8, 8, 3, 1]]):
            idx = torch.tensor(idx) + second_view
            got = features(idx, out=buffer).reshape(-1, features.dim).numpy()
            expected = by_hand(source, idx.reshape(-1).numpy() % 9)
            np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_features_are_materialized_only_within_half_the_free_memory(monkeypatch):
    """Pair features and fold-normalized copies are held as one matrix only when it fits half the
    memory free (and HOST_DENSE_LIMIT_BYTES); otherwise they are built batch by batch."""
    from embeval import memory
    from embeval.evaluate import normalize
    from embeval.train import features as F

    table = torch.randn(50, 4)
    pair = F.Features(table, np.arange(40), np.arange(10, 50), "pair")
    norm = normalize.fit("zscore", table)
    folds = normalize.FoldFeatures(table, np.arange(40), None, "single", [norm, norm])
    assert isinstance(pair.dense(), F.DenseFeatures) and isinstance(folds.dense(), F.DenseFeatures)
    monkeypatch.setattr(memory, "available_memory", lambda: 2 * pair.nbytes() - 2)
    assert pair.dense() is pair and folds.dense() is folds
    monkeypatch.setattr(memory, "available_memory", lambda: None)
    assert isinstance(folds.dense(), F.DenseFeatures)


def test_lbfgs_solves_groups_on_disjoint_samples_apart(monkeypatch):
    """Groups that share no sample (--normalize zscore's per-fold copies of the samples) are solved
    on pools of their own rows, and each problem reaches scikit-learn's optimum on its own rows."""
    chained = [np.arange(0, 5), np.arange(20, 25), np.arange(4, 9), np.arange(8, 12)]
    assert [p.tolist() for p in lbfgs.separate_pools(chained)] == [[0, 2, 3], [1]]
    assert [p.tolist() for p in lbfgs.separate_pools([np.arange(0), np.arange(3)])] == [[0], [1]]
    rng = np.random.default_rng(4)
    n, dim, nclasses = 300, 5, 3
    y = rng.integers(0, nclasses, n)
    x = (rng.standard_normal((n, dim)) + np.eye(nclasses, dim)[y]).astype(np.float32)
    sets = [np.arange(0, 100), np.arange(150, 250), np.arange(50, 150), np.arange(200, 300)]
    C = np.array([[0.5, 4.0]] * len(sets))
    pools = []
    real_init = lbfgs.Objective.__init__

    def spy(self, features, labels, nclasses, train_sets, C, device):
        real_init(self, features, labels, nclasses, train_sets, C, device)
        pools.append(len(self.pool))

    monkeypatch.setattr(lbfgs.Objective, "__init__", spy)
    features, labels, cpu = DenseFeatures(torch.tensor(x)), torch.tensor(y), torch.device("cpu")
    theta, _, converged = lbfgs.fit(features, labels, nclasses, sets, C, cpu)
    assert converged.all() and sorted(pools) == [150, 150]
    for g, rows in enumerate(sets):
        for r, c in enumerate(C[g]):
            clf = LogisticRegression(C=c, max_iter=10000, tol=1e-10).fit(x[rows].astype(np.float64), y[rows])
            # The mean-scaled objective is 1/(C n)-strongly convex, so a gradient within GTOL per entry
            # puts the weights within sqrt(entries) * GTOL * C * n of the optimum.
            bound = np.sqrt((dim + 1) * nclasses) * lbfgs.GTOL_FLOAT64 * c * len(rows)
            assert np.abs(theta[g, r, :dim, :].numpy() - clf.coef_.T).max() <= bound
            b = theta[g, r, dim, :].numpy()  # the softmax's intercepts are defined up to a shared shift
            assert np.abs((b - b.mean()) - (clf.intercept_ - clf.intercept_.mean())).max() <= bound


def test_lbfgs_hands_large_features_from_float32_to_float64(monkeypatch):
    """Features of large magnitude put float32's gradient noise above the tolerance: the float32
    phase must notice it has stopped improving and hand over (not run to max_iter), and the
    float64 phase must still reach the optimum."""
    phases = []
    minimize = lbfgs.minimize

    def spy(objective, theta, problems, dtype, *args, **kwargs):
        out = minimize(objective, theta, problems, dtype, *args, **kwargs)
        phases.append((dtype, int(out[1].max())))
        return out

    monkeypatch.setattr(lbfgs, "minimize", spy)
    rng = np.random.default_rng(0)
    n, dim, nclasses = 600, 32, 3
    x = rng.standard_normal((n, dim)).astype(np.float32)
    y = (x @ rng.standard_normal((dim, nclasses)) / 4 + rng.gumbel(size=(n, nclasses))).argmax(axis=1)
    x *= 30
    grid = (0.25, 32.0)
    theta, _, converged = lbfgs.fit(DenseFeatures(torch.tensor(x)), torch.tensor(y), nclasses, [np.arange(n)],
                                    np.array([grid]), torch.device("cpu"))
    assert converged.all()
    float32_iterations = [it for dtype, it in phases if dtype == torch.float32]
    assert float32_iterations and max(float32_iterations) < lbfgs.MAX_ITER // 2
    for r, c in enumerate(grid):
        w, b = theta[0, r, :dim, :].numpy(), theta[0, r, dim, :].numpy()
        gw, gb = _sklearn_objective_gradient(x.astype(np.float64), y, nclasses, w, b, c)
        assert max(np.abs(gw).max(), np.abs(gb).max()) / (c * n) <= 1e-6


def test_mlp_and_prototype_configurations_run(devbow_vectors, data_dir):
    _, vectors = devbow_vectors
    mlp = build(classifier={"nhid": 20, "dropout": 0.1, "optim": "adam", "tenacity": 2, "epoch_size": 2})
    record = score(vectors, data_dir, tasks=["SST5"], config=mlp, progress=False, log=quiet)
    result = record["tasks"]["SST5"]["results"]
    assert 23 < result["acc"] < 45 and record["config"]["classifier"]["nhid"] == 20
    record = score(vectors, data_dir, tasks=["TREC", "SICKEntailment"], config=build("prototype"), progress=False,
                   log=quiet)
    assert record["config"]["kfold"] == 5 and record["config"]["classifier"]["optim"] == "rmsprop"
    assert 55 < record["tasks"]["TREC"]["results"]["acc"] < 80
    assert 65 < record["tasks"]["SICKEntailment"]["results"]["acc"] < 80


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("solver", ["senteval", "lbfgs"])
def test_cpu_and_cuda_agree(solver):
    rng = np.random.default_rng(4)
    splits = {"train": rng.integers(0, 3, 400), "dev": rng.integers(0, 3, 100), "test": rng.integers(0, 3, 100)}
    y = np.concatenate(list(splits.values()))
    x = rng.standard_normal((len(y), 16)) + 0.7 * np.eye(16)[y]
    config = build(solver=solver)
    cpu = classify.split(context("SST5", splits, x, config, classes=None))
    gpu = classify.split(context("SST5", splits, x, config, classes=None, device="cuda"))
    assert abs(cpu["acc"] - gpu["acc"]) <= 2.0 and abs(cpu["devacc"] - gpu["devacc"]) <= 2.0
    if solver == "lbfgs":
        assert cpu["acc"] == gpu["acc"] and cpu["reg"] == gpu["reg"]


def test_bad_classifier_options_are_one_line_errors(cli, tmp_path):
    for args, fragment in ((["--classifier", "{nope"], "not valid JSON"),
                           (["--classifier", '{"tenacity": "x"}'], "tenacity must be an integer"),
                           (["--classifier", '{"depth": 2}'], "unknown classifier setting depth"),
                           (["--solver", "newton"], "'newton' is not one of"),
                           (["--config", "fast"], "'fast' is not one of"),
                           (["--kfold", "1"], "--kfold: must be an integer >= 2"),
                           (["--solver", "lbfgs", "--classifier", '{"nhid": 10}'], "logistic regression only")):
        result = cli("score", tmp_path / "v.h5", *args)
        assert result.exit_code == 2, (args, result.output)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("embeval: error:") and fragment in lines[0], lines
