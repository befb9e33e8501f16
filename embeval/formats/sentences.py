"""Phase one: each task's deduplicated sentence lists, their fingerprints, and the manifest.

Export order: the task's splits in order (train, dev, test; STS subsets in SentEval's order;
COCO train, valid, test), within a split every first sentence in file order, then every second
sentence; each distinct sentence is kept at its first occurrence. A union export concatenates the
requested tasks' lists (of role "text") in registry order and keeps each sentence once.

A task has one list (role "text": TASK.txt, vectors /TASK) or a list per role (retrieval: queries
and documents, which instruction-tuned encoders embed with different prompts: TASK.query.txt and
TASK.document.txt, vectors /TASK.query and /TASK.document). A list is a text file, one sentence a
line, unless a sentence holds a line break: then it is JSON lines (TASK.jsonl, one JSON string a
line), so every list is exported losslessly. The fingerprint of a list is the sha256 of its file's
bytes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from embeval._version import __version__
from embeval.errors import DATA_HINT, DataFileError, EmbevalError
from embeval.formats import atomic, targets
from embeval.untrusted import FILE_STEM, MAX_DECLARATION_BYTES, check_name, confine, loads_json, read_bytes, read_json

logger = logging.getLogger("embeval")

if TYPE_CHECKING:
    from embeval.tasks.registry import Registry
    from embeval.tasks.spec import TaskSpec

FORMAT = "embeval-sentences"
FORMAT_VERSION = 1
UNION = "ALL"


def dedup(sentences):
    """Distinct sentences in order of first occurrence."""
    return list(dict.fromkeys(sentences))


def task_sentences(task_data):
    """The task's export list: distinct sentences in the documented export order."""
    return dedup(task_data.sentences())


def union_sentences(lists):
    """The union export list of several task lists (given in registry order)."""
    return dedup(s for sentences in lists for s in sentences)


LINES, JSONL = "lines", "jsonl"
TEXT = "text"


def list_format(sentences):
    """How a list is written: one sentence a line, or JSON lines when a sentence holds a line break."""
    joined = "".join(sentences)
    return JSONL if "\n" in joined or "\r" in joined else LINES


def encode_lines(sentences):
    """The bytes of an export file: UTF-8, one sentence a line, each ended by \\n (JSON lines when a
    sentence holds a line break)."""
    if list_format(sentences) == JSONL:
        return "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in sentences).encode("utf-8")
    return ("\n".join(sentences) + "\n").encode("utf-8") if len(sentences) else b""


def fingerprint(sentences):
    """The sha256 (hex) of the export file's bytes."""
    return hashlib.sha256(encode_lines(sentences)).hexdigest()


def dataset_name(task, role=TEXT):
    """The vectors dataset (and export file stem) of a task's list of a role."""
    return task if role == TEXT else f"{task}.{role}"


def split_lines(data, path, fmt=LINES):
    """Sentences of an export file's bytes (split on \\n only: other characters stay in the line;
    JSON lines: one JSON string a line)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise EmbevalError(f"export file is not valid UTF-8 (byte {err.start})", file=path)
    if text and not text.endswith("\n"):
        raise EmbevalError("export file does not end with a newline (truncated?)", file=path)
    lines = text.split("\n")[:-1] if text else []
    if fmt != JSONL:
        return lines
    sentences = []
    for number, line in enumerate(lines, 1):
        try:
            value = loads_json(line, file=path, line=number)
        except json.JSONDecodeError:
            value = None
        if not isinstance(value, str):
            raise EmbevalError(f"line {number} is not a JSON string", file=path)
        sentences.append(value)
    return sentences


@dataclass(frozen=True)
class ExportList:
    """One list an encoder embeds: its vectors dataset, file, sentence count, fingerprint, the tasks
    it serves (several for the union), its role and its file format."""

    dataset: str
    file: str
    count: int
    sha256: str
    tasks: tuple
    role: str = TEXT
    format: str = LINES


def _file_name(dataset, sentences):
    return f"{dataset}.{'txt' if list_format(sentences) == LINES else 'jsonl'}"


def _entry(dataset, sentences, role=TEXT):
    fmt = list_format(sentences)
    entry = {
        "file": _file_name(dataset, sentences),
        "count": len(sentences),
        "sha256": fingerprint(sentences),
    }
    if fmt != LINES:
        entry["format"] = fmt
    if role != TEXT:
        entry["dataset"] = dataset
    return entry


def export(task_lists, out_dir, union=False, about=None, inputs=()):
    """Write each task's lists (TASK.txt, TASK.ROLE.txt; or ALL.txt for the text lists of a union)
    and manifest.json into out_dir; return the manifest. task_lists: {task: {role: sentences}}, or
    loaded split data (TaskData, one list each); about: {task: {key: value}} added to its entry
    (an MTEB task's origin); inputs: the files the lists were read from, never written over."""
    if not isinstance(task_lists, dict):
        task_lists = {data.name: {TEXT: task_sentences(data)} for data in task_lists}
    out_dir = Path(out_dir)
    check_owned(out_dir, task_lists, union, inputs)
    earlier = _earlier_files(out_dir)
    tasks, text_lists = {}, []
    for name, lists in task_lists.items():
        if list(lists) == [TEXT]:
            sentences = lists[TEXT]
            text_lists.append(sentences)
            entry = _entry(name, sentences)
            if union:
                entry["file"] = None
            else:
                atomic.write_bytes(out_dir / entry["file"], encode_lines(sentences))
            tasks[name] = entry
            continue
        roles = {}
        for role, sentences in lists.items():
            roles[role] = _entry(dataset_name(name, role), sentences, role)
            atomic.write_bytes(out_dir / roles[role]["file"], encode_lines(sentences))
        tasks[name] = {"roles": roles}
    for name, fields in (about or {}).items():
        if name in tasks:
            tasks[name].update(fields)
    manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "embeval": __version__, "tasks": tasks}
    if union and text_lists:
        names = [n for n, lists in task_lists.items() if list(lists) == [TEXT]]
        sentences = union_sentences(text_lists)
        manifest["union"] = dict(_entry(UNION, sentences), tasks=names)
        atomic.write_bytes(out_dir / manifest["union"]["file"], encode_lines(sentences))
    atomic.write_text(out_dir / "manifest.json", json.dumps(manifest, indent=1) + "\n")
    _remove_stale(out_dir, earlier, set(_written_files(task_lists, union)))
    return manifest


def _earlier_files(out_dir):
    """{file name: sha256} of the list files an earlier export's manifest in out_dir records."""
    if not (out_dir / "manifest.json").is_file():
        return {}
    try:
        return {entry.file: entry.sha256 for entry in manifest_files(load_manifest(out_dir)) if entry.file}
    except EmbevalError:
        return {}


def _remove_stale(out_dir, earlier, written):
    """Remove the list files of the earlier export that this one does not write (their manifest
    entry is gone), when they are as embeval wrote them; a file changed since is kept, with a warning."""
    for name, sha in earlier.items():
        path = out_dir / name
        if name in written or path.is_symlink() or not path.is_file():
            continue
        if _sha256_of(path) != sha:
            logger.warning(f"{path}: kept: an earlier export's file changed since embeval wrote it; not in this export")
            continue
        try:
            path.unlink()
        except OSError as err:
            logger.warning(f"{path}: kept: an earlier export's file, not in this export, could not be removed ({err})")


def _written_files(task_lists, union):
    """The file names an export of task_lists writes (manifest.json last)."""
    names, text_lists = [], []
    for name, lists in task_lists.items():
        for role, sentences in lists.items():
            if role == TEXT and list(lists) == [TEXT]:
                text_lists.append(sentences)
                if union:
                    continue
            names.append(_file_name(dataset_name(name, role), sentences))
    if union and text_lists:
        names.append(_file_name(UNION, union_sentences(text_lists)))
    return names + ["manifest.json"]


def check_owned(out_dir, task_lists, union=False, inputs=()):
    """Refuse, before anything is written, an export into a folder holding a file of the same name that
    an earlier export did not write (embeval.formats.targets): a manifest.json that is not an embeval
    manifest, or a list file that the folder's manifest does not record with the same fingerprint (a
    file of the user's, or one edited since); and any of them that is one of `inputs` (a task file,
    a data file)."""
    out_dir = Path(out_dir)
    owned = None

    def recorded(path):
        nonlocal owned
        if owned is None:
            owned = _earlier_files(out_dir)
        sha = owned.get(path.name)
        if sha is None:
            return "was not written by an earlier export (its manifest.json does not record it)"
        changed = "was changed since embeval wrote it (its manifest.json records another sha256)"
        return sha == _sha256_of(path) or changed

    def manifest_ok(path):
        try:
            load_manifest(out_dir)
        except EmbevalError:
            return False
        return True

    lists = targets.Output("a list file of an earlier export (recorded as is in its manifest.json)", recorded)
    manifest = targets.Output("a manifest embeval wrote", manifest_ok)
    targets.check_folder(out_dir)
    targets.check(
        [
            targets.Target(out_dir / name, manifest if name == "manifest.json" else lists)
            for name in _written_files(task_lists, union)
        ],
        inputs,
    )


def _sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def load_manifest(export_dir):
    """Read and validate an export folder's manifest.json (exports of every earlier version read): its
    task and dataset names valid names, its files inside the export folder."""
    path = Path(export_dir) / "manifest.json"
    if not Path(export_dir).is_dir():
        raise EmbevalError("export folder not found (run `embeval export-sentences` first)", file=export_dir)
    if not os.path.lexists(path):
        raise EmbevalError("no manifest.json: not an embeval export folder", file=export_dir)
    manifest = read_json(
        path,
        MAX_DECLARATION_BYTES,
        missing="no manifest.json: not an embeval export folder",
        invalid=lambda why: EmbevalError(f"unreadable manifest ({why})", file=path),
    )
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise EmbevalError(f"not an {FORMAT} manifest", file=path)
    if manifest.get("format_version") != FORMAT_VERSION:
        raise EmbevalError(
            f"format_version {manifest.get('format_version')} is not supported (this embeval reads {FORMAT_VERSION})",
            file=path,
        )
    if not isinstance(manifest.get("tasks"), dict):
        raise EmbevalError("the manifest has no tasks", file=path)
    for name, entry in manifest["tasks"].items():
        check_name(name, "task", file=path)
        lists = entry.get("roles") if isinstance(entry, dict) and "roles" in entry else {TEXT: entry}
        if not isinstance(lists, dict) or not lists:
            raise EmbevalError("task entry needs its lists", file=path, task=name)
        for role, one in lists.items():
            check_name(role, "role", file=path, task=name)
            if (
                not isinstance(one, dict)
                or not isinstance(one.get("count"), int)
                or not isinstance(one.get("sha256"), str)
            ):
                raise EmbevalError("task entry needs count and sha256", file=path, task=name)
            _check_entry(export_dir, path, name, one, file_needed="union" not in manifest or "roles" in entry)
    if "union" in manifest:
        union = manifest["union"]
        if (
            not isinstance(union, dict)
            or not isinstance(union.get("count"), int)
            or not isinstance(union.get("sha256"), str)
            or not isinstance(union.get("tasks"), list)
        ):
            raise EmbevalError("the union entry needs count, sha256 and tasks", file=path, task=UNION)
        for name in union["tasks"]:
            check_name(name, "union task", file=path, task=UNION)
        _check_entry(export_dir, path, UNION, union, file_needed=True)
    return manifest


def _check_entry(export_dir, path, task, entry, file_needed):
    """A list entry's dataset and file: valid names, the file inside the export folder."""
    if "dataset" in entry:
        check_name(entry["dataset"], "dataset", file=path, task=task, pattern=FILE_STEM)
    if entry.get("format", LINES) not in (LINES, JSONL):
        raise EmbevalError(f"format must be {LINES} or {JSONL}", file=path, task=task)
    file = entry.get("file")
    if file is None and not file_needed:
        return
    check_name(file, "file", file=path, task=task, pattern=FILE_STEM)
    confine(export_dir, file, False, "file", file=path, task=task)


def manifest_files(manifest):
    """Every list an encoder must embed (ExportList), in the manifest's order."""
    out = []
    if "union" in manifest:
        u = manifest["union"]
        out.append(
            ExportList(UNION, u["file"], u["count"], u["sha256"], tuple(u["tasks"]), TEXT, u.get("format", LINES))
        )
    for name, entry in manifest["tasks"].items():
        if "roles" in entry:
            for role, one in entry["roles"].items():
                out.append(
                    ExportList(
                        one.get("dataset", dataset_name(name, role)),
                        one["file"],
                        one["count"],
                        one["sha256"],
                        (name,),
                        role,
                        one.get("format", LINES),
                    )
                )
        elif "union" not in manifest:
            out.append(
                ExportList(
                    name, entry["file"], entry["count"], entry["sha256"], (name,), TEXT, entry.get("format", LINES)
                )
            )
    return out


def read_export_file(export_dir, entry):
    """Read one export list (an ExportList) and check it against its manifest entry."""
    task = entry.tasks[0] if len(entry.tasks) == 1 else entry.dataset
    path = confine(export_dir, check_name(entry.file, "file", task=task, pattern=FILE_STEM), False, "file", task=task)
    data = read_bytes(path, None, task=task, missing="export file not found")
    if hashlib.sha256(data).hexdigest() != entry.sha256:
        raise EmbevalError("file differs from its manifest fingerprint (edited or truncated?)", file=path, task=task)
    sentences = split_lines(data, path, entry.format)
    if len(sentences) != entry.count:
        raise EmbevalError(f"{len(sentences)} lines, the manifest says {entry.count}", file=path, task=task)
    return sentences


def export_sentences(
    data_dir: str | Path,
    out_dir: str | Path,
    tasks: Sequence[str | TaskSpec] | None = None,
    union: bool = False,
    log: Callable[[str], None] | None = None,
    registry: Registry | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Export the sentences of `tasks` (names or TaskSpecs; None: every task of the registry whose
    data is there) to out_dir.

    Returns (manifest, built-in tasks skipped for want of data). A named task without data, a task
    of a task file without its data, a missing data folder or a folder without any task data is an
    EmbevalError. The export's order is the
    registry's, whatever the order asked, so equal task sets give equal exports."""
    from embeval.tasks.registry import Registry, builtin

    root = Path(data_dir)
    registry = registry if registry is not None else builtin()
    asked = None if tasks is None else [t if isinstance(t, str) else t.name for t in tasks]
    extra = [t for t in tasks or [] if not isinstance(t, str) and t.name not in registry]
    if extra:
        registry = Registry(list(registry.values()) + extra)
    specs = [spec for name, spec in registry.items() if asked is None or name in asked]
    present = [s for s in specs if not s.missing_files(root)]
    missing = [s for s in specs if s not in present]
    needed = missing if asked is not None else [s for s in missing if not s.builtin]  # a declared task's data always is
    if needed:
        needed[0].require_data(root)
    if not present:
        if not root.is_dir():
            raise DataFileError(f"data folder not found; {DATA_HINT}", file=root)
        raise DataFileError(f"no task data in this folder; {DATA_HINT}", file=root)
    lists = {}
    for spec in present:
        if log:
            log(f"loading {spec.name} ...")
        lists[spec.name] = spec.kind_module.sentences(spec, spec.load(root))
    about = {
        spec.name: {"mteb": mteb_origin(spec, lists[spec.name])} for spec in present if spec.mteb and spec.mteb.type
    }
    inputs = [path for spec in present for path in [None if spec.builtin else spec.source, *spec.paths(root).values()]]
    return export(lists, out_dir, union=union, about=about, inputs=inputs), [s.name for s in missing]


PROMPT_TYPES = {"query": "query", "document": "document", "instructed_query": "query"}  # role -> mteb's prompt type


def mteb_origin(spec, lists):
    """What the manifest says of a list of an MTEB task scored by name: the task, its dataset and
    revision, the subset and split, and the role mteb encodes each list as (its prompt type: "query",
    "document", or null when mteb gives none; instructed queries are queries to mteb)."""
    return {
        "task": spec.mteb.name,
        "dataset": spec.mteb.dataset,
        "revision": spec.mteb.revision,
        "subset": spec.mteb.subset,
        "split": spec.mteb.split,
        "encode_as": {role: PROMPT_TYPES.get(role) for role in lists},
    }
