"""The vocabulary of a task's figures: what a figure is, where it appears in a report, and how to
find it in a task's results. Which figures each task has is declared by its kind (embeval/kinds/).

A figure is named by its path in the task's results (see embeval.formats.predictions): "acc",
"all.spearman.pooled", "cosine.spearman", ...
"""

from dataclasses import dataclass

CLASSIFIER_SETS = ("logreg", "mlp")


@dataclass(frozen=True)
class Figure:
    """A figure of a task's results: its path, its label, and whether it is a percentage (True) or a
    fraction such as a correlation (False)."""

    path: str
    label: str
    percent: bool


@dataclass(frozen=True)
class Column:
    """Where a figure appears in `embeval report`: its table (a group of embeval.tasks.groups), the
    figure's path, the column header (None: the task's short name), what the figure is in words, the
    factor from the JSON's units to the table's, whether each classifier that ran has its own table,
    and what the table's caption says of it (tasks with the same note are named together)."""

    group: str
    path: str
    metric: str
    scale: float = 1.0
    header: str | None = None
    per_classifier: bool = False
    order: int = 0  # columns of a table are sorted by it, registry order breaking ties
    measure: str | None = None  # accuracy | f1 | pearson | spearman: what a published baseline must report here
    protocol: str | None = None  # classifier | regressor | cosine
    aggregation: str | None = None  # STS12-16: pooled | mean | wmean
    split: str | None = None  # the split a correlation is computed on
    note: str = ""

    def spec(self, task, classifier=None, vectors=None):
        """How this column's figure was computed, for matching published baselines (None: no baseline
        can stand beside it)."""
        if self.measure is None:
            return None
        spec = {"task": task, "metric": self.measure, "protocol": self.protocol}
        if self.protocol == "classifier":
            spec["classifier"] = classifier
        if self.protocol == "cosine":
            spec["vectors"] = vectors
        if self.aggregation:
            spec["aggregation"] = self.aggregation
        if self.split:
            spec["split"] = self.split
        return spec


def lookup(results, path):
    """The value at a dotted path of a results dict (None when absent)."""
    value = results
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def variants(results):
    """Prefixes under which a task's figures also appear: each classifier that ran ('logreg.',
    'mlp.'), and the normalized cosine figures ('normalized.', 'cosine_normalized' for relatedness)."""
    out = [""]
    if isinstance(results, dict):
        out += [f"{name}." for name in CLASSIFIER_SETS if isinstance(results.get(name), dict)]
        if isinstance(results.get("normalized"), dict):
            out.append("normalized.")
    return out


POOLED = "all.{coef}.pooled"


@dataclass(frozen=True)
class Mteb:
    """A task's counterpart in MTEB, on the task whose results hold MTEB's figures: MTEB's task name,
    the dataset and revision MTEB evaluates, its number of pairs, where the figures sit in the task's
    results (a path with {coef}: spearman or pearson), the protocol in words, the splits pooled for
    it (empty: the evaluator's own figure is MTEB's), why an export leaves it out when the results
    hold SentEval's figure but not MTEB's, and the MTEB subset the figures are of with its languages
    (ISO 639-3 and script, e.g. "dan-Latn")."""

    name: str
    dataset: str = ""
    revision: str = ""
    pairs: int = 0
    figures: str = ""
    protocol: str = ""
    pooled_splits: tuple = ()
    absent: str = ""
    subset: str = "default"
    languages: tuple = ("eng-Latn",)
    # A task scored by name (embeval.tasks.mteb_source): the split, mteb's type and main score, the
    # benchmarks it was asked through, a revision mismatch allowed, a revision that could not be verified.
    split: str = "test"
    type: str = ""
    main_score: str = ""
    benchmarks: tuple = ()
    revision_mismatch: str = ""
    revision_unverified: str = ""
    revision_scored: str = ""  # the revision of the copy scored, when it is not mteb's (a mismatch allowed)
    parts: int = 0  # how many (subset, split) parts the mteb task has
    # A part holding many of mteb's subsets (parallel subsets: each language pair), each with its languages.
    subset_languages: tuple = ()
    notes: tuple = ()  # what mteb does silently with the part's data (judgments outside the corpus, ...)
