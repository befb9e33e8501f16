"""Exact search over a corpus read from a vectors file: in this process, or split into shards
searched by Ray tasks (`--ray`, local or a cluster) whose top-k lists are merged (the same result as
one search: embeval.train.search.merge_top_k keeps its tie rule).

A shard's worker opens the vectors file itself (paths travel, not arrays: every worker must see the
file at the same path) and reads its documents' rows block by block."""

import logging
import os

import numpy as np

from embeval.errors import EmbevalError, install_hint
from embeval.formats.vectors import ReadBuffer
from embeval.memory import memory_limit, search_budget
from embeval.train import search

LOCAL_OBJECT_STORE_BYTES = 256 << 20


def shard_top_k(path, dataset, task, file_rows, start, queries, depth, similarity, dims, device="cpu", budget=None):
    """The `depth` best of documents start..start+len(file_rows) (document j is row file_rows[j - start]
    of the dataset) for every query: (scores, document indices)."""
    import torch

    from embeval.formats.vectors import VectorsFile

    device = torch.device(device)
    budget = search_budget(device) if budget is None else budget
    with VectorsFile(path, guard=False) as vf:
        ds = vf.dataset(dataset, task)

        def read_file_rows(chosen):
            values = vf.read_rows(ds, task, chosen)
            return values if dims is None else np.ascontiguousarray(values[:, :dims])

        def read(a, b):
            return read_file_rows(file_rows[a - start : b - start])

        def read_rows(rows):
            return read_file_rows(file_rows[rows - start])

        stop = start + len(file_rows)
        return search.top_k(
            queries, read, stop, depth, similarity, budget, device, rows=(start, stop), read_rows=read_rows
        )


class RayShards:
    """Runs each shard's search as a Ray task: address None starts a local Ray (stopped by close()),
    an address joins that cluster; the shards are as many as the CPUs Ray offers (at least 2)."""

    def __init__(self, address=None, shards=None):
        try:
            import ray
        except ImportError:
            raise EmbevalError(f"needs Ray: {install_hint('ray')}", file="--ray")
        self.ray = ray
        self.started = False
        if not ray.is_initialized():
            kwargs = {
                "address": address,
                "include_dashboard": False,
                "logging_level": logging.WARNING,
                "log_to_driver": False,
            }
            if address is None:
                kwargs.update(num_cpus=os.cpu_count(), object_store_memory=LOCAL_OBJECT_STORE_BYTES)
            try:
                ray.init(**kwargs)
            except (ConnectionError, RuntimeError, ValueError) as err:
                raise EmbevalError(f"cannot start or join Ray: {err}".splitlines()[0], file=address or "--ray")
            self.started = True
        self.shards = shards or max(2, int(ray.cluster_resources().get("CPU", 2)))
        self.remote = ray.remote(shard_top_k)

    def map(self, jobs):
        """The results of shard_top_k(*job) for every job, in order."""
        futures = [self.remote.options(num_cpus=1, max_retries=1).remote(*job) for job in jobs]
        try:
            return self.ray.get(futures)
        except self.ray.exceptions.RayError as err:
            reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise EmbevalError(f"a Ray task of the search failed: {reason}", file="--ray")

    def close(self):
        if self.started:
            self.ray.shutdown()
            self.started = False


def corpus_top_k(source, doc_rows, queries, depth, similarity, device, shards=None, progress=None, planned=None):
    """The `depth` best documents of every query (document j: row doc_rows[j] of the source's list),
    searched here or over shards (a RayShards), under the run's memory budget (each shard's search
    under it too). progress(rows), planned(rows): as embeval.train.search.top_k's (here only)."""
    file_rows = np.asarray(doc_rows, dtype=np.int64)
    if source.found.rows is not None:
        file_rows = np.asarray(source.found.rows)[file_rows]
    n = len(file_rows)
    if shards is None:
        buffer = ReadBuffer()  # the search is done with a piece before it reads the next one

        def read(a, b):
            return source.gather_file_rows(file_rows[a:b], buffer)

        def read_rows(rows):
            return source.gather_file_rows(file_rows[rows], buffer)

        budget = search_budget(device)
        return search.top_k(
            queries, read, n, depth, similarity, budget, device, progress=progress, read_rows=read_rows, planned=planned
        )
    bounds = np.linspace(0, n, max(1, min(shards.shards, n)) + 1).astype(np.int64)
    jobs = [
        (
            str(source.path),
            source.found.dataset_name,
            source.task,
            file_rows[a:b],
            int(a),
            queries,
            depth,
            similarity,
            source.dims,
            "cpu",
            memory_limit(),
        )
        for a, b in zip(bounds[:-1], bounds[1:])
        if b > a
    ]
    return search.merge_top_k(shards.map(jobs), depth)
