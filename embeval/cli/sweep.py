"""The `embeval sweep` command."""

import sys

import click

from embeval.cli.common import data_option, fails_cleanly, say, task_file_option, task_registry, tasks_option
from embeval.errors import EXIT_BAD_INPUT, EmbevalError
from embeval.run.config import NORMALIZATIONS


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
    "pip install 'embeval[ray]'.",
)
@click.option(
    "--device",
    type=click.Choice(["auto", "cpu", "cuda"]),
    default="auto",
    show_default=True,
    help="Where to train and score.",
)
@click.option(
    "--config",
    "preset",
    type=click.Choice(["literature", "prototype"]),
    default="literature",
    show_default=True,
    help="As for `embeval score`.",
)
@click.option("--kfold", type=int, default=None, metavar="N", help="Folds for cross-validation (overrides --config).")
@click.option("--classifier", metavar="JSON", default=None, help="Classifier settings overriding --config.")
@click.option(
    "--solver",
    type=click.Choice(["senteval", "lbfgs"]),
    default="senteval",
    show_default=True,
    help="As for `embeval score`.",
)
@click.option("--classifiers", metavar="logreg,mlp", default=None, help="As for `embeval score`.")
@click.option(
    "--normalize",
    type=click.Choice(NORMALIZATIONS),
    default="none",
    show_default=True,
    help="Normalize the sentence vectors first (after truncation, with --dims).",
)
@click.option(
    "--bootstrap",
    type=int,
    default=1000,
    show_default=True,
    metavar="N",
    help="Bootstrap resamples of the 95% confidence intervals (0: none).",
)
@click.option("--seed", type=int, default=1111, show_default=True, help="Seed of every classifier and fold.")
@click.option("--quiet", is_flag=True, help="No progress lines on stderr.")
@fails_cleanly
def sweep(
    files,
    data,
    tasks,
    task_files,
    out_dir,
    resume,
    restart,
    dims,
    ray,
    device,
    preset,
    kfold,
    classifier,
    solver,
    classifiers,
    normalize,
    bootstrap,
    seed,
    quiet,
):
    """Score many vectors files in one run: checkpoints, models, truncations.

    Every file is checked first; a bad file gets its one-line error and is left out (exit code 2),
    the others are scored. For each task the classifiers of files of equal dimension train together
    (results identical to `embeval score` of each file alone). Writes DIR/FILE-STEM.results.json
    per file, DIR/sweep.json and prints files x tasks with the best file per task chosen on the dev
    figure; files with a root attribute `step` also get DIR/plots/TASK.png. Globs are expanded.
    """
    from embeval.run import sweep_report
    from embeval.run.config import build
    from embeval.run.sweep import sweep as run
    from embeval.tasks.files import resolve_data_dir

    registry = task_registry(task_files)
    names = registry.parse(tasks) if tasks is not None else None
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
    runner = None
    if ray is not None:
        from embeval.run.sweep_ray import RayRunner

        runner = RayRunner(None if ray == "local" else ray, device)
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
