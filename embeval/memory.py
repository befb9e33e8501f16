"""How much memory this process may still use, on the host and on the device, and the device plan.

On a GPU the memory free to this process is what the driver reports free plus what PyTorch's
caching allocator holds reserved but unused (it hands that out again without asking the driver).
Dense feature matrices may take half of it; the sentence table of a task must fit in a quarter,
leaving the rest for features, models and their gradients. Pre-flight refuses a table that does
not, before anything is allocated, with one line naming the task, the sizes and `--device cpu`.
"""

import os
from contextlib import contextmanager

from embeval.errors import EmbevalError

HOST_DENSE_LIMIT_BYTES = 2 << 30  # on the CPU dense matrices stay below this (caches, other processes)
TABLE_SHARE = 4  # a task's table may take 1/TABLE_SHARE of the device's free memory


def available_memory():
    """Bytes of memory available to this process (best effort), or None if unknown: the host's available
    memory, lowered to what the process's own limits leave (`ulimit -v`, `ulimit -d`: limit_left)."""
    found = [free for free in (host_available(), limit_left()) if free is not None]
    return min(found) if found else None


def host_available():
    """The host's available memory (MemAvailable), or None if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


# The process's resource limits on memory, and the /proc/self/status field each is counted against.
_LIMITS = (("RLIMIT_AS", "VmSize:"), ("RLIMIT_DATA", "VmData:"))


def limit_left():
    """Bytes the process may still map under its address-space and data limits (RLIMIT_AS, `ulimit -v`;
    RLIMIT_DATA, `ulimit -d`), the least of them; None when neither is set (or unknown)."""
    try:
        import resource
    except ImportError:  # not on Unix
        return None
    left = []
    status = None
    for name, field in _LIMITS:
        limit = getattr(resource, name, None)
        if limit is None:
            continue
        soft, _ = resource.getrlimit(limit)
        if soft == resource.RLIM_INFINITY or soft < 0:
            continue
        if status is None:
            try:
                with open("/proc/self/status") as f:
                    status = f.read()
            except OSError:
                status = ""
        used = next((int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith(field)), 0)
        left.append(max(0, soft - used))
    return min(left) if left else None


BOOTSTRAP_COPIES = 4  # float64 values per resample a figure's interval holds at once (values, copies)


def check_bootstrap(resamples, option="--bootstrap"):
    """Refuse, before anything is scored, a resample count whose values do not fit in half of the
    memory available (one float64 per resample of each figure, copied while its interval is taken)."""
    need = int(resamples) * 8 * BOOTSTRAP_COPIES
    free = available_memory()
    if free is not None and need > free // 2:
        raise EmbevalError(
            f"{resamples} resamples need {need / 2**30:.1f} GiB of memory for each figure's interval, more than "
            f"half of the {free / 2**30:.1f} GiB available; use fewer (the default is 1000)",
            file=option,
        )


def check_budget(budget, option="--memory-budget"):
    """Refuse a memory budget (bytes; None: the defaults) larger than the memory available to this process:
    scoring would plan allocations the machine cannot make."""
    free = available_memory()
    if budget is not None and free is not None and budget > free:
        raise EmbevalError(
            f"{budget / 2**30:.1f} GiB is more than the {free / 2**30:.1f} GiB of memory available to this process; "
            f"give at most {free // 2**20}MiB, or leave it out (the default: half the memory available, on the CPU "
            "at most 2GiB for matrices)",
            file=option,
        )


def device_memory(device):
    """(free bytes, total bytes) of a CUDA device for this process, counting PyTorch's reserved but
    unused memory as free; None for the CPU or when unknown."""
    import torch

    if device.type != "cuda":
        return None
    free, total = torch.cuda.mem_get_info(device)
    cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return free + cached, total


_LIMIT: list[int | None] = [None]  # --memory-budget, when given (set by the command that scores)


def memory_limit():
    """The memory budget the run was given (--memory-budget, bytes), or None."""
    return _LIMIT[0]


@contextmanager
def limited(budget):
    """Within the block, the run's memory budget is `budget` bytes (None: the default ones)."""
    saved, _LIMIT[0] = _LIMIT[0], budget
    try:
        yield
    finally:
        _LIMIT[0] = saved


@contextmanager
def small_pages():
    """Within the block, numpy's large arrays are not advised to take transparent huge pages (numpy
    advises it by default on Linux; NUMPY_MADVISE_HUGEPAGE). A run's arrays are mostly written once
    (rows read from the file, a table's blocks): a huge page's fault, whose memory the kernel may
    first have to compact, then costs more than it saves (measured: a 300,000-row retrieval task
    16% faster). The setting as before after; unchanged where numpy has no such switch."""
    import numpy as np

    core = getattr(np, "_core", None) or getattr(np, "core", None)  # numpy 2, numpy 1
    switch = getattr(getattr(core, "multiarray", None), "_set_madvise_hugepage", None)
    if switch is None:
        yield
        return
    before = switch(False)
    try:
        yield
    finally:
        switch(before)


def dense_budget(device):
    """Bytes a materialized feature matrix may take on `device`: half of the memory free there (on
    the CPU also at most HOST_DENSE_LIMIT_BYTES), scaling with the device; at most half the run's
    memory budget when one is given."""
    gpu = device_memory(device)
    if gpu is not None:
        default = gpu[0] // 2
    else:
        free = available_memory()
        default = HOST_DENSE_LIMIT_BYTES if free is None else min(HOST_DENSE_LIMIT_BYTES, free // 2)
    return default if _LIMIT[0] is None else min(default, _LIMIT[0] // 2)


def search_budget(device):
    """Bytes an exact search may allocate at once: the run's memory budget when one is given (on a
    GPU at most half its free memory), else dense_budget."""
    if _LIMIT[0] is None:
        return dense_budget(device)
    gpu = device_memory(device)
    return _LIMIT[0] if gpu is None else min(_LIMIT[0], gpu[0] // 2)


def check_device_tables(tables, device):
    """Refuse, before scoring, any task whose float32 table (name, (rows, dim)) would not fit in
    1/TABLE_SHARE of the device's free memory."""
    gpu = device_memory(device)
    if gpu is None:
        return
    free, total = gpu
    for name, (rows, dim) in tables:
        need = rows * dim * 4
        if need * TABLE_SHARE > free:
            raise EmbevalError(
                f"{rows} x {dim} vectors take {need / 2**30:.2f} GiB as float32; with its features and models "
                f"they need about {TABLE_SHARE * need / 2**30:.2f} GiB of {device}, which has "
                f"{free / 2**30:.2f} GiB free of {total / 2**30:.2f} GiB; score this task with --device cpu",
                file="--device",
                task=name,
            )
