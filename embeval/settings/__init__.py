"""The run configuration and the classifier settings (the lowest layer: no torch, no click, no I/O).

Each setting is declared once, as a field of a frozen dataclass carrying its Setting: the
command-line option, the type, the range or the choices, the default and the help text (in the
spirit of scikit-learn's `_parameter_constraints`). Constructing a dataclass validates every field
against its declaration (a one-line EmbevalError naming the option), so a RunConfig is valid
wherever it travels; `build` turns the options of a command into one, and embeval.cli.options
generates the commands' options from the same declarations. `to_record()` is the `config` object
of a results file (what --resume and the reports compare), `RunConfig.from_record` reads one back.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from embeval.errors import EmbevalError
from embeval.settings import optimizers

MLP_NHID = 50  # --classifiers mlp on the downstream tasks, when the configured classifier is logistic regression

SOLVERS = ("senteval", "lbfgs")
DEVICES = ("auto", "cpu", "cuda")
PROBING_CLASSIFIERS = ("configured", "logreg", "mlp", "both")
CLASSIFIERS = ("logreg", "mlp")
NORMALIZATION_METHODS = ("none", "l2", "zscore", "zscore+l2")  # embeval.evaluate.normalize applies them
NORMALIZATIONS = NORMALIZATION_METHODS + ("tune",)


@dataclass(frozen=True)
class Setting:
    """The declaration of one setting.

    kind: int, float, str or bool (an int is never a bool; a float setting takes an int too).
    choices: the values allowed (str settings); low: the smallest value allowed; below: values must
    be below it; high: the largest value allowed (a bound on the work a setting asks for); also: values
    allowed outside the range (bootstrap's 0); a setting whose default is None takes None.
    check: a further check, value -> the problem in words or None. from_config: on the command line
    the option's default is None, the value then follows the other options (--config's preset,
    --classifiers). recorded_at_default: to_record() writes the field even at its default."""

    help: str
    option: str = ""
    kind: type = int
    default: Any = None
    choices: tuple[str, ...] = ()
    low: float | None = None
    below: float | None = None
    high: float | None = None
    also: tuple[Any, ...] = ()
    metavar: str | None = None
    check: Callable[[Any], str | None] | None = None
    from_config: bool = False
    recorded_at_default: bool = True

    def problem(self, value: Any) -> str | None:
        """What is wrong with `value` (one line, without the setting's name), or None."""
        if value is None and self.default is None:
            return None
        if self.kind is bool:
            return None if isinstance(value, bool) else f"must be true or false, got {value!r}"
        if self.kind in (int, float):
            number = isinstance(value, int) if self.kind is int else isinstance(value, (int, float))
            if isinstance(value, bool) or not number:
                return f"{self._expected()}, got {value!r}"
            if value in self.also:
                return None
            if (self.low is not None and value < self.low) or (self.below is not None and value >= self.below):
                return f"{self._expected()}, got {value!r}"
            if self.high is not None and value > self.high:
                most = int(self.high) if self.kind is int else self.high
                return f"must be at most {most}, got {value!r}"
            return None
        if not isinstance(value, str):
            return f"must be a string, got {value!r}"
        if self.choices and value not in self.choices:
            return f"unknown choice {value!r}; use {', '.join(self.choices)}"
        return self.check(value) if self.check else None

    def _expected(self) -> str:
        if self.kind is float and self.low is not None and self.below is not None:
            return f"must be a number in [{self.low:g}, {self.below:g})"
        what = "an integer" if self.kind is int else "a number"
        if self.low is not None:
            what += f" >= {self.low:g}"
        if self.also:
            return f"must be {' or '.join(map(str, self.also))} or {what}"
        return f"must be {what}"


# The most bootstrap resamples of a run's intervals: the Monte Carlo error of a 95% percentile interval is
# already a small fraction of its width at a few thousand; more is work without a use.
MAX_RESAMPLES = 100_000


def declare(default: Any, **declaration: Any) -> Any:
    """A dataclass field carrying its Setting (a callable default is a default factory)."""
    setting = Setting(default=default, **declaration)
    if callable(default):
        return field(default_factory=default, metadata={"setting": setting})
    return field(default=default, metadata={"setting": setting})


def declared(cls: type) -> dict[str, Setting]:
    """{field name: its Setting} of a settings dataclass, in field order."""
    return {f.name: f.metadata["setting"] for f in fields(cls)}


def _record(settings: Any) -> dict[str, Any]:
    record = {}
    for f in fields(settings):
        value, setting = getattr(settings, f.name), f.metadata["setting"]
        default = setting.default() if callable(setting.default) else setting.default
        if not setting.recorded_at_default and value == default:
            continue
        if hasattr(value, "to_record"):
            value = value.to_record()
        record[f.name] = list(value) if isinstance(value, tuple) else value
    return record


@dataclass(frozen=True)
class ClassifierSettings:
    """The classifier of SentEval's PyTorch protocol (--classifier's keys); the defaults are the
    literature preset's."""

    nhid: int = declare(0, low=0, high=100_000, help="hidden units (0 = logistic regression)")
    optim: str = declare(
        "adam", kind=str, check=optimizers.problem, help="optimizer string: 'adam', 'rmsprop', 'sgd,lr=0.1', ..."
    )
    batch_size: int = declare(64, low=1, high=10_000_000, help="samples per step")
    tenacity: int = declare(5, low=0, high=10_000, help="early-stopping checks without improvement before stopping")
    epoch_size: int = declare(4, low=1, high=1_000, help="passes over the training set between two checks")
    max_epoch: int = declare(200, low=1, high=100_000, help="the most passes over the training set")
    dropout: float = declare(0.0, kind=float, low=0, below=1, help="dropout rate of the MLP's hidden layer")

    def __post_init__(self) -> None:
        for name, setting in declared(ClassifierSettings).items():
            value = getattr(self, name)
            problem = setting.problem(value)
            if problem is not None:
                if name == "optim":
                    raise EmbevalError(f"optim: {problem}", file="--classifier")
                raise EmbevalError(f"classifier setting {name} {problem}", file="--classifier")
        object.__setattr__(self, "dropout", float(self.dropout))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], source: str = "--classifier") -> ClassifierSettings:
        """The settings of a JSON object or dict (unknown keys refused, absent ones at their default)."""
        unknown = sorted(set(values) - set(declared(cls)))
        if unknown:
            raise EmbevalError(
                f"unknown classifier setting {', '.join(unknown)}; settings are {', '.join(declared(cls))}",
                file=source,
            )
        return cls(**values)

    def to_record(self) -> dict[str, Any]:
        return _record(self)


@dataclass(frozen=True)
class Preset:
    """A named configuration (--config): its kfold, its classifier settings that differ from the
    defaults, and what it is for."""

    kfold: int
    classifier: Mapping[str, Any]
    about: str


PRESETS = {
    "literature": Preset(10, {}, "comparable to papers"),
    "prototype": Preset(5, {"optim": "rmsprop", "batch_size": 128, "tenacity": 3, "epoch_size": 2}, "about 5x faster"),
}
DEFAULT_PRESET = "literature"


def _preset_help() -> str:
    parts = []
    for name, preset in PRESETS.items():
        classifier = ClassifierSettings.from_mapping(preset.classifier).to_record()
        shown = ", ".join(f"{k} {classifier[k]}" for k in ("nhid", "optim", "batch_size", "tenacity", "epoch_size"))
        parts.append(f"{name}: kfold {preset.kfold}, {shown} ({preset.about}).")
    return " ".join(parts)


def _classifier_help() -> str:
    keys = ", ".join(f"{name} ({setting.help})" for name, setting in declared(ClassifierSettings).items())
    example = '\'{"nhid": 50, "dropout": 0.1}\''
    return f"Classifier settings overriding --config, a JSON object such as {example}. Keys: {keys}."


@dataclass(frozen=True)
class RunConfig:
    """How a run scores: the classifier protocol, the comparison options and the seed. Fields in
    the order of the results file's `config` object."""

    preset: str = declare(DEFAULT_PRESET, option="--config", kind=str, choices=tuple(PRESETS), help=_preset_help())
    kfold: int = declare(
        PRESETS[DEFAULT_PRESET].kfold,
        option="--kfold",
        low=2,
        high=1_000,
        metavar="N",
        from_config=True,
        help="Folds for cross-validation (overrides --config).",
    )
    classifier: ClassifierSettings = declare(
        ClassifierSettings, option="--classifier", kind=str, metavar="JSON", from_config=True, help=_classifier_help()
    )
    solver: str = declare(
        "senteval",
        option="--solver",
        kind=str,
        choices=SOLVERS,
        help="senteval: SentEval's PyTorch protocol (Adam or RMSprop, early stopping), trained in batches of "
        "problems. lbfgs: the exact optimum of scikit-learn's LogisticRegression objective for every C of "
        "SentEval's grid (deterministic).",
    )
    seed: int = declare(
        1111,
        option="--seed",
        low=0,
        high=2**32 - 1,
        help="Seed of every classifier and fold, and of the bootstrap resamples (0 to 2**32-1, numpy's range).",
    )
    probing_classifier: str = declare(
        "configured",
        option="--probing-classifier",
        kind=str,
        choices=PROBING_CLASSIFIERS,
        from_config=True,
        help="Probing tasks: the configured classifier (--classifier, as SentEval's probing code), logistic "
        "regression, the MLP grid the probing paper reports (nhid 50/100/200 x dropout 0/0.1/0.2, tuned on "
        "dev), or logreg and mlp both. WordContent is always logistic regression. Default: as "
        "--classifiers, else configured.",
    )
    bootstrap: int = declare(
        1000,
        option="--bootstrap",
        low=100,
        high=MAX_RESAMPLES,
        also=(0,),
        metavar="N",
        help=f"Bootstrap resamples of the 95% confidence intervals of every figure (0: none; at most "
        f"{MAX_RESAMPLES:,}).",
    )
    classifiers: tuple[str, ...] | None = declare(
        None,
        option="--classifiers",
        kind=str,
        metavar="logreg,mlp",
        recorded_at_default=False,
        help="Classification tasks: run each classifier and report both (the Pitfalls paper's advice): logreg "
        f"(nhid 0) and mlp (the configured nhid, {MLP_NHID} when it is 0), each tuned by the task's protocol. "
        "SentEval's top-level keys stay logistic regression's. The MLP's early stopping runs many more "
        "passes: with mlp a classification task takes many times as long (about 26 times on CR in one "
        "measured run).",
    )
    normalize: str = declare(
        "none",
        option="--normalize",
        kind=str,
        choices=NORMALIZATIONS,
        recorded_at_default=False,
        help="Normalize the sentence vectors first (statistics from training sentences only); tune picks per "
        "task on dev. Cosine STS reports raw and normalized side by side.",
    )
    baseline_bow_dim: int | None = declare(
        None,
        option="--baseline-bow-dim",
        low=1,
        metavar="D",
        recorded_at_default=False,
        help="Also score a hashing bag of words of dimension D (exporters/bow_numpy.py's rule, computed by "
        "embeval) for context.",
    )

    def __post_init__(self) -> None:
        if isinstance(self.classifier, Mapping):
            object.__setattr__(self, "classifier", ClassifierSettings.from_mapping(self.classifier))
        if not isinstance(self.classifier, ClassifierSettings):
            raise EmbevalError("must be a JSON object such as '{\"nhid\": 50}'", file="--classifier")
        if isinstance(self.classifiers, (list, str)):
            object.__setattr__(self, "classifiers", parse_classifiers(self.classifiers))
        for name, setting in declared(RunConfig).items():
            if name == "classifier":
                continue
            value = getattr(self, name)
            problem = _classifiers_problem(value) if name == "classifiers" else setting.problem(value)
            if problem is not None:
                raise EmbevalError(problem, file=setting.option)
        if self.solver == "lbfgs":
            if self.classifier.nhid != 0:
                raise EmbevalError(
                    "the lbfgs solver fits logistic regression only (nhid 0); use --solver senteval for an MLP",
                    file="--classifier",
                )
            if self.classifiers is not None and "mlp" in self.classifiers:
                raise EmbevalError(
                    "the MLP needs --solver senteval (lbfgs fits logistic regression only)", file="--classifiers"
                )
            if self.probing_classifier not in ("configured", "logreg"):
                raise EmbevalError(
                    "the probing MLP grid needs --solver senteval (lbfgs fits logistic regression only)",
                    file="--probing-classifier",
                )

    def to_record(self) -> dict[str, Any]:
        """The results file's `config` object."""
        return _record(self)

    @classmethod
    def from_record(cls, record: Mapping[str, Any], source: object = None, partial: bool = False) -> RunConfig:
        """The configuration a results file's `config` object records (absent keys at their defaults).
        Unknown keys are refused, or with partial=True (a record of another embeval version) ignored;
        a problem is one line naming `source`."""
        known = declared(cls)
        unknown = sorted(set(record) - set(known))
        try:
            if unknown and not partial:
                raise EmbevalError(f"unknown setting {', '.join(unknown)}; settings are {', '.join(known)}")
            values = {k: v for k, v in record.items() if k in known}
            if isinstance(values.get("classifier"), Mapping) and partial:
                values["classifier"] = {
                    k: v for k, v in values["classifier"].items() if k in declared(ClassifierSettings)
                }
            return cls(**values)
        except EmbevalError as err:
            if source is None:
                raise
            raise EmbevalError(f"config: {err}", file=source)

    def with_classifier(self, **changes: Any) -> RunConfig:
        """This configuration with some classifier settings changed."""
        return replace(self, classifier=replace(self.classifier, **changes))


DEVICE = Setting(
    option="--device",
    kind=str,
    default="auto",
    choices=DEVICES,
    help="Where to train and score: the GPU when there is one (auto), or force one.",
)
SIZE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
SIZE_UNITS.update({"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40})
SMALLEST_BUDGET = 1 << 20


def parse_size(text: str | int) -> int:
    """Bytes of a size: an integer (bytes) or a number with a unit, '512MiB', '2GiB', '1.5GB'
    (KiB/MiB/GiB/TiB: powers of 1024; kB/MB/GB/TB: of 1000; case ignored). EmbevalError naming
    --memory-budget when it is not one, or below SMALLEST_BUDGET."""
    problem = _size_problem(text)
    if problem is not None:
        raise EmbevalError(problem, file=MEMORY_BUDGET.option)
    return _size(text)


def _size(text: str | int) -> int:
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    value = str(text).strip()
    number = value.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    unit = value[len(number) :].strip().lower()
    return int(float(number.strip()) * SIZE_UNITS[unit])


def _size_problem(text: Any) -> str | None:
    try:
        size = _size(text)
    except (ValueError, KeyError, OverflowError):
        return f"not a size: {str(text)[:40]!r}; write e.g. 512MiB or 2GiB"
    if size < SMALLEST_BUDGET:
        return f"{str(text)[:40]!r} is below the smallest memory budget, 1MiB"
    return None


MEMORY_BUDGET = Setting(
    option="--memory-budget",
    kind=str,
    default=None,
    metavar="SIZE",
    check=_size_problem,
    help="Memory scoring may allocate at once, beyond the interpreter, its libraries and the tasks' data "
    "(e.g. 512MiB, 2GiB): the exact search of retrieval takes all of it, dense feature matrices at most half. "
    "Figures do not depend on it. Default: half the memory available (on the CPU at most 2GiB for "
    "matrices), or half the GPU's free memory.",
)
SAVE_PREDICTIONS = Setting(
    option="--save-predictions/--no-save-predictions",
    kind=bool,
    default=True,
    help="Write every task's per-test-item predictions to OUT.predictions.npz beside the results (what "
    "`embeval compare` and --resume read; well under a MB for a dozen tasks).",
)


def parse_classifiers(text: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...] | None:
    """'logreg,mlp' -> ("logreg", "mlp"); None stays None (the configured classifier alone)."""
    if text is None:
        return None
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    problem = _classifiers_problem(tuple(names))
    if problem is not None:
        raise EmbevalError(problem, file="--classifiers")
    return tuple(dict.fromkeys(names))


def _classifiers_problem(names: Any) -> str | None:
    if names is None:
        return None
    unknown = [n for n in names if n not in CLASSIFIERS] if isinstance(names, tuple) else [repr(names)]
    if unknown or not names:
        return f"unknown classifier {', '.join(unknown) or '(none named)'}; use logreg, mlp or logreg,mlp"
    return None


def _given(value: Any, name: str) -> Any:
    """None (not given on the command line) -> the declared default."""
    if value is not None:
        return value
    default = declared(RunConfig)[name].default
    return default() if callable(default) else default


def build(
    preset: str | None = None,
    kfold: int | None = None,
    classifier: str | Mapping[str, Any] | None = None,
    solver: str | None = None,
    seed: int | None = None,
    probing_classifier: str | None = None,
    classifiers: str | list[str] | tuple[str, ...] | None = None,
    normalize: str | None = None,
    bootstrap: int | None = None,
    baseline_bow_dim: int | None = None,
) -> RunConfig:
    """The run configuration of a command's options: a preset (--config), overridden by --kfold and
    --classifier (a JSON object or a dict); None is the declared default.

    classifiers: None (the configured classifier) or names of CLASSIFIERS, run one after the other on
    the classification tasks; the probing tasks follow it (logreg,mlp -> both) unless
    probing_classifier is given."""
    preset = _given(preset, "preset")
    if preset not in PRESETS:
        raise EmbevalError(f"unknown configuration {preset!r}; use {' or '.join(PRESETS)}", file="--config")
    settings = dict(PRESETS[preset].classifier)
    if classifier is not None:
        if isinstance(classifier, str):
            try:
                classifier = json.loads(classifier)
            except json.JSONDecodeError as err:
                raise EmbevalError(f"not valid JSON ({err.msg} at character {err.pos})", file="--classifier")
        if not isinstance(classifier, Mapping):
            raise EmbevalError("must be a JSON object such as '{\"nhid\": 50}'", file="--classifier")
        settings.update(classifier)
    names = parse_classifiers(classifiers)
    if probing_classifier is None and names is not None:
        probing_classifier = "both" if len(names) == 2 else names[0]
    return RunConfig(
        preset=preset,
        kfold=PRESETS[preset].kfold if kfold is None else kfold,
        classifier=ClassifierSettings.from_mapping(settings),
        solver=_given(solver, "solver"),
        seed=_given(seed, "seed"),
        probing_classifier=_given(probing_classifier, "probing_classifier"),
        bootstrap=_given(bootstrap, "bootstrap"),
        classifiers=names,
        normalize=_given(normalize, "normalize"),
        baseline_bow_dim=baseline_bow_dim,
    )


def as_config(config: RunConfig | Mapping[str, Any] | None) -> RunConfig:
    """A RunConfig from an API argument: a RunConfig, a results file's `config` object, or None (the
    defaults: the literature preset)."""
    if config is None:
        return RunConfig()
    if isinstance(config, RunConfig):
        return config
    if isinstance(config, Mapping):
        return RunConfig.from_record(config)
    raise EmbevalError(
        f"must be a RunConfig (embeval.run.config.build) or a dict, got {type(config).__name__}", file="config"
    )
