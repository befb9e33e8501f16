"""The ten probing tasks (Conneau et al., 2018): split protocol, with the configured classifier,
logistic regression or an MLP grid.

`configured` (the default) is what SentEval's probing code runs: the configured classifier as given
(`--classifier`: nhid, optim, dropout...), trained with the run's solver. `logreg` is the configured
classifier with nhid 0. `mlp` is the grid the probing paper reports and SentEval's README
recommends: nhid in {50, 100, 200} x dropout in {0, 0.1, 0.2} x the regularization grid, all tuned
on dev (the SentEval solver; every grid point of one nhid is trained in one batched call).
WordContent is always logistic regression (nhid 0), as in SentEval.
"""

from dataclasses import replace

import numpy as np

from embeval.evaluate import classify, normalize
from embeval.train import batched

MLP_GRID = {"nhid": (50, 100, 200), "dropout": (0.0, 0.1, 0.2)}


def _logreg(ctx):
    return classify.split(ctx, classify.classifier_named(ctx.config, "logreg"), prefix="logreg")


def _mlp(ctx):
    """Every (nhid, dropout, reg) of the grid trained with early stopping on dev; the best is tested."""
    samples = classify.prepare(ctx, normalize.table(ctx))
    nclasses = classify.class_count(ctx)
    regs = classify.TORCH_REGS
    dropouts = [d for d in MLP_GRID["dropout"] for _ in regs]
    columns = [r for _ in MLP_GRID["dropout"] for r in regs]
    train, dev, test = samples.idx("train"), samples.idx("dev"), samples.idx("test")
    candidates = []
    for nhid in MLP_GRID["nhid"]:
        classifier = replace(ctx.config.classifier, nhid=nhid)
        what = f"the MLP grid at {nhid} hidden units, {len(columns)} fits at once (dropout x weight decay)"
        ctx.progress.stage(classify.stage_label(ctx, classifier, what), total=classifier.max_epoch, unit="pass")
        trained = batched.train(
            samples.features,
            samples.labels,
            nclasses,
            [batched.Group(train, dev)],
            [columns],
            classifier,
            ctx.seed,
            ctx.device,
            dropouts=dropouts,
            progress=lambda passes, active, fits: ctx.progress.step(passes, f"{active} of {fits} fits still training"),
        )
        for r, (dropout, reg) in enumerate(zip(dropouts, columns)):
            candidates.append((classify.percent(trained.best_accuracy[0, r]), nhid, dropout, reg, trained, r))
    scores = [c[0] for c in candidates]
    devacc, nhid, dropout, reg, trained, r = candidates[int(np.argmax(scores))]
    yhat = trained.predict(samples.features, test, 0)[:, r]
    classify.keep_predictions(ctx, "mlp", samples, "test", yhat)
    return {
        "devacc": devacc,
        "acc": classify.percent(np.mean(yhat == samples.y("test"))),
        "ndev": len(dev),
        "ntest": len(test),
        "nhid": nhid,
        "dropout": dropout,
        "reg": reg,
    }


def _configured(ctx):
    """The split protocol with the configured classifier, and the settings it trained with."""
    result = yield from classify.split(ctx)
    used = classify.task_classifier(ctx.task, ctx.config)
    result.update(classifier="configured", nhid=used.nhid, dropout=used.dropout, optim=used.optim)
    return result


def evaluate_probing(ctx):
    """SentEval's keys for the headline classifier (the MLP grid when it ran), and each classifier's
    results; with the configured classifier, its results and the nhid, dropout and optim it used."""
    choice = ctx.config.probing_classifier
    if choice == "configured":
        return (yield from _configured(ctx))
    ran = {}
    if choice in ("logreg", "both") or ctx.task.params.logreg_only:
        ran["logreg"] = yield from _logreg(ctx)
    if choice in ("mlp", "both") and not ctx.task.params.logreg_only:
        ran["mlp"] = _mlp(ctx)
    headline = "mlp" if "mlp" in ran else "logreg"
    result = {key: ran[headline][key] for key in ("devacc", "acc", "ndev", "ntest")}
    result["classifier"] = headline
    result.update(ran)
    ctx.keep("", ctx.predictions[headline])
    return result
