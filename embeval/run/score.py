"""`embeval score`: plan, then execute each unit and write the results.

plan() checks everything first — data, structure, fingerprints, memory, values — so bad input never
leaves a results file behind (nor touches the previous one), and a run that would score nothing is
an error. Then each unit is executed and the record so far goes to OUT.partial; OUT is written once,
when the run is complete, so an interrupted run keeps what finished and `resume=True` picks it up.
Only data and vectors are read: no user code runs in this process.
"""

from __future__ import annotations

import hashlib
import logging
import platform
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from embeval import threads as run_threads
from embeval._version import __version__, code_fingerprint
from embeval.errors import EmbevalError, Terminated
from embeval.formats.h5guard import check_file
from embeval.formats.results import FORMAT, FORMAT_VERSION
from embeval.formats.vectors import VectorsFile  # noqa: F401  (tests patch reads through this module)
from embeval.memory import check_budget, check_device_tables, limited, memory_limit, small_pages
from embeval.run import baseline
from embeval.run.outputs import ResultsFiles
from embeval.run.resume import reusable_units
from embeval.settings import RunConfig, as_config, parse_size
from embeval.tasks import mteb_tasks
from embeval.tasks.registry import Registry
from embeval.tasks.registry import registry as task_registry
from embeval.tasks.spec import TaskSpec

logger = logging.getLogger("embeval")


def versions():
    import h5py
    import numpy as np
    import scipy
    import sklearn
    import torch

    from embeval import stats

    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "torch": torch.__version__,
        "scikit-learn": sklearn.__version__,
        "h5py": h5py.__version__,
        # the bootstrap's kernels: compiled, or numpy's (Pearson's interval ends then differ by ~1e-15)
        "bootstrap kernels": "compiled" if stats._kernels is not None else "numpy",
    }


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM: `terminated`) during a run; `saved` lists the tasks whose results are kept in the
    file `kept_in`."""

    def __init__(self, saved, kept_in, terminated=False):
        super().__init__()
        self.saved, self.kept_in, self.terminated = saved, kept_in, terminated


def new_record(vectors, root, config: RunConfig, device, model=None):
    """A results record before any task is scored; model: the vectors file's `model` attribute (the
    name tables give the vectors), recorded under vectors.model when present."""
    from embeval.run.execute import describe_device

    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "embeval": __version__,
        "embeval_code": code_fingerprint(),
        "vectors": {"file": str(vectors), **({"model": model} if model else {})},
        "data": {"path": str(root)},
        "config": config.to_record(),
        "seed": config.seed,
        "device": describe_device(device),
        "memory_budget": memory_limit(),
        "versions": versions(),
        "tasks": {},
        "skipped": {},
    }


def place(record, unit, entry):
    """Put a unit's entry where its source's records go (the baseline's under record["baseline"]), with
    the digest of its figures and intervals (`figures_sha256`, checked by every reader)."""
    from embeval.formats.results import figures_digest

    entry["figures_sha256"] = figures_digest(entry)
    if unit.source.run == "encoder":
        record["tasks"][unit.task] = entry
        return
    if "baseline" not in record:
        record["baseline"] = {
            "encoder": baseline.NAME,
            "rule": "exporters/bow_numpy.py",
            "dim": unit.source.bow_dim,
            "tasks": {},
        }
    record["baseline"]["tasks"][unit.task] = entry


def device_tables(units):
    """(task, (rows, dim)) of every table a run puts on the device, the tables lending statistics too."""
    tables = {}
    for unit in units:
        for one in (unit, unit.reference):
            if one is not None:
                tables[(one.task, one.source.bow_dim)] = (one.task, (one.vectors["count"], one.vectors["dim"]))
    return list(tables.values())


def score(
    vectors: str | Path,
    data_dir: str | Path,
    tasks: Sequence[str | TaskSpec] | None = None,
    out: str | Path | None = None,
    device: str = "auto",
    config: RunConfig | Mapping[str, Any] | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    strict: bool = False,
    resume: bool = False,
    save_predictions: bool | None = None,
    restart: bool = False,
    task_files: Sequence[str | Path] = (),
    registry: Registry | None = None,
    ray: str | None = None,
    threads: int | None = None,
    memory_budget: int | str | None = None,
) -> dict[str, Any]:
    """Score every requested task present in the vectors file; write the results to `out`.

    tasks: names in the order to score them (None: every task the file and data hold). Every task
    is checked before any is scored; a run with nothing to score raises EmbevalError. `out` is
    written when the run is complete; after each task the results so far go to OUT.partial (see
    ResultsFiles), and one process at a time may write `out`. strict: a requested task that would
    be skipped (absent from the file, no data, no evaluator) is an error. resume: reuse the results
    in OUT.partial or `out` of tasks whose vectors, data, configuration and embeval code are
    unchanged. restart: discard the OUT.partial of an earlier run that did not finish (without resume
    or restart such a file is kept and the run refused). save_predictions: write every task's
    per-test-item predictions to OUT.predictions.npz (default: whenever `out` is given). progress:
    show the stages of long tasks on stderr. Ctrl-C raises Interrupted, naming what was kept.
    task_files: task files (or folders of them) declaring tasks beyond the built-ins; registry: the
    tasks known to the run (default: the built-ins, those of EMBEVAL_TASKS and of task_files). config: a
    RunConfig (embeval.run.config.build), a results file's `config` object, or None (the literature
    preset). ray: search retrieval corpora in shards as Ray tasks: "local" (a Ray started here) or a
    cluster's address (the figures are those of a search in this process). threads: torch's CPU
    threads during the run (default: OMP_NUM_THREADS, else the CPUs the process may use; see
    embeval.threads), recorded under `threads`. memory_budget: what scoring may allocate at once
    (bytes or a size such as "2GiB"; embeval.memory.limited), recorded in the results; None: the
    defaults of embeval.memory (the figures are the same either way).

    What can be checked without torch is checked before it is imported: the configuration, the
    options, the vectors file's presence and HDF5 signature, the results files.
    """
    log = log or (lambda msg: print(msg, file=sys.stderr))
    config = as_config(config)
    budget = memory_limit() if memory_budget is None else parse_size(memory_budget)
    if memory_budget is not None:
        check_budget(budget)
    with limited(budget), small_pages():
        return _score(
            vectors, data_dir, tasks, out, device, config, progress, log, strict, resume, save_predictions, restart,
            task_files, registry, ray, threads,
        )  # fmt: skip


def _score(
    vectors,
    data_dir,
    tasks,
    out,
    device,
    config,
    progress,
    log,
    strict,
    resume,
    save_predictions,
    restart,
    task_files,
    registry,
    ray,
    threads,
):
    root = Path(data_dir)
    if save_predictions is None:
        save_predictions = out is not None
    if save_predictions and not out:
        raise EmbevalError("needs a results file to write the predictions beside (--out)", file="--save-predictions")
    if resume and not out:
        raise EmbevalError("needs the results file to resume from (--out)", file="--resume")
    check_file(vectors)
    files = ResultsFiles(out, save_predictions) if out else None
    workspace = shards = None
    chosen = run_threads.choose(threads)
    try:
        registry = registry if registry is not None else task_registry(task_files)
        inputs = [vectors, *task_files, *registry.inputs(root, tasks)]
        previous = files.check(resume, restart, inputs=inputs) if files else []
        from embeval.run.execute import Workspace, check_budgets, resolve_device
        from embeval.run.plan import plan

        device = resolve_device(device)
        if ray is not None:
            from embeval.run.shards import RayShards

            shards = RayShards(None if ray == "local" else ray)
        workspace = Workspace(shards)  # the task data plan() loads and fingerprints is reused by execute()
        size = Path(vectors).stat().st_size
        if size >= CHECK_NOTE_BYTES:  # a large file's checks take a while before the first task: say so
            log(f"checking {vectors} ({size / 2**30:.1f} GiB: every vector it holds for the tasks is read once) ...")
        cache = workspace.data_cache(str(root))
        work = plan(vectors, root, tasks, config, strict, cache=cache, registry=registry, kept=workspace.kept)
        check_device_tables(device_tables(work.units), device)
        check_budgets(work.units, workspace, device)
        with run_threads.using(chosen):
            record = new_record(vectors, root, config, device, work.model)
            record["threads"] = chosen.to_record()
            record["skipped"] = work.skipped
            if registry.unsupported:
                record["skipped"]["mteb_unsupported"] = list(registry.unsupported)
            decisions = reusable_units(files, previous, record, work.units) if resume else {}
            note = mlp_note(config, [u for u in work.units if (u.source.run, u.task) not in decisions])
            if note:
                log(note)
            _run(work.units, decisions, record, files, device, progress, log, workspace)
    except KeyboardInterrupt as stop:
        raise Interrupted(
            files.saved if files else [], files.progress if files else None, terminated=isinstance(stop, Terminated)
        )
    except EmbevalError:
        if files and files.saved and not files.write_failed:
            logger.info(files.kept())
        raise
    finally:
        if workspace is not None:
            workspace.close()
        if shards is not None:
            shards.close()
        if files:
            files.release()
    return record


CHECK_NOTE_BYTES = 256 << 20  # a vectors file this large gets a line before its checks


def mlp_note(config, units):
    """A line for the start of a run that trains the MLP beside logistic regression (--classifiers with
    mlp): which tasks, and that they take many times longer. None when no such task is to be scored."""
    if "mlp" not in (config.classifiers or ()):
        return None
    names = list(dict.fromkeys(u.task for u in units if u.spec.kind_module.runs_classifiers(u.spec)))
    if not names:
        return None
    shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    return (
        f"note: --classifiers {','.join(config.classifiers)} trains an MLP beside logistic regression on {shown}: "
        "expect these tasks to take many times as long as with logistic regression alone (about 26 times on CR "
        "in one measured run; embeval docs comparison)"
    )


def _run(units, decisions, record, files, device, progress, log, workspace):
    from embeval.evaluate.context import QUIET
    from embeval.run.execute import execute
    from embeval.run.progress import TaskProgress

    kept = {}  # run -> task -> {"data_sha256", "vectors_sha256", "sets"}
    started = time.perf_counter()
    for i, unit in enumerate(units):
        run = unit.source.run
        entry, sets = decisions.get((run, unit.task), (None, None))
        if entry is None:
            name = unit.task + ("" if run == "encoder" else f" ({run})")
            log(f"scoring {name} ({i + 1} of {len(units)}) ...")
            reporter = TaskProgress(name) if progress else None
            try:
                entry, sets = execute(unit, device, workspace, reporter or QUIET)
            except EmbevalError as err:
                if err.task is None:  # raised below the task (a search, a solver): name the task
                    err.task = unit.task
                raise
            finally:
                if reporter:
                    reporter.close()
            log(f"  {name} done in {entry['seconds']:.1f} s")
        place(record, unit, entry)
        kept.setdefault(run, {})[unit.task] = {
            "data_sha256": unit.data_sha256,
            "vectors_sha256": entry["vectors"]["vectors_sha256"],
            "sets": sets,
        }
        finish(record, started)
        if files and (i + 1 == len(units) or units[i + 1].task != unit.task):
            files.task_done(record, kept)
    finish(record, started)
    from embeval.tasks.benchmarks import section

    found = section(record, kept.get("encoder"))
    if found:
        record["benchmarks"] = found
    if files:
        files.complete(record, kept)


def finish(record, started):
    """The run-level fields that summarize the tasks scored so far."""
    tasks = record["tasks"]
    record["data"]["fingerprint"] = hashlib.sha256(
        "".join(f"{n}\0{t['data_sha256']}\n" for n, t in sorted(tasks.items())).encode()
    ).hexdigest()
    record["vectors"]["fingerprints"] = {n: t["vectors"]["vectors_sha256"] for n, t in tasks.items()}
    dims = sorted({t["vectors"]["dim"] for t in tasks.values()})
    record["vectors"]["dim"] = dims[0] if len(dims) == 1 else dims
    record["seconds"] = round(time.perf_counter() - started, 3)
    mteb = mteb_tasks.summary(record)
    if mteb:
        record["mteb"] = mteb
