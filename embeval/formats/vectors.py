"""The vectors file (SPEC §3): checks, a memory-mapped / chunk-by-chunk reader, and a writer.

A file holds one 2-D float dataset per task at /TASK (row i = line i of TASK.txt) with the
task's fingerprint in its `sha256` attribute, or one /ALL dataset for a union export with
attributes `sha256` and `tasks`. Contiguous datasets are read through a memory map, chunked or
compressed ones block by block, so only the rows of the task being scored are ever in memory.
"""

import hashlib
import logging
import os
import re
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from embeval.errors import EmbevalError, VectorsError
from embeval.formats import atomic, h5guard, targets
from embeval.formats.h5guard import check_file
from embeval.formats.sentences import (
    TEXT,
    UNION,
    load_manifest,
    manifest_files,
    read_export_file,
)
from embeval.memory import available_memory, memory_limit
from embeval.tasks.registry import TASKS

log = logging.getLogger("embeval")

FLOAT_SIZES = (2, 4, 8)
BLOCK_BYTES = 64 << 20
KEPT_BYTES = 256 << 20  # tables a run keeps from its fingerprints for its scoring at most (KeptTables)
MAX_LINK_HOPS = 16
ROOT_TEXT = ("model",)  # root attributes the scorer reads as text: `model`, the results' name for the vectors
# HDF5's built-in filters (gzip, shuffle, fletcher32, szip, nbit, scaleoffset) and LZF, which h5py
# registers itself. Any other filter would make HDF5 load a plugin: third-party code chosen by the file.
BUILTIN_FILTERS = frozenset({1, 2, 3, 4, 5, 6, 32000})
# Errors h5py raises for a damaged file, lazily, on any metadata access or read.
H5_ERRORS = (OSError, RuntimeError, KeyError, ValueError, TypeError)


def _attr_text(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray):
        return ",".join(_attr_text(v) for v in value.ravel())
    return str(value)


def describe_dtype(dtype):
    """A dtype in the words of the error messages: float32, int64, strings, compound (a, b), ..."""
    import h5py

    if h5py.check_string_dtype(dtype) is not None or dtype.kind in "SU":
        return "strings"
    if dtype.names:
        return f"compound ({', '.join(dtype.names)})"
    if h5py.check_enum_dtype(dtype) is not None:
        return f"enum ({dtype.base})"
    if dtype.subdtype is not None:
        return f"array of {dtype.subdtype[0]} {dtype.subdtype[1]} per element"
    if h5py.check_vlen_dtype(dtype) is not None:
        return "variable-length sequences"
    if h5py.check_ref_dtype(dtype) is not None:
        return "object references"
    if dtype.kind == "V":
        return "opaque bytes"
    return str(dtype)


# What a fingerprint that differs means, checked against the task's data (score) or an export (vectors check).
DATA_CHANGED = (
    "the task's data changed since the vectors were computed (or they come from another export); export and embed again"
)
OTHER_EXPORT = "the vectors were computed from another export (or another version of it); embed this export again"


class KeptTables:
    """The tables a run's fingerprints read, kept for the scoring that reads
    them next instead of reading and checking the same bytes again: each taken once, of the same
    file only (device, inode, size and times unchanged), at most `budget` bytes held at once (and a
    quarter of the run's --memory-budget)."""

    def __init__(self, budget: int | None = None) -> None:
        self.budget, self.held = KEPT_BYTES if budget is None else budget, 0
        self.tables: dict[Any, np.ndarray] = {}
        self.lock = threading.Lock()

    @staticmethod
    def _key(path: Any, name: str, rows: Any) -> Any:
        which = None if rows is None else hashlib.blake2b(np.asarray(rows, dtype=np.int64).tobytes()).digest()
        return (h5guard.identity(path), name, which)

    def keep(self, path: Any, name: str, rows: Any, table: np.ndarray) -> None:
        key = self._key(path, name, rows)
        with self.lock:
            if key[0] is None or key in self.tables or self.held + table.nbytes > self._budget():
                return
            self.tables[key] = table
            self.held += table.nbytes

    def room(self, nbytes: int) -> bool:
        """Whether a table of nbytes would be kept now (a reader may then read it whole at once)."""
        with self.lock:
            return self.held + nbytes <= self._budget()

    def _budget(self) -> int:
        """The bytes held at most: `budget`, and a quarter of the run's --memory-budget when given."""
        limit = memory_limit()
        return self.budget if not limit else min(self.budget, limit // 4)

    def take(self, path: Any, name: str, rows: Any) -> np.ndarray | None:
        if not self.tables:
            return None
        key = self._key(path, name, rows)
        with self.lock:
            table = self.tables.pop(key, None)
            if table is not None:
                self.held -= table.nbytes
            return table

    def clear(self) -> None:
        with self.lock:
            self.tables.clear()
            self.held = 0


class VectorsFile:
    """An open vectors file. Use as a context manager; every problem is a VectorsError.

    `names`: the datasets the caller will use (default: every task and /ALL). Before the file is
    opened here, a guard process reads their metadata the same way (h5guard): a file damaged so that
    the HDF5 library crashes or hangs on it is refused instead of killing this process.
    """

    def __init__(self, path, names=None, guard=True, kept=None):
        """guard: True (check the file first), False (checked already), or a started guard of the
        file's `names` (h5guard.start(path, names, inspect_metadata)): waited for first. kept: the
        KeptTables a run's fingerprints keep their tables in and its reads take them from (None: none
        kept)."""
        import h5py

        self.kept = kept
        self.path = check_file(path)
        self.wanted = list(names) if names is not None else list(TASKS) + [UNION]
        if isinstance(guard, h5guard.Guard):
            guard.wait()
        elif guard:
            h5guard.check(self.path, self.wanted, inspect_metadata)
        try:
            self.h5 = h5py.File(self.path, "r")
        except OSError as err:
            raise VectorsError(_open_problem(err, self.path), file=self.path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self.h5.close()
        except H5_ERRORS:
            pass

    def _error(self, message, task=None):
        return VectorsError(message, file=self.path, task=task)

    def names(self):
        """Names of the top-level entries (links are listed, not followed)."""
        try:
            return list(self.h5.keys())
        except H5_ERRORS as err:
            raise self._error(f"corrupted HDF5 file: cannot list its datasets ({_h5_reason(err)})")

    def root_groups(self):
        """Names of the groups at the root (hard links only; links are not followed)."""
        import h5py

        found = []
        for name in self.names():
            try:
                if isinstance(self.h5.get(name, getlink=True), h5py.HardLink) and isinstance(self.h5[name], h5py.Group):
                    found.append(name)
            except H5_ERRORS:
                continue
        return found

    def has(self, name):
        return name in self.names()

    def grouped_task_datasets(self, limit=64):
        """Paths of datasets named like a wanted task (a declared one too) or the union inside groups,
        where embeval does not look (it reads /TASK at the root): for an error that says where they
        are. Links are not followed; at most `limit` entries are visited."""
        import h5py

        found, stack, visited = [], [(self.h5, "")], 0
        names = set(self.wanted) | {UNION}
        while stack and visited < limit:
            group, prefix = stack.pop()
            try:
                items = [(k, group.get(k)) for k in group if isinstance(group.get(k, getlink=True), h5py.HardLink)]
            except H5_ERRORS:
                continue
            for key, obj in items:
                visited += 1
                if isinstance(obj, h5py.Group):
                    stack.append((obj, f"{prefix}/{key}"))
                elif prefix and key in names and isinstance(obj, h5py.Dataset):
                    found.append(f"{prefix}/{key}")
        return sorted(found)

    def union_tasks(self):
        """The task names of the /ALL union dataset, or None when the file has none."""
        if not self.has(UNION):
            return None
        ds = self.dataset(UNION, UNION)
        text = self.attribute(ds, "tasks", UNION)
        if text is None:
            raise self._error("union dataset /ALL has no `tasks` attribute (the tasks it was exported from)", UNION)
        tasks = [t.strip() for t in text.split(",") if t.strip()]
        if not tasks:
            raise self._error("the `tasks` attribute of /ALL names no task", UNION)
        twice = sorted({t for t in tasks if tasks.count(t) > 1})
        if twice:
            raise self._error(f"the `tasks` attribute of /ALL names {', '.join(twice)} twice", UNION)
        return tasks

    def root_text(self, key):
        """The file's root attribute `key` as text (whitespace collapsed), or None when absent or empty; an
        attribute that is not text is an error."""
        try:
            if key not in self.h5.attrs:
                return None
            value = self.h5.attrs[key]
        except H5_ERRORS as err:
            raise self._error(f"corrupted HDF5 file: cannot read the root attribute `{key}` ({_h5_reason(err)})")
        if isinstance(value, np.ndarray) and value.shape == (1,):
            value = value[0]
        if isinstance(value, (bytes, np.bytes_)):
            value = value.decode("utf-8", "replace")
        if not isinstance(value, str):
            raise self._error(f"the root attribute `{key}` must be text, got {_attr_text(value)!r}")
        return " ".join(value.split()) or None

    def attribute(self, ds, key, task):
        """An attribute of ds as text, or None when absent."""
        try:
            if key not in ds.attrs:
                return None
            return _attr_text(ds.attrs[key])
        except H5_ERRORS as err:
            raise self._error(
                f"corrupted HDF5 file: cannot read the `{key}` attribute of {ds.name} ({_h5_reason(err)})", task
            )

    def _resolve(self, name, task):
        """The object at /name, following soft links inside the file; links out of it are refused."""
        import h5py

        parts, group, hops, i = [p for p in name.split("/") if p], self.h5, 0, 0
        obj = group
        while i < len(parts):
            part = parts[i]
            if part == ".":
                i += 1
                continue
            if not isinstance(obj, h5py.Group) or part == "..":
                raise self._error(f"/{name} does not lead to a dataset", task)
            link = obj.get(part, getlink=True)
            if link is None:
                raise self._error(f"/{name}: no entry {part!r} (dangling link?)", task)
            if isinstance(link, h5py.ExternalLink):
                raise self._error(
                    f"/{name} leads through an external link to {link.filename}; a vectors file must hold its own data",
                    task,
                )
            if isinstance(link, h5py.SoftLink):
                hops += 1
                if hops > MAX_LINK_HOPS:
                    raise self._error(f"/{name}: more than {MAX_LINK_HOPS} soft links (a cycle?)", task)
                target = [p for p in link.path.split("/") if p]
                if link.path.startswith("/"):
                    parts, obj, i = target + parts[i + 1 :], self.h5, 0
                else:
                    parts = parts[:i] + target + parts[i + 1 :]
                continue
            if not isinstance(link, h5py.HardLink):
                raise self._error(f"/{name} is a user-defined link; a vectors file must hold its own data", task)
            obj = obj[part]
            i += 1
        return obj

    def dataset(self, name, task):
        """The dataset at /name after structural checks: in this file, 2-D, float, built-in filters."""
        import h5py

        try:
            ds = self._resolve(name, task)
            if not isinstance(ds, h5py.Dataset):
                raise self._error(
                    f"/{name} is a {'group' if isinstance(ds, h5py.Group) else 'named type'}, not a dataset", task
                )
            if ds.is_virtual:
                raise self._error(f"/{name} is a virtual dataset; a vectors file must hold its own data", task)
            if ds.external:
                raise self._error(f"/{name} uses external storage; a vectors file must hold its own data", task)
            shape, dtype = ds.shape, ds.dtype
            if shape is None or len(shape) != 2:
                raise self._error(f"/{name} has shape {shape}; expected 2-D (sentences, dimension)", task)
            if dtype.kind != "f" or dtype.itemsize not in FLOAT_SIZES:
                raise self._error(
                    f"/{name} has dtype {describe_dtype(dtype)}; expected float16, float32 or float64", task
                )
            if shape[1] == 0:
                raise self._error(f"/{name} has dimension 0", task)
            plist = ds.id.get_create_plist()
            for k in range(plist.get_nfilters()):
                code, _flags, _values, label = plist.get_filter(k)
                if code not in BUILTIN_FILTERS:
                    raise self._error(
                        f"/{name} is compressed with HDF5 filter {code} "
                        f"({label.decode('utf-8', 'replace')}), which would load a plugin; "
                        "write it uncompressed or with gzip",
                        task,
                    )
            return ds
        except VectorsError:
            raise
        except H5_ERRORS as err:
            raise self._error(f"corrupted HDF5 file: cannot open /{name} ({_h5_reason(err)})", task)

    def inspect(self, ds, task):
        """Read the rest of what scoring reads of ds's metadata: its attributes and its chunk index."""
        self.attribute(ds, "sha256", task)
        self.attribute(ds, "tasks", task)
        try:
            if ds.chunks is not None:
                ds.id.chunk_iter(lambda info: None)
            else:
                ds.id.get_offset()
        except H5_ERRORS as err:
            raise self._error(f"corrupted HDF5 file: cannot read the layout of {ds.name} ({_h5_reason(err)})", task)

    def check_fingerprint(self, ds, name, task, count, sha256, against="data"):
        """The dataset's fingerprint must be the sentence list's, and its row count the list's length.
        A fingerprint that differs means the data changed since the vectors were computed (or they come
        from another export), whatever the row count; against: what the list comes from, the task's
        "data" or an "export" (its manifest). Returns False when ds has none."""
        got = self.attribute(ds, "sha256", task)
        if got is not None and got.strip().lower() != sha256:
            source, meaning = ("the task data's", DATA_CHANGED) if against == "data" else ("the export's", OTHER_EXPORT)
            rows = f" ({count} sentences, the vectors have {ds.shape[0]} rows)" if ds.shape[0] != count else ""
            raise self._error(
                f"/{name} fingerprint {got[:12]}… does not match {source} {sha256[:12]}…{rows}: {meaning}", task
            )
        if ds.shape[0] != count:
            hint = ""
            if ds.shape[1] == count:
                hint = (
                    f"; it looks transposed: write shape (sentences, dimension) = ({count}, {ds.shape[0]}), "
                    "e.g. numpy's array.T"
                )
            raise self._error(f"/{name} has {ds.shape[0]} rows, the task has {count} sentences{hint}", task)
        return got is not None

    def check_memory(self, count, dim, task):
        """Refuse, before allocating anything, a table that cannot fit in the memory available."""
        need = count * dim * 4
        free = available_memory()
        if free is not None and need > free:
            raise self._error(
                f"{count} x {dim} vectors need {need / 2**30:.1f} GiB as float32, more than "
                f"the {free / 2**30:.1f} GiB of memory available",
                task,
            )

    def read_rows(self, ds, task, rows=None, out=None):
        """The float32 table of `rows` of ds (all rows when None), checked to be finite; written into
        `out` (a C-contiguous float32 array of that shape, e.g. a buffer reused from read to read)
        when given."""
        count = ds.shape[0] if rows is None else len(rows)
        dim = ds.shape[1]
        if out is not None and (out.shape != (count, dim) or out.dtype != np.float32 or not out.flags.c_contiguous):
            raise ValueError(f"out must be C-contiguous float32 of shape {(count, dim)}, not {out.shape}")
        kept = self.kept.take(self.path, ds.name, rows) if self.kept is not None else None
        if kept is not None:  # read and checked by the fingerprint of the same file
            if out is None:
                return kept
            out[...] = kept
            return out
        if out is not None:
            table = out
        else:
            self.check_memory(count, dim, task)
            table = np.empty((count, dim), dtype=np.float32)
        block = max(1, BLOCK_BYTES // (dim * ds.dtype.itemsize))
        try:
            source = self._memmap(ds)
            if rows is None:
                if ds.chunks:
                    block = max(ds.chunks[0], block // ds.chunks[0] * ds.chunks[0])
                for start in range(0, count, block):
                    table[start : start + block] = source[start : start + block]
            else:
                self._gather(source, ds, np.asarray(rows, dtype=np.int64), table, block)
        except H5_ERRORS as err:
            raise self._error(f"corrupted or truncated HDF5 file: cannot read {ds.name} ({_h5_reason(err)})", task)
        bad = _nonfinite_rows(table)
        if len(bad):
            raise self._error(f"{len(bad)} of {count} vectors contain NaN or Inf (first at row {bad[0]})", task)
        return table

    def blocks(self, ds, task, rows=None, start=0, stop=None, block_bytes=BLOCK_BYTES, check_finite=True, into=None):
        """(first row, float32 block) over rows start..stop of ds (or over ds[rows], in that order),
        reading a block at a time (each checked to be finite unless told not to): never the whole
        table in memory, unless `into` is given (a C-contiguous float32 array of every row, from row 0):
        then each block is read into its rows there and is a view of them."""
        dim = ds.shape[1]
        stop = (ds.shape[0] if rows is None else len(rows)) if stop is None else stop
        block = max(1, block_bytes // (dim * ds.dtype.itemsize))
        if rows is None and ds.chunks:
            block = max(ds.chunks[0], block // ds.chunks[0] * ds.chunks[0])
        try:
            source = self._memmap(ds)
            for first in range(start, stop, block):
                last = min(stop, first + block)
                if into is not None:
                    values = into[first:last]
                    if rows is not None:
                        self._gather(source, ds, np.asarray(rows[first:last], dtype=np.int64), values, block)
                    elif isinstance(source, _FileRows) and source.dtype == values.dtype:
                        source.read_into(first, values)
                    else:
                        values[...] = source[first:last]
                elif rows is None:
                    values = np.asarray(source[first:last], dtype=np.float32)
                else:
                    values = np.empty((last - first, dim), dtype=np.float32)
                    self._gather(source, ds, np.asarray(rows[first:last], dtype=np.int64), values, block)
                bad = _nonfinite_rows(values) if check_finite else []
                if len(bad):
                    raise self._error(f"vectors contain NaN or Inf (first at row {first + bad[0]})", task)
                yield first, values
        except H5_ERRORS as err:
            raise self._error(f"corrupted or truncated HDF5 file: cannot read {ds.name} ({_h5_reason(err)})", task)

    def fingerprint_rows(self, ds, task, rows=None, block_bytes=BLOCK_BYTES, keep=False):
        """(sha256, count, dim, constant) of the float32 table of ds's rows (all, or ds[rows]), read block
        by block: the fingerprint a table of those rows has (embeval.run.plan.table_fingerprint), and
        "zero" or "identical" when every row is the same (two rows or more), else None. Each block is
        compared with the first row until one differs: for most tables its last row already does, and
        the check costs nothing beside the hashing."""
        found, warning = self.fingerprint_quietly(ds, task, rows, block_bytes, keep=keep)
        if warning:
            log.warning(warning)
        return found

    def fingerprint_quietly(self, ds, task, rows=None, block_bytes=BLOCK_BYTES, stop=None, keep=False):
        """fingerprint_rows' result and the warning it would log (None when there is none), for a
        caller that logs it later; stop: a threading.Event that ends the reading early (raises
        Cancelled); keep: the table read is kept (self.kept) for the read_rows to come, when it fits the
        room left there (then read into one array, block by block)."""
        count = ds.shape[0] if rows is None else len(rows)
        dim = ds.shape[1]
        whole, nbytes = None, count * dim * 4
        if keep and self.kept is not None and self.kept.room(nbytes):
            free = available_memory()
            if free is None or nbytes <= free:
                whole = np.empty((count, dim), dtype=np.float32)
        h = hashlib.sha256(f"{count}x{dim}\n".encode())
        bad, reference, same, degenerate = [], None, True, []
        # a block's hashing runs beside the next block's reading and checks (hashlib lets other
        # threads run while it hashes); a table of one block is hashed here, without a thread
        hasher, hashed, last = None, None, None
        try:
            for first, values in self.blocks(ds, task, rows, block_bytes=block_bytes, check_finite=False, into=whole):
                if stop is not None and stop.is_set():
                    raise Cancelled(ds.name)
                values = np.ascontiguousarray(values)
                if last is not None:
                    hasher = hasher or ThreadPoolExecutor(1)
                    if hashed is not None:
                        hashed.result()
                    hashed = hasher.submit(h.update, last.data)
                last = values
                nonfinite, overflowing = _row_checks(values)
                bad += [first + row for row in nonfinite]
                degenerate += [first + row for row in overflowing]
                if same and len(values):
                    reference = values[0].copy() if reference is None else reference
                    same = bool((values[-1] == reference).all()) and bool((values == reference).all())
            if hashed is not None:
                hashed.result()
            if last is not None:
                h.update(last.data)
        finally:
            if hasher is not None:
                hasher.shutdown(wait=True)
        if bad:
            raise self._error(f"{len(bad)} of {count} vectors contain NaN or Inf (first at row {bad[0]})", task)
        if whole is not None:
            self.kept.keep(self.path, ds.name, rows, whole)
        warning = None
        if degenerate:
            warning = (
                f"{self.path}: {task}: {len(degenerate)} of {count} vectors of {ds.name} have a norm that overflows "
                f"or underflows float32 (first at row {degenerate[0]}): under cosine they act as zero vectors"
            )
        constant = None
        if same and count > 1:
            constant = "identical" if reference.any() else "zero"
        return (h.hexdigest(), count, dim, constant), warning

    def _memmap(self, ds):
        """Positional reads of a contiguous uncompressed dataset (_FileRows), else the dataset itself."""
        if ds.chunks is not None or ds.compression is not None:
            return ds
        offset = ds.id.get_offset()
        if offset is None:
            return ds
        return _FileRows(self.path, offset, ds.dtype, ds.shape)

    @staticmethod
    def _gather(source, ds, rows, table, block):
        """table[i] = source[rows[i]], reading only the blocks (chunks) that hold wanted rows."""
        if isinstance(source, _FileRows) and table.dtype == source.dtype and _consecutive(rows):
            source.read_into(int(rows[0]), table)  # one range, in order: read in place
            return
        order = np.argsort(rows, kind="stable")
        sorted_rows = rows[order]
        if isinstance(source, _FileRows):
            source.gather(sorted_rows, order, table, block)
            return
        step = ds.chunks[0] if ds.chunks else block
        step = max(step, block // step * step)
        starts = np.unique(sorted_rows // step) * step
        for lo in starts:
            a, b = np.searchsorted(sorted_rows, [lo, lo + step])
            chunk = source[lo : min(lo + step, ds.shape[0])]
            table[order[a:b]] = chunk[sorted_rows[a:b] - lo]


class ReadBuffer:
    """One float32 array reused by consecutive reads (grown to the largest): a read writes rows the
    kernel has already mapped, instead of a fresh array's pages."""

    def __init__(self):
        self.array = np.empty(0, dtype=np.float32)

    def take(self, count, dim):
        """A C-contiguous (count, dim) view of the buffer; what an earlier take returned is overwritten."""
        if self.array.size < count * dim:
            self.array = np.empty(count * dim, dtype=np.float32)
        return self.array[: count * dim].reshape(count, dim)


class Cancelled(Exception):
    """A fingerprint's reading ended early (fingerprint_quietly's stop)."""


class _FileRows:
    """The rows of a contiguous uncompressed dataset, read with positional reads into fresh arrays:
    no memory map, so nothing of the file stays in the process's memory after a read (a map's
    pages count in its resident memory until it is closed: a pass over a file larger than memory
    would hold it all)."""

    GAP_BYTES = 1 << 16  # wanted rows closer than this are read in one span

    def __init__(self, path, offset, dtype, shape):
        self.path, self.offset, self.dtype, self.shape = path, offset, np.dtype(dtype), shape
        self.row_bytes = self.dtype.itemsize * shape[1]

    def read(self, start, stop):
        """Rows [start, stop) as an array of the dataset's dtype."""
        out = np.empty((max(0, stop - start), self.shape[1]), dtype=self.dtype)
        return self.read_into(start, out)

    def read_into(self, start, out):
        """Rows [start, start + len(out)) read straight into `out` (C-contiguous, the dataset's
        dtype and width); returns out."""
        view = memoryview(out).cast("B")
        done, position = 0, self.offset + start * self.row_bytes
        with open(self.path, "rb", buffering=0) as f:
            while done < len(view):
                got = os.preadv(f.fileno(), [view[done:]], position + done)
                if got <= 0:
                    raise OSError(f"the file ends before row {start + done // max(1, self.row_bytes)}")
                done += got
        return out

    def __getitem__(self, rows):
        if not isinstance(rows, slice) or rows.step not in (None, 1):
            raise TypeError("rows of a vectors file are read by ranges")
        start, stop, _ = rows.indices(self.shape[0])
        return self.read(start, stop)

    def gather(self, sorted_rows, order, table, block):
        """table[order[i]] = row sorted_rows[i]: runs of near rows read at once, at most `block` rows."""
        gap = max(1, self.GAP_BYTES // max(1, self.row_bytes))
        breaks = np.flatnonzero(np.diff(sorted_rows) > gap) + 1
        bounds = np.concatenate([[0], breaks, [len(sorted_rows)]])
        for a, b in zip(bounds[:-1], bounds[1:]):
            while a < b:
                lo = sorted_rows[a]
                end = a + int(np.searchsorted(sorted_rows[a:b], lo + block, side="left"))
                span = self.read(int(lo), int(sorted_rows[end - 1]) + 1)
                table[order[a:end]] = span[sorted_rows[a:end] - lo]
                a = end


def inspect_metadata(path, names, report):
    """Read every piece of metadata the scorer reads of the datasets `names`; report(name) before each."""
    try:
        with VectorsFile(path, guard=False) as vf:
            present = set(vf.names())
            for key in ROOT_TEXT:
                try:
                    vf.root_text(key)
                except EmbevalError:
                    pass
            for name in names:
                if name in present:
                    report(name)
                    try:
                        vf.inspect(vf.dataset(name, name), name)
                    except EmbevalError:
                        pass
    except EmbevalError:
        pass


def _h5_reason(err):
    """h5py's message without its boilerplate, kept short."""
    text = " ".join(str(err).split())
    for prefix in ("Unable to synchronously ", "Can't synchronously ", "Unable to "):
        if text.startswith(prefix):
            text = text[len(prefix) :]
            break
    return text[:200]


def _open_problem(err, path=None):
    """Why h5py could not open the file. With HDF5 locking off (HDF5_USE_FILE_LOCKING=FALSE) a file still
    being written fails to open as a damaged one would: when its writer holds the lock, that is said."""
    text = str(err).lower()
    if re.search(r"\block", text):  # not the "sblock" of a truncated file's message
        return (
            f"cannot lock the file ({_h5_reason(err)}); is another program still writing it? "
            "(HDF5_USE_FILE_LOCKING=FALSE turns locking off)"
        )
    if path is not None and _write_locked(path):
        return (
            f"still being written: another program holds the file's write lock ({_h5_reason(err)}); "
            "wait until it has finished and closed the file"
        )
    if "truncated" in text:
        return (
            f"truncated HDF5 file ({_h5_reason(err)}); it was not completely written or copied, "
            "or is still being written"
        )
    return (
        f"corrupted HDF5 file, or one still being written ({_h5_reason(err)}); if a program is writing it, "
        "wait until it has closed the file, else write the file again"
    )


def _write_locked(path):
    """True when another process holds an exclusive lock on the file, as an HDF5 writer does whatever this
    process's HDF5_USE_FILE_LOCKING says (flock, or fcntl record locks on some builds); False when none
    does or locks are not available."""
    try:
        import fcntl
    except ImportError:  # Windows
        return False
    try:
        with open(path, "rb") as stream:
            for probe in (fcntl.flock, fcntl.lockf):
                try:
                    probe(stream, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except (BlockingIOError, PermissionError):
                    return True
                except OSError:
                    continue
                probe(stream, fcntl.LOCK_UN)
    except OSError:
        return False
    return False


def _consecutive(rows):
    """Whether the int64 rows are r, r + 1, ..., r + n - 1 (n >= 1)."""
    return len(rows) > 0 and int(rows[-1]) - int(rows[0]) == len(rows) - 1 and bool((np.diff(rows) == 1).all())


def _nonfinite_rows(table):
    """Rows holding NaN or Inf (_row_checks)."""
    return _row_checks(table)[0]


def _row_checks(table, block=65536):
    """(rows holding NaN or Inf, rows that are not all zero but whose squared norm in float32 is 0
    (underflow) or infinite (overflow): cosine similarity, computed in float32, treats them as zero
    vectors), from one pass over the squared norms: a row's is finite and nonzero unless the row is
    non-finite, overflows, underflows or is zero; only those rows are looked at again, `block` at a time."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        squared = np.einsum("ij,ij->i", table, table, dtype=np.float32)
    suspects = np.flatnonzero(~np.isfinite(squared) | (squared == 0))
    nonfinite, degenerate = [], []
    for start in range(0, len(suspects), block):
        rows = suspects[start : start + block]
        values = table[rows]
        finite = np.isfinite(values).all(axis=1)
        nonfinite += rows[~finite].tolist()
        degenerate += rows[finite & values.any(axis=1)].tolist()
    return nonfinite, degenerate


def warn_unverified(path, names):
    """One loud warning for every dataset without a sha256 attribute."""
    log.warning(
        "%s: %s: no sha256 attribute: cannot verify that the rows follow this data's sentence order",
        path,
        ", ".join(f"/{n}" for n in names),
    )


def union_rows(union_sentences, task_sentences):
    """Row of each task sentence in the union list."""
    index = {s: i for i, s in enumerate(union_sentences)}
    return np.fromiter((index[s] for s in task_sentences), dtype=np.int64, count=len(task_sentences))


def outside_export(path, export_dir):
    """Top-level entries of the vectors file that the export's manifest does not list (left from
    another export, or written by hand): nothing checks or scores them."""
    listed = {e.dataset.lstrip("/") for e in manifest_files(load_manifest(export_dir))}
    with VectorsFile(path, names=[]) as vf:
        return [name for name in vf.names() if name not in listed]


def check_against_manifest(path, export_dir, tasks=None):
    """Validate every dataset the export's manifest asks for (those of `tasks` when given, or the
    union that holds them); return [(dataset, problem or None, or "absent")]."""
    manifest = load_manifest(export_dir)
    report = []
    entries = manifest_files(manifest)
    if tasks is not None:
        known = {t for e in entries for t in e.tasks}
        unknown = [t for t in tasks if t not in known]
        if unknown:
            raise VectorsError(
                f"not in the export's manifest: {', '.join(unknown)}", file=Path(export_dir), task=unknown[0]
            )
        entries = [e for e in entries if any(t in e.tasks for t in tasks)]
    with VectorsFile(path, names=[e.dataset for e in entries]) as vf:
        names = vf.names()
        for entry in entries:
            name = entry.dataset
            if name not in names:
                report.append((name, "absent"))
                continue
            try:
                ds = vf.dataset(name, name)
                if not vf.check_fingerprint(ds, name, name, entry.count, entry.sha256, against="export"):
                    warn_unverified(path, [name])
                if name == UNION:
                    got = vf.union_tasks()
                    if got != list(entry.tasks):
                        raise VectorsError(
                            f"union built from {','.join(got)}, the export has {','.join(entry.tasks)}",
                            file=path,
                            task=name,
                        )
                vf.fingerprint_rows(ds, name)
                report.append((name, None))
            except VectorsError as err:
                report.append((name, str(err)))
    return report


def _role_encoder(encode, prompts, role):
    """The function that embeds a list of a role: encode (or encode[role], else encode["text"]) with
    the role's prompt prepended to each sentence."""
    function = encode
    if isinstance(encode, dict):
        function = encode.get(role, encode.get(TEXT))
        if function is None:
            fallback = " or encode['text']" if role != TEXT else ""
            raise VectorsError(
                f"no encode function for the role {role!r} (give encode[{role!r}]{fallback})", file="encode"
            )
    prompt = (prompts or {}).get(role, "")
    if not prompt:
        return function, ""
    return (lambda batch: function([prompt + s for s in batch])), prompt


def write(
    path: str | Path,
    export_dir: str | Path,
    encode: Callable[[list[str]], Any] | Mapping[str, Callable[[list[str]], Any]],
    batch_size: int = 256,
    dtype: str = "float32",
    compression: str | None = None,
    overwrite: bool = False,
    progress: bool = True,
    prompts: Mapping[str, str] | None = None,
) -> Path:
    """Embed an export folder and write the vectors file.

    encode: a function list[str] -> array (n, dim), or {role: function} for exports whose tasks have
    lists by role (queries and documents of retrieval tasks; "text" for the others). prompts:
    {role: text} prepended to every sentence of that role's lists (e.g. {"query": "query: "}); each
    dataset records its prompt in the attribute `prompt`. One dataset per list (or /ALL for a union
    export) with its fingerprint; written to a temporary file and renamed, so an interrupted run
    never leaves a half-written vectors file behind. compression: None (contiguous,
    memory-mappable) or "gzip" (chunked).
    """
    import h5py
    from tqdm import tqdm

    path = Path(path)
    if path.exists() and not overwrite:
        raise VectorsError("file exists; pass overwrite=True to replace it", file=path)
    if np.dtype(dtype).kind != "f" or np.dtype(dtype).itemsize not in FLOAT_SIZES:
        raise VectorsError(f"dtype {dtype} is not float16, float32 or float64", file=path)
    manifest = load_manifest(export_dir)
    entries = manifest_files(manifest)
    inputs = [Path(export_dir) / "manifest.json"] + [Path(export_dir) / entry.file for entry in entries if entry.file]
    targets.check([targets.Target(path, targets.ANY, "path")], inputs)  # overwrite=True: anything but an input
    jobs = [(entry, read_export_file(export_dir, entry)) for entry in entries]
    total = sum(len(sentences) for _, sentences in jobs)
    tmp = atomic.temporary_sibling(path)
    try:
        with h5py.File(tmp, "w") as h5, tqdm(total=total, unit="sent", disable=not progress, desc="embedding") as bar:
            for entry, sentences in jobs:
                name = entry.dataset
                function, prompt = _role_encoder(encode, prompts, entry.role)
                ds = None
                for start in range(0, len(sentences), batch_size):
                    batch = sentences[start : start + batch_size]
                    vectors = _encoded(function, batch, name, start, path)
                    if ds is None:
                        ds = _create(h5, name, len(sentences), vectors.shape[1], dtype, compression)
                    ds[start : start + len(batch)] = vectors
                    bar.update(len(batch))
                if ds is None:
                    raise VectorsError("nothing to embed (empty sentence list)", file=path, task=name)
                ds.attrs["sha256"] = entry.sha256
                if prompt:
                    ds.attrs["prompt"] = prompt
                if name == UNION:
                    ds.attrs["tasks"] = ",".join(entry.tasks)
        os.replace(tmp, path)
    except OSError as err:
        raise VectorsError(f"cannot write: {atomic.describe_os_error(err)}", file=path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def _encoded(encode, batch, name, start, path):
    vectors = np.asarray(encode(batch))
    if vectors.ndim != 2 or vectors.shape[0] != len(batch):
        raise VectorsError(f"encode returned shape {vectors.shape} for {len(batch)} sentences", file=path, task=name)
    if not np.isfinite(vectors).all():
        row = start + int(np.flatnonzero(~np.isfinite(vectors).all(axis=1))[0])
        raise VectorsError(f"encode returned NaN or Inf (sentence {row})", file=path, task=name)
    return vectors


def _create(h5, name, count, dim, dtype, compression):
    if compression:
        return h5.create_dataset(
            name, (count, dim), dtype=dtype, chunks=(min(max(count, 1), 1024), dim), compression=compression
        )
    return h5.create_dataset(name, (count, dim), dtype=dtype)
