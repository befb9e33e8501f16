"""The `embeval sweep` command."""

import sys

import click

from embeval.cli.common import (
    data_option,
    fails_cleanly,
    mteb_options,
    say,
    task_file_option,
    task_names,
    task_registry,
    tasks_option,
)
from embeval.cli.options import config_option, device_option, memory_budget_option, options, threads_option
from embeval.errors import EXIT_BAD_INPUT, EmbevalError, install_hint


def parse_dims(text):
    """'64,128,256' -> [64, 128, 256] (positive integers, each once)."""
    if text is None:
        return None
    try:
        dims = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise EmbevalError(f"must be comma-separated integers, got {text!r}", file="--dims")
    if not dims or any(d < 1 for d in dims):
        raise EmbevalError(f"must be positive integers, got {text!r}", file="--dims")
    return list(dict.fromkeys(dims))


@click.command()
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@data_option
@tasks_option
@task_file_option
@mteb_options
@click.option(
    "--out-dir",
    "out_dir",
    metavar="DIR",
    default="sweep",
    show_default=True,
    help="Folder for each file's FILE-STEM.results.json (and predictions), sweep.json and the plots.",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Reuse every (file, task) already scored in DIR with the same vectors, data, configuration and "
    "embeval code; score the rest.",
)
@click.option(
    "--restart",
    is_flag=True,
    help="Discard what an earlier sweep that did not finish left in DIR's .partial files (kept otherwise: "
    "without --resume or --restart such files are refused).",
)
@click.option(
    "--dims",
    metavar="D1,D2,...",
    default=None,
    help="Score each file truncated to its first D dimensions (Matryoshka), each (file, D) a source of its "
    "own (FILE-STEM.dD.results.json); only the listed D are scored (list the full dimension too to "
    "score the whole vectors). Vectors are not renormalized unless --normalize says so.",
)
@click.option(
    "--ray",
    "ray",
    metavar="[ADDRESS]",
    is_flag=False,
    flag_value="local",
    default=None,
    help="Run each work unit (a group of stacked files x one task) as a Ray task: --ray alone starts a "
    "local Ray, --ray=ADDRESS joins a cluster (files must be readable by every worker at the same "
    "paths). Needs "
    f"{install_hint('ray')}.",
)
@options(
    device_option(),
    memory_budget_option(),
    config_option("preset"),
    config_option("kfold"),
    config_option("classifier"),
    config_option("solver"),
    config_option("classifiers"),
    config_option(
        "normalize",
        help="Normalize the sentence vectors first (after truncation, with --dims); tune picks per task on dev.",
    ),
    config_option("bootstrap"),
    config_option("seed"),
)
@threads_option
@click.option("--quiet", is_flag=True, help="No progress lines on stderr.")
@fails_cleanly
def sweep(
    files,
    data,
    tasks,
    task_files,
    allow_paths_outside,
    mteb,
    out_dir,
    resume,
    restart,
    dims,
    ray,
    device,
    memory_budget,
    preset,
    kfold,
    classifier,
    solver,
    classifiers,
    normalize,
    bootstrap,
    seed,
    threads,
    quiet,
):
    """Score many vectors files in one run: checkpoints, models, truncations.

    Every file is checked first; a bad file gets its one-line error and is left out (exit code 2),
    the others are scored. For each task the classifiers of files of equal dimension train together
    (results identical to `embeval score` of each file alone). Writes DIR/FILE-STEM.results.json
    per file, DIR/sweep.json and prints files x tasks with the best file per task chosen on the dev
    figure; files with a root attribute `step` also get DIR/plots/TASK.png. Globs are expanded.
    """
    from embeval.settings import build, parse_size

    budget = None if memory_budget is None else parse_size(memory_budget)
    config = build(
        preset,
        kfold=kfold,
        classifier=classifier,
        solver=solver,
        seed=seed,
        classifiers=classifiers,
        normalize=normalize,
        bootstrap=bootstrap,
    )
    registry = task_registry(task_files, allow_paths_outside, mteb)
    names = task_names(registry, tasks)
    from embeval.run import sweep_report
    from embeval.run.sweep import sweep as run
    from embeval.tasks.files import resolve_data_dir

    runner = None
    if ray is not None:
        from embeval.run.sweep_ray import RayRunner

        runner = RayRunner(None if ray == "local" else ray, device, budget=budget, threads=threads)
    from embeval.memory import check_budget, limited, small_pages

    if ray is None or ray == "local":  # a cluster's workers have memory of their own
        check_budget(budget)

    with limited(budget), small_pages():
        summary = run(
            list(files),
            resolve_data_dir(data),
            names,
            out_dir,
            device,
            config,
            parse_dims(dims),
            resume,
            runner=runner,
            log=(lambda m: None) if quiet else say,
            restart=restart,
            registry=registry,
            threads=threads,
        )
    if summary["sources"]:
        click.echo(sweep_report.table(summary))
        click.echo(f"results: {out_dir}/sweep.json")
    if summary["left_out"] or any(not s["complete"] for s in summary["sources"]):
        left = [item["file"] for item in summary["left_out"]]
        failed = [s["label"] for s in summary["sources"] if not s["complete"]]
        parts = ([f"left out {', '.join(left)}"] if left else []) + (
            [f"incomplete {', '.join(failed)}"] if failed else []
        )
        click.echo(f"embeval: error: sweep: {'; '.join(parts)} (see the errors above)", err=True)
        sys.exit(EXIT_BAD_INPUT)
