"""Phase one: each task's deduplicated sentence list, its fingerprint, and the manifest.

Export order: the task's splits in order (train, dev, test; STS subsets in SentEval's order;
COCO train, valid, test), within a split every first sentence in file order, then every second
sentence; each distinct sentence is kept at its first occurrence. A union export concatenates the
requested tasks' lists in registry order and keeps each sentence once.
"""

import hashlib
import json
from pathlib import Path

from embeval._version import __version__
from embeval.errors import DATA_HINT, DataFileError, EmbevalError
from embeval.formats import atomic
from embeval.tasks.registry import TASKS

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


def encode_lines(sentences):
    """The bytes of an export file: UTF-8, one sentence a line, each ended by \\n."""
    return "".join(s + "\n" for s in sentences).encode("utf-8")


def fingerprint(sentences):
    """The sha256 (hex) of the export file's bytes."""
    return hashlib.sha256(encode_lines(sentences)).hexdigest()


def split_lines(data, path):
    """Sentences of an export file's bytes (split on \\n only: other characters stay in the line)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise EmbevalError(f"export file is not valid UTF-8 (byte {err.start})", file=path)
    if text and not text.endswith("\n"):
        raise EmbevalError("export file does not end with a newline (truncated?)", file=path)
    return text.split("\n")[:-1] if text else []


def export(task_datas, out_dir, union=False):
    """Write TASK.txt files (or ALL.txt) and manifest.json into out_dir; return the manifest."""
    out_dir = Path(out_dir)
    tasks = {}
    lists = []
    for data in task_datas:
        sentences = task_sentences(data)
        lists.append(sentences)
        entry = {
            "file": None if union else f"{data.name}.txt",
            "count": len(sentences),
            "sha256": fingerprint(sentences),
        }
        if not union:
            atomic.write_bytes(out_dir / entry["file"], encode_lines(sentences))
        tasks[data.name] = entry
    manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "embeval": __version__, "tasks": tasks}
    if union:
        names = [d.name for d in task_datas]
        sentences = union_sentences(lists)
        atomic.write_bytes(out_dir / f"{UNION}.txt", encode_lines(sentences))
        manifest["union"] = {
            "file": f"{UNION}.txt",
            "count": len(sentences),
            "sha256": fingerprint(sentences),
            "tasks": names,
        }
    atomic.write_text(out_dir / "manifest.json", json.dumps(manifest, indent=1) + "\n")
    return manifest


def load_manifest(export_dir):
    """Read and validate an export folder's manifest.json."""
    path = Path(export_dir) / "manifest.json"
    if not Path(export_dir).is_dir():
        raise EmbevalError("export folder not found (run `embeval export-sentences` first)", file=export_dir)
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EmbevalError("no manifest.json: not an embeval export folder", file=export_dir)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise EmbevalError(f"unreadable manifest ({err})", file=path)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise EmbevalError(f"not an {FORMAT} manifest", file=path)
    if manifest.get("format_version") != FORMAT_VERSION:
        raise EmbevalError(
            f"format_version {manifest.get('format_version')} is not supported (this embeval reads {FORMAT_VERSION})",
            file=path,
        )
    for name, entry in manifest.get("tasks", {}).items():
        if name not in TASKS:
            raise EmbevalError(f"unknown task {name!r} in the manifest", file=path)
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("count"), int)
            or not isinstance(entry.get("sha256"), str)
        ):
            raise EmbevalError("task entry needs count and sha256", file=path, task=name)
    return manifest


def manifest_files(manifest):
    """(dataset name, file name, count, sha256, tasks) for each list an encoder must embed."""
    if "union" in manifest:
        u = manifest["union"]
        return [(UNION, u["file"], u["count"], u["sha256"], list(u["tasks"]))]
    return [(name, e["file"], e["count"], e["sha256"], [name]) for name, e in manifest["tasks"].items()]


def read_export_file(export_dir, file, count, sha256, task):
    """Read one export file and check it against its manifest entry."""
    path = Path(export_dir) / file
    try:
        data = path.read_bytes()
    except OSError as err:
        raise EmbevalError(f"cannot read export file: {err.strerror}", file=path, task=task)
    if hashlib.sha256(data).hexdigest() != sha256:
        raise EmbevalError("file differs from its manifest fingerprint (edited or truncated?)", file=path, task=task)
    sentences = split_lines(data, path)
    if len(sentences) != count:
        raise EmbevalError(f"{len(sentences)} lines, the manifest says {count}", file=path, task=task)
    return sentences


def export_sentences(data_dir, out_dir, tasks=None, union=False, log=None):
    """Export the sentences of `tasks` (None: every task whose data is in data_dir) to out_dir.

    Returns (manifest, tasks skipped for want of data). A named task without data, a missing data
    folder or a folder without any task data is an EmbevalError. The export's order is the
    registry's, whatever the order asked, so equal task sets give equal exports."""
    root = Path(data_dir)
    names = [n for n in TASKS if tasks is None or n in tasks]
    if not root.is_dir():
        raise DataFileError(f"data folder not found; {DATA_HINT}", file=root)
    present = [n for n in names if not TASKS[n].missing_files(root)]
    missing = [n for n in names if n not in present]
    if tasks is not None and missing:
        first = TASKS[missing[0]]
        raise DataFileError(
            f"missing data file; {DATA_HINT}", file=root / first.missing_files(root)[0], task=first.name
        )
    if not present:
        raise DataFileError(f"no task data in this folder; {DATA_HINT}", file=root)
    loaded = []
    for name in present:
        if log:
            log(f"loading {name} ...")
        loaded.append(TASKS[name].load(root))
    return export(loaded, out_dir, union=union), missing
