"""The `embeval tasks` command: every task embeval knows, and a check of the task files."""

import click

from embeval.cli.common import (
    data_option,
    fails_cleanly,
    mteb_options,
    status,
    task_file_option,
    task_names,
    task_registry,
    tasks_option,
)


@click.command("tasks")
@data_option
@tasks_option
@task_file_option
@mteb_options
@click.option(
    "--no-load",
    is_flag=True,
    help="List the tasks without reading their data (no sizes; with --mteb: each dataset's local copy or "
    "the command that fetches it).",
)
@fails_cleanly
def tasks(data, tasks, task_files, allow_paths_outside, mteb, no_load):
    """List the built-in tasks and those your task files declare: kind, protocol, where they come
    from, their description, and (reading their data, which checks it) their splits and sizes.

    Every task file named by --task-file or EMBEVAL_TASKS is read and checked first: a problem in a
    declaration or a data file is one line naming the file (and the key or line), exit code 2.
    """
    from embeval.errors import EmbevalError
    from embeval.tasks.files import resolve_data_dir

    if no_load and mteb is not None:  # MTEB's tasks as mteb describes them, no dataset read
        from embeval.tasks.mteb_source import describe

        if tasks is not None:
            raise EmbevalError("lists the tasks of --mteb; give the names there", file="--tasks")
        for line in describe(mteb.names, mteb.data, allow_paths_outside):
            click.echo(line)
        return
    registry = task_registry(task_files, allow_paths_outside, mteb)
    names = task_names(registry, tasks) or list(registry)
    root = resolve_data_dir(data)
    declared = {spec.name for spec in registry.declared()}
    width = max(len(n) for n in names) + 2
    problems = 0
    for name in names:
        spec = registry[name]
        where = "built-in" if spec.builtin else spec.source
        kind = spec.kind + (f" ({spec.protocol})" if spec.protocol else "")
        line = f"{name:<{width}}{kind:34s} {where}"
        if spec.description:
            line += f"\n{'':<{width}}{spec.description}"
        if no_load:
            click.echo(line)
            continue
        missing = spec.missing_files(root)
        if missing:
            if name in declared:
                spec.require_data(root)
            click.echo(f"{line}\n{'':<{width}}no data in {root}")
            continue
        status(f"loading {name} ...")
        try:
            data_of = spec.load(root)
        except EmbevalError:
            if name in declared:
                raise
            problems += 1
            click.echo(f"{line}\n{'':<{width}}its data does not load (embeval data verify {name})")
            continue
        lists = spec.kind_module.sentences(spec, data_of)
        sentences = ", ".join(f"{len(v)} {'sentences' if r == 'text' else r + ' sentences'}" for r, v in lists.items())
        click.echo(f"{line}\n{'':<{width}}{spec.kind_module.sizes(spec, data_of)}; {sentences} to embed")
    declared -= set(registry.mteb_names)
    if declared:
        click.echo(f"task files: {len(declared)} declared task{'s' if len(declared) > 1 else ''}, all valid")
    if problems:
        raise EmbevalError(f"{problems} built-in task{'s' if problems > 1 else ''} with unreadable data", file=root)
