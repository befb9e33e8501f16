"""Checking a data folder against the checksum table of SentEval's layout.

Each data set's expected files (its tasks' files, the files its steps make, and every file the
table records under its folder) are looked up: missing, present with the recorded sha256 (ok),
present with another (differs), or present with no recorded checksum (the table cannot know files
that could not be obtained when it was made, such as SNLI train, COCO and the probing tasks).
"""

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from embeval.datasets.sources import dataset_of_task, load_checksums

OK, MISSING, DIFFERS, UNRECORDED = "ok", "missing", "differs", "unrecorded"


def sha256_of(path):
    """(size in bytes, sha256 hex) of a file."""
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def check_file(root, rel, table):
    path = Path(root) / rel
    if not path.is_file():
        return MISSING
    if rel not in table:
        return UNRECORDED
    return OK if sha256_of(path) == table[rel] else DIFFERS


@dataclass
class Status:
    """The state of one data set in a folder."""

    dataset: str
    files: dict = field(default_factory=dict)  # path -> OK | MISSING | DIFFERS | UNRECORDED

    def paths(self, state):
        return [p for p, s in self.files.items() if s == state]

    @property
    def present(self):
        return any(s != MISSING for s in self.files.values())

    @property
    def usable(self):
        """All files there and none differs from its recorded checksum."""
        return self.present and not self.paths(MISSING) and not self.paths(DIFFERS)

    @property
    def verified(self):
        return self.usable and not self.paths(UNRECORDED)

    def describe(self):
        """ok / missing FILE / differs FILE / present, no recorded checksum / not present."""
        if not self.present:
            return "not present"
        differs, missing = self.paths(DIFFERS), self.paths(MISSING)
        unrecorded = self.paths(UNRECORDED)
        if differs:
            more = f" (and {len(differs) - 1} more)" if len(differs) > 1 else ""
            return f"differs: {differs[0]} does not match its recorded sha256{more}"
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            return f"missing: {missing[0]}{more}"
        if unrecorded and len(unrecorded) == len(self.files):
            return "present, no recorded checksum"
        if unrecorded:
            return f"ok, {len(unrecorded)} of {len(self.files)} files without recorded checksum"
        return "ok"


def dataset_status(root, dataset, table=None):
    table = load_checksums() if table is None else table
    return Status(dataset.name, {rel: check_file(root, rel, table) for rel in dataset.expected_files(table)})


def verify_tasks(root, task_names):
    """[(task, Status)] for the given tasks; data sets shared by tasks are checked once."""
    owners = dataset_of_task()
    table = load_checksums()
    cache = {}
    out = []
    for task in task_names:
        dataset = owners[task]
        if dataset.name not in cache:
            cache[dataset.name] = dataset_status(root, dataset, table)
        out.append((task, cache[dataset.name]))
    return out


def staged_problems(staging, dataset, table=None) -> list[str]:
    """Problems of a freshly made data set in `staging` (laid out as the data folder): [message]."""
    table = load_checksums() if table is None else table
    problems = []
    for rel in dataset.expected_files(table):
        state = check_file(staging, rel, table)
        if state == MISSING:
            problems.append(f"{rel} was not produced (the download lacks it)")
        elif state == DIFFERS:
            problems.append(f"{rel} differs from SentEval's file (sha256 mismatch)")
    return problems


def record(root, datasets) -> list[str]:
    """Checksum-table lines (path, size, sha256) for every file present under the data sets."""
    lines = []
    root = Path(root)
    for dataset in datasets:
        if dataset.placement == "folder":
            base = root / dataset.folder
            rels = sorted(str(p.relative_to(root)) for p in base.rglob("*") if p.is_file()) if base.is_dir() else []
        else:
            rels = [rel for rel in dataset.outputs() if (root / rel).is_file()]
        for rel in rels:
            size, digest = sha256_of(root / rel)
            lines.append(f"{rel}\t{size}\t{digest}")
    return lines
