"""Run configurations: the classifier settings, k-fold and solver, with validation at the boundary."""

import json

from embeval.errors import EmbevalError
from embeval.evaluate.normalize import METHODS
from embeval.train import optimizers

CLASSIFIER_DEFAULTS = {
    "nhid": 0,
    "optim": "adam",
    "batch_size": 64,
    "tenacity": 5,
    "epoch_size": 4,
    "max_epoch": 200,
    "dropout": 0.0,
}

PRESETS = {
    "literature": {
        "kfold": 10,
        "classifier": {"nhid": 0, "optim": "adam", "batch_size": 64, "tenacity": 5, "epoch_size": 4},
    },
    "prototype": {
        "kfold": 5,
        "classifier": {"nhid": 0, "optim": "rmsprop", "batch_size": 128, "tenacity": 3, "epoch_size": 2},
    },
}

SOLVERS = ("senteval", "lbfgs")
DEVICES = ("auto", "cpu", "cuda")
PROBING_CLASSIFIERS = ("configured", "logreg", "mlp", "both")
CLASSIFIERS = ("logreg", "mlp")
NORMALIZATIONS = METHODS + ("tune",)
BOOTSTRAP_DEFAULT = 1000


def parse_optim(text, source="--classifier"):
    """'adam' or 'sgd,lr=0.1' -> (name, settings): SentEval's optimizer string with torch.optim's
    keyword names and defaults (embeval.train.optimizers.parse); a refused string is a one-line
    error naming `source`."""
    try:
        return optimizers.parse(text)
    except ValueError as err:
        raise EmbevalError(f"optim: {err}", file=source) from None


def _check_classifier(classifier, source):
    unknown = sorted(set(classifier) - set(CLASSIFIER_DEFAULTS))
    if unknown:
        raise EmbevalError(
            f"unknown classifier setting {', '.join(unknown)}; settings are {', '.join(CLASSIFIER_DEFAULTS)}",
            file=source,
        )
    ints = {"nhid": 0, "batch_size": 1, "tenacity": 0, "epoch_size": 1, "max_epoch": 1}
    for key, low in ints.items():
        value = classifier[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise EmbevalError(f"classifier setting {key} must be an integer >= {low}, got {value!r}", file=source)
    dropout = classifier["dropout"]
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
        raise EmbevalError(f"classifier setting dropout must be a number in [0, 1), got {dropout!r}", file=source)
    classifier["dropout"] = float(dropout)
    parse_optim(classifier["optim"], source)


def parse_classifiers(text):
    """'logreg,mlp' -> ("logreg", "mlp"); None stays None (the configured classifier alone)."""
    if text is None:
        return None
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    unknown = [n for n in names if n not in CLASSIFIERS]
    if unknown or not names:
        raise EmbevalError(
            f"unknown classifier {', '.join(unknown) or '(none named)'}; use logreg, mlp or logreg,mlp",
            file="--classifiers",
        )
    return tuple(dict.fromkeys(names))


def _check_comparison(normalize, bootstrap, baseline_bow_dim):
    if normalize not in NORMALIZATIONS:
        raise EmbevalError(f"unknown normalization {normalize!r}; use {', '.join(NORMALIZATIONS)}", file="--normalize")
    if isinstance(bootstrap, bool) or not isinstance(bootstrap, int) or not (bootstrap == 0 or bootstrap >= 100):
        raise EmbevalError(f"must be 0 (no intervals) or an integer >= 100, got {bootstrap!r}", file="--bootstrap")
    if baseline_bow_dim is not None and (
        isinstance(baseline_bow_dim, bool) or not isinstance(baseline_bow_dim, int) or baseline_bow_dim < 1
    ):
        raise EmbevalError(f"must be a positive integer, got {baseline_bow_dim!r}", file="--baseline-bow-dim")


def build(
    preset="literature",
    kfold=None,
    classifier=None,
    solver="senteval",
    seed=1111,
    probing_classifier=None,
    classifiers=None,
    normalize="none",
    bootstrap=BOOTSTRAP_DEFAULT,
    baseline_bow_dim=None,
):
    """The run configuration: a preset, optionally overridden by --kfold and --classifier (JSON or dict).

    classifiers: None (the configured classifier) or names from CLASSIFIERS, run one after the
    other on the classification tasks; the probing tasks follow it (logreg,mlp -> both) unless
    probing_classifier is given (without either: the configured classifier, as SentEval).
    normalize: embeval.evaluate.normalize's methods or tune. bootstrap: resamples of the confidence
    intervals (0: none). baseline_bow_dim: also score a hashing bag of words of that dimension."""
    if preset not in PRESETS:
        raise EmbevalError(f"unknown configuration {preset!r}; use {' or '.join(PRESETS)}", file="--config")
    if solver not in SOLVERS:
        raise EmbevalError(f"unknown solver {solver!r}; use {' or '.join(SOLVERS)}", file="--solver")
    merged = dict(CLASSIFIER_DEFAULTS)
    merged.update(PRESETS[preset]["classifier"])
    if classifier is not None:
        if isinstance(classifier, str):
            try:
                classifier = json.loads(classifier)
            except json.JSONDecodeError as err:
                raise EmbevalError(f"not valid JSON ({err.msg} at character {err.pos})", file="--classifier")
        if not isinstance(classifier, dict):
            raise EmbevalError("must be a JSON object such as '{\"nhid\": 50}'", file="--classifier")
        merged.update(classifier)
    _check_classifier(merged, "--classifier")
    k = PRESETS[preset]["kfold"] if kfold is None else kfold
    if isinstance(k, bool) or not isinstance(k, int) or k < 2:
        raise EmbevalError(f"must be an integer >= 2, got {k!r}", file="--kfold")
    if solver == "lbfgs" and merged["nhid"] != 0:
        raise EmbevalError(
            "the lbfgs solver fits logistic regression only (nhid 0); use --solver senteval for an MLP",
            file="--classifier",
        )
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise EmbevalError(f"must be an integer, got {seed!r}", file="--seed")
    classifiers = parse_classifiers(classifiers)
    if solver == "lbfgs" and classifiers is not None and "mlp" in classifiers:
        raise EmbevalError(
            "the MLP needs --solver senteval (lbfgs fits logistic regression only)", file="--classifiers"
        )
    if probing_classifier is None:
        probing_classifier = (
            "configured" if classifiers is None else ("both" if len(classifiers) == 2 else classifiers[0])
        )
    if probing_classifier not in PROBING_CLASSIFIERS:
        raise EmbevalError(
            f"unknown choice {probing_classifier!r}; use {', '.join(PROBING_CLASSIFIERS)}", file="--probing-classifier"
        )
    if solver == "lbfgs" and probing_classifier not in ("configured", "logreg"):
        raise EmbevalError(
            "the probing MLP grid needs --solver senteval (lbfgs fits logistic regression only)",
            file="--probing-classifier",
        )
    _check_comparison(normalize, bootstrap, baseline_bow_dim)
    config = {
        "preset": preset,
        "kfold": k,
        "classifier": merged,
        "solver": solver,
        "seed": seed,
        "probing_classifier": probing_classifier,
        "bootstrap": bootstrap,
    }
    if classifiers is not None:
        config["classifiers"] = list(classifiers)
    if normalize != "none":
        config["normalize"] = normalize
    if baseline_bow_dim is not None:
        config["baseline_bow_dim"] = baseline_bow_dim
    return config
