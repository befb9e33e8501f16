"""The task registry: every SentEval task declared as data, in SentEval's order.

Adding a task means adding one entry here: where its files are, how they are encoded and parsed,
how SentEval orders its samples, which evaluator scores it and which metrics that reports.
"""
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

from embeval.errors import EmbevalError
from embeval.tasks import loaders

CLASSIFICATION_METRICS = ("devacc", "acc", "ndev", "ntest")
RELATEDNESS_METRICS = ("devpearson", "pearson", "spearman", "mse", "ndev", "ntest")
STS_METRICS = ("pearson", "spearman", "nsamples")
RETRIEVAL_METRICS = ("devacc", "acc", "ndev", "ntest")


@dataclass(frozen=True)
class Task:
    name: str
    kind: str  # classification | pair-classification | sts | relatedness | retrieval | probing
    files: Tuple[str, ...]  # relative to the data folder
    encoding: str
    loader: Callable
    evaluator: str  # the name of its evaluator in embeval.evaluate
    metrics: Tuple[str, ...]
    sort: Optional[str] = None  # SentEval's sample order: single | pair | snli | None
    classes: Optional[Tuple[str, ...]] = None
    features: str = "single"  # single | pair ([|u-v|, u*v]) | snli ([u, v, u*v, |u-v|])
    params: Dict = field(default_factory=dict)

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

D = "downstream/"
BINARY = ("negative", "positive")


def _binary(name, folder, pos, neg, classes=BINARY):
    return Task(name, "classification", (f"{D}{folder}/{pos}", f"{D}{folder}/{neg}"), "latin-1",
                loaders.load_binary, "inner_kfold", CLASSIFICATION_METRICS, "single", classes)


def _sst(name, folder, fmt, classes):
    files = tuple(f"{D}SST/{folder}/sentiment-{s}" for s in ("train", "dev", "test"))
    return Task(name, "classification", files, "utf-8", loaders.load_sst, "split",
                CLASSIFICATION_METRICS, "single", classes, params={"format": fmt})


def _sick(name, target, evaluator, metrics, kind, classes):
    files = tuple(f"{D}SICK/{f}" for f in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"))
    return Task(name, kind, files, "utf-8", loaders.load_sick, evaluator, metrics, "pair", classes,
                features="pair", params={"target": target})


def _sts(name):
    folder = f"{D}STS/{name}-en-test"
    files = tuple(f"{folder}/STS.{kind}.{subset}.txt" for subset in STS_SUBSETS[name] for kind in ("input", "gs"))
    return Task(name, "sts", files, "utf-8", loaders.load_sts, "cosine_sts", STS_METRICS, "pair",
                features="pair", params={"folder": folder, "subsets": STS_SUBSETS[name]})


def _probing(name, filename):
    params = {"logreg_only": True} if name == "WordContent" else {}
    return Task(name, "probing", (f"probing/{filename}",), "utf-8", loaders.load_probing, "probing",
                CLASSIFICATION_METRICS, "single", params=params)


_DOWNSTREAM = [
    _binary("CR", "CR", "custrev.pos", "custrev.neg"),
    _binary("MR", "MR", "rt-polarity.pos", "rt-polarity.neg"),
    _binary("MPQA", "MPQA", "mpqa.pos", "mpqa.neg"),
    _binary("SUBJ", "SUBJ", "subj.objective", "subj.subjective", classes=("subjective", "objective")),
    _sst("SST2", "binary", "tab", ("negative", "positive")),
    _sst("SST5", "fine", "label-first", ("very negative", "negative", "neutral", "positive", "very positive")),
    Task("TREC", "classification", (f"{D}TREC/train_5500.label", f"{D}TREC/TREC_10.label"), "latin-1",
         loaders.load_trec, "kfold", CLASSIFICATION_METRICS, "single",
         ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")),
    Task("MRPC", "pair-classification",
         (f"{D}MRPC/msr_paraphrase_train.txt", f"{D}MRPC/msr_paraphrase_test.txt"), "utf-8",
         loaders.load_mrpc, "kfold", CLASSIFICATION_METRICS + ("f1",), "pair",
         ("not paraphrase", "paraphrase"), features="pair"),
    _sick("SICKEntailment", "entailment", "split", CLASSIFICATION_METRICS, "pair-classification",
          ("CONTRADICTION", "NEUTRAL", "ENTAILMENT")),
    _sick("SICKRelatedness", "relatedness", "relatedness", RELATEDNESS_METRICS, "relatedness", None),
    Task("STSBenchmark", "relatedness",
         tuple(f"{D}STS/STSBenchmark/sts-{s}.csv" for s in ("train", "dev", "test")), "utf-8",
         loaders.load_stsb, "relatedness", RELATEDNESS_METRICS, "pair", features="pair"),
    Task("SNLI", "pair-classification",
         tuple(f"{D}SNLI/{f}.{s}" for s in ("train", "dev", "test") for f in ("s1", "s2", "labels")),
         "latin-1", loaders.load_snli, "split", CLASSIFICATION_METRICS, "snli",
         ("entailment", "neutral", "contradiction"), features="snli",
         params={"folder": f"{D}SNLI", "noreg": True, "max_epoch": 15, "epoch_size": 1}),
    Task("ImageCaptionRetrieval", "retrieval",
         tuple(f"{D}COCO/{s}.pkl" for s in ("train", "valid", "test")), "latin-1",
         loaders.load_coco, "retrieval", RETRIEVAL_METRICS),
] + [_sts(name) for name in STS_SUBSETS] + [
    Task("STSBenchmarkRaw", "sts", ("raw/STSBenchmark/sts-test.csv",), "utf-8", loaders.load_stsb_raw,
         "cosine_sts", STS_METRICS, "pair", features="pair"),  # MTEB's STS-B: raw cased test sentences
]

TASKS = {task.name: task for task in _DOWNSTREAM + [_probing(n, f) for n, f in PROBING_FILES.items()]}
TASK_NAMES = tuple(TASKS)
DOWNSTREAM_TASKS = tuple(t.name for t in _DOWNSTREAM)
PROBING_TASKS = tuple(PROBING_FILES)


def parse_task_list(text, source="--tasks"):
    """Task names from a comma-separated list, in registry order; unknown names are an error."""
    if text is None:
        return list(TASK_NAMES)
    names = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [n for n in names if n not in TASKS]
    if unknown:
        raise EmbevalError(f"unknown task {', '.join(unknown)}; tasks are {', '.join(TASK_NAMES)}",
                           file=source)
    if not names:
        raise EmbevalError("no task named", file=source)
    return [n for n in TASK_NAMES if n in names]
