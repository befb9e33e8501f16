"""Classification engine: parity with SentEval, known answers, folds, solvers and backends."""

import copy
import json

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

from embeval.evaluate import classify
from embeval.evaluate.classify import drive
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


def differences_from_reference(record, reference):
    """Every (task, key, ours, SentEval's) where a recorded figure is not reproduced exactly."""
    return [
        (task, key, record["tasks"][task]["results"].get(key), value)
        for task, ref in reference.items()
        for key, value in ref["results"].items()
        if record["tasks"][task]["results"].get(key) != value
    ]


def test_senteval_solver_parity_with_pytorch_path(devbow_vectors, data_dir, reference_dir):
    """--solver senteval reproduces SentEval's PyTorch path on the same vectors figure for figure,
    on every task recorded (embeval draws SentEval's numpy streams and initial weights)."""
    _, vectors = devbow_vectors
    reference = json.loads((reference_dir / "senteval_devbow_pytorch.json").read_text())["tasks"]
    record = score(vectors, data_dir, tasks=list(reference), progress=False, log=quiet)
    assert differences_from_reference(record, reference) == []


def test_parity_check_fails_when_one_test_prediction_changes(devbow_vectors, data_dir, reference_dir, monkeypatch):
    """The parity comparison is exact: SICK-E scored with one test item's predicted class changed
    (the first, moved to the next class) no longer matches SentEval's record."""
    _, vectors = devbow_vectors
    reference = json.loads((reference_dir / "senteval_devbow_pytorch.json").read_text())["tasks"]
    reference = {"SICKEntailment": reference["SICKEntailment"]}
    predict = batched.Trained.predict

    def one_changed(self, features, idx, group):
        classes = predict(self, features, idx, group)
        classes[0] = (classes[0] + 1) % 3
        return classes

    monkeypatch.setattr(batched.Trained, "predict", one_changed)
    record = score(vectors, data_dir, tasks=["SICKEntailment"], config=build(bootstrap=0), progress=False, log=quiet)
    [(task, key, ours, theirs)] = differences_from_reference(record, reference)
    assert (task, key) == ("SICKEntailment", "acc") and abs(ours - theirs) == pytest.approx(0.02, abs=1e-9)


def context(task, splits, vectors, config, classes=None, device="cpu"):
    """A Context for synthetic data: `splits` maps split name -> (labels); row i of vectors is sample i."""
    data_splits, rows, start = {}, {}, 0
    for name, labels in splits.items():
        n = len(labels)
        texts = [f"s{start + i}" + " x" * (i % 3) for i in range(n)]
        pair = TASKS[task].params.features != "single"
        data_splits[name] = Split(name, texts, np.asarray(labels), b=list(texts) if pair else None)
        idx = np.arange(start, start + n)
        rows[name] = (idx, idx if pair else None)
        start += n
    data = TaskData(task, data_splits, classes)
    table = torch.as_tensor(np.asarray(vectors, dtype=np.float32), device=device)
    return Context(TASKS[task], data, table, rows, torch.device(device), config, config.seed)


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
    result = drive(classify.inner_kfold(context("CR", {"all": y}, separable(y, 2), config)))
    assert result["acc"] == 100.0 and result["devacc"] == 100.0
    y_train, y_test = rng.integers(0, 6, 600), rng.integers(0, 6, 60)
    x = separable(np.concatenate([y_train, y_test]), 6)
    result = drive(classify.kfold(context("TREC", {"train": y_train, "test": y_test}, x, config)))
    assert result["acc"] == 100.0 and result["devacc"] == 100.0
    splits = {"train": rng.integers(0, 2, 600), "dev": rng.integers(0, 2, 40), "test": rng.integers(0, 2, 40)}
    x = separable(np.concatenate(list(splits.values())), 2)
    result = drive(classify.split(context("SST2", splits, x, config)))
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
    independent = sorted(
        range(len(mrpc)), key=lambda i: (len(mrpc.a[i].split()), len(mrpc.b[i].split()), int(mrpc.y[i]))
    )
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


def _converged(c):
    """scikit-learn's logistic regression run to convergence: Newton's method (newton-cholesky) reaches
    the same optimum as its default lbfgs at tol 1e-6 (measured: the same fold scores for every C on
    TREC and MRPC) in a tenth of the time."""
    return LogisticRegression(C=c, solver="newton-cholesky", max_iter=10000, tol=1e-6)


def _sklearn_kfold(x_train, y_train, x_test, y_test, kfold, seed):
    """SentEval's k-fold protocol with scikit-learn run to convergence, written out independently."""
    folds = list(StratifiedKFold(kfold, shuffle=True, random_state=seed).split(x_train, y_train))
    grid = [2.0**t for t in range(-1, 6)]
    scores = []
    for c in grid:
        accs = [_converged(c).fit(x_train[a], y_train[a]).score(x_train[b], y_train[b]) for a, b in folds]
        scores.append(round(100 * np.mean(accs), 2))
    best = grid[int(np.argmax(scores))]
    final = _converged(best).fit(x_train, y_train)
    return max(scores), round(100 * final.score(x_test, y_test), 2)


def test_lbfgs_against_sklearn_on_the_same_folds(devbow_vectors, data_dir, tmp_path):
    """Within 0.1 point of scikit-learn run to convergence (tol 1e-6; max_iter 10000) on TREC and MRPC, 16-d vectors."""
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
                order = senteval_order(split, TASKS[task].params.sort)
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
    groups = [
        batched.Group(np.arange(0, 60), np.arange(60, 90)),
        batched.Group(np.arange(30, 90), None),
        batched.Group(np.arange(0, 59), np.arange(59, 90)),
        batched.Group(np.arange(0, 40), np.arange(40, 90)),
    ]
    return DenseFeatures(torch.tensor(x, dtype=torch.float32)), torch.tensor(y), groups


@pytest.mark.parametrize(
    "classifier",
    [
        {"nhid": 0, "optim": "adam", "batch_size": 16, "tenacity": 2, "epoch_size": 2},
        {"nhid": 7, "optim": "rmsprop", "batch_size": 8, "tenacity": 1, "epoch_size": 1, "dropout": 0.0},
        {"nhid": 0, "optim": "sgd,lr=0.1,momentum=0.9", "batch_size": 32, "tenacity": 3, "epoch_size": 1},
    ],
)
def test_batched_equals_one_problem_at_a_time(classifier):
    config = build(classifier=classifier).classifier
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


@pytest.fixture
def one_thread():
    """Small problems run faster on one intra-op thread (and far faster on a busy machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class SentEvalClassifier:
    """SentEval's PyTorchClassifier (LogReg / MLP) written out as SentEval writes it: numpy and torch
    seeded on creation, nn.Sequential(Linear, Dropout, Sigmoid, Linear), CrossEntropyLoss, torch.optim
    with the weight decay set on its parameter group, autograd, early stopping on accuracy."""

    OPTIMIZERS = {"adam": torch.optim.Adam, "rmsprop": torch.optim.RMSprop}

    def __init__(self, classifier, inputdim, nclasses, l2reg, seed):
        np.random.seed(seed)
        torch.manual_seed(seed)
        nhid = classifier["nhid"]
        if nhid == 0:
            self.model = torch.nn.Sequential(torch.nn.Linear(inputdim, nclasses))
        else:
            self.model = torch.nn.Sequential(
                torch.nn.Linear(inputdim, nhid),
                torch.nn.Dropout(p=classifier["dropout"]),
                torch.nn.Sigmoid(),
                torch.nn.Linear(nhid, nclasses),
            )
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self.optimizer = self.OPTIMIZERS[classifier["optim"]](self.model.parameters())
        self.optimizer.param_groups[0]["weight_decay"] = l2reg
        self.batch_size, self.tenacity = classifier["batch_size"], classifier["tenacity"]
        self.epoch_size, self.max_epoch = classifier["epoch_size"], classifier["max_epoch"]
        self.rounds = 0

    def fit(self, x, y, validation_data=None, validation_split=None):
        x, y = torch.tensor(x, dtype=torch.float32), torch.tensor(y)
        if validation_data is not None:
            dev_x, dev_y = torch.tensor(validation_data[0], dtype=torch.float32), torch.tensor(validation_data[1])
        else:
            permutation = np.random.permutation(len(x))
            cut = int(validation_split * len(x))
            x, y, dev_x, dev_y = x[permutation[cut:]], y[permutation[cut:]], x[permutation[:cut]], y[permutation[:cut]]
        nepoch, best, stop, count = 0, -1, False, 0
        while not stop and nepoch <= self.max_epoch:
            self.model.train()
            for _ in range(self.epoch_size):
                permutation = np.random.permutation(len(x))
                for i in range(0, len(x), self.batch_size):
                    idx = torch.from_numpy(permutation[i : i + self.batch_size]).long()
                    loss = self.loss_fn(self.model(x[idx]), y[idx])
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
            nepoch += self.epoch_size
            self.rounds += 1
            accuracy = self.score(dev_x, dev_y)
            if accuracy > best:
                best, best_model = accuracy, copy.deepcopy(self.model)
            else:
                if count >= self.tenacity:
                    stop = True
                count += 1
        self.model = best_model
        return best

    def score(self, x, y):
        self.model.eval()
        x, y = torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(y)
        with torch.no_grad():
            return (self.model(x).max(1)[1] == y).sum().item() / len(x)

    def weights(self):
        """[W1 (D, H), b1, W2 (H, C), b2] (W, b for logistic regression), as Trained.problem gives them."""
        linears = [m for m in self.model if isinstance(m, torch.nn.Linear)]
        return [t for layer in linears for t in (layer.weight.detach().t(), layer.bias.detach())]


def _learnable(seed, n, dim=6, nclasses=3):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, nclasses, n)
    x = rng.standard_normal((n, dim)) + 0.6 * np.eye(nclasses, dim)[y] + 0.5 * np.eye(nclasses, dim)[y][:, ::-1]
    return x.astype(np.float32), y


@pytest.mark.parametrize("optim", ["adam", "rmsprop"])
@pytest.mark.parametrize("nhid", [0, 16])
def test_trainer_follows_senteval_step_for_step(optim, nhid, one_thread):
    """Every (weight decay, early-stopping set) problem, trained together, ends with the weights,
    rounds and accuracy of SentEval's classifier run alone: with a given early-stopping set, and
    with SentEval's 5% validation split of the train set."""
    x, y = _learnable(11, 200)
    classifier = build(
        classifier={"nhid": nhid, "optim": optim, "batch_size": 16, "tenacity": 2, "epoch_size": 1, "max_epoch": 40}
    ).classifier
    regs = [1e-5, 1e-2]
    groups = [batched.Group(np.arange(140), np.arange(140, 200)), batched.Group(np.arange(200), None)]
    ours = batched.train(
        DenseFeatures(torch.tensor(x)), torch.tensor(y), 3, groups, regs, classifier, 1111, torch.device("cpu")
    )
    for r, reg in enumerate(regs):
        theirs, best = [SentEvalClassifier(classifier.to_record(), 6, 3, reg, 1111)], []
        best.append(theirs[0].fit(x[:140], y[:140], validation_data=(x[140:], y[140:])))
        theirs.append(SentEvalClassifier(classifier.to_record(), 6, 3, reg, 1111))
        best.append(theirs[1].fit(x, y, validation_split=0.05))
        for g, clf in enumerate(theirs):
            assert ours.best_accuracy[g, r] == best[g] and ours.rounds[g, r] == clf.rounds, (g, reg)
            for a, b in zip(ours.problem(g, r), clf.weights()):
                assert torch.allclose(a, b, rtol=0, atol=1e-6), (g, reg, (a - b).abs().max())  # measured 3.4e-7
            assert np.array_equal(
                ours.predict(DenseFeatures(torch.tensor(x)), np.arange(200), g)[:, r],
                clf.model(torch.tensor(x)).argmax(1).numpy(),
            )
    assert ours.rounds.min() >= 4 and len(set(ours.rounds.ravel().tolist())) > 1


def _senteval_sorted(texts, y):
    """SentEval's sort of a single-sentence task: by token count, then label (stable)."""
    return sorted(range(len(y)), key=lambda i: (len(texts[i].split()), y[i]))


def test_inner_kfold_equals_sentevals_protocol_written_out(one_thread):
    """--solver senteval's inner k-fold (MR, CR, SUBJ, MPQA) against SentEval's InnerKFoldClassifier
    written out with the classifier above: regs, dev scores, fold accuracies, devacc and acc."""
    x, y = _learnable(5, 150, nclasses=2)
    classifier = {"batch_size": 16, "tenacity": 1, "epoch_size": 1, "max_epoch": 12}
    config = build(kfold=3, classifier=classifier)
    ctx = context("CR", {"all": y}, x, config)
    ours = drive(classify.inner_kfold(ctx))
    order = _senteval_sorted(ctx.data.splits["all"].a, y)
    xs, ys = x[order], y[order]
    regs = [10.0**t for t in range(-5, -1)]
    outer = StratifiedKFold(3, shuffle=True, random_state=1111)
    dev_results, test_results, chosen = [], [], []
    for train, test in outer.split(xs, ys):
        scores = []
        for reg in regs:
            inner = StratifiedKFold(3, shuffle=True, random_state=1111)
            accs = []
            for a, b in inner.split(xs[train], ys[train]):
                clf = SentEvalClassifier(config.classifier.to_record(), 6, 2, reg, 1111)
                clf.fit(xs[train][a], ys[train][a], validation_data=(xs[train][b], ys[train][b]))
                accs.append(clf.score(xs[train][b], ys[train][b]))
            scores.append(round(100 * np.mean(accs), 2))
        reg = regs[int(np.argmax(scores))]
        chosen.append(reg)
        dev_results.append(max(scores))
        clf = SentEvalClassifier(config.classifier.to_record(), 6, 2, reg, 1111)
        clf.fit(xs[train], ys[train], validation_split=0.05)
        test_results.append(round(100 * clf.score(xs[test], ys[test]), 2))
    assert ours["reg"] == chosen and ours["fold_acc"] == test_results
    assert ours["devacc"] == round(np.mean(dev_results), 2) and ours["acc"] == round(np.mean(test_results), 2)
    assert len(set(chosen)) > 1 or len(set(test_results)) > 1


def test_kfold_equals_sentevals_protocol_written_out(one_thread):
    """--solver senteval's k-fold (TREC, MRPC): reg by k-fold on train (each fold early-stopping on its
    held-out part), retrained with SentEval's 5% split, tested; against SentEval's KFoldClassifier."""
    x, y = _learnable(8, 180)
    config = build(kfold=3, classifier={"batch_size": 16, "tenacity": 1, "epoch_size": 1, "max_epoch": 12})
    y_train, y_test = y[:150], y[150:]
    ctx = context("TREC", {"train": y_train, "test": y_test}, x, config)
    ours = drive(classify.kfold(ctx))
    order = _senteval_sorted(ctx.data.splits["train"].a, y_train)
    xs, ys = x[:150][order], y_train[order]
    test_order = _senteval_sorted(ctx.data.splits["test"].a, y_test)
    xt, yt = x[150:][test_order], y_test[test_order]
    regs = [10.0**t for t in range(-5, -1)]
    scores = []
    for reg in regs:
        accs = []
        for a, b in StratifiedKFold(3, shuffle=True, random_state=1111).split(xs, ys):
            clf = SentEvalClassifier(config.classifier.to_record(), 6, 6, reg, 1111)  # TREC's 6 classes
            clf.fit(xs[a], ys[a], validation_data=(xs[b], ys[b]))
            accs.append(clf.score(xs[b], ys[b]))
        scores.append(round(100 * np.mean(accs), 2))
    reg = regs[int(np.argmax(scores))]
    clf = SentEvalClassifier(config.classifier.to_record(), 6, 6, reg, 1111)
    clf.fit(xs, ys, validation_split=0.05)
    assert ours["reg"] == reg and ours["devacc"] == max(scores)
    assert list(ours["dev_scores"].values()) == scores
    assert ours["acc"] == round(100 * clf.score(xt, yt), 2)


@pytest.mark.parametrize(
    "name,settings",
    [("adam", "adam,lr=0.01"), ("rmsprop", "rmsprop"), ("sgd", "sgd,lr=0.1,momentum=0.5"), ("adagrad", "adagrad")],
)
def test_batched_optimizers_equal_torch_optim(name, settings):
    _compare_with_torch_optim(name, settings)


def _compare_with_torch_optim(name, settings):
    """Masked, unmasked and frozen steps of the batched optimizer against torch.optim's."""
    from embeval.train.optimizers import parse

    _, params = parse(settings)
    rng = np.random.default_rng(0)
    start = torch.tensor(rng.standard_normal((4, 3)), dtype=torch.float32)
    grads = [torch.tensor(rng.standard_normal((4, 3)), dtype=torch.float32) for _ in range(5)]
    reference = torch.nn.Parameter(start.clone())
    torch_opt = {
        "adam": torch.optim.Adam,
        "rmsprop": torch.optim.RMSprop,
        "sgd": torch.optim.SGD,
        "adagrad": torch.optim.Adagrad,
    }[name]([reference], weight_decay=0.01, **params)
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
        theta, _, converged = lbfgs.fit(
            DenseFeatures(torch.tensor(x)),
            torch.tensor(y),
            nclasses,
            [np.arange(150)],
            np.array([grid]),
            torch.device("cpu"),
        )
        assert converged.all()
        x64 = x.astype(np.float64)
        for r, c in enumerate(grid):
            w, b = theta[0, r, :6, :].numpy(), theta[0, r, 6, :].numpy()
            gw, gb = _sklearn_objective_gradient(x64[:150], y[:150], nclasses, w, b, c)
            assert max(np.abs(gw).max(), np.abs(gb).max()) / (c * 150) <= 1e-6
            clf = LogisticRegression(C=c, max_iter=10000, tol=1e-10).fit(x64[:150], y[:150])
            # Our solver stops at a relative gradient of 1e-6; scikit-learn >= 1.8 goes on to ~3e-9. At C = 8
            # (weak regularization, 4 classes) that leaves coefficients up to 1.2e-5 apart (measured).
            assert np.allclose(w, clf.coef_.T, atol=2e-5)
            pred = lbfgs.predict(theta[0, r : r + 1], torch.tensor(x[150:]))[:, 0].numpy()
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
        return {
            "single": u,
            "pair": np.hstack([np.abs(u - v), u * v]),
            "snli": np.hstack([u, v, u * v, np.abs(u - v)]),
        }[kind]

    norm = normalize.fit("zscore", torch.tensor(table), np.arange(6))
    normalized = ((table - norm.mean.numpy()) * norm.scale.numpy()).astype(np.float32)
    pairs = None if kind == "single" else b
    made = [
        (Features(torch.tensor(table), a, pairs, kind), table, 0),
        (Features(torch.tensor(table), a, pairs, kind).dense(), table, 0),
        (normalize.FoldFeatures(torch.tensor(table), a, pairs, kind, [norm, norm]), normalized, 9),
        (normalize.FoldFeatures(torch.tensor(table), a, pairs, kind, [norm, norm]).dense(), normalized, 9),
    ]
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
    theta, _, converged = lbfgs.fit(
        DenseFeatures(torch.tensor(x)), torch.tensor(y), nclasses, [np.arange(n)], np.array([grid]), torch.device("cpu")
    )
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
    record = score(
        vectors, data_dir, tasks=["TREC", "SICKEntailment"], config=build("prototype"), progress=False, log=quiet
    )
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
    cpu = drive(classify.split(context("SST5", splits, x, config, classes=None)))
    gpu = drive(classify.split(context("SST5", splits, x, config, classes=None, device="cuda")))
    assert abs(cpu["acc"] - gpu["acc"]) <= 2.0 and abs(cpu["devacc"] - gpu["devacc"]) <= 2.0
    if solver == "lbfgs":
        assert cpu["acc"] == gpu["acc"] and cpu["reg"] == gpu["reg"]


def test_bad_classifier_options_are_one_line_errors(cli, tmp_path):
    for args, fragment in (
        (["--classifier", "{nope"], "not valid JSON"),
        (["--classifier", '{"tenacity": "x"}'], "tenacity must be an integer"),
        (["--classifier", '{"depth": 2}'], "unknown classifier setting depth"),
        (["--solver", "newton"], "'newton' is not one of"),
        (["--config", "fast"], "'fast' is not one of"),
        (["--kfold", "1"], "--kfold: must be an integer >= 2"),
        (["--solver", "lbfgs", "--classifier", '{"nhid": 10}'], "logistic regression only"),
    ):
        result = cli("score", tmp_path / "v.h5", *args)
        assert result.exit_code == 2, (args, result.output)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("embeval: error:") and fragment in lines[0], lines
