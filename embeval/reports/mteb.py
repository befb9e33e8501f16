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
from pathlib import Path

from embeval._version import __version__
from embeval.errors import EmbevalError
from embeval.formats import atomic
from embeval.reports.tables import load
from embeval.tasks.figures import POOLED
from embeval.tasks.registry import TASKS

# The MTEB version whose result schema is written (and tested with the real client).
MTEB_SCHEMA_VERSION = "2.26.24"
NO_REVISION = "no_revision_available"  # MTEB's own placeholder when a model has no revision
SPLIT = "test"
SUBSET = "default"
LANGUAGES = ["eng-Latn"]


# MTEB's task name -> (the embeval task whose results hold MTEB's figures, its registry facts)
MTEB_TASKS = {task.mteb.name: (name, task.mteb) for name, task in TASKS.items() if task.mteb is not None}

# Why an MTEB task is left out when the results hold SentEval's figure but not MTEB's (by MTEB name).
WHY_ABSENT = {
    "STSBenchmark": "the results hold no MTEB-protocol figure (cosine on the raw, cased test sentences: the task "
    "STSBenchmarkRaw); SentEval's figure is on tokenized text",
    "SICK-R": "the results hold no MTEB-protocol figure (cosine over all 9927 pairs); SentEval's cosine figure "
    "covers the test split only",
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
    if MTEB_TASKS[task][1].figures == POOLED:
        counts = [
            v.get("nsamples") for k, v in results.items() if isinstance(v, dict) and k not in ("all", "normalized")
        ]
        return sum(counts) if counts and all(isinstance(c, int) for c in counts) else None
    found = (results.get("mteb") or {}).get("nsamples")
    return found if isinstance(found, int) else None


def scores(record):
    """({MTEB task name: (embeval task, its Mteb facts, spearman, pearson)}, [notes on tasks left out])."""
    chosen, notes = {}, []
    for task, (source, spec) in MTEB_TASKS.items():
        entry = record["tasks"].get(source)
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
        chosen[spec.name] = (source, spec, spearman, pearson)
    return chosen, notes


def task_result(task, spec, spearman, pearson, entry, source):
    """One MTEB result file's content (TaskResult's schema)."""
    return {
        "dataset_revision": spec.revision,
        "task_name": spec.name,
        "mteb_version": MTEB_SCHEMA_VERSION,
        "scores": {
            SPLIT: [
                {
                    "cosine_spearman": spearman,
                    "cosine_pearson": pearson,
                    "main_score": spearman,
                    "hf_subset": SUBSET,
                    "languages": list(LANGUAGES),
                }
            ]
        },
        "evaluation_time": entry.get("seconds"),
        "kg_co2_emissions": None,
        # Ignored by MTEB's loader; says where the figures come from.
        "embeval": {
            "version": __version__,
            "results_file": source,
            "task": task,
            "figures": spec.figures.format(coef="<spearman|pearson>"),
            "protocol": spec.protocol,
            "written_by": "embeval export-mteb, not by mteb.evaluate",
        },
    }


def model_meta(name, revision, dim):
    """model_meta.json: the fields of MTEB's ModelMeta, unknown ones null (MTEB's empty ModelMeta)."""
    return {
        "name": name,
        "revision": revision,
        "release_date": None,
        "languages": None,
        "n_parameters": None,
        "n_active_parameters_override": None,
        "n_embedding_parameters": None,
        "memory_usage_mb": None,
        "max_tokens": None,
        "embed_dim": dim,
        "license": None,
        "open_weights": None,
        "public_training_code": None,
        "public_training_data": None,
        "framework": [],
        "reference": None,
        "similarity_fn_name": "cosine",
        "use_instructions": None,
        "training_datasets": None,
        "adapted_from": None,
        "superseded_by": None,
        "modalities": ["text"],
        "model_type": ["dense"],
        "citation": None,
        "contacts": None,
        "experiment_kwargs": None,
        "output_dtypes": None,
        "extra_requirements_groups": None,
        "loader_kwargs": {},
        "loader": None,
        "is_cross_encoder": False,
    }


def model_folder(name):
    """MTEB's folder name for a model: '/' as '__', spaces as '_'."""
    return name.replace("/", "__").replace(" ", "_")


def export(results_path, model, out, revision=None):
    """Write the MTEB result files; returns (folder written, [(MTEB task, file, main score, protocol)], notes)."""
    if not MODEL_NAME.match(model or ""):
        raise EmbevalError(
            "the model name must be 'organization/model' (MTEB's form), e.g. my-org/my-encoder", file="--model"
        )
    revision = revision or NO_REVISION
    if not REVISION.match(revision):
        raise EmbevalError("the revision may hold letters, digits, '.', '_' and '-' only", file="--revision")
    record = load(results_path)
    chosen, notes = scores(record)
    if not chosen:
        raise EmbevalError(
            "no task with an MTEB-protocol figure (STS12-16, STSBenchmark, SICK-R) to export"
            + (f" ({'; '.join(notes)})" if notes else ""),
            file=results_path,
        )
    folder = Path(out) / "results" / model_folder(model) / revision
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise EmbevalError(f"cannot create the folder ({err.strerror})", file=folder)
    dims = {
        e["vectors"]["dim"]
        for e in record["tasks"].values()
        if isinstance(e.get("vectors"), dict) and isinstance(e["vectors"].get("dim"), int)
    }
    written = []
    for name, (task, spec, spearman, pearson) in chosen.items():
        path = folder / f"{name}.json"
        content = task_result(task, spec, spearman, pearson, record["tasks"][task], Path(results_path).name)
        atomic.write_text(path, json.dumps(content, indent=2) + "\n")
        written.append((name, path, spearman, spec.protocol))
    meta = model_meta(model, revision, dims.pop() if len(dims) == 1 else None)
    atomic.write_text(folder / "model_meta.json", json.dumps(meta, indent=2) + "\n")
    return folder, written, notes
