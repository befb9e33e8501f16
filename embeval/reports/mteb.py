"""`embeval export-mteb`: an embeval results file as MTEB result files.

MTEB's tooling (its result cache, leaderboard and `mteb.ResultCache().load_results`) reads one JSON
file per task, `results/<org>__<model>/<revision>/<MTEB task name>.json`, beside a `model_meta.json`.
Only tasks with an MTEB counterpart (a task's [mteb] table: its MTEB name and revision), and only
figures computed by MTEB's protocol (each kind says which: its mteb_scores), are written. Of
SentEval's tasks:

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

A task file's task with an [mteb] table (name, revision; subset and languages when not MTEB's
"default" subset in English) is exported when its kind scored it MTEB's way: pair classification
and classification with protocol "mteb", clustering, summarization, bitext mining
(docs/mteb-kinds.md). Its main_score is the task's headline figure (`figure` chooses another).
"""

import json
import logging
import re
from pathlib import Path

from embeval._version import __version__
from embeval.errors import EmbevalError
from embeval.formats import atomic, targets
from embeval.reports.tables import load, task_specs
from embeval.tasks.mteb_tasks import tie_exposure
from embeval.tasks.registry import builtin
from embeval.untrusted import FILE_STEM, MAX_DECLARATION_BYTES, check_name, read_json

logger = logging.getLogger("embeval")

# The MTEB version whose result schema is written (and tested with the real client).
MTEB_SCHEMA_VERSION = "2.26.24"
NO_REVISION = "no_revision_available"  # MTEB's own placeholder when a model has no revision
SPLIT = "test"
SUBSET = "default"
LANGUAGES = ["eng-Latn"]


MODEL_NAME = re.compile(r"[^/\s]+/[^/\s]+")  # fullmatch
REVISION = re.compile(r"[A-Za-z0-9._-]+")


def scores(record, path="results", registry=None):
    """({MTEB task name: (TaskSpec, MTEB's score fields)}, [notes on tasks left out])."""
    specs, notes = task_specs([record], [path], registry)
    chosen = {}
    for spec in specs:
        if spec.mteb is None or spec.name not in record["tasks"]:
            continue
        fields = spec.kind_module.mteb_scores(spec, record["tasks"][spec.name]["results"])
        if fields is None:
            why = spec.mteb.absent or "the results hold no figure computed MTEB's way"
            notes.append(f"{spec.mteb.name}: left out: {why}")
            continue
        pairs = fields.pop("pairs", None)
        if spec.mteb.pairs and pairs is not None and pairs != spec.mteb.pairs:
            notes.append(
                f"{spec.mteb.name}: left out: scored on {pairs} pairs, MTEB's {spec.mteb.name} has {spec.mteb.pairs}"
            )
            continue
        if not spec.mteb.revision:
            logger.warning(
                f"{spec.mteb.name}: exported with dataset_revision left empty (the [mteb] table declares no `revision`)"
            )
        chosen.setdefault(spec.mteb.name, []).append((spec, fields))  # several: the subsets and splits of a task
    for spec in builtin().values():  # a task named like an MTEB task whose figures another task holds
        if (
            spec.mteb
            and spec.mteb.name not in chosen
            and spec.name not in record["tasks"]
            and spec.mteb.name in record["tasks"]
            and spec.mteb.absent
        ):
            notes.append(f"{spec.mteb.name}: left out: {spec.mteb.absent}")
    return chosen, list(dict.fromkeys(notes))


NOTES = "embeval_notes"  # a key of each part's scores: mteb's TaskResult keeps it (scores are dicts) and ignores it


def part_notes(spec, entry):
    """What the results say of one part beyond its figures, as export-mteb writes it under NOTES in the
    part's scores: a revision mismatch allowed or a revision not verified (a task scored by name), the
    notes on its data (judgments outside the corpus, ...) and its tie exposure (retrieval, reranking)."""
    notes = {}
    if spec.mteb.revision_mismatch:
        notes["revision_mismatch"] = spec.mteb.revision_mismatch
    if spec.mteb.revision_unverified:
        notes["revision_unverified"] = spec.mteb.revision_unverified
    if spec.mteb.notes:
        notes["data"] = list(spec.mteb.notes)
    ties = tie_exposure(spec, entry.get("results") or {})
    if ties is not None:
        notes["tie_exposure"] = ties
    return notes


def dataset_revision(parts):
    """The revision a result file names: the revision of the copies scored when a mismatch was allowed
    (the figures are of that revision), else mteb's."""
    scored = {one.mteb.revision_scored for one, _ in parts}
    return scored.pop() if len(scored) == 1 and "" not in scored else parts[0][0].mteb.revision


def task_result(parts, entries, source):
    """One MTEB result file's content (TaskResult's schema): parts [(TaskSpec, score fields)] of one
    MTEB task (a subset and split each), entries their results entries."""
    spec = parts[0][0]
    scores = {}
    for (one, fields), entry in zip(parts, entries, strict=True):
        notes = part_notes(one, entry)
        subsets = fields.get("hf_subsets") or {one.mteb.subset: fields}  # a part of several subsets: each its entry
        languages = dict(one.mteb.subset_languages)
        for subset, values in subsets.items():
            part = dict(values, hf_subset=subset, languages=list(languages.get(subset, one.mteb.languages)))
            if notes:
                part[NOTES] = notes
            scores.setdefault(one.mteb.split, []).append(part)
    seconds = [e.get("seconds") for e in entries]
    return {
        "dataset_revision": dataset_revision(parts),
        "task_name": spec.mteb.name,
        "mteb_version": MTEB_SCHEMA_VERSION,
        "scores": scores,
        "evaluation_time": sum(seconds) if all(isinstance(t, (int, float)) for t in seconds) else None,
        "kg_co2_emissions": None,
        # Ignored by MTEB's loader; says where the figures come from.
        "embeval": {
            "version": __version__,
            "results_file": source,
            "task": spec.name,
            "figures": spec.mteb.figures.format(coef="<spearman|pearson>") if spec.mteb.figures else "",
            "protocol": spec.mteb.protocol,
            "written_by": WRITTEN_BY,
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


WRITTEN_BY = "embeval export-mteb, not by mteb.evaluate"  # in every result file: what marks it as embeval's


def _json_of(path):
    try:
        return read_json(path, MAX_DECLARATION_BYTES, warn=False)
    except EmbevalError:
        return None


def _is_task_result(path):
    """Whether an MTEB result file is one export-mteb wrote (its `embeval` object says so)."""
    content = _json_of(path)
    about = content.get("embeval") if isinstance(content, dict) else None
    return isinstance(about, dict) and about.get("written_by") == WRITTEN_BY


def _is_model_meta(path):
    """Whether a model_meta.json is one export-mteb wrote: exactly model_meta() of its own name, revision
    and dimension (MTEB's ModelMeta takes no field of embeval's, so the content is the mark)."""
    content = _json_of(path)
    if not isinstance(content, dict) or not isinstance(content.get("name"), str):
        return False
    return content == model_meta(content["name"], content.get("revision"), content.get("embed_dim"))


TASK_RESULT = targets.Output("an MTEB result file that embeval export-mteb wrote", _is_task_result)
MODEL_META = targets.Output("a model_meta.json that embeval export-mteb wrote", _is_model_meta)


def model_folder(name):
    """MTEB's folder name for a model: '/' as '__', spaces as '_'."""
    return name.replace("/", "__").replace(" ", "_")


def export(results_path, model, out, revision=None, registry=None):
    """Write the MTEB result files; returns (folder written, [(MTEB task, file, main score, protocol)], notes)."""
    if not MODEL_NAME.fullmatch(model or ""):
        raise EmbevalError(
            "the model name must be 'organization/model' (MTEB's form), e.g. my-org/my-encoder", file="--model"
        )
    revision = revision or NO_REVISION
    if not REVISION.fullmatch(revision) or revision in (".", ".."):
        raise EmbevalError(
            "the revision may hold letters, digits, '.', '_' and '-' only (and is not '.' or '..')", file="--revision"
        )
    targets.check_folder(out)
    record = load(results_path)
    chosen, notes = scores(record, results_path, registry)
    if not chosen:
        ours = ", ".join(spec.label for spec in builtin().values() if spec.mteb and spec.mteb.figures)
        raise EmbevalError(
            f"no task with an MTEB-protocol figure to export: a task of your own is exported when its task "
            f"file has an [mteb] table (MTEB's task name and revision: `embeval docs mteb-kinds`) and the vectors are "
            f"scored with that task file; SentEval's tasks that are: {ours}"
            + (f" ({'; '.join(notes)})" if notes else ""),
            file=results_path,
        )
    folder = Path(out) / "results" / model_folder(model) / revision
    paths = {}
    for name, parts in chosen.items():
        stem = check_name(name, "MTEB task name", file=results_path, task=parts[0][0].name, pattern=FILE_STEM)
        paths[name] = folder / f"{stem}.json"
    meta_path = folder / "model_meta.json"
    targets.check(
        [targets.Target(path, TASK_RESULT) for path in paths.values()] + [targets.Target(meta_path, MODEL_META)],
        [results_path, *registry.sources()] if registry is not None else [results_path],
    )
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
    for name, parts in chosen.items():
        spec = parts[0][0]
        path = paths[name]
        entries = [record["tasks"][one.name] for one, _ in parts]
        content = task_result(parts, entries, Path(results_path).name)
        atomic.write_text(path, json.dumps(content, indent=2) + "\n")
        for what in dict.fromkeys(
            note for one, _ in parts for note in (one.mteb.revision_mismatch, one.mteb.revision_unverified) if note
        ):
            logger.warning(f"{path}: {name}: dataset_revision {content['dataset_revision']}: {what}")
        main = sum(fields["main_score"] for _, fields in parts) / len(parts)
        written.append((name, path, main, spec.mteb.protocol))
    meta = model_meta(model, revision, dims.pop() if len(dims) == 1 else None)
    atomic.write_text(meta_path, json.dumps(meta, indent=2) + "\n")
    return folder, written, notes
