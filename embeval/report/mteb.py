"""`embeval export-mteb`: an embeval results file as MTEB result files.

MTEB's tooling (its result cache, leaderboard and `mteb.ResultCache().load_results`) reads one JSON
file per task, `results/<org>__<model>/<revision>/<MTEB task name>.json`, beside a `model_meta.json`.
Only the tasks MTEB shares with SentEval, and only figures computed by MTEB's protocol, are written:

- STS12-16: cosine similarity, every pair of the year's subsets pooled into one correlation over
  MTEB's test split (the same pairs as SentEval's files): embeval's `all.<coef>.pooled` figures.
- STSBenchmark: cosine similarity on the test split's raw, cased sentences, which embeval scores as
  the task STSBenchmarkRaw (SentEval's STSBenchmark is tokenized and lowercased).
- SICK-R: cosine similarity over all 9,927 pairs (SentEval's train, trial and test pooled, MTEB's
  only split), which embeval records under `mteb` in SICKRelatedness's results.
A results file without these figures (SentEval's tokenized STS-B, SICK-R's test split only) leaves the
task out with a note, never writing a figure of another protocol as MTEB's main score.

No other SentEval task has an MTEB counterpart with the same data and protocol (MTEB has no MR, CR,
SUBJ, MPQA, SST, TREC, MRPC, SICK-E, SNLI, COCO caption retrieval or probing task).
"""
import json
import re
from dataclasses import dataclass
from pathlib import Path

from embeval._version import __version__
from embeval.errors import EmbevalError
from embeval.formats import atomic
from embeval.report.tables import load

# The MTEB version whose result schema is written (and tested with the real client).
MTEB_SCHEMA_VERSION = "2.26.24"
NO_REVISION = "no_revision_available"  # MTEB's own placeholder when a model has no revision
SPLIT = "test"
SUBSET = "default"
LANGUAGES = ["eng-Latn"]


@dataclass(frozen=True)
class MtebTask:
    """A SentEval task's MTEB counterpart. Declared here once; these facts belong on the task registry."""

    name: str  # MTEB's task name
    dataset: str  # MTEB's dataset on the Hugging Face hub
    revision: str  # the dataset revision MTEB evaluates
    pairs: int  # pairs in MTEB's test split
    source: str  # the embeval task whose results hold the MTEB-protocol figures
    figures: str  # where they sit in its results: a path with {coef} for spearman or pearson
    protocol: str  # what the figure is, for the user


POOLED = "all.{coef}.pooled"

MTEB_TASKS = {
    "STS12": MtebTask("STS12", "mteb/sts12-sts", "a0d554a64d88156834ff5ae9920b964011b16384", 3108, "STS12", POOLED,
                      "cosine, all 3108 pairs of the 5 subsets pooled"),
    "STS13": MtebTask("STS13", "mteb/sts13-sts", "7e90230a92c190f1bf69ae9002b8cea547a64cca", 1500, "STS13", POOLED,
                      "cosine, all 1500 pairs of the 3 subsets pooled"),
    "STS14": MtebTask("STS14", "mteb/sts14-sts", "6031580fec1f6af667f0bd2da0a551cf4f0b2375", 3750, "STS14", POOLED,
                      "cosine, all 3750 pairs of the 6 subsets pooled"),
    "STS15": MtebTask("STS15", "mteb/sts15-sts", "ae752c7c21bf194d8b67fd573edf7ae58183cbe3", 3000, "STS15", POOLED,
                      "cosine, all 3000 pairs of the 5 subsets pooled"),
    "STS16": MtebTask("STS16", "mteb/sts16-sts", "4d8694f8f0e0100860b497b999b3dbed754a0513", 1186, "STS16", POOLED,
                      "cosine, all 1186 pairs of the 5 subsets pooled"),
    "STSBenchmark": MtebTask("STSBenchmark", "mteb/stsbenchmark-sts", "b0fddb56ed78048fa8b90373c8a3cfc37b684831",
                             1379, "STSBenchmarkRaw", POOLED, "cosine, test split, raw cased sentences"),
    "SICKRelatedness": MtebTask("SICK-R", "mteb/sickr-sts", "20a6d6f312dd54037fe07a32d58e5e168867909d", 9927,
                                "SICKRelatedness", "mteb.{coef}", "cosine, train + trial + test pooled (9927 pairs)"),
}

WHY_ABSENT = {
    "STSBenchmark": "the results hold no MTEB-protocol figure (cosine on the raw, cased test sentences: the task "
                    "STSBenchmarkRaw); SentEval's figure is on tokenized text",
    "SICKRelatedness": "the results hold no MTEB-protocol figure (cosine over all 9927 pairs); SentEval's "
                       "cosine figure covers the test split only",
}

MODEL_NAME = re.compile(r"^[^/\s]+/[^/\s]+$")
REVISION = re.compile(r"^[A-Za-z0-9._-]+$")


def _figure(results, path):
    value = results
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _pairs(task, results):
    """The pairs the figure was computed on, or None when the results do not say."""
    if MTEB_TASKS[task].figures == POOLED:
        counts = [v.get("nsamples") for k, v in results.items() if isinstance(v, dict) and k not in
                  ("all", "normalized")]
        return sum(counts) if counts and all(isinstance(c, int) for c in counts) else None
    found = (results.get("mteb") or {}).get("nsamples")
    return found if isinstance(found, int) else None


def scores(record):
    """({MTEB task name: (embeval task, MtebTask, spearman, pearson)}, [notes on tasks left out])."""
    chosen, notes = {}, []
    for task, spec in MTEB_TASKS.items():
        entry = record["tasks"].get(spec.source)
        if entry is None:
            if task in record["tasks"]:
                notes.append(f"{task}: left out: {WHY_ABSENT[task]}")
            continue
        results = entry["results"]
        spearman = _figure(results, spec.figures.format(coef="spearman"))
        pearson = _figure(results, spec.figures.format(coef="pearson"))
        if spearman is None or pearson is None:
            notes.append(f"{task}: left out: {WHY_ABSENT.get(task, 'the results hold no pooled cosine figure')}")
            continue
        pairs = _pairs(task, results)
        if pairs is not None and pairs != spec.pairs:
            notes.append(f"{task}: left out: scored on {pairs} pairs, MTEB's {spec.name} has {spec.pairs}")
            continue
        chosen[spec.name] = (spec.source, spec, spearman, pearson)
    return chosen, notes


def task_result(task, spec, spearman, pearson, entry, source):
    """One MTEB result file's content (TaskResult's schema)."""
    return {
        "dataset_revision": spec.revision,
        "task_name": spec.name,
        "mteb_version": MTEB_SCHEMA_VERSION,
        "scores": {SPLIT: [{
            "cosine_spearman": spearman,
            "cosine_pearson": pearson,
            "main_score": spearman,
            "hf_subset": SUBSET,
            "languages": list(LANGUAGES),
        }]},
        "evaluation_time": entry.get("seconds"),
        "kg_co2_emissions": None,
        # Ignored by MTEB's loader; says where the figures come from.
        "embeval": {"version": __version__, "results_file": source, "task": task,
                    "figures": spec.figures.format(coef="<spearman|pearson>"), "protocol": spec.protocol,
                    "written_by": "embeval export-mteb, not by mteb.evaluate"},
    }


def model_meta(name, revision, dim):
    """model_meta.json: the fields of MTEB's ModelMeta, unknown ones null (MTEB's empty ModelMeta)."""
    return {
        "name": name, "revision": revision, "release_date": None, "languages": None, "n_parameters": None,
        "n_active_parameters_override": None, "n_embedding_parameters": None, "memory_usage_mb": None,
        "max_tokens": None, "embed_dim": dim, "license": None, "open_weights": None, "public_training_code": None,
        "public_training_data": None, "framework": [], "reference": None, "similarity_fn_name": "cosine",
        "use_instructions": None, "training_datasets": None, "adapted_from": None, "superseded_by": None,
        "modalities": ["text"], "model_type": ["dense"], "citation": None, "contacts": None,
        "experiment_kwargs": None, "output_dtypes": None, "extra_requirements_groups": None, "loader_kwargs": {},
        "loader": None, "is_cross_encoder": False,
    }


def model_folder(name):
    """MTEB's folder name for a model: '/' as '__', spaces as '_'."""
    return name.replace("/", "__").replace(" ", "_")


def export(results_path, model, out, revision=None):
    """Write the MTEB result files; returns (folder written, [(MTEB task, file, main score, protocol)], notes)."""
    if not MODEL_NAME.match(model or ""):
        raise EmbevalError("the model name must be 'organization/model' (MTEB's form), e.g. my-org/my-encoder",
                           file="--model")
    revision = revision or NO_REVISION
    if not REVISION.match(revision):
        raise EmbevalError("the revision may hold letters, digits, '.', '_' and '-' only", file="--revision")
    record = load(results_path)
    chosen, notes = scores(record)
    if not chosen:
        raise EmbevalError("no task with an MTEB-protocol figure (STS12-16, STSBenchmark, SICK-R) to export"
                           + (f" ({'; '.join(notes)})" if notes else ""), file=results_path)
    folder = Path(out) / "results" / model_folder(model) / revision
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise EmbevalError(f"cannot create the folder ({err.strerror})", file=folder)
    dims = {e["vectors"]["dim"] for e in record["tasks"].values() if isinstance(e.get("vectors"), dict)
            and isinstance(e["vectors"].get("dim"), int)}
    written = []
    for name, (task, spec, spearman, pearson) in chosen.items():
        path = folder / f"{name}.json"
        content = task_result(task, spec, spearman, pearson, record["tasks"][task], Path(results_path).name)
        atomic.write_text(path, json.dumps(content, indent=2) + "\n")
        written.append((name, path, spearman, spec.protocol))
    meta = model_meta(model, revision, dims.pop() if len(dims) == 1 else None)
    atomic.write_text(folder / "model_meta.json", json.dumps(meta, indent=2) + "\n")
    return folder, written, notes
