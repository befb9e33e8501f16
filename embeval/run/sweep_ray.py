"""A sweep's work groups as Ray tasks (`embeval sweep --ray [ADDRESS]`).

Each group (files of equal dimension stacked x one task) is one Ray task that reads the files and
the task data itself: paths travel, not arrays, so every worker must see the files and the data
folder at the same paths (a shared filesystem). A task's resource request follows its device and
size: one CPU (or --threads CPUs); on a GPU the fraction of a GPU its matrices take (at least a
tenth), so several small groups share one GPU. A worker runs torch on the CPUs Ray grants its task
and within the sweep's --memory-budget, as the sweep's own process would. A group whose worker
dies fails as a whole; the sweep retries what failed once (embeval.run.sweep) and then reports it
per file and task, keeping the other groups' results.
"""

import logging
import os

from embeval.errors import EmbevalError, install_hint
from embeval.run.sweep import Failure, execute_group, unit_bytes

logger = logging.getLogger("embeval")

LOCAL_OBJECT_STORE_BYTES = 256 << 20
MIN_GPU_SHARE = 0.1
DEFAULT_GPU_BYTES = 16 << 30

_WORKSPACE = None


def run_in_worker(units, device, wrap=None, budget=None):
    """Execute one group in a Ray worker, keeping that worker's open files and task data for its
    next groups, within the memory budget `budget` (bytes, None: the default ones). wrap(units,
    device, run): an optional function around the execution."""
    global _WORKSPACE
    import ray
    import torch

    from embeval.memory import limited, small_pages
    from embeval.run.execute import Workspace, resolve_device

    if _WORKSPACE is None:
        _WORKSPACE = Workspace()
    torch.set_num_threads(_granted_cpus(ray))

    def run(units, device):
        return execute_group(units, resolve_device(device), _WORKSPACE)

    with limited(budget), small_pages():
        return run(units, device) if wrap is None else wrap(units, device, run)


def _granted_cpus(ray):
    """The CPUs Ray granted this task (at least 1): torch's intra-op threads are set to it, so that
    tasks sharing a node do not each run a thread per core (measured: nine tasks of eight 384-d files
    on 2 cores took 291 s through Ray with two threads per task, against 78 s in one process)."""
    try:
        return max(1, int(ray.get_runtime_context().get_assigned_resources().get("CPU", 1)))
    except Exception:  # noqa: BLE001 (outside a Ray task: one thread)
        return 1


def _import_ray():
    try:
        import ray
    except ImportError:
        raise EmbevalError(f"needs Ray: {install_hint('ray')}", file="--ray")
    return ray


class RayRunner:
    """Runs a sweep's groups as Ray tasks. address None: the Ray already initialized in this process,
    else a local Ray started here (and stopped by close()); an address joins that cluster.
    budget: the memory budget of every worker (--memory-budget, bytes); threads: the CPUs each task
    asks for, and so its torch threads (--threads; default 1). wrap: passed to run_in_worker (tests
    use it to kill a worker)."""

    def __init__(self, address, device="auto", num_cpus=None, wrap=None, budget=None, threads=None):
        if threads is not None:
            from embeval.threads import choose

            choose(threads, capped=False)  # refused as the sweep's own --threads is; the CPUs are checked
            # below (a local Ray's: this machine's; a cluster's: its largest node's)
        self.ray = _import_ray()
        self.device = device
        self.wrap = wrap
        self.budget = budget
        self.threads = threads or 1
        self.started = False
        local = num_cpus or os.cpu_count() or 1  # a local Ray's CPUs
        if address is None and not self.ray.is_initialized() and self.threads > local:
            raise EmbevalError(f"{self.threads} threads per task, but this machine has {local} CPUs", file="--threads")
        if not self.ray.is_initialized():
            kwargs = {
                "address": address,
                "include_dashboard": False,
                "logging_level": logging.WARNING,
                "log_to_driver": False,
            }
            if address is None:
                kwargs.update(num_cpus=local, object_store_memory=LOCAL_OBJECT_STORE_BYTES)
            try:
                self.ray.init(**kwargs)
            except (ConnectionError, RuntimeError, ValueError) as err:
                raise EmbevalError(f"cannot start or join Ray: {err}".splitlines()[0], file=address or "--ray")
            self.started = True
        self.remote = self.ray.remote(run_in_worker)
        self.gpus = self.ray.cluster_resources().get("GPU", 0) > 0
        most = max(
            (node.get("Resources", {}).get("CPU", 0) for node in self.ray.nodes() if node.get("Alive")), default=0
        )
        if self.threads > most:  # no node could take such a task: Ray would wait for one forever
            self.close()
            raise EmbevalError(
                f"{self.threads} threads per task, but the largest node of the Ray cluster has {most:g} CPUs",
                file="--threads",
            )

    def resources(self, group):
        """The Ray resource request of a group: its CPUs (threads); on a GPU, also its share of the GPU's
        memory."""
        if self.device == "cpu" or (self.device == "auto" and not self.gpus):
            return {"num_cpus": self.threads, "num_gpus": 0}
        share = sum(unit_bytes(u) for u in group) / DEFAULT_GPU_BYTES
        return {"num_cpus": self.threads, "num_gpus": round(min(1.0, max(MIN_GPU_SHARE, share)), 2)}

    def run(self, groups):
        """Submit every group; yield (group, results) as each finishes."""
        device = self.device if self.device != "auto" else ("cuda" if self.gpus else "cpu")
        futures = {}
        for group in groups:
            options = dict(self.resources(group), max_retries=0)
            futures[self.remote.options(**options).remote(group, device, self.wrap, self.budget)] = group
        while futures:
            done, _ = self.ray.wait(list(futures), num_returns=1)
            for future in done:
                group = futures.pop(future)
                try:
                    results = self.ray.get(future)
                except self.ray.exceptions.RayError as err:
                    reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                    results = [
                        (None, Failure(f"{u.source.path}: {u.task}: the Ray task failed: {reason}", retry=True))
                        for u in group
                    ]
                yield group, results

    def close(self):
        if self.started:
            self.ray.shutdown()
            self.started = False
