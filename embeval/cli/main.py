"""The `embeval` command. Each command is a thin shell over library functions."""

import importlib.util
from pathlib import Path

import click

from embeval._version import __version__
from embeval.cli.common import (
    EXIT_TERMINATED,
    OneLineErrorsGroup,
    data_option,
    fails_cleanly,
    labels_option,
    mteb_options,
    resamples_option,
    say,
    seed_option,
    sigterm_stops_like_ctrl_c,
    status,
    task_file_option,
    task_names,
    task_registry,
    tasks_option,
)
from embeval.cli.data import data as data_commands
from embeval.cli.docs import docs as docs_command
from embeval.cli.options import (
    comparison_options,
    config_option,
    device_option,
    memory_budget_option,
    options,
    threads_option,
)
from embeval.cli.sweep import sweep as sweep_command
from embeval.cli.tasks import tasks as tasks_command
from embeval.errors import EmbevalError, install_hint
from embeval.reports.cells import COMPARE_FORMATS, RANK_FORMATS, TABLE_FORMATS
from embeval.run.quickstart import DEFAULT_WORKDIR, ENCODERS

ENCODER_NAMES = tuple(ENCODERS)


def bootstrap_kernels() -> str:
    """This install's bootstrap kernels: compiled (built at install by a C compiler) or numpy's (the
    same figures, slower intervals); found without importing them."""
    return "compiled" if importlib.util.find_spec("embeval._kernels") else "numpy (installed without a C compiler)"


@click.group(cls=OneLineErrorsGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(
    __version__,
    "--version",
    prog_name="embeval",
    message=f"%(prog)s, version %(version)s; bootstrap kernels: {bootstrap_kernels()}",
)
def cli():
    """Evaluate sentence embeddings on SentEval's suite, MTEB's task types and your own tasks, with
    the encoder outside the process.

    \b
    1. embeval export-sentences --data DATA --out sentences/
    2. embed every list of sentences/manifest.json with any encoder, write vectors.h5 (below)
    3. embeval score vectors.h5 --data DATA

    New here? `embeval quickstart` runs all three with a ready-made encoder (fetching the data it needs).

    \b
    The vectors file: one HDF5 file (all of it: embeval docs formats)
      /TASK        a dataset per task, shape (sentences, dimension), float16, float32 or float64;
                   row i = the vector of line i of sentences/TASK.txt (lines split on \\n only)
      sha256       an attribute of each dataset: its list's fingerprint in manifest.json
      /TASK.ROLE   a task with roles (retrieval, reranking: query, document): a dataset per role,
                   named by the role's "dataset" in manifest.json, each with its own sha256
      /ALL         an export made with --union: one dataset for ALL.txt, attributes sha256 and
                   tasks (the union's task names, comma-separated); role lists stay apart
      model, step  optional root attributes: a name for tables, a checkpoint's training step
    Check one without scoring: embeval vectors check vectors.h5 --export sentences/

    Your own tasks, and MTEB's task types (retrieval, reranking, STS, pair classification,
    classification, multilabel classification, regression, clustering, summarization, bitext
    mining, instruction retrieval and reranking): a TOML task file, given with --task-file to every
    command (`embeval tasks --task-file FILE` checks it; embeval docs tasks, embeval docs mteb-kinds).
    MTEB's tasks and benchmarks by name: --mteb NAMES (embeval docs mteb-by-name).

    Every command's options: embeval COMMAND --help. The documentation, offline: embeval docs
    (its topics), embeval docs TOPIC. Bad input is reported as one line on stderr with exit code 2.
    """


@cli.command("export-sentences")
@data_option
@click.option("--out", "out", metavar="DIR", required=True, help="Folder to write TASK.txt files and manifest.json to.")
@tasks_option
@task_file_option
@mteb_options
@click.option(
    "--union",
    is_flag=True,
    help="Write one ALL.txt with every distinct sentence of the tasks once (about 22% fewer "
    "sentences to embed for the downstream tasks) instead of one file per task.",
)
@fails_cleanly
def export_sentences(data, out, tasks, task_files, allow_paths_outside, mteb, union):
    """Write each task's deduplicated sentence list for embedding.

    For every task (or those in --tasks) whose data is present, writes OUT/TASK.txt: UTF-8, one
    sentence a line, each line ended by \\n, distinct sentences in order of first occurrence.
    Empty lines are real sentences (CR and MPQA have empty samples) and need a vector too.
    OUT/manifest.json records each file's sentence count and sha256, the task's fingerprint,
    which the vectors file must carry (the layout: `embeval --help`; all of it: embeval docs formats).
    """
    from embeval.formats.sentences import export_sentences as run
    from embeval.tasks.files import resolve_data_dir

    root = resolve_data_dir(data)
    registry = task_registry(task_files, allow_paths_outside, mteb)
    names = task_names(registry, tasks)
    manifest, missing = run(root, out, names, union, log=status, registry=registry)
    for name, entry in manifest["tasks"].items():
        for role, one in (entry.get("roles") or {"": entry}).items():
            shown = f"{name} ({role})" if role else name
            click.echo(f"{shown:24s} {one['count']:>8d} sentences  {one['sha256'][:12]}")
    if union:
        u = manifest["union"]
        click.echo(f"{'ALL (union)':24s} {u['count']:>8d} sentences  {u['sha256'][:12]}")
        apart = sum(manifest["tasks"][name]["count"] for name in u["tasks"])
        click.echo(f"the union saves {apart - u['count']} of {apart} embeddings of its tasks' lists")
    if missing:
        click.echo(f"skipped (no data in {root}): {', '.join(missing)}")
    click.echo(f"wrote {Path(out) / 'manifest.json'}")


@cli.group()
def vectors():
    """Inspect and validate vectors files (the format: `embeval --help`, embeval docs formats)."""


@vectors.command("check")
@click.argument("file", metavar="FILE")
@click.option(
    "--export",
    "export_dir",
    metavar="DIR",
    required=True,
    help="The export folder (with manifest.json) the vectors were computed from.",
)
@tasks_option
@task_file_option
@click.option("--strict", is_flag=True, help="A task of the export absent from the file is an error.")
@fails_cleanly
def vectors_check(file, export_dir, tasks, task_files, allow_paths_outside, strict):
    """Validate a vectors file against an export, without scoring.

    Checks every dataset the manifest asks for (or those of --tasks): 2-D float16/32/64, one row
    per sentence, the task's sha256 fingerprint, no NaN or Inf, no links or storage outside the
    file. As `embeval score` does, a task absent from the file is skipped and listed (an error when
    named in --tasks or with --strict). Exit code 0 when every dataset checked is usable and at least
    one was checked, 2 otherwise.
    """
    from embeval.formats.h5guard import check_file
    from embeval.formats.sentences import load_manifest

    load_manifest(export_dir)  # the export and the file are checked before the task registry and numpy load
    check_file(file)
    names = task_registry(task_files, allow_paths_outside).parse(tasks) if tasks is not None else None
    from embeval.formats.vectors import check_against_manifest, outside_export

    report = check_against_manifest(file, export_dir, names)
    absent = [name for name, problem in report if problem == "absent"]
    checked = [(name, problem) for name, problem in report if problem != "absent"]
    for name, problem in checked:
        click.echo(f"{name:24s} {'ok' if problem is None else 'ERROR ' + problem}")
    if absent:
        click.echo(f"skipped (absent from the file): {', '.join(absent)}")
    bad = [name for name, problem in checked if problem]
    if bad:
        raise EmbevalError(f"{len(bad)} of {len(checked)} datasets unusable: {', '.join(bad)}", file=file)
    if absent and (strict or names is not None):
        raise EmbevalError(f"absent from the file{' (--strict)' if strict else ''}", file=file, task=", ".join(absent))
    if not checked:
        raise EmbevalError("none of the export's datasets is in the file", file=file)
    if names is None:
        outside = outside_export(file, export_dir)
        if outside:
            click.echo(f"not in the export, not checked: {', '.join(outside)}")
    click.echo(f"{file}: all {len(checked)} dataset{'s' if len(checked) != 1 else ''} ok")


@cli.command()
@click.argument("file", metavar="FILE")
@data_option
@tasks_option
@task_file_option
@mteb_options
@click.option(
    "--out",
    "out",
    metavar="PATH",
    default=None,
    help="Results JSON, written atomically once the run is complete (after every task the results so "
    "far go to PATH.partial, for --resume). Default: FILE's name with .results.json, in the "
    "current folder.",
)
@options(
    device_option(),
    memory_budget_option(),
    config_option("preset"),
    config_option("kfold"),
    config_option("classifier"),
    config_option("solver"),
    config_option("probing_classifier"),
)
@comparison_options
@config_option("seed")
@click.option(
    "--resume",
    is_flag=True,
    help="Reuse the results in --out (and its .partial file) of tasks whose vectors, data, "
    "configuration and embeval code are unchanged; score the rest.",
)
@click.option(
    "--restart",
    is_flag=True,
    help="Discard the results an earlier run that did not finish left in PATH.partial (kept otherwise: "
    "without --resume or --restart such a run is refused).",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Every requested task must be scored: a task absent from the file (or from the union's "
    "tasks), without data, or without an evaluator is an error instead of being skipped.",
)
@click.option(
    "--ray",
    "ray",
    metavar="[ADDRESS]",
    is_flag=False,
    flag_value="local",
    default=None,
    help="Search retrieval corpora in shards as Ray tasks: --ray alone starts a local Ray, --ray=ADDRESS "
    "joins a cluster (the vectors file must be readable by every worker at the same path). The figures "
    f"are those of one search. Needs {install_hint('ray')}.",
)
@threads_option
@click.option("--quiet", is_flag=True, help="No progress lines on stderr.")
@fails_cleanly
def score(
    file,
    data,
    tasks,
    task_files,
    allow_paths_outside,
    mteb,
    out,
    device,
    memory_budget,
    preset,
    kfold,
    classifier,
    solver,
    probing_classifier,
    classifiers,
    normalize,
    bootstrap,
    baseline_bow_dim,
    save_predictions,
    seed,
    resume,
    restart,
    strict,
    ray,
    threads,
    quiet,
):
    """Score a vectors file on every task it holds.

    Reads FILE (HDF5: /TASK datasets or a union /ALL), checks each task's fingerprint and values,
    and runs SentEval's protocol: cosine STS (STS12-16, with mean, wmean and pooled aggregations,
    and the cosine figures of STS-B and SICK-R), SICK-R and STS-B supervised regression, the
    classification tasks (MR, CR, SUBJ, MPQA, SST2, SST5, TREC, MRPC, SICK-E, SNLI) with either
    solver, and COCO image-caption ranking; and the tasks of task files (--task-file) by their
    kind's protocol, MTEB's task types included. Tasks absent from the file, without data, or not
    implemented are listed, never silently dropped (--strict: an error). Every task is checked
    before any is scored. Prints a table and writes the JSON results, with the full configuration,
    when the run is complete (the results so far go to OUT.partial after every task).
    """
    import shlex
    import sys

    from embeval.formats.h5guard import check_file
    from embeval.settings import build, parse_size

    budget = None if memory_budget is None else parse_size(memory_budget)
    config = build(
        preset,
        kfold=kfold,
        classifier=classifier,
        solver=solver,
        seed=seed,
        probing_classifier=probing_classifier,
        classifiers=classifiers,
        normalize=normalize,
        bootstrap=bootstrap,
        baseline_bow_dim=baseline_bow_dim,
    )
    check_file(file)  # a wrong path is answered before the task registry and numpy load
    registry = task_registry(task_files, allow_paths_outside, mteb)
    names = task_names(registry, tasks)
    from embeval.formats.results import table
    from embeval.run.score import Interrupted
    from embeval.run.score import score as run
    from embeval.tasks.files import resolve_data_dir

    log = (lambda m: None) if quiet else say
    out = out or f"{Path(file).name.rsplit('.', 1)[0]}.results.json"
    root = resolve_data_dir(data)
    try:
        with sigterm_stops_like_ctrl_c():
            record = run(
                file,
                root,
                tasks=names,
                out=out,
                device=device,
                config=config,
                progress=not quiet,
                log=log,
                strict=strict,
                resume=resume,
                restart=restart,
                save_predictions=save_predictions,
                registry=registry,
                ray=ray,
                threads=threads,
                memory_budget=budget,
            )
    except Interrupted as stop:
        stopped, code = ("terminated", EXIT_TERMINATED) if stop.terminated else ("interrupted", 130)
        if not stop.saved:
            click.echo(f"embeval: {stopped} before any task finished; {out} was not changed", err=True)
            sys.exit(code)
        ctx = click.get_current_context()
        again = ["embeval", "score", str(file), "--data", str(root), "--out", str(out)]
        for param in ctx.command.params:
            value = ctx.params.get(param.name)
            if (
                not isinstance(param, click.Option)
                or param.name in ("data", "out", "resume", "restart")
                or value is None
                or value == param.get_default(ctx)
                or (param.multiple and not value)
            ):
                continue
            if param.multiple:
                for one in value:
                    again += [param.opts[0], str(one)]
            elif not param.is_flag:
                again += [param.opts[0], str(value)]
            elif value or param.secondary_opts:
                again += [param.opts[0] if value else param.secondary_opts[0]]
        click.echo(
            f"embeval: {stopped}; the results of {', '.join(stop.saved)} are kept in {stop.kept_in}; "
            f"finish the run with: {shlex.join(again + ['--resume'])}",
            err=True,
        )
        sys.exit(code)
    click.echo(table(record, list(record["tasks"])))
    click.echo(f"results: {out}")
    if record.get("predictions"):
        click.echo(f"predictions: {Path(out).with_name(record['predictions']['file'])}")


@cli.command()
@data_option
@click.option(
    "--workdir",
    metavar="DIR",
    default=DEFAULT_WORKDIR,
    show_default=True,
    help="Folder for the export, the vectors and the results. An existing folder is reused only "
    "if an earlier quickstart made it.",
)
@click.option(
    "--encoder",
    type=click.Choice(("auto",) + ENCODER_NAMES),
    default="auto",
    show_default=True,
    help="minilm: all-MiniLM-L6-v2 through exporters/sentence_transformers_export.py (needs "
    f"`{install_hint('quickstart')}`); bow: exporters/bow_numpy.py; auto: minilm when "
    "installed, else bow.",
)
@click.option(
    "--tasks", metavar="A,B,...", default=None, help="Tasks to run. Default: STS12-16 (a few minutes on two CPU cores)."
)
@click.option(
    "--mirror",
    metavar="URL",
    envvar="EMBEVAL_MIRROR",
    default=None,
    help="Where to fetch absent data from (as `embeval data fetch --mirror`). Default: "
    "$EMBEVAL_MIRROR, else the upstream hosts.",
)
@device_option(help="Where to embed (minilm) and score.")
@memory_budget_option()
@config_option(
    "preset", help="Classifier configuration of the classification tasks (prototype: faster, not comparable to papers)."
)
@comparison_options
@fails_cleanly
def quickstart(
    data,
    workdir,
    encoder,
    tasks,
    mirror,
    device,
    memory_budget,
    preset,
    classifiers,
    normalize,
    bootstrap,
    baseline_bow_dim,
    save_predictions,
):
    """Export, embed with a ready-made encoder in a separate process, score: the whole workflow.

    \b
    0. without --data, fetches the data of absent tasks into $EMBEVAL_DATA, else the per-user
       data folder (as `embeval data fetch`)
    1. writes WORKDIR/sentences/ (a union export of the tasks)
    2. runs an exporter from exporters/ as its own process -> WORKDIR/vectors-ENCODER.h5
    3. scores the vectors -> WORKDIR/results-ENCODER.json, and prints the table
    A second run reuses the vectors when the export has not changed.
    """
    from embeval.settings import build, parse_size

    config = build(
        preset, classifiers=classifiers, normalize=normalize, bootstrap=bootstrap, baseline_bow_dim=baseline_bow_dim
    )
    budget = None if memory_budget is None else parse_size(memory_budget)
    from embeval.formats.results import table
    from embeval.memory import check_budget, limited
    from embeval.run import quickstart as qs

    check_budget(budget)
    from embeval.tasks.files import resolve_data_dir
    from embeval.tasks.registry import parse_task_list

    names = parse_task_list(",".join(qs.QUICKSTART_TASKS) if tasks is None else tasks)
    with limited(budget):
        record, results, vectors, used = qs.run(
            resolve_data_dir(data),
            workdir,
            encoder,
            names,
            device,
            log=status,
            say=lambda message: click.echo(message, err=True),
            config=config,
            save_predictions=save_predictions,
            fetch_missing=data is None,
            mirror=mirror,
        )
    click.echo(f"encoder: {qs.ENCODERS[used][1]}; vectors: {vectors}")
    click.echo(table(record, list(record["tasks"])))
    click.echo(f"results: {results}")
    click.echo("\n".join(qs.guide(record, results, data)))


@cli.command()
@click.argument("results", nargs=-1, required=True, metavar="A.json B.json [C.json ...]")
@labels_option
@tasks_option
@task_file_option
@resamples_option(
    "Bootstrap resamples (default: those of the first file's run, else 1000, or more when Holm's adjustment "
    "of many comparisons needs them"
)
@seed_option
@click.option(
    "--format", "fmt", type=click.Choice(COMPARE_FORMATS), default="text", show_default=True, help="Output format."
)
@click.option("--out", "out", metavar="PATH", default=None, help="Write the table there instead of stdout.")
@click.option("--json", "json_out", metavar="PATH", default=None, help="Also write every figure as JSON.")
@fails_cleanly
def compare(results, labels, tasks, task_files, allow_paths_outside, resamples, seed, fmt, out, json_out):
    """Paired comparison of encoders on the same test items (each file against the first).

    Needs results scored with --save-predictions. Per task and headline figure: the difference
    B - A, its 95% bootstrap interval and a paired bootstrap p-value (the same resampled test items
    for both), with Holm's adjustment over the table, and which differences are significant.
    """
    from embeval.formats import atomic, targets
    from embeval.formats.results import dumps
    from embeval.reports import compare as cmp

    registry = task_registry(task_files, allow_paths_outside)
    targets.check(
        targets.named([(out, "--out")]) + targets.named([(json_out, "--json")], cmp.COMPARISON),
        _inputs(results, registry),
    )
    names = registry.parse(tasks) if tasks is not None else None
    result = cmp.compare(
        list(results), labels=list(labels) or None, tasks=names, resamples=resamples, seed=seed, registry=registry
    )
    text = cmp.formatted(result, fmt)
    if out:
        atomic.write_text(out, _ended(targets.stamp(text, "compare", fmt)))
        click.echo(f"wrote {out}")
    else:
        click.echo(text)
    if json_out:
        atomic.write_text(json_out, dumps(result))


def _ended(text):
    return text if text.endswith("\n") else text + "\n"


def _inputs(paths, registry):
    """The files a command that reads results files takes in: each results file (or a sweep's summary)
    and the predictions beside it, and the task files of the registry."""
    from embeval.formats.predictions import sidecar_path
    from embeval.run.sweep_report import SUMMARY

    return [one for path in paths for one in (path, sidecar_path(path), Path(path) / SUMMARY)] + registry.sources()


@cli.command()
@click.argument("results", nargs=-1, required=True, metavar="A.json B.json [...]")
@labels_option
@tasks_option
@task_file_option
@resamples_option("Bootstrap resamples of each task's test items (default: those of the first file's run, else 1000")
@seed_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(RANK_FORMATS),
    default="text",
    show_default=True,
    help="Output format. html: one self-contained page with each run's rank interval drawn (needs matplotlib).",
)
@click.option("--out", "out", metavar="PATH", default=None, help="Write the leaderboard there instead of stdout.")
@click.option(
    "--json", "json_out", metavar="PATH", default=None, help="Also write every figure, interval and test as JSON."
)
@fails_cleanly
def rank(results, labels, tasks, task_files, allow_paths_outside, resamples, seed, fmt, out, json_out):
    """A leaderboard of 2 to 100 results files with rank intervals: which encoder is really better.

    Needs results scored with saved predictions (the default). Per benchmark (MTEB's Mean (Task), Mean
    (TaskType), type means and Borda's rank) and per task: each run's figure with its 95% interval and its
    rank with a 95% rank interval, from the same bootstrap resamples of the test items for every run; the
    runs that cannot be told apart from the best, and the matrix of paired differences with p-values
    adjusted over every pair (embeval docs ranking).
    """
    from embeval.formats import atomic, targets
    from embeval.formats.results import dumps
    from embeval.reports import rank as ranking

    registry = task_registry(task_files, allow_paths_outside)
    targets.check(
        targets.named([(out, "--out")]) + targets.named([(json_out, "--json")], ranking.RANKING),
        _inputs(results, registry),
    )
    names = registry.parse(tasks) if tasks is not None else None
    result = ranking.rank(
        list(results),
        labels=list(labels) or None,
        tasks=names,
        resamples=resamples,
        seed=seed,
        registry=registry,
        log=status,
    )
    if fmt == "html":
        from embeval.reports import html

        text = html.render_rank(result)
    else:
        text = ranking.formatted(result, fmt)
    if out:
        atomic.write_text(out, _ended(targets.stamp(text, "rank", fmt)))
        click.echo(f"wrote {out}")
    else:
        click.echo(text.rstrip("\n"))
    if json_out:
        atomic.write_text(json_out, dumps(result))


@cli.command()
@click.argument("results", nargs=-1, required=True, metavar="RESULTS.json...")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(TABLE_FORMATS + ("html",)),
    default="markdown",
    show_default=True,
    help="Output format. html: one self-contained page with the tables, figures with error bars, the "
    "STS aggregations side by side and, for several files with saved predictions, the paired "
    "comparison (needs matplotlib); given a sweep's folder (or its sweep.json), the sweep's table "
    "and its curves against step.",
)
@labels_option
@click.option("--out", "out", metavar="PATH", default=None, help="Write the report there instead of stdout.")
@click.option(
    "--plots",
    "plots",
    metavar="DIR",
    default=None,
    help=f"Also draw the geometry figures (PNG, needs matplotlib: {install_hint('report')}) into "
    "DIR; a markdown report links them.",
)
@click.option("--no-ci", is_flag=True, help="Leave the confidence intervals out of the cells.")
@click.option("--no-baseline", is_flag=True, help="Leave out the rows of --baseline-bow-dim baselines.")
@click.option(
    "--baselines",
    "published",
    metavar="NAME,...",
    default=None,
    help="Add published figures as rows (e.g. simcse-unsup-bert-base,sbert-nli-base, or a source: "
    "simcse, sbert, infersent); a figure computed differently from its column is marked. "
    "See `embeval docs reports`.",
)
@task_file_option
@fails_cleanly
def report(results, fmt, labels, out, plots, no_ci, no_baseline, published, task_files, allow_paths_outside):
    """Paper-ready tables, one row per encoder: SentEval's transfer table, SimCSE's STS table, the
    probing table and the geometry table, each with a dimension column and a caption that names the
    metric and the aggregation. With --format html, RESULTS may instead be one sweep (its --out-dir
    folder, or its sweep.json).
    """
    from embeval.formats import atomic, targets
    from embeval.reports import tables as rep

    sweep = _sweep_of(results, fmt, labels, plots, published)
    registry = task_registry(task_files, allow_paths_outside)
    drawn = [(Path(plots) / name, "--plots") for name in rep.PLOT_FILES] if plots else []
    targets.check(
        targets.named([(out, "--out")]) + targets.named(drawn, targets.PLOT),
        _inputs(results, registry) + ([sweep] if sweep else []),
    )
    names = None
    if published is not None:
        from embeval.reports.baselines import resolve

        names = resolve(published)
    if sweep is not None:
        from embeval.reports import html

        text = html.render_sweep(sweep, ci=not no_ci)
    elif fmt == "html":
        from embeval.reports import html

        text = html.render(
            list(results),
            labels=list(labels) or None,
            baselines=not no_baseline,
            ci=not no_ci,
            published=names,
            registry=registry,
        )
    else:
        tables, rows = rep.build(
            list(results),
            labels=list(labels) or None,
            baselines=not no_baseline,
            ci=not no_ci,
            published=names,
            registry=registry,
        )
        specs, _ = rep.task_specs([row.record for row in rows], list(results), registry)
        figures = rep.plots(rows, plots, relative_to=Path(out).parent if out else None, specs=specs) if plots else None
        text = rep.render(tables, fmt, ci=not no_ci, figures=figures)
        if fmt == "markdown":
            from embeval.reports import rank as ranking

            text += ranking.report_markdown(list(results), list(labels) or None, registry)
    if out:
        atomic.write_text(out, _ended(targets.stamp(text, "report", fmt)))
        click.echo(f"wrote {out}")
    else:
        click.echo(text)


def _sweep_of(results, fmt, labels, plots, published):
    """The sweep.json that `embeval report` was given (a sweep's folder or its sweep.json), or None when
    every argument is a results file."""
    from embeval.run import sweep_report

    found = [sweep_report.find(path) for path in results]
    sweeps = [path for path in found if path is not None]
    if not sweeps:
        return None
    if len(results) > 1:
        raise EmbevalError(
            "a sweep is reported on its own: give its folder (or sweep.json) alone; its results "
            "files can be reported together as usual",
            file=sweeps[0],
        )
    if fmt != "html":
        raise EmbevalError(
            "a sweep's report is the HTML page (--format html); `embeval sweep` prints its table", file=sweeps[0]
        )
    for given, option in ((labels, "--label"), (plots, "--plots"), (published, "--baselines")):
        if given:
            raise EmbevalError(f"{option} does not apply to a sweep's report", file=sweeps[0])
    return sweeps[0]


@cli.command("export-mteb")
@click.argument("results", metavar="RESULTS.json")
@click.option(
    "--model", required=True, metavar="ORG/NAME", help="The model's name in MTEB's form, e.g. my-org/my-encoder."
)
@click.option(
    "--revision",
    default=None,
    metavar="REV",
    help="The model's revision (e.g. a commit hash). Default: MTEB's no_revision_available.",
)
@click.option(
    "--out",
    "out",
    metavar="DIR",
    required=True,
    help="An MTEB result cache folder: files go to DIR/results/ORG__NAME/REV/.",
)
@task_file_option
@fails_cleanly
def export_mteb(results, model, revision, out, task_files, allow_paths_outside):
    """Write MTEB result files (one JSON per task, and model_meta.json) for the tasks with an MTEB
    counterpart: of SentEval's, STS12-16, STSBenchmarkRaw and SICK-R; of yours, those whose task file
    has an [mteb] table. MTEB's protocol only (embeval docs reports).

    A task whose MTEB-protocol figure is not in the results is left out with a note.
    """
    from embeval.reports import mteb

    registry = task_registry(task_files, allow_paths_outside)
    folder, written, notes = mteb.export(results, model, out, revision=revision, registry=registry)
    for name, path, main_score, protocol in written:
        click.echo(f"{name:14s} main_score {main_score:.4f}  {f'({protocol})  ' if protocol else ''}{path.name}")
    for note in notes:
        click.echo(f"not exported: {note}")
    click.echo(f"wrote {folder}")


cli.add_command(data_commands)
cli.add_command(docs_command)
cli.add_command(sweep_command)
cli.add_command(tasks_command)


def main():
    cli(prog_name="embeval")


if __name__ == "__main__":
    main()
