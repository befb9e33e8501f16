"""`embeval data fetch | verify | list`: getting and checking SentEval's task data."""

import sys

import click

from embeval.cli.common import fails_cleanly, tasks_option
from embeval.errors import EXIT_BAD_INPUT, UNREACHABLE_HINT, EmbevalError


def _human(size):
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024


def _task_names(tasks):
    from embeval.tasks.registry import parse_task_list

    return parse_task_list(tasks)


@click.group("data")
def data():
    """Get SentEval's task data (Python only: no bash, perl or cabextract) and check it.

    \b
    embeval data fetch --data DIR           download and preprocess every task's data
    embeval data verify --data DIR          check the files against SentEval's checksums
    embeval data list                       sources, sizes, licenses, and what is present
    """


@data.command("fetch")
@tasks_option
@click.option(
    "--data",
    "dest",
    metavar="DIR",
    default=None,
    help="Data folder to fill (SentEval's layout: DIR/downstream, DIR/probing). Default: "
    "$EMBEVAL_DATA, else the per-user data folder.",
)
@click.option("--dest", "dest_alias", metavar="DIR", default=None, hidden=True)
@click.option(
    "--mirror",
    metavar="URL",
    envvar="EMBEVAL_MIRROR",
    default=None,
    help="Fetch every file from this base URL (http(s)://, file:// or a folder) instead of "
    "the upstream hosts; it must hold the upstream file names (embeval docs data). "
    "Default: $EMBEVAL_MIRROR.",
)
@click.option("--force", is_flag=True, help="Replace data sets that are present but differ or are incomplete.")
@click.option("--keep-downloads", is_flag=True, help="Keep the downloaded archives in DIR/.downloads.")
@click.option("--quiet", is_flag=True, help="No progress bars or status lines on stderr.")
@fails_cleanly
def fetch(tasks, dest, dest_alias, mirror, force, keep_downloads, quiet):
    """Download each task's upstream files and build SentEval's data layout from them.

    Archives are resumed where an earlier run stopped, read through once to catch corruption,
    unpacked and preprocessed as SentEval's download script does (Moses and Penn Treebank
    tokenization, lowercasing, MRPC from Microsoft's installer), checked against the recorded
    sha256 of SentEval's files, and only then moved into place. Exit code 2 when a data set
    could not be fetched; data sets already present and intact are left alone.
    """
    dest = dest or dest_alias
    from embeval.datasets.download import ServerUnreachable
    from embeval.datasets.fetch import fetch as run
    from embeval.tasks.files import resolve_data_dir

    root = resolve_data_dir(dest)
    log = (lambda m: None) if quiet else (lambda m: click.echo(m, err=True))
    try:
        report = run(
            root,
            _task_names(tasks),
            mirror=mirror,
            force=force,
            keep_downloads=keep_downloads,
            progress=not quiet and sys.stderr.isatty(),
            log=log,
        )
    except ServerUnreachable as unreachable:  # the ways on, as quickstart names them
        raise ServerUnreachable(
            f"{unreachable.message}; {UNREACHABLE_HINT}", file=unreachable.file, task=unreachable.task
        )
    for dataset in report.done:
        click.echo(f"{dataset.name:24s} fetched")
    for dataset, state in report.skipped:
        click.echo(f"{dataset.name:24s} {state}")
    for err in report.failed:
        click.echo(f"embeval: error: {err}", err=True)
    if report.failed:
        sys.exit(EXIT_BAD_INPUT)
    click.echo(f"data folder: {root}")


@data.command("verify")
@click.argument("positional", metavar="[DIR]", required=False)
@click.option(
    "--data",
    "folder",
    metavar="DIR",
    default=None,
    help="Data folder to check. Default: $EMBEVAL_DATA, else the per-user data folder.",
)
@tasks_option
@fails_cleanly
def verify(positional, folder, tasks):
    """Check a data folder against the sha256 of SentEval's files, task by task.

    For each task: ok, missing (the first missing file), differs (the first file whose sha256
    is not the recorded one), or "present, no recorded checksum" for files the table cannot
    know (SNLI train, COCO, probing). Exit code 2 when a task named in --tasks is not usable,
    or, without --tasks, when any file present differs from its record.
    """
    from embeval.datasets.verify import verify_tasks
    from embeval.tasks.files import resolve_data_dir

    root = resolve_data_dir(folder or positional)
    if not root.is_dir():
        raise EmbevalError("data folder not found", file=root)
    names = _task_names(tasks)
    report = verify_tasks(root, names)
    for task, status in report:
        click.echo(f"{task:24s} {status.describe()}")
    if tasks is not None:
        bad = [task for task, status in report if not status.usable]
    else:
        bad = [task for task, status in report if status.paths("differs")]
    if bad:
        raise EmbevalError(f"{len(bad)} task(s) not usable: {', '.join(bad)}", file=root)
    usable = sum(status.usable for _, status in report)
    partial = sum(status.present and not status.usable for _, status in report)
    click.echo(
        f"{root}: {usable} task(s) usable, {partial} incomplete, "
        f"{len(report) - usable - partial} not present; no file differs from its record"
    )


@data.command("list")
@click.option(
    "--data",
    "folder",
    metavar="DIR",
    default=None,
    help="Data folder to report on. Default: $EMBEVAL_DATA, else the per-user data folder.",
)
@click.option("--urls", is_flag=True, help="Print only the upstream URL of every file a mirror must hold.")
@fails_cleanly
def list_(folder, urls):
    """Each task: where its data comes from, its size, its license, and whether it is present
    and verified in the data folder."""
    from embeval.datasets.sources import dataset_of_task, load_checksums, mirror_files
    from embeval.datasets.verify import dataset_status
    from embeval.tasks.files import resolve_data_dir
    from embeval.tasks.registry import TASKS

    if urls:
        for name, item in mirror_files().items():
            click.echo(f"{name}\t{item.url}")
        return
    root = resolve_data_dir(folder)
    table = load_checksums()
    owners = dataset_of_task()
    statuses = {}
    click.echo(f"data folder: {root}")
    for task in TASKS:
        dataset = owners[task]
        if dataset.name not in statuses:
            statuses[dataset.name] = dataset_status(root, dataset, table)
        status = statuses[dataset.name]
        expected = dataset.expected_files(table)
        known = [table[p][0] for p in expected if p in table]
        size = _human(sum(known)) if len(known) == len(expected) else "unknown"
        hosts = sorted({item.url.split("/")[2] for item in dataset.downloads})
        verified = "verified" if status.verified else status.describe()
        click.echo(f"{task:22s} {size:>9s}  {verified}")
        click.echo(f"{'':22s} source: {', '.join(hosts)} ({', '.join(i.file for i in dataset.downloads)})")
        click.echo(f"{'':22s} license: {dataset.license}")
