"""`embeval data fetch`: download, unpack, preprocess, verify, and place each data set atomically.

For every data set of the requested tasks: its downloads are fetched (or reused from an earlier,
interrupted run) into DEST/.downloads, each archive is read through once to catch corruption, the
steps run in a staging folder inside DEST, the result is checked against the checksum table (and,
for files the table cannot know, parsed by the task's loader), and only then is the finished
folder renamed into place. A failure removes the staging folder, so DEST never holds a
half-written data set; a corrupt archive is removed so the next run downloads it again; an
interrupted download is resumed by the next run.
"""

import os
import shutil
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

from embeval.datasets import files
from embeval.datasets.archives import Archive, ArchiveError
from embeval.datasets.download import FatalFetchError, download, mirror_url
from embeval.datasets.preprocess import run_steps
from embeval.datasets.sources import datasets_for, load_checksums
from embeval.datasets.verify import dataset_status, sha256_of, staged_problems
from embeval.errors import EmbevalError
from embeval.tasks.registry import TASKS

DOWNLOADS = ".downloads"


class FetchReport:
    """What a fetch did: data sets fetched (done), left alone because present (skipped, with their
    state), and the errors of those that failed."""

    def __init__(self):
        self.done, self.skipped, self.failed = [], [], []


def fetch(dest, task_names, mirror=None, force=False, keep_downloads=False, progress=False, log=lambda message: None):
    """Fetch the data sets of the given tasks into dest. Returns a FetchReport; raises
    FatalFetchError when nothing more can succeed (unreachable server, unwritable destination)."""
    dest = Path(dest)
    report = FetchReport()
    downloads = dest / DOWNLOADS
    check_mirror(mirror, dest, task_names)
    try:
        files.make_dirs(downloads)
    except OSError as err:
        raise FatalFetchError(f"cannot write: {files.describe(err)}", file=dest)
    try:
        return _fetch_all(task_names, dest, downloads, report, force, keep_downloads, mirror, progress, log)
    finally:
        try:
            downloads.rmdir()  # only when empty: a failed run keeps its partial downloads to resume from
        except OSError:
            pass


def check_mirror(mirror, dest, task_names):
    """Refuse a mirror folder that fetching would write over: the download folder (whose archives a
    finished fetch removes) or a data set's folder (which a fetch replaces), or one inside them."""
    if not mirror or ("://" in mirror and not mirror.startswith("file://")):
        return
    folder = Path(urllib.request.url2pathname(urllib.parse.urlsplit(mirror).path) if "://" in mirror else mirror)
    try:
        folder = folder.resolve()
        written = [(dest / DOWNLOADS).resolve()] + [(dest / d.folder).resolve() for d in datasets_for(task_names)]
    except (OSError, RuntimeError):
        return  # the download names what is wrong with it
    for place in written:
        if folder == place or folder.is_relative_to(place):
            what = "the download folder" if place == written[0] else "a data set's folder"
            raise EmbevalError(
                f"is {what} of {dest} or inside it, which fetching writes over (a finished fetch removes its "
                "archives); give a mirror folder outside the data folder",
                file=mirror,
            )


def _fetch_all(task_names, dest, downloads, report, force, keep_downloads, mirror, progress, log):
    used = set()
    for dataset in datasets_for(task_names):
        label = ",".join(dataset.tasks)
        status = dataset_status(dest, dataset)
        if status.usable and not force:
            report.skipped.append((dataset, status.describe()))
            log(f"{dataset.name}: already present ({status.describe()})")
            continue
        if status.present and not force:
            report.failed.append(
                EmbevalError(
                    f"already there but {status.describe()}; use --force to replace it",
                    file=dest / dataset.folder,
                    task=label,
                )
            )
            continue
        try:
            used.update(_fetch_one(dataset, dest, downloads, mirror, progress, log))
            report.done.append(dataset)
            log(f"{dataset.name}: done")
        except FatalFetchError:
            raise
        except EmbevalError as err:
            report.failed.append(err)
    if not report.failed and not keep_downloads:
        finished = report.done + [dataset for dataset, _ in report.skipped]
        for name in used | {item.file for dataset in finished for item in dataset.downloads}:
            files.remove_file(downloads / name)
    return report


def _fetch_one(dataset, dest, downloads, mirror, progress, log):
    """Fetch and place one data set; returns the download file names it used."""
    label = ",".join(dataset.tasks)
    archives = {}
    for item in dataset.downloads:
        url = mirror_url(mirror, item.file) if mirror else item.url
        path = downloads / item.file
        if not path.is_file():
            log(f"{dataset.name}: downloading {url}")
            download(url, path, label, progress=progress)
        _check_download(item, path, url, label)
        archives[item.file] = Archive(path)
    try:
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=dest))
    except OSError as err:
        raise FatalFetchError(f"cannot write: {files.describe(err)}", file=dest, task=label)
    try:
        log(f"{dataset.name}: preprocessing")
        try:
            run_steps(dataset, archives, staging)
        except ArchiveError as err:
            _discard(dataset, downloads)
            raise EmbevalError(
                f"{err.message}; removed it, run the command again to download it anew", file=err.file, task=label
            )
        except OSError as err:
            raise FatalFetchError(f"cannot write: {files.describe(err)}", file=err.filename or staging, task=label)
        problems = staged_problems(staging, dataset)
        if problems:
            removed = _discard(dataset, downloads)
            raise EmbevalError(
                f"{problems[0]}{_more(problems)}; removed the download "
                f"{', '.join(removed)} so the next run fetches it anew",
                file=dest / dataset.folder,
                task=label,
            )
        problem = _format_problem(dataset, staging, dest)
        if problem:
            removed = _discard(dataset, downloads)
            raise EmbevalError(
                f"the downloaded data is not in the task's format ({problem}); removed the "
                f"download {', '.join(removed)}",
                file=dest / dataset.folder,
                task=label,
            )
        _place(dataset, staging, dest, label)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [item.file for item in dataset.downloads]


def _format_problem(dataset, staging, dest):
    """For data sets with files the checksum table cannot vouch for (SNLI train, COCO, probing):
    parse each task with its loader, as scoring will, and return the first problem."""
    table = load_checksums()
    if all(rel in table for rel in dataset.expected_files(table)):
        return None
    for task in dataset.tasks:
        try:
            TASKS[task].load(staging)
        except EmbevalError as err:
            return str(err).replace(str(staging), str(dest))
    return None


def _more(problems):
    return f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""


def _check_download(item, path, url, label):
    """Known archive checksum, then a full read of the archive; a bad one is removed and named."""
    if item.sha256 and sha256_of(path)[1] != item.sha256:
        files.remove_file(path)
        raise EmbevalError(
            f"download does not match its recorded sha256 (corrupt); removed {path}, "
            f"run the command again to download it anew",
            file=url,
            task=label,
        )
    try:
        Archive(path).check()
    except ArchiveError as err:
        files.remove_file(path)
        raise EmbevalError(
            f"{err.message}; removed it, run the command again to download it anew", file=path, task=label
        )


def _discard(dataset, downloads):
    removed = []
    for item in dataset.downloads:
        if files.remove_file(downloads / item.file):
            removed.append(item.file)
    return removed


def _place(dataset, staging, dest, label):
    """Move the verified data set from staging into dest in one rename (per file for probing)."""
    try:
        if dataset.placement == "files":
            for rel in dataset.outputs():
                files.make_dirs((dest / rel).parent)
                os.replace(staging / rel, dest / rel)
            return
        target = dest / dataset.folder
        files.make_dirs(target.parent)
        previous = staging / "previous"
        if target.exists():
            os.replace(target, previous)
        try:
            os.replace(staging / dataset.folder, target)
        except OSError:
            if previous.exists():
                os.replace(previous, target)
            raise
    except OSError as err:
        raise FatalFetchError(f"cannot write: {files.describe(err)}", file=err.filename or dest, task=label)
