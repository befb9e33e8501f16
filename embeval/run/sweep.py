"""`embeval sweep`: many vectors files (and truncations of them) scored in one run.

Every file goes through plan() first; a bad one is reported in one line and left out. The task data
is loaded once per process, and for each task the files of equal dimension are scored together in
groups as large as memory allows: their classification problems train in one batched call
(embeval.evaluate.stack), with results per file identical to scoring it alone. Each file gets the
results file `embeval score` writes (with its predictions), written the same way (OUT.partial after
each task, OUT when complete), so --resume reuses every (file, task) already done with the same
fingerprints and configuration. A group can run here or as a Ray task (embeval.run.sweep_ray).
"""

import glob
import logging
import sys
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path

from embeval import threads as run_threads
from embeval.errors import EmbevalError
from embeval.formats import targets
from embeval.formats.h5guard import check_file
from embeval.memory import available_memory, dense_budget, device_memory
from embeval.run.outputs import ResultsFiles
from embeval.run.resume import reusable_units
from embeval.run.score import finish, new_record, place
from embeval.settings import as_config
from embeval.tasks.registry import registry as task_registry

logger = logging.getLogger("embeval")

SWEEP_FORMAT = "embeval-sweep"


@dataclass
class SweepSource:
    """One scored source of a sweep: a file, or its first `dims` columns."""

    path: str
    dims: int | None
    label: str
    out: Path
    step: float | None = None
    model: str | None = None  # the file's `model` attribute
    units: list = field(default_factory=list)
    skipped: dict = field(default_factory=dict)
    files: ResultsFiles | None = None
    record: dict | None = None
    kept: dict = field(default_factory=dict)
    failed: dict = field(default_factory=dict)
    reused: dict = field(default_factory=dict)


@dataclass
class LeftOut:
    """A file (or truncation) that is not scored, and the one-line error saying why."""

    path: str
    error: str


def expand(patterns):
    """The files named by `patterns`, globs expanded (sorted), each once: ([paths], [LeftOut])."""
    paths, left_out = [], []
    for pattern in patterns:
        if glob.has_magic(pattern):
            found = sorted(glob.glob(pattern))
            if not found:
                left_out.append(LeftOut(pattern, str(EmbevalError("no file matches this pattern", file=pattern))))
            paths += found
        else:
            paths.append(pattern)
    return list(dict.fromkeys(paths)), left_out


def output_name(path, dims):
    stem = Path(path).name.rsplit(".", 1)[0]
    return f"{stem}.d{dims}" if dims else stem


def read_step(path):
    """The file's root attribute `step` (a number), or None."""
    import h5py

    try:
        with h5py.File(path, "r") as f:
            value = f.attrs.get("step")
    except OSError:
        return None
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        raise EmbevalError(f"the root attribute step must be a number, got {value!r}", file=path)


def truncated_units(units, dims, workspace):
    """The units of scoring the first `dims` columns: their source says so, and their description of
    the vectors (dimension, fingerprint) is the truncated table's."""
    from embeval.run.execute import truncate
    from embeval.run.plan import table_fingerprint

    out = []
    for unit in units:
        if dims > unit.vectors["dim"]:
            raise EmbevalError(
                f"--dims {dims} exceeds the file's {unit.vectors['dim']} dimensions",
                file=unit.source.path,
                task=unit.task,
            )
        table = truncate(workspace.table(unit, workspace.located(unit)), dims)
        vectors = dict(
            unit.vectors, dim=dims, vectors_sha256=table_fingerprint(table), truncated_from=unit.vectors["dim"]
        )
        reference = truncated_units([unit.reference], dims, workspace)[0] if unit.reference is not None else None
        out.append(replace(unit, source=replace(unit.source, dims=dims), vectors=vectors, reference=reference))
    return out


def plan_sources(paths, data_dir, tasks, config, dims_list, out_dir, workspace, registry=None):
    """Pre-flight of every file: ([SweepSource], [LeftOut]). workspace: where the task data is
    loaded (once) and the files are read from; registry: the tasks known to the sweep."""
    from embeval.run.plan import plan

    sources, left_out, names = [], [], {}
    for path in paths:
        try:
            work = plan(
                path, data_dir, tasks, config, cache=workspace.data_cache(str(Path(data_dir))), registry=registry
            )
            step = read_step(path)
        except EmbevalError as err:
            left_out.append(LeftOut(path, str(err)))
            continue
        for dims in dims_list or [None]:
            name = output_name(path, dims)
            if name in names:
                left_out.append(
                    LeftOut(
                        path,
                        str(
                            EmbevalError(
                                f"has the same name as {names[name]}; its results would overwrite the other's",
                                file=path,
                            )
                        ),
                    )
                )
                continue
            try:
                units = truncated_units(work.units, dims, workspace) if dims else work.units
            except EmbevalError as err:
                left_out.append(LeftOut(f"{path} --dims {dims}", str(err)))
                continue
            names[name] = path
            base = work.model or output_name(path, None)
            label = f"{base}@{dims}" if dims else base
            sources.append(
                SweepSource(
                    path, dims, label, Path(out_dir) / f"{name}.results.json", step, work.model, units, work.skipped
                )
            )
    labels = [s.label for s in sources]
    for source in sources:
        if labels.count(source.label) > 1:  # files of one model: each named by its file too
            source.label = f"{source.label} ({output_name(source.path, source.dims)})"
    return sources, left_out


def unit_bytes(unit):
    """Memory a unit takes when stacked with others (its kind's estimate)."""
    return unit.spec.kind_module.unit_bytes(unit.spec, unit.vectors["count"], unit.vectors["dim"], unit.config)


def memory_budget(device):
    """Bytes the stacked matrices of one group may take: four times a dense feature matrix's budget on
    the device, within half the memory free there."""
    gpu = device_memory(device)
    free = gpu[0] if gpu is not None else available_memory()
    limit = 4 * dense_budget(device)
    return limit if free is None else min(limit, free // 2)


def groups_of(units, device, budget=None):
    """The units of one task in work groups: units of equal dimension together, as many per group as
    fit the memory budget; tasks whose kind fits nothing that stacks one unit a group."""
    budget = memory_budget(device) if budget is None else budget
    groups = []
    by_dim = {}
    for unit in units:
        if not unit.spec.kind_module.stacks:
            groups.append([unit])
        else:
            by_dim.setdefault(unit.vectors["dim"], []).append(unit)
    for members in by_dim.values():
        size = max(1, budget // max(1, unit_bytes(members[0])))
        groups += [members[i : i + size] for i in range(0, len(members), size)]
    return groups


@dataclass(frozen=True)
class Failure:
    """Why a unit was not scored: its one-line error, the traceback (for the sweep's log; empty for
    bad input), and whether running it again may succeed (a lost worker) or not (an error the same
    inputs raise again)."""

    message: str
    traceback: str = ""
    retry: bool = False


def failure(unit, err):
    """The Failure of a unit that raised `err` (deterministic: not retried)."""
    if isinstance(err, EmbevalError):
        return Failure(str(err))
    trace = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    return Failure(f"{unit.source.path}: {unit.task}: {type(err).__name__}: {err}", trace)


def execute_group(units, device="cpu", workspace=None):
    """Score a group of units of one task, their classifiers trained together: [(entry, sets) or
    (None, Failure)] in the units' order."""
    import torch

    from embeval.evaluate.stack import run_together
    from embeval.run.execute import Workspace, execute_steps

    own = workspace is None
    workspace = workspace or Workspace()
    device = torch.device(device)
    try:
        outcomes = run_together([execute_steps(unit, device, workspace) for unit in units])
    finally:
        if own:
            workspace.close()
    results = []
    for unit, (value, err) in zip(units, outcomes):
        if err is None:
            results.append(value)
        elif isinstance(err, Exception):
            results.append((None, failure(unit, err)))
        else:
            raise err
    return results


class LocalRunner:
    """Executes groups in this process, one after the other, in one Workspace (default: a new one)."""

    def __init__(self, device, workspace=None):
        from embeval.run.execute import Workspace

        self.device = device
        self.workspace = workspace or Workspace()

    def run(self, groups):
        for group in groups:
            yield group, execute_group(group, self.device, self.workspace)

    def close(self):
        self.workspace.close()


def sweep(
    patterns,
    data_dir,
    tasks=None,
    out_dir="sweep",
    device="auto",
    config=None,
    dims=None,
    resume=False,
    runner=None,
    log=None,
    restart=False,
    task_files=(),
    registry=None,
    threads=None,
):
    """Score every file of `patterns` (and each of its truncations to `dims`) on `tasks`; write one
    results file per source, OUT_DIR/sweep.json and (when the files carry a `step`) plots.

    runner: something with run(groups) yielding (group, results) and close() (default: LocalRunner).
    threads: torch's CPU threads in this process (embeval.threads.choose), recorded in every results file.
    Returns the summary (embeval.run.sweep_report.summary) with `left_out` and `failed`."""
    from embeval.run import sweep_report

    log = log or (lambda msg: print(msg, file=sys.stderr))
    config = as_config(config)
    out_dir = Path(out_dir)
    started = time.perf_counter()
    paths, left_out = expand(patterns)
    for path in list(paths):
        try:
            check_file(path)
        except EmbevalError as err:
            paths.remove(path)
            left_out.append(LeftOut(path, str(err)))
    try:
        known = registry if registry is not None else task_registry(task_files)
        check_targets(paths, left_out, out_dir, dims, tasks, known, data_dir)
    except BaseException:
        if runner is not None:
            runner.close()
        raise
    if not paths:  # nothing to score: said without loading torch
        for item in left_out:
            logger.error(f"{item.error} (left out of the sweep)")
        if runner is not None:
            runner.close()
        return sweep_report.summary([], left_out, out_dir, round(time.perf_counter() - started, 3))
    from embeval.run.execute import Workspace, check_budgets, resolve_device

    device = resolve_device(device)
    chosen = run_threads.choose(threads if runner is None else None)
    workspace = Workspace()
    try:
        sources, bad = plan_sources(paths, data_dir, tasks, config, dims, out_dir, workspace, known)
        if runner is None:  # a Ray task plans its search under its worker's budget
            check_budgets([unit for source in sources for unit in source.units], workspace, device)
    except BaseException:
        workspace.close()
        raise
    left_out += bad
    for item in left_out:
        logger.error(f"{item.error} (left out of the sweep)")
    if sources:
        out_dir.mkdir(parents=True, exist_ok=True)
    local = runner is None  # a Ray runner's tasks set their own threads (the CPUs Ray grants them)
    if runner is None:
        runner = LocalRunner(device, workspace)
    else:
        workspace.close()
    try:
        ready = []
        for source in sources:
            try:
                _open(source, data_dir, config, device, resume, restart, [s.path for s in sources])
                if local:
                    source.record["threads"] = chosen.to_record()
                ready.append(source)
            except EmbevalError as err:
                left_out.append(LeftOut(source.path, str(err)))
                logger.error(f"{err} (left out of the sweep)")
        with run_threads.using(chosen):
            _run(ready, runner, device, log, out_dir)
    finally:
        for source in sources:
            if source.files is not None:
                source.files.release()
        runner.close()
    summary = sweep_report.summary(ready, left_out, out_dir, round(time.perf_counter() - started, 3))
    if ready:
        sweep_report.write(summary, out_dir, log)
    return summary


def check_targets(paths, left_out, out_dir, dims, tasks, registry, data_dir):
    """Before any work, every file the sweep writes (embeval.formats.targets): sweep.json, sweep.log and
    the plots (an error), and each source's results files (a source whose files are refused is left out:
    removed from `paths`, added to `left_out`). None of them may be an input."""
    from embeval.run import sweep_report

    inputs = [*paths, *registry.inputs(data_dir, tasks)]
    names = [t if isinstance(t, str) else t.name for t in tasks] if tasks is not None else list(registry)
    targets.check(sweep_report.output_targets(out_dir, names), inputs)
    for path in list(paths):
        try:
            for one in dims or [None]:
                out = Path(out_dir) / f"{output_name(path, one)}.results.json"
                targets.check(ResultsFiles(out, save_predictions=True).targets("--out-dir"), inputs)
        except EmbevalError as err:
            paths.remove(path)
            left_out.append(LeftOut(path, str(err)))


def _open(source, data_dir, config, device, resume, restart=False, inputs=()):
    source.files = ResultsFiles(source.out, save_predictions=True)
    previous = source.files.check(resume, restart, inputs)
    source.record = new_record(source.path, data_dir, config, device, source.model)
    source.record["skipped"] = source.skipped
    if source.dims:
        source.record["vectors"]["truncated_to"] = source.dims
    if source.step is not None:
        source.record["vectors"]["step"] = source.step
    source.reused = reusable_units(source.files, previous, source.record, source.units) if resume else {}


def _run(sources, runner, device, log, out_dir):
    started = time.perf_counter()
    order = list(dict.fromkeys(u.task for s in sources for u in s.units))
    owner = {}
    pending = {}
    for source in sources:
        for unit in source.units:
            owner[id(unit)] = source
            entry, sets = source.reused.get((unit.source.run, unit.task), (None, None))
            if entry is not None:
                _keep(source, unit, entry, sets, started)
            else:
                pending.setdefault(unit.task, []).append(unit)
    groups = [g for task in order for g in groups_of(pending.get(task, []), device)]
    retry = []
    for attempt in range(2):
        for group, results in runner.run(groups if attempt == 0 else retry):
            task = group[0].task
            again = []
            for unit, (entry, detail) in zip(group, results):
                source = owner[id(unit)]
                if entry is not None:
                    _keep(source, unit, entry, detail, started)
                    source.files.task_done(source.record, source.kept)
                elif attempt == 0 and detail.retry:
                    again.append(unit)
                    log(f"  {task} of {source.label} failed ({detail.message}); retrying once")
                else:
                    source.failed[task] = detail.message
                    logger.error(f"{detail.message} (not scored)")
                    _log_failure(out_dir, source, unit, detail)
            if again:
                retry.append(again)
            log(f"{task} done: {', '.join(owner[id(u)].label for u in group)}")
        if not retry:
            break
    for source in sources:
        tasks = source.record["tasks"]
        source.record["tasks"] = {u.task: tasks[u.task] for u in source.units if u.task in tasks}
        finish(source.record, started)
        if not source.failed:
            source.files.complete(source.record, source.kept)
        elif source.record["tasks"]:
            source.files.task_done(source.record, source.kept)


SWEEP_LOG = "sweep.log"


def _log_failure(out_dir, source, unit, detail):
    """Append a failed unit's error and traceback to OUT_DIR/sweep.log."""
    with open(Path(out_dir) / SWEEP_LOG, "a", encoding="utf-8") as log:
        log.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {source.label}: {unit.task}: {detail.message}\n")
        if detail.traceback:
            log.write(detail.traceback.rstrip("\n") + "\n")
        log.write("\n")


def _keep(source, unit, entry, sets, started):
    place(source.record, unit, entry)
    source.kept.setdefault(unit.source.run, {})[unit.task] = {
        "data_sha256": unit.data_sha256,
        "vectors_sha256": entry["vectors"]["vectors_sha256"],
        "sets": sets,
    }
    finish(source.record, started)
