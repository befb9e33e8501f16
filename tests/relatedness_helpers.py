"""SentEval's relatedness regressor written the direct way, and small synthetic relatedness tasks.

`senteval_style_fit` follows SentEval's description step by step with global seeds, nn modules,
autograd and torch.optim.Adam: the independent computation the fast evaluator is checked against
(and timed against in bench/relatedness.py).
"""

import copy

import numpy as np
import torch
from scipy.stats import pearsonr

from embeval.evaluate.context import Context
from embeval.tasks.registry import TASKS
from embeval.tasks.samples import Split, TaskData


def tai_by_definition(score, nclasses=5):
    """Class i (0-based) gets y - floor(y) when i + 1 == floor(y) + 1 and floor(y) - y + 1 when i + 1 == floor(y)."""
    row = [0.0] * nclasses
    for i in range(nclasses):
        if i + 1 == np.floor(score) + 1:
            row[i] = score - np.floor(score)
        if i + 1 == np.floor(score):
            row[i] = np.floor(score) - score + 1
    return row


def senteval_style_fit(train_x, train_scores, dev_x, dev_scores, test_x, seed=1111):
    """(dev Pearson, test predictions, passes) from the regressor as SentEval runs it (numpy inputs)."""
    np_state = np.random.get_state()
    with torch.random.fork_rng():
        np.random.seed(seed)
        torch.manual_seed(seed)
        model = torch.nn.Sequential(torch.nn.Linear(train_x.shape[1], 5), torch.nn.Softmax(dim=1))
        loss_fn = torch.nn.MSELoss()
        optimizer = torch.optim.Adam(model.parameters())
        x = torch.from_numpy(train_x)
        y = torch.from_numpy(np.array([tai_by_definition(s) for s in train_scores], dtype=np.float32))

        def predict(features):
            model.eval()
            with torch.no_grad():
                proba = np.concatenate(
                    [model(torch.from_numpy(features[i : i + 64])).numpy() for i in range(0, len(features), 64)]
                )
            return np.dot(proba, np.arange(1, 6))

        passes, best, count, best_model = 0, -1, 0, None
        while passes <= 1000:
            model.train()
            for _ in range(50):
                permutation = np.random.permutation(len(x))
                for i in range(0, len(x), 64):
                    idx = torch.from_numpy(permutation[i : i + 64])
                    loss = loss_fn(model(x[idx]), y[idx])
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            passes += 50
            r = pearsonr(predict(dev_x), dev_scores)[0]
            r = 0.0 if r != r else r
            if r > best:
                best, best_model = r, copy.deepcopy(model)
            else:
                if count >= 3:
                    break
                count += 1
        model = best_model
        yhat = predict(test_x)
    np.random.set_state(np_state)
    return best, yhat, passes


def synthetic_context(splits_vectors, task="STSBenchmark", device="cpu"):
    """A Context for a relatedness task from {split: (vectors A, vectors B, scores)}; every sentence
    is distinct and one token long, so SentEval's sort order is the score order within a split."""
    splits, tables, rows, offset = {}, [], {}, 0
    for name, (a, b, y) in splits_vectors.items():
        n = len(y)
        splits[name] = Split(
            name,
            [f"{name}a{i}" for i in range(n)],
            np.asarray(y, dtype=np.float64),
            b=[f"{name}b{i}" for i in range(n)],
        )
        tables += [a, b]
        rows[name] = (np.arange(offset, offset + n), np.arange(offset + n, offset + 2 * n))
        offset += 2 * n
    table = torch.from_numpy(np.concatenate(tables).astype(np.float32)).to(device)
    data = TaskData(task, splits, None, [f"{s}.file" for s in splits])
    return Context(TASKS[task], data, table, rows, torch.device(device))
