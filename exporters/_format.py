"""The embeval export and vectors formats, for the standalone exporters (numpy and h5py only).

Reads an export folder: manifest.json and every list it names (docs/formats.md): a task's one list
(role "text", TASK.txt, dataset /TASK), a retrieval task's list per role (TASK.query.txt and
TASK.document.txt, datasets /TASK.query and /TASK.document), or a union's ALL.txt (dataset /ALL);
a list whose sentences hold line breaks is JSON lines (TASK.jsonl, one JSON string a line). Every
file is checked against its fingerprint. Writes the vectors file: one 2-D float32 dataset per list
with attribute `sha256`, `tasks` (comma-separated) for /ALL, and `prompt` when a prompt (--prompt
ROLE=TEXT) was prepended to the sentences of that list's role. This module deliberately does not
import embeval: the exporters show that the format can be implemented from its description alone.
"""

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import h5py
import numpy as np

FORMAT = "embeval-sentences"
FORMAT_VERSION = 1
UNION = "ALL"
TEXT = "text"
LINES, JSONL = "lines", "jsonl"
EXIT_BAD_INPUT = 2


class ExportError(Exception):
    """Bad input: reported as one line on stderr with exit code 2."""


class Job:
    """One sentence list to embed: its dataset name, sentences, fingerprint, (union) tasks, role, and
    the prompt prepended to its sentences ("" for none)."""

    def __init__(self, name, sentences, sha256, tasks=None, role=TEXT):
        self.name = name
        self.sentences = sentences
        self.sha256 = sha256
        self.tasks = tasks
        self.role = role
        self.prompt = ""

    def texts(self):
        """The sentences as the encoder sees them: each with the prompt prepended."""
        return [self.prompt + s for s in self.sentences] if self.prompt else self.sentences


def arguments(description, prog=None):
    """The options every exporter takes; callers add their own."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(
        "--export",
        required=True,
        metavar="DIR",
        help="export folder written by `embeval export-sentences` (per-task or --union)",
    )
    parser.add_argument("--out", required=True, metavar="FILE", help="vectors file (HDF5) to write")
    parser.add_argument(
        "--prompt",
        action="append",
        default=[],
        metavar="ROLE=TEXT",
        help="prepend TEXT to every sentence of the lists of ROLE (text, query or document), e.g. "
        '--prompt query="query: "; recorded in the attribute `prompt` of those datasets; repeat for each role',
    )
    parser.add_argument("--overwrite", action="store_true", help="replace FILE if it exists")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument(
        "--progress-every",
        type=float,
        default=None,
        metavar="SECONDS",
        help="plain progress lines on stderr (sentences embedded of the total), at most one every SECONDS, "
        "instead of a progress bar: for a log file",
    )
    return parser


def parse_prompts(values, option="--prompt"):
    """{role: text} of repeated ROLE=TEXT values (the text may be empty: no prompt)."""
    prompts = {}
    for value in values:
        role, sep, text = value.partition("=")
        if not sep or not role:
            raise ExportError(f'{option} {value!r}: expected ROLE=TEXT, e.g. {option} query="query: "')
        if role in prompts:
            raise ExportError(f"{option} {role}=...: given twice")
        prompts[role] = text
    return prompts


def apply_prompts(jobs, prompts, prog, quiet=False):
    """Give each job the prompt of its role; note on stderr a prompt no list of this export uses."""
    roles = {job.role for job in jobs}
    for job in jobs:
        job.prompt = prompts.get(job.role, "")
    unused = [role for role in prompts if role not in roles]
    if unused and not quiet:
        print(
            f"{prog}: note: this export has no list of role {', '.join(unused)} "
            f"(its roles: {', '.join(sorted(roles))}); that prompt is not used",
            file=sys.stderr,
        )


def read_export(export_dir):
    """Every list the manifest asks for (the union, then each task's lists in manifest order), read and
    checked against its count and sha256."""
    folder = Path(export_dir)
    if not folder.is_dir():
        raise ExportError(f"{folder}: export folder not found")
    path = folder / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ExportError(f"{folder}: no manifest.json: not an embeval export folder")
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ExportError(f"{path}: unreadable manifest ({err})")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ExportError(f"{path}: not an {FORMAT} manifest")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ExportError(
            f"{path}: format_version {manifest.get('format_version')} is not supported "
            f"(this exporter reads {FORMAT_VERSION})"
        )
    union = manifest.get("union")
    tasks = manifest.get("tasks")
    if not isinstance(tasks, dict) or not (tasks or union):
        raise ExportError(f"{path}: the manifest lists no tasks")
    jobs = []
    if union is not None:
        names = union.get("tasks") if isinstance(union, dict) else None
        if not isinstance(names, list) or not all(isinstance(t, str) for t in names):
            raise ExportError(f"{path}: union entry needs a list of tasks")
        jobs.append(_job(folder, path, union, UNION, tasks=names))
    for name, raw in tasks.items():
        if isinstance(raw, dict) and "roles" in raw:
            roles = raw["roles"]
            if not isinstance(roles, dict) or not roles:
                raise ExportError(f"{path}: {name}: `roles` needs a list per role")
            for role, one in roles.items():
                dataset = one.get("dataset", f"{name}.{role}") if isinstance(one, dict) else None
                if not role or not isinstance(dataset, str):
                    raise ExportError(f"{path}: {name}: role {role!r} needs file, count, sha256 and dataset")
                jobs.append(_job(folder, path, one, dataset, role=role))
        elif union is None:
            jobs.append(_job(folder, path, raw, name))
    seen = set()
    for job in jobs:
        if job.name in seen:
            raise ExportError(f"{path}: two lists name the dataset {job.name!r}")
        seen.add(job.name)
    return jobs


def _job(folder, path, raw, name, tasks=None, role=TEXT):
    """The Job of one manifest entry {file, count, sha256[, format]}, its list read and checked."""
    if not name or "/" in name or name.startswith("."):
        raise ExportError(f"{path}: {name!r} cannot name a dataset")
    if (
        not isinstance(raw, dict)
        or not isinstance(raw.get("file"), str)
        or not isinstance(raw.get("count"), int)
        or not isinstance(raw.get("sha256"), str)
    ):
        raise ExportError(f"{path}: {name}: entry needs file, count and sha256")
    if "/" in raw["file"] or "\\" in raw["file"] or raw["file"] in ("", ".", ".."):
        raise ExportError(f"{path}: {name}: file {raw['file']!r} is not a plain file name")
    fmt = raw.get("format", LINES)
    if fmt not in (LINES, JSONL):
        raise ExportError(f"{path}: {name}: list format {fmt!r} is not supported (this exporter reads lines, jsonl)")
    sha256 = raw["sha256"].lower()
    return Job(name, _read_list(folder, raw["file"], raw["count"], sha256, name, fmt), sha256, tasks, role)


def _read_list(folder, file, count, sha256, name, fmt=LINES):
    """The sentences of one export file: UTF-8, split on \\n only, each line ended by \\n; in JSON
    lines, each line one JSON string."""
    path = folder / file
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ExportError(f"{path}: {name}: cannot read export file ({err.strerror})")
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ExportError(f"{path}: {name}: file differs from its manifest fingerprint (edited or truncated?)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ExportError(f"{path}: {name}: not valid UTF-8 (byte {err.start})")
    if text and not text.endswith("\n"):
        raise ExportError(f"{path}: {name}: the last line has no newline (truncated?)")
    sentences = text.split("\n")[:-1] if text else []
    if len(sentences) != count:
        raise ExportError(f"{path}: {name}: {len(sentences)} lines, the manifest says {count}")
    if fmt == JSONL:
        sentences = [_json_string(line, number, path, name) for number, line in enumerate(sentences, 1)]
    return sentences


def _json_string(line, number, path, name):
    """The sentence of one JSON-lines line: a JSON string of valid Unicode (no lone surrogate)."""
    try:
        value = json.loads(line)
    except ValueError:
        value = None
    if not isinstance(value, str):
        raise ExportError(f"{path}: {name}: line {number} is not a JSON string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ExportError(f"{path}: {name}: line {number} holds a lone surrogate (\\uD800-\\uDFFF)")
    return value


class Progress:
    """A tqdm bar when tqdm is installed, else a progress line on stderr every few seconds; plain lines
    at most every `plain_every` seconds when that is given (a log file). `done`: sentences already done
    before this run (a resumed export); the rate counts this run's only."""

    def __init__(self, total, label, quiet=False, every=5.0, done=0, plain_every=None):
        self.total, self.label, self.quiet = total, label, quiet
        self.every = every if plain_every is None else plain_every
        self.done = self.initial = done
        self.started = time.monotonic()
        self.last = self.started - self.every if plain_every is not None else self.started  # a first line at 0
        self.bar = None
        if plain_every is not None and not quiet:
            self.update(0)
        elif not quiet:
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self.bar = tqdm(total=total, initial=done, unit="sent", desc=label, file=sys.stderr)

    def update(self, n, note=""):
        """n more sentences done; note: what else to show (e.g. tokens sent)."""
        self.done += n
        if self.bar is not None:
            if note:
                self.bar.set_postfix_str(note, refresh=False)
            self.bar.update(n)
        elif not self.quiet and (time.monotonic() - self.last >= self.every or self.done == self.total):
            self.last = time.monotonic()
            rate = (self.done - self.initial) / max(self.last - self.started, 1e-9)
            print(
                f"{self.label}: {self.done}/{self.total} sentences ({100 * self.done / max(self.total, 1):.0f}%,"
                f" {rate:.0f}/s{', ' + note if note else ''})",
                file=sys.stderr,
                flush=True,
            )

    def close(self):
        if self.bar is not None:
            self.bar.close()


def check_output(out, overwrite):
    """Refuse to replace an existing file without --overwrite."""
    out = Path(out)
    if out.exists() and not overwrite:
        raise ExportError(f"{out}: file exists; pass --overwrite to replace it")
    if out.exists() and not out.is_file():
        raise ExportError(f"{out}: exists and is not a file")
    return out


def write_vectors(
    out, jobs, dim, encode, batch_size, label, quiet=False, attrs=None, encode_takes_prompt=False, progress_every=None
):
    """Embed every job's sentences with encode(list of str) -> (n, dim) array; write FILE atomically.

    encode gets the sentences with the job's prompt prepended, or, with encode_takes_prompt, the
    sentences and the prompt (encode(batch, prompt): an encoder that applies prompts itself). Each
    dataset records its prompt in the attribute `prompt` (none when there is no prompt). The file is
    written under a temporary name in the same folder and renamed at the end, so an interrupted run
    leaves no partial vectors file behind. attrs: optional root attributes. progress_every: plain progress
    lines at most that often (seconds) instead of a bar.
    """
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ExportError(f"{out.parent}: cannot create the output folder ({err.strerror})")
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    progress = Progress(sum(len(j.sentences) for j in jobs), label, quiet, plain_every=progress_every)
    try:
        with h5py.File(tmp, "w") as h5:
            for key, value in (attrs or {}).items():
                h5.attrs[key] = value
            for job in jobs:
                ds = h5.create_dataset(job.name, (len(job.sentences), dim), dtype="float32")
                for start in range(0, len(job.sentences), batch_size):
                    batch = job.sentences[start : start + batch_size]
                    if encode_takes_prompt:
                        vectors = encode(batch, job.prompt)
                    else:
                        vectors = encode([job.prompt + s for s in batch] if job.prompt else batch)
                    vectors = np.asarray(vectors, dtype=np.float32)
                    if vectors.shape != (len(batch), dim) or not np.isfinite(vectors).all():
                        raise ExportError(
                            f"{job.name}: the encoder returned shape {vectors.shape} or "
                            f"non-finite values for sentences {start}..{start + len(batch) - 1}"
                        )
                    ds[start : start + len(batch)] = vectors
                    progress.update(len(batch))
                ds.attrs["sha256"] = job.sha256
                if job.prompt:
                    ds.attrs["prompt"] = job.prompt
                if job.tasks is not None:
                    ds.attrs["tasks"] = ",".join(job.tasks)
        os.replace(tmp, out)
    except OSError as err:
        raise ExportError(f"{out}: cannot write ({err.strerror or err})")
    finally:
        progress.close()
        if tmp.exists():
            tmp.unlink()
    return out


def run(main, prog):
    """Call main(); report ExportError as `prog: error: message` and exit 2, Ctrl-C as exit 130."""
    try:
        main()
    except ExportError as err:
        print(f"{prog}: error: {' '.join(str(err).split())}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        sys.exit(130)
