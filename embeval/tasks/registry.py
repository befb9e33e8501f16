"""The task registry: every SentEval task declared once, as data, in SentEval's order.

Every fact about a task lives on its entry: where its files are and how they are parsed, how
SentEval orders its samples, which evaluator scores it, its figures (headline first), the dev figure
that selects a normalization, where it appears in a report, which task lends it normalization
statistics, whether it hosts the geometry diagnostics, whether quickstart scores it, and its name in
MTEB. The runner, report, compare and quickstart read these fields and never test a task's name.
Adding a task is adding one entry (and an evaluator only if its kind is new).
"""

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from embeval.errors import EmbevalError
from embeval.tasks import loaders
from embeval.tasks.figures import (
    ACCURACY,
    F1,
    POOLED,
    RELATEDNESS_FIGURES,
    REPORT_GROUPS,
    RETRIEVAL_FIGURES,
    STS_FIGURES,
    Column,
    Figure,
    Mteb,
)

KINDS = ("classification", "pair-classification", "sts", "relatedness", "retrieval", "probing")
EVALUATORS = ("inner_kfold", "kfold", "split", "probing", "cosine_sts", "relatedness", "retrieval")
SORTS = (None, "single", "pair", "snli")
FEATURES = ("single", "pair", "snli")

CLASSIFICATION_METRICS = ("devacc", "acc", "ndev", "ntest")
RELATEDNESS_METRICS = ("devpearson", "pearson", "spearman", "mse", "ndev", "ntest")
STS_METRICS = ("pearson", "spearman", "nsamples")


@dataclass(frozen=True, kw_only=True)
class Task:
    """One task. `figures`: headline first; `selection`: the dev figure --normalize tune maximizes
    (None: the evaluator tunes on its own); `columns`: where its figures appear in `embeval report`;
    `statistics_from`: the task whose train split lends normalization statistics (STS12-16 have
    none of their own); `geometry`: the geometry diagnostics are computed on this task's table."""

    name: str
    kind: str
    files: tuple[str, ...]  # relative to the data folder
    encoding: str
    loader: Callable
    evaluator: str
    metrics: tuple[str, ...]
    figures: tuple[Figure, ...]
    selection: str | None = None
    columns: tuple[Column, ...] = ()
    short_name: str | None = None
    aliases: tuple[str, ...] = ()
    sort: str | None = None  # SentEval's sample order: single | pair | snli | None
    classes: tuple[str, ...] | None = None
    features: str = "single"  # single | pair ([|u-v|, u*v]) | snli ([u, v, u*v, |u-v|])
    statistics_from: str | None = None
    geometry: bool = False
    quickstart: bool = False
    mteb: Mteb | None = None
    params: dict = field(default_factory=dict)

    def __post_init__(self):
        checks = [
            (self.kind in KINDS, f"kind {self.kind!r} is not one of {KINDS}"),
            (self.evaluator in EVALUATORS, f"evaluator {self.evaluator!r} is not one of {EVALUATORS}"),
            (self.sort in SORTS, f"sort {self.sort!r} is not one of {SORTS}"),
            (self.features in FEATURES, f"features {self.features!r} is not one of {FEATURES}"),
            (bool(self.files), "no data files"),
            (bool(self.figures), "no figures"),
            (
                self.selection is None or self.selection in self.metrics,
                f"selection {self.selection!r} is not one of its metrics",
            ),
            (all(c.group in REPORT_GROUPS for c in self.columns), f"report groups are {REPORT_GROUPS}"),
        ]
        for ok, problem in checks:
            if not ok:
                raise ValueError(f"task {self.name}: {problem}")

    @property
    def label(self):
        """The name tables print: the short name people write (SICK-E, STS-B), else the name."""
        return self.short_name or self.name

    @property
    def headline(self):
        return self.figures[0]

    def load(self, data_dir):
        """Parse the task's files under data_dir into a TaskData (file order)."""
        return self.loader(Path(data_dir), self)

    def missing_files(self, data_dir):
        """The task's files that are not under data_dir."""
        return [rel for rel in self.files if not (Path(data_dir) / rel).is_file()]


STS_SUBSETS = {
    "STS12": ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
    "STS13": ("FNWN", "headlines", "OnWN"),
    "STS14": ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
    "STS15": ("answers-forums", "answers-students", "belief", "headlines", "images"),
    "STS16": ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
}

PROBING_FILES = {
    "Length": "sentence_length.txt",
    "WordContent": "word_content.txt",
    "Depth": "tree_depth.txt",
    "TopConstituents": "top_constituents.txt",
    "BigramShift": "bigram_shift.txt",
    "Tense": "past_present.txt",
    "SubjNumber": "subj_number.txt",
    "ObjNumber": "obj_number.txt",
    "OddManOut": "odd_man_out.txt",
    "CoordinationInversion": "coordination_inversion.txt",
}

# MTEB's STS12-16 test sets are SentEval's subsets of the year pooled: (dataset, revision, pairs).
STS_MTEB = {
    name: Mteb(
        name,
        f"mteb/{name.lower()}-sts",
        revision,
        pairs,
        POOLED,
        f"cosine, all {pairs} pairs of the {len(STS_SUBSETS[name])} subsets pooled",
    )
    for name, revision, pairs in (
        ("STS12", "a0d554a64d88156834ff5ae9920b964011b16384", 3108),
        ("STS13", "7e90230a92c190f1bf69ae9002b8cea547a64cca", 1500),
        ("STS14", "6031580fec1f6af667f0bd2da0a551cf4f0b2375", 3750),
        ("STS15", "ae752c7c21bf194d8b67fd573edf7ae58183cbe3", 3000),
        ("STS16", "4d8694f8f0e0100860b497b999b3dbed754a0513", 1186),
    )
}

D = "downstream/"
BINARY = ("negative", "positive")
ACCURACY_COLUMN = Column(
    "transfer", "acc", "accuracy %", per_classifier=True, measure="accuracy", protocol="classifier"
)
REGRESSOR_COLUMN = Column(
    "transfer", "pearson", "Pearson x100, regressor", scale=100.0, measure="pearson", protocol="regressor", split="test"
)
STSB_COSINE_COLUMN = Column(
    "sts", "cosine.spearman", "Spearman x100", scale=100.0, order=1, measure="spearman", protocol="cosine", split="test"
)
SICKR_COSINE_COLUMN = Column(
    "sts", "cosine.spearman", "Spearman x100", scale=100.0, order=2, measure="spearman", protocol="cosine", split="test"
)
CLASSIFICATION = {
    "metrics": CLASSIFICATION_METRICS,
    "figures": (ACCURACY,),
    "selection": "devacc",
    "columns": (ACCURACY_COLUMN,),
}


def _binary(name, folder, pos, neg, classes=BINARY):
    return Task(
        name=name,
        kind="classification",
        files=(f"{D}{folder}/{pos}", f"{D}{folder}/{neg}"),
        encoding="latin-1",
        loader=loaders.load_binary,
        evaluator="inner_kfold",
        sort="single",
        classes=classes,
        **CLASSIFICATION,
    )


def _sst(name, folder, fmt, classes):
    files = tuple(f"{D}SST/{folder}/sentiment-{s}" for s in ("train", "dev", "test"))
    return Task(
        name=name,
        kind="classification",
        files=files,
        encoding="utf-8",
        loader=loaders.load_sst,
        evaluator="split",
        sort="single",
        classes=classes,
        params={"format": fmt},
        **CLASSIFICATION,
    )


SICK_FILES = tuple(f"{D}SICK/{f}" for f in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"))


def _sts(name):
    folder = f"{D}STS/{name}-en-test"
    files = tuple(f"{folder}/STS.{kind}.{subset}.txt" for subset in STS_SUBSETS[name] for kind in ("input", "gs"))
    return Task(
        name=name,
        kind="sts",
        files=files,
        encoding="utf-8",
        loader=loaders.load_sts,
        evaluator="cosine_sts",
        metrics=STS_METRICS,
        figures=STS_FIGURES,
        sort="pair",
        features="pair",
        columns=(
            Column(
                "sts",
                "all.spearman.pooled",
                "Spearman x100",
                scale=100.0,
                measure="spearman",
                protocol="cosine",
                aggregation="pooled",
            ),
        ),
        statistics_from="STSBenchmark",
        quickstart=True,
        mteb=STS_MTEB[name],
        params={"folder": folder, "subsets": STS_SUBSETS[name]},
    )


def _probing(name, filename):
    return Task(
        name=name,
        kind="probing",
        files=(f"probing/{filename}",),
        encoding="utf-8",
        loader=loaders.load_probing,
        evaluator="probing",
        metrics=CLASSIFICATION_METRICS,
        figures=(ACCURACY,),
        selection="devacc",
        sort="single",
        columns=(Column("probing", "acc", "accuracy %", per_classifier=True),),
        params={"logreg_only": True} if name == "WordContent" else {},
    )


_DOWNSTREAM = (
    [
        _binary("CR", "CR", "custrev.pos", "custrev.neg"),
        _binary("MR", "MR", "rt-polarity.pos", "rt-polarity.neg"),
        _binary("MPQA", "MPQA", "mpqa.pos", "mpqa.neg"),
        _binary("SUBJ", "SUBJ", "subj.objective", "subj.subjective", classes=("subjective", "objective")),
        _sst("SST2", "binary", "tab", ("negative", "positive")),
        _sst("SST5", "fine", "label-first", ("very negative", "negative", "neutral", "positive", "very positive")),
        Task(
            name="TREC",
            kind="classification",
            files=(f"{D}TREC/train_5500.label", f"{D}TREC/TREC_10.label"),
            encoding="latin-1",
            loader=loaders.load_trec,
            evaluator="kfold",
            sort="single",
            classes=("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"),
            **CLASSIFICATION,
        ),
        Task(
            name="MRPC",
            kind="pair-classification",
            files=(f"{D}MRPC/msr_paraphrase_train.txt", f"{D}MRPC/msr_paraphrase_test.txt"),
            encoding="utf-8",
            loader=loaders.load_mrpc,
            evaluator="kfold",
            metrics=CLASSIFICATION_METRICS + ("f1",),
            figures=(ACCURACY, F1),
            selection="devacc",
            sort="pair",
            classes=("not paraphrase", "paraphrase"),
            features="pair",
            columns=(
                ACCURACY_COLUMN,
                Column(
                    "transfer", "f1", "F1 %", header="MRPC F1", per_classifier=True, measure="f1", protocol="classifier"
                ),
            ),
        ),
        Task(
            name="SICKEntailment",
            short_name="SICK-E",
            aliases=("SICK-E", "SICKE"),
            kind="pair-classification",
            files=SICK_FILES,
            encoding="utf-8",
            loader=loaders.load_sick,
            evaluator="split",
            sort="pair",
            classes=("CONTRADICTION", "NEUTRAL", "ENTAILMENT"),
            features="pair",
            params={"target": "entailment"},
            **CLASSIFICATION,
        ),
        Task(
            name="SICKRelatedness",
            short_name="SICK-R",
            aliases=("SICK-R", "SICKR"),
            kind="relatedness",
            files=SICK_FILES,
            encoding="utf-8",
            loader=loaders.load_sick,
            evaluator="relatedness",
            metrics=RELATEDNESS_METRICS,
            figures=RELATEDNESS_FIGURES,
            selection="devpearson",
            sort="pair",
            features="pair",
            columns=(REGRESSOR_COLUMN, SICKR_COSINE_COLUMN),
            mteb=Mteb(
                "SICK-R",
                "mteb/sickr-sts",
                "20a6d6f312dd54037fe07a32d58e5e168867909d",
                9927,
                "mteb.{coef}",
                "cosine, train + trial + test pooled (9927 pairs)",
                pooled_splits=("train", "dev", "test"),
            ),
            params={"target": "relatedness"},
        ),
        Task(
            name="STSBenchmark",
            short_name="STS-B",
            aliases=("STS-B", "STSB"),
            kind="relatedness",
            files=tuple(f"{D}STS/STSBenchmark/sts-{s}.csv" for s in ("train", "dev", "test")),
            encoding="utf-8",
            loader=loaders.load_stsb,
            evaluator="relatedness",
            metrics=RELATEDNESS_METRICS,
            figures=RELATEDNESS_FIGURES,
            selection="devpearson",
            sort="pair",
            features="pair",
            columns=(REGRESSOR_COLUMN, STSB_COSINE_COLUMN),
            geometry=True,
        ),
        Task(
            name="SNLI",
            kind="pair-classification",
            files=tuple(f"{D}SNLI/{f}.{s}" for s in ("train", "dev", "test") for f in ("s1", "s2", "labels")),
            encoding="latin-1",
            loader=loaders.load_snli,
            evaluator="split",
            sort="snli",
            classes=("entailment", "neutral", "contradiction"),
            features="snli",
            params={"folder": f"{D}SNLI", "noreg": True, "max_epoch": 15, "epoch_size": 1},
            **CLASSIFICATION,
        ),
        Task(
            name="ImageCaptionRetrieval",
            short_name="COCO",
            aliases=("COCO",),
            kind="retrieval",
            files=tuple(f"{D}COCO/{s}.pkl" for s in ("train", "valid", "test")),
            encoding="latin-1",
            loader=loaders.load_coco,
            evaluator="retrieval",
            metrics=("devacc", "acc", "ndev", "ntest"),
            figures=RETRIEVAL_FIGURES,
            selection="devacc",
            columns=(Column("transfer", "acc.mean_recall", "mean of R@1/5/10 both ways %"),),
        ),
    ]
    + [_sts(name) for name in STS_SUBSETS]
    + [
        Task(
            name="STSBenchmarkRaw",
            kind="sts",
            files=("raw/STSBenchmark/sts-test.csv",),
            encoding="utf-8",
            loader=loaders.load_stsb_raw,
            evaluator="cosine_sts",
            metrics=STS_METRICS,
            figures=STS_FIGURES,
            sort="pair",
            features="pair",
            statistics_from="STSBenchmark",
            mteb=Mteb(
                "STSBenchmark",
                "mteb/stsbenchmark-sts",
                "b0fddb56ed78048fa8b90373c8a3cfc37b684831",
                1379,
                POOLED,
                "cosine, test split, raw cased sentences",
            ),
        ),
    ]
)


def build_registry(tasks):
    """{name: task} after the checks that involve several entries: unique names and aliases, and
    statistics_from naming a task of the registry that has a train split of its own."""
    registry = {}
    spellings = {}
    for task in tasks:
        for spelling in (task.name, *task.aliases):
            key = spelling.lower()
            if key in spellings:
                raise ValueError(f"task {task.name}: the name {spelling!r} is also {spellings[key]}'s")
            spellings[key] = task.name
        registry[task.name] = task
    for task in tasks:
        lender = registry.get(task.statistics_from) if task.statistics_from else None
        if task.statistics_from and (lender is None or lender.statistics_from):
            raise ValueError(
                f"task {task.name}: statistics_from {task.statistics_from!r} is not a task with statistics of its own"
            )
    return registry


TASKS = build_registry(_DOWNSTREAM + [_probing(n, f) for n, f in PROBING_FILES.items()])


def canonical_name(spelling):
    """The registry name of a task as people write it (any case, or an alias such as STS-B), or None."""
    key = spelling.strip().lower()
    for task in TASKS.values():
        if key in (s.lower() for s in (task.name, *task.aliases)):
            return task.name
    return None


def parse_task_list(text, source="--tasks"):
    """Task names from a comma-separated list, in the order given (None: every task, in registry
    order). Case does not matter and the short names people write (STS-B, SICK-E, SICK-R, COCO) are
    accepted; an unknown name is an error with a suggestion."""
    if text is None:
        return list(TASKS)
    spellings = [t.strip() for t in text.split(",") if t.strip()]
    if not spellings:
        raise EmbevalError("no task named", file=source)
    names = []
    for spelling in spellings:
        name = canonical_name(spelling)
        if name is None:
            raise EmbevalError(
                f"unknown task {spelling}{_suggestion(spelling)}; tasks are {', '.join(TASKS)}", file=source
            )
        if name not in names:
            names.append(name)
    return names


def _suggestion(spelling):
    known = {s.lower(): t.name for t in TASKS.values() for s in (t.name, *t.aliases)}
    close = difflib.get_close_matches(spelling.lower(), list(known), n=1, cutoff=0.6)
    return f" (did you mean {known[close[0]]}?)" if close else ""
