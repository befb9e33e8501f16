"""Device memory planning: budgets from the device's free memory (PyTorch's cache included), and a
pre-flight that stops a table too large for the device with one line, before anything is scored."""

import numpy as np
import pytest
import torch

from embeval import memory
from embeval.errors import EmbevalError
from embeval.formats import sentences as export
from embeval.formats.vectors import write
from embeval.tasks.registry import TASKS

GiB = 1 << 30


def test_budget_scales_with_the_device(monkeypatch):
    """Half the device's free memory, with no host cap: an 80 GB GPU holds matrices beyond 2 GiB."""
    monkeypatch.setattr(memory, "device_memory", lambda device: (60 * GiB, 80 * GiB))
    assert memory.dense_budget(torch.device("cuda")) == 30 * GiB
    monkeypatch.setattr(memory, "device_memory", lambda device: None)
    monkeypatch.setattr(memory, "available_memory", lambda: 64 * GiB)
    assert memory.dense_budget(torch.device("cpu")) == memory.HOST_DENSE_LIMIT_BYTES


def test_free_device_memory_counts_pytorchs_reserved_but_unused_memory(monkeypatch):
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (1 * GiB, 16 * GiB))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device: 5 * GiB)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device: 2 * GiB)
    assert memory.device_memory(torch.device("cuda")) == (4 * GiB, 16 * GiB)
    assert memory.device_memory(torch.device("cpu")) is None


def test_a_table_too_large_for_the_device_is_one_line_naming_task_sizes_and_cpu(monkeypatch):
    monkeypatch.setattr(memory, "device_memory", lambda device: (GiB, 8 * GiB))
    memory.check_device_tables([("SST2", (10000, 768))], torch.device("cuda"))
    with pytest.raises(EmbevalError) as err:
        memory.check_device_tables([("SST2", (10000, 768)), ("SNLI", (570000, 768))], torch.device("cuda"))
    message = str(err.value)
    assert "SNLI" in message and "570000 x 768" in message and "--device cpu" in message and "\n" not in message
    assert "1.00 GiB free of 8.00 GiB" in message


def test_score_stops_before_scoring_when_the_device_is_small(monkeypatch, tmp_path, data_dir, cli):
    """An injected 1 MiB device: `embeval score` exits 2 with the one-line error, no traceback, no results."""
    export.export([TASKS["TREC"].load(data_dir)], tmp_path / "sentences")
    rng = np.random.default_rng(0)
    write(tmp_path / "v.h5", tmp_path / "sentences", lambda s: rng.standard_normal((len(s), 64)), progress=False)
    monkeypatch.setattr(memory, "device_memory", lambda device: (1 << 20, 1 << 30))
    out = tmp_path / "results.json"
    result = cli("score", tmp_path / "v.h5", "--data", data_dir, "--tasks", "TREC", "--out", out, "--device", "cpu")
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if "--device cpu" in line]
    assert len(lines) == 1 and "TREC" in lines[0] and "x 64 vectors" in lines[0], result.output
    assert "Traceback" not in result.output and not out.exists()


def test_small_pages_turns_numpys_huge_page_advice_off_inside_and_restores_it():
    """Inside small_pages numpy does not advise huge pages; after it (also after an error) the
    setting is what it was."""
    from embeval.memory import small_pages

    switch = np._core.multiarray._set_madvise_hugepage
    for before in (True, False):
        switch(before)
        with small_pages():
            assert switch(False) is False  # returns the setting it replaces
        assert switch(before) is before
        with pytest.raises(RuntimeError), small_pages():
            raise RuntimeError("stop")
        assert switch(True) is before
