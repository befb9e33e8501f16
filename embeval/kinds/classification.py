"""Classification of single sentences with SentEval's protocols (MR, CR, SUBJ, MPQA, SST2, SST5,
TREC, and a user's labelled sentences).

Protocols (a task's `protocol`), each with SentEval's sample order (sorted by tokens, then label),
folds and regularization grids, and either solver (--solver):
- split: files train, dev, test; the regularization chosen on dev, the chosen model tested;
- kfold: files train, test; the regularization chosen by k-fold cross-validation on train, the
  model retrained on all of train and tested;
- nested-kfold: one file `all`; k outer folds, the regularization chosen by an inner k-fold within
  each outer training fold; the mean of the outer test accuracies.
Files: text and label columns (tsv, csv or jsonl). Keys: `labels` (the label values in class-id
order; default: the training split's labels, numerically when all are integers, else as strings),
`f1` (also report F1 of class 1, as MRPC), `regularization` (grid, or none: SNLI's single 1e-9
weight decay / C = 1e9), `max_epoch` and `epoch_size` (override the configured classifier's).
Figures: test accuracy (%), F1 of class 1 with `f1`; the dev accuracy selects.

Protocol "mteb" (MTEB's AbsTaskClassification, embeval.evaluate.mteb_classification): files train
and test; n_experiments times, a training set of up to samples_per_label sentences of each label
drawn from train as mteb draws it, scikit-learn's logistic regression fitted on it and tested on
all of test. Keys with MTEB's defaults: samples_per_label (8), n_experiments (10), max_iter (100),
seed (42, MTEB's task seed, not the run's --seed; or `seeds`, a list: scored under each seed,
the figures the means over all their experiments, `per_seed` each seed's). Only the train
sentences some experiment draws are exported (the draws depend on the labels and the seeds only),
as mteb embeds only those.
Figures (fractions, means over the experiments): accuracy (the headline), macro f1, f1_weighted,
precision, precision_weighted, recall, recall_weighted, and for two test labels ap and ap_weighted
(mteb's: the label values as scores, 1 the positive label; undefined, null, for labels that are not
numbers or two without 1, where mteb's own run stops with scikit-learn's error).

Protocol "mteb-kfold" (MTEB's AbsTaskClassification with is_cross_validation, the SciRepEval tasks):
one file `all`; n_splits folds (scikit-learn's shuffled KFold under the seed), each fold's training
set of up to samples_per_label sentences per label drawn from the other folds as mteb draws it, the
classifier fitted on it and tested on the fold. Keys: samples_per_label (8), n_splits (5), max_iter
(100), seed (42). The same figures, means over the folds; every sentence is embedded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from embeval.kinds.mteb_experiments import Draws, fitting, inputs, read_integers
from embeval.kinds.mteb_shared import figures_of, fractions_line, headline_column, lazy_statistic
from embeval.kinds.mteb_shared import score_fields as mteb_fields
from embeval.tasks.declaration import MOST, MOST_SEEDS, Declaration
from embeval.tasks.figures import Column, Figure
from embeval.tasks.kind import Kind, Line, ci_text, num
from embeval.tasks.spec import TaskSpec

ACCURACY = Figure("acc", "test accuracy %", True)
F1 = Figure("f1", "test F1 of class 1 %", True)
CLASSIFIERS = ("logreg", "mlp")  # --classifiers: each classifier's results sit under its name
PROTOCOL_FILES = {"split": ("train", "dev", "test"), "kfold": ("train", "test"), "nested-kfold": ("all",)}
TRAINING_SPLIT = {"split": "train", "kfold": "train", "nested-kfold": "all"}
PROTOCOL_NOTES = {
    "nested-kfold": "nested k-fold, mean of the outer folds",
    "kfold": "k-fold on train",
    "split": "dev split",
}


@dataclass(frozen=True)
class ClassifierParams:
    """The parameters of a task scored by SentEval's classifier. `features` and `sort` are the
    trainer's names of its inputs and its sample order (single sentences: "single")."""

    labels: tuple[str, ...] | None = None
    f1: bool = False
    regularization: str = "grid"
    max_epoch: int | None = None
    epoch_size: int | None = None
    logreg_only: bool = False
    features: str = "single"
    sort: str = "single"


def read_classifier_keys(decl: Declaration) -> dict[str, Any]:
    """The keys every kind trained with SentEval's classifier shares."""
    labels = decl.strings("labels", None)
    keys: dict[str, Any] = {
        "labels": labels,
        "f1": decl.take("f1", (bool,), False),
        "regularization": decl.take("regularization", default="grid", choices=("grid", "none")),
        "max_epoch": decl.integer("max_epoch", None, 1),
        "epoch_size": decl.integer("epoch_size", None, 1),
    }
    if labels is not None and len(labels) < 2:
        raise decl.error("a classification task needs two or more labels", "labels")
    if keys["f1"] and labels is not None and len(labels) != 2:
        raise decl.error("F1 of class 1 needs exactly two labels", "f1")
    return keys


def accuracy_lines(results: Mapping[str, Any], ci: Mapping[str, Any] | None) -> list[Line]:
    """`accuracy % dev / test` (and F1), per classifier when several ran."""

    def line(r: Mapping[str, Any], prefix: str, label: str) -> Line:
        text = f"{num(r.get('devacc'))} / {num(r.get('acc'))}" + ci_text(ci, f"{prefix}acc", 1.0)
        if "f1" in r:
            text += f"  (F1 {num(r['f1'])}{ci_text(ci, prefix + 'f1', 1.0)})"
        return Line(label, text)

    ran = [c for c in CLASSIFIERS if isinstance(results.get(c), Mapping)]
    if ran:
        return [line(results[c], f"{c}.", f"{c} accuracy % dev / test") for c in ran]
    return [line(results, "", "accuracy % dev / test")]


class SentEvalClassifierKind(Kind):
    """What the kinds scored by SentEval's classifier share: protocols, figures, evaluation, lines."""

    protocols: ClassVar[tuple[str, ...]] = ("split", "kfold", "nested-kfold")
    stacks = True

    def file_keys(self, protocol: str | None) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
        return PROTOCOL_FILES[protocol or "split"], (), False

    def figures(self, spec: TaskSpec) -> tuple[Figure, ...]:
        return (ACCURACY, F1) if spec.params.f1 else (ACCURACY,)

    def selection(self, spec: TaskSpec) -> str | None:
        return "devacc"

    def runs_classifiers(self, spec: TaskSpec) -> bool:
        return spec.protocol != MTEB

    def evaluate(self, ctx: Any) -> Any:
        from embeval.evaluate import classify

        return classify.evaluate(ctx)

    def check_data(self, spec: TaskSpec, data: Any, config: Any) -> None:
        """Every class of the split the k-fold protocols fold has a sample in each fold (nested k-fold:
        also in each inner fold of every outer training fold)."""
        protocol = spec.protocol or "split"
        if protocol not in ("kfold", "nested-kfold"):
            return
        import math

        import numpy as np

        from embeval.errors import DataFileError

        k = config.kfold
        need = k
        while protocol == "nested-kfold" and need - math.ceil(need / k) < k:
            need += 1
        split = TRAINING_SPLIT[protocol]
        values, counts = np.unique(np.asarray(data.splits[split].y), return_counts=True)
        for value, count in zip(values.tolist(), counts.tolist(), strict=True):
            if count < need:
                label = data.classes[value] if data.classes and 0 <= value < len(data.classes) else value
                raise DataFileError(
                    f"class {ascii(str(label))[:40]} has {count} samples in the {split} split, too few for the "
                    f"{k} folds of the {protocol} protocol (--kfold {k}; at least {need} needed): add samples or "
                    "give a smaller --kfold",
                    file=None if spec.builtin else spec.source,
                    task=spec.name,
                )

    def lines(self, spec: TaskSpec, results: Mapping[str, Any], ci: Mapping[str, Any] | None) -> list[Line]:
        return accuracy_lines(results, ci)

    def columns(self, spec: TaskSpec) -> tuple[Column, ...]:
        if not spec.report.show:
            return ()
        group = spec.report.group or "transfer"
        accuracy = Column(
            group,
            "acc",
            "accuracy %",
            header=spec.report.header,
            per_classifier=True,
            order=spec.report.order,
            measure="accuracy",
            protocol="classifier",
            note=PROTOCOL_NOTES.get(spec.protocol or "split", ""),
        )
        if not spec.params.f1:
            return (accuracy,)
        positive = spec.params.labels[1] if spec.params.labels else "1"
        f1 = Column(
            group,
            "f1",
            "F1 %",
            header=f"{spec.label} F1",
            per_classifier=True,
            order=spec.report.order,
            measure="f1",
            protocol="classifier",
            note=f"F1 (%) of the class {positive}",
        )
        return accuracy, f1

    def unit_bytes(self, spec: TaskSpec, count: int, dim: int, config: Any) -> int:
        from embeval.train.features import feature_dim

        copies = 1
        if spec.protocol == "nested-kfold" and config.normalize.startswith("zscore"):
            copies = config.kfold
        return 4 * count * (dim + 2 * copies * feature_dim(dim, spec.params.features))


MTEB = "mteb"
MTEB_KFOLD = "mteb-kfold"
MTEB_PROTOCOLS = (MTEB, MTEB_KFOLD)
MTEB_FIGURES = figures_of(
    [
        ("accuracy", "accuracy"),
        ("f1", "macro F1"),
        ("f1_weighted", "weighted F1"),
        ("precision", "macro precision"),
        ("precision_weighted", "weighted precision"),
        ("recall", "macro recall"),
        ("recall_weighted", "weighted recall"),
        ("ap", "AP (two labels)"),
        ("ap_weighted", "weighted AP (two labels)"),
    ]
)
MTEB_SET = "mteb-classification"  # the prediction set's kind: gold labels, each experiment's predictions
DRAWS = Draws()  # the experiments' training sets, drawn from the train split's labels


@dataclass(frozen=True)
class MtebClassifierParams:
    """MTEB's protocol, with MTEB's defaults (AbsTaskClassification)."""

    samples_per_label: int = 8
    n_experiments: int = 10
    max_iter: int = 100
    seed: int = 42
    more_seeds: tuple[int, ...] = ()  # `seeds = [...]`: the task scored under each seed, one after another

    @property
    def seeds(self) -> tuple[int, ...]:
        return (self.seed, *self.more_seeds)

    def training_rows(self, labels: Any) -> list[Any]:
        """The train rows of each experiment, as mteb draws them (every seed's experiments in turn)."""
        from embeval.evaluate import mteb_classification

        return [
            rows
            for seed in self.seeds
            for rows in mteb_classification.training_rows(labels, self.n_experiments, self.samples_per_label, seed)
        ]


def read_mteb_keys(decl: Declaration) -> MtebClassifierParams:
    bounds = (("samples_per_label", 1), ("n_experiments", 1), ("max_iter", 1), ("seed", 0))
    values: dict[str, Any] = dict(read_integers(decl, MtebClassifierParams, bounds))
    if decl.has("seeds"):
        if decl.has("seed"):
            raise decl.error("give `seed` or `seeds`, not both", "seeds")
        seeds = decl.take("seeds", (list,), [])
        most = MOST["seed"][0]
        bad = [v for v in seeds if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= most]
        if not seeds or bad:
            got = f"{bad[0]!r}"[:40] if bad else "[]"
            raise decl.error(f"must be a non-empty list of integers in [0, {most}], got {got}", "seeds")
        if len(seeds) > MOST_SEEDS:
            raise decl.error(f"lists {len(seeds)} seeds, more than {MOST_SEEDS} (each scores the whole task)", "seeds")
        if len(set(seeds)) != len(seeds):
            raise decl.error(f"lists a seed twice: {seeds}", "seeds")
        values["seed"], values["more_seeds"] = seeds[0], tuple(seeds[1:])
    return MtebClassifierParams(**values)


@dataclass(frozen=True)
class MtebKfoldParams:
    """MTEB's cross-validated protocol, with MTEB's defaults (AbsTaskClassification, is_cross_validation)."""

    samples_per_label: int = 8
    n_splits: int = 5
    max_iter: int = 100
    seed: int = 42

    def folds(self, labels: Any) -> list[Any]:
        """[(train rows drawn, test rows)] of each fold, as mteb draws them."""
        from embeval.evaluate import mteb_classification

        return mteb_classification.folds(labels, self.n_splits, self.samples_per_label, self.seed)


class Classification(SentEvalClassifierKind):
    name = "classification"
    mteb_type = "Classification"  # MTEB's task type of its tasks (benchmark means per type)
    summary = "labelled sentences; SentEval's classifier (split, kfold or nested-kfold) or MTEB's experiments or folds"
    protocols = ("split", "kfold", "nested-kfold", MTEB, MTEB_KFOLD)
    statistics = {
        MTEB_SET: {
            name: lazy_statistic("embeval.evaluate.mteb_classification", name, True) for name in ("accuracy", "f1")
        }
    }

    def file_keys(self, protocol: str | None) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
        if protocol == MTEB:
            return ("train", "test"), (), False
        if protocol == MTEB_KFOLD:
            return ("all",), (), False
        return super().file_keys(protocol)

    def column_keys(self, protocol: str | None) -> tuple[str, ...]:
        return ("text", "label")

    def read_params(self, decl: Declaration, protocol: str | None) -> Any:
        if protocol == MTEB:
            return read_mteb_keys(decl)
        if protocol == MTEB_KFOLD:
            bounds = (("samples_per_label", 1), ("n_splits", 2), ("max_iter", 1), ("seed", 0))
            return MtebKfoldParams(**read_integers(decl, MtebKfoldParams, bounds))
        return ClassifierParams(**read_classifier_keys(decl))

    def load(self, spec: TaskSpec, paths: Mapping[str, Path]) -> Any:
        from embeval.tasks.samples import read_splits

        if spec.protocol == MTEB:
            return read_mteb_splits(spec, paths)
        if spec.protocol == MTEB_KFOLD:
            return read_mteb_folds(spec, paths)
        keys = PROTOCOL_FILES[spec.protocol or "split"]
        return read_splits(spec, paths, keys, ("text", "label"), "label", TRAINING_SPLIT[spec.protocol or "split"])

    def sentences(self, spec: TaskSpec, data: Any) -> dict[str, list[str]]:
        return DRAWS.sentences(spec, data) if spec.protocol == MTEB else super().sentences(spec, data)

    def rows(self, spec: TaskSpec, data: Any, row_of: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
        return DRAWS.rows(spec, data, row_of) if spec.protocol == MTEB else super().rows(spec, data, row_of)

    def sizes(self, spec: TaskSpec, data: Any) -> str:
        sizes = super().sizes(spec, data)
        if spec.protocol == MTEB_KFOLD:
            return f"{sizes} ({spec.params.n_splits}-fold cross-validation)"
        return f"{sizes} ({DRAWS.note(spec, data)})" if spec.protocol == MTEB else sizes

    def figures(self, spec: TaskSpec) -> tuple[Figure, ...]:
        return MTEB_FIGURES if spec.protocol in MTEB_PROTOCOLS else super().figures(spec)

    def selection(self, spec: TaskSpec) -> str | None:
        return None if spec.protocol in MTEB_PROTOCOLS else "devacc"

    def normalizes(self, spec: TaskSpec) -> bool:
        return spec.protocol not in MTEB_PROTOCOLS

    def evaluate(self, ctx: Any) -> Any:
        if ctx.task.protocol == MTEB_KFOLD:
            return evaluate_mteb_folds(ctx)
        return evaluate_mteb(ctx) if ctx.task.protocol == MTEB else super().evaluate(ctx)

    def lines(self, spec: TaskSpec, results: Mapping[str, Any], ci: Mapping[str, Any] | None) -> list[Line]:
        if spec.protocol not in MTEB_PROTOCOLS:
            return super().lines(spec, results, ci)
        runs = _runs(spec)
        return [
            fractions_line(f"accuracy | macro F1 x100 (MTEB, {runs})", results, ("accuracy", "f1"), ci),
            fractions_line(
                "weighted F1 | macro precision | macro recall", results, ("f1_weighted", "precision", "recall")
            ),
        ]

    def columns(self, spec: TaskSpec) -> tuple[Column, ...]:
        if spec.protocol not in MTEB_PROTOCOLS:
            return super().columns(spec)
        note = f"{spec.headline.label}, {_runs(spec)} of {spec.params.samples_per_label} sentences per label"
        return headline_column(spec, "mteb-classification", note)

    def mteb_scores(self, spec: TaskSpec, results: Mapping[str, Any]) -> dict[str, Any] | None:
        if spec.protocol not in MTEB_PROTOCOLS or "seeds" in results:  # several seeds: not one MTEB result
            return None
        return mteb_fields(spec, results, tuple(f.path for f in MTEB_FIGURES) + ("scores_per_experiment",))

    def unit_bytes(self, spec: TaskSpec, count: int, dim: int, config: Any) -> int:
        if spec.protocol in MTEB_PROTOCOLS:
            return 4 * count * dim
        return super().unit_bytes(spec, count, dim, config)


def _runs(spec: TaskSpec) -> str:
    """The experiments of MTEB's protocols, in words."""
    if spec.protocol == MTEB_KFOLD:
        return f"{spec.params.n_splits} folds"
    return f"{spec.params.n_experiments} experiments"


def read_mteb_splits(spec: TaskSpec, paths: Mapping[str, Path]) -> Any:
    """Train and test of MTEB's protocol: label ids in the order of every label of both splits
    (numerically when all are integers, else as strings: the order mteb's classifier sees); the
    train split must hold two labels or more."""
    import numpy as np

    from embeval.errors import DataFileError
    from embeval.tasks import tabular
    from embeval.tasks.files import join_tokens
    from embeval.tasks.samples import Split, TaskData, label_order

    names = dict(spec.column_names)
    tokenize = join_tokens if spec.tokenization == "whitespace" else (lambda text: text)
    read = {}
    for key in ("train", "test"):
        path = paths[key]
        texts, labels = [], []
        for line, row in tabular.read_rows(path, spec.format, ("text", "label"), names, spec.name):
            texts.append(tokenize(tabular.text_field(row["text"], names.get("text", "text"), path, spec.name, line)))
            labels.append(tabular.label_field(row["label"], names.get("label", "label"), path, spec.name, line))
        read[key] = (texts, labels)
    if len(set(read["train"][1])) < 2:
        raise DataFileError(
            f"the train split has one label ({read['train'][1][0]!r}); MTEB's classifier needs two or more",
            file=paths["train"],
            task=spec.name,
        )
    classes = label_order(set(read["train"][1]) | set(read["test"][1]))
    ids = {label: i for i, label in enumerate(classes)}
    splits = {
        key: Split(key, texts, np.array([ids[label] for label in labels], dtype=np.int64))
        for key, (texts, labels) in read.items()
    }
    return TaskData(
        spec.name, splits, classes, [paths["train"], paths["test"]], spaced=spec.tokenization == "whitespace"
    )


def read_mteb_folds(spec: TaskSpec, paths: Mapping[str, Path]) -> Any:
    """The one split of MTEB's cross-validated protocol (label ids as read_mteb_splits orders them),
    checked: at least n_splits sentences, and every fold's training draw holding two labels or more."""
    from embeval.errors import DataFileError
    from embeval.tasks.samples import read_splits

    data = read_splits(spec, paths, ("all",), ("text", "label"), "label", "all")
    labels = data.splits["all"].y
    params = spec.params
    if len(labels) < params.n_splits:
        raise DataFileError(
            f"{len(labels)} sentences, fewer than the n_splits = {params.n_splits} folds",
            file=paths["all"],
            task=spec.name,
        )
    for fold, (train, _) in enumerate(params.folds(labels)):
        if len(set(labels[train].tolist())) < 2:
            raise DataFileError(
                f"fold {fold}'s training draw holds one label; MTEB's classifier needs two or more",
                file=paths["all"],
                task=spec.name,
            )
    return data


def evaluate_mteb_folds(ctx: Any) -> dict[str, Any]:
    """MTEB's cross-validated figures and their prediction set (each sentence's label, its prediction
    by its fold's classifier, and its fold)."""
    from embeval.evaluate import mteb_classification
    from embeval.formats.predictions import PredictionSet

    params = ctx.task.params
    labels = ctx.data.splits["all"].y
    vectors = ctx.table.cpu().numpy()[ctx.rows["all"][0]]
    with fitting():
        figures, arrays = mteb_classification.cross_validate(
            vectors,
            labels,
            samples_per_label=params.samples_per_label,
            seed=params.seed,
            max_iter=params.max_iter,
            n_splits=params.n_splits,
            values=mteb_classification.label_values(ctx.data.classes),
        )
    order = "the split, file order; each sentence's prediction by its fold's classifier; group: its fold"
    ctx.keep("", PredictionSet(MTEB_SET, arrays, ("accuracy", "f1"), order))
    return dict(figures, labels=list(ctx.data.classes), test_items=len(labels))


def evaluate_mteb(ctx: Any) -> dict[str, Any]:
    """MTEB's figures of the test split and their prediction set (each test sentence's label and its
    predictions, one per experiment)."""
    from embeval.evaluate import mteb_classification
    from embeval.formats.predictions import PredictionSet

    params = ctx.task.params
    train, test = ctx.data.splits["train"], ctx.data.splits["test"]
    train_vectors, test_vectors = inputs(ctx)
    values = mteb_classification.label_values(ctx.data.classes)  # what average precision scores
    runs = []
    with fitting():
        for seed in params.seeds:
            runs.append(
                mteb_classification.classify(
                    train_vectors,
                    train.y,
                    test_vectors,
                    test.y,
                    n_experiments=params.n_experiments,
                    samples_per_label=params.samples_per_label,
                    seed=seed,
                    max_iter=params.max_iter,
                    values=values,
                )
            )
    figures, arrays = runs[0]
    if len(runs) > 1:  # every seed's experiments together: the figures are their means
        import numpy as np

        figures = mteb_classification.average([e for f, _ in runs for e in f["scores_per_experiment"]])
        figures["seeds"] = list(params.seeds)
        figures["per_seed"] = {
            str(seed): {k: v for k, v in f.items() if k != "scores_per_experiment"}
            for seed, (f, _) in zip(params.seeds, runs, strict=True)
        }
        arrays = {"gold": arrays["gold"], "pred": np.concatenate([a["pred"] for _, a in runs], axis=1)}
    ctx.keep(
        "", PredictionSet(MTEB_SET, arrays, ("accuracy", "f1"), "test split, file order; one column per experiment")
    )
    return dict(figures, labels=list(ctx.data.classes), test_items=len(test))


KIND = Classification()
