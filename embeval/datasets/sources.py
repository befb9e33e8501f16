"""The declared data sources (data/sources.json) and the checksum table (data/checksums.tsv).

Both live in the repository's top-level data/ folder, which pyproject.toml installs as the package
`embeval._data`; a source checkout that is not installed reads the folder directly.
"""

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from embeval.errors import EmbevalError
from embeval.tasks.registry import TASKS

SOURCES_FILE = "sources.json"
CHECKSUMS_FILE = "checksums.tsv"


def data_folder():
    """The folder holding sources.json and checksums.tsv."""
    try:
        from importlib.resources import files

        folder = files("embeval._data")
        if (folder / SOURCES_FILE).is_file():
            return folder
    except (ImportError, ModuleNotFoundError, TypeError):
        pass
    checkout = Path(__file__).resolve().parents[2] / "data"
    if (checkout / SOURCES_FILE).is_file():
        return checkout
    raise EmbevalError("the data source table is missing from this installation; reinstall embeval", file=SOURCES_FILE)


@dataclass(frozen=True)
class Download:
    file: str  # the name it has upstream, and in a mirror
    url: str
    sha256: str | None


@dataclass(frozen=True)
class Dataset:
    """One unit of fetching: a folder (or, for probing, files) of SentEval's layout."""

    name: str
    tasks: tuple[str, ...]
    folder: str  # relative to the data folder
    license: str
    downloads: tuple[Download, ...]
    steps: tuple[dict, ...]
    placement: str = "folder"  # folder: the folder is placed whole; files: file by file

    def outputs(self):
        """Files the steps name as outputs (relative to the data folder)."""
        names = []
        for step in self.steps:
            if step["do"] in ("copy", "ptb") or step["do"] == "rename":
                names.append(step["to"])
            elif step["do"] == "snli":
                names += [f"{kind}.{step['split']}" for kind in ("s1", "s2", "labels")]
        return [f"{self.folder}/{n}" for n in names]

    def expected_files(self, table):
        """Every file this data set must have: its tasks' files, its outputs, its recorded files."""
        files = dict.fromkeys(f for t in self.tasks for f in TASKS[t].data_files())
        files.update(dict.fromkeys(self.outputs()))
        if self.placement == "folder":
            files.update(dict.fromkeys(p for p in table if p.startswith(self.folder + "/")))
        return sorted(files)


@cache
def load_sources():
    """{data set name: Dataset}, in the order of data/sources.json."""
    folder = data_folder()
    doc = json.loads((folder / SOURCES_FILE).read_text(encoding="utf-8"))
    if doc.get("format") != "embeval-data-sources":
        raise EmbevalError("not an embeval data source table", file=SOURCES_FILE)
    out = {}
    for entry in doc["datasets"]:
        downloads = tuple(Download(d["file"], d["url"], d.get("sha256")) for d in entry["downloads"])
        out[entry["name"]] = Dataset(
            entry["name"],
            tuple(entry["tasks"]),
            entry["folder"],
            entry["license"],
            downloads,
            tuple(entry["steps"]),
            entry.get("placement", "folder"),
        )
    return out


@cache
def load_checksums():
    """{path relative to the data folder: (size in bytes, sha256 hex)} of SentEval's layout."""
    table = {}
    text = (data_folder() / CHECKSUMS_FILE).read_text(encoding="utf-8")
    for number, line in enumerate(text.splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            raise EmbevalError("expected path, size and sha256 separated by tabs", file=CHECKSUMS_FILE, line=number)
        table[parts[0]] = (int(parts[1]), parts[2])
    return table


def datasets_for(task_names):
    """The data sets that hold the given tasks, in table order."""
    wanted = set(task_names)
    return [d for d in load_sources().values() if wanted & set(d.tasks)]


def dataset_of_task():
    """{task name: Dataset}."""
    return {t: d for d in load_sources().values() for t in d.tasks}


def mirror_files():
    """{file name in a mirror: Download}; names are unique across all data sets."""
    out: dict[str, Download] = {}
    for dataset in load_sources().values():
        for d in dataset.downloads:
            out.setdefault(d.file, d)
    return out


def check_covers_all_tasks():
    """Registered tasks that no data set serves (none, when the table is complete)."""
    covered = set(dataset_of_task())
    return [t for t in TASKS if t not in covered]
