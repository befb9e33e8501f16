"""The vectors file: round trips through every storage layout, union mode, and the reader's checks."""

import json
import os

import h5py
import numpy as np
import pytest

from embeval.errors import EmbevalError, VectorsError
from embeval.formats import sentences as export
from embeval.formats.vectors import VectorsFile, check_against_manifest, outside_export, write
from embeval.run.config import build
from embeval.run.score import score
from embeval.tasks.registry import TASKS

TASK_SET = ["SICKRelatedness", "STSBenchmark", "STS13", "STS16"]
# The layouts' figures are compared with float32's under one configuration: the quicker classifier
# (SICK-R's and STS-B's regressors still train on every train item) and no intervals (not compared).
CONFIG = build("prototype", bootstrap=0)


def quiet(message):
    pass


@pytest.fixture(scope="module")
def exported(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("export")
    datas = [TASKS[t].load(data_dir) for t in TASK_SET]
    export.export(datas, root / "per-task")
    export.export(datas, root / "union", union=True)
    return root


def scores_of(record):
    return {t: e["results"] for t, e in record["tasks"].items()}


@pytest.fixture(scope="module")
def f32_vectors(exported, devbow):
    path = exported / "f32.h5"
    write(path, exported / "per-task", devbow.encode, progress=False)
    return path


@pytest.fixture(scope="module")
def float32_scores(f32_vectors, data_dir):
    return scores_of(score(f32_vectors, data_dir, tasks=TASK_SET, config=CONFIG, progress=False, log=quiet))


@pytest.mark.parametrize(
    "dtype,compression", [("float32", "gzip"), ("float16", None), ("float16", "gzip"), ("float64", None)]
)
def test_round_trip_layouts(exported, data_dir, devbow, float32_scores, dtype, compression):
    path = exported / f"{dtype}-{compression}.h5"
    write(path, exported / "per-task", devbow.encode, dtype=dtype, compression=compression, progress=False)
    with h5py.File(path) as f:
        assert f["STS13"].dtype == np.dtype(dtype)
        assert (f["STS13"].compression == "gzip") == (compression == "gzip")
    got = scores_of(score(path, data_dir, tasks=TASK_SET, config=CONFIG, progress=False, log=quiet))
    tol = 2e-3 if dtype == "float16" else 1e-9
    for task in TASK_SET:
        flat_got, flat_ref = _flatten(got[task]), _flatten(float32_scores[task])
        assert flat_got.keys() == flat_ref.keys()
        for key in flat_ref:
            assert flat_got[key] == pytest.approx(flat_ref[key], abs=tol), (task, key)


def _flatten(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_union_mode_scores_equal_per_task(exported, data_dir, devbow, float32_scores, compression):
    manifest = json.loads((exported / "union" / "manifest.json").read_text())
    assert manifest["union"]["tasks"] == TASK_SET and (exported / "union" / "ALL.txt").exists()
    assert not (exported / "union" / "STS13.txt").exists()
    per_task_total = sum(e["count"] for e in manifest["tasks"].values())
    assert manifest["union"]["count"] < per_task_total
    path = exported / f"union-{compression}.h5"
    write(path, exported / "union", devbow.encode, compression=compression, progress=False)
    with h5py.File(path) as f:
        assert list(f) == ["ALL"] and f["ALL"].attrs["tasks"] == ",".join(TASK_SET)
    record = score(path, data_dir, tasks=TASK_SET, config=CONFIG, progress=False, log=quiet)
    assert scores_of(record) == float32_scores
    assert record["tasks"]["STS13"]["vectors"]["source"] == "/ALL"


def test_contiguous_dataset_is_read_without_a_memory_map(exported, f32_vectors):
    """Positional reads: the rows asked for, in any order, and no mapping of the file left in the
    process (a map's pages would count in its memory through a pass over the whole file)."""
    path = exported / "f32.h5"
    with VectorsFile(path) as vf:
        ds = vf.dataset("STS13", "STS13")
        assert not isinstance(vf._memmap(ds), np.memmap)
        with h5py.File(path) as f:
            expected = f["STS13"][:]
        assert np.array_equal(vf.read_rows(ds, "STS13"), expected)
        rows = np.array([5, 0, 5, 17, 3, 2637, 1200])
        assert np.array_equal(vf.read_rows(ds, "STS13", rows), expected[rows])
        blocks = list(vf.blocks(ds, "STS13", block_bytes=4096))
        assert len(blocks) > 1 and np.array_equal(np.concatenate([b for _, b in blocks]), expected)
        with open("/proc/self/maps") as maps:
            assert str(path.resolve()) not in maps.read()


def test_chunked_gather_reads_the_right_rows(tmp_path):
    rng = np.random.default_rng(1)
    values = rng.standard_normal((1000, 6)).astype(np.float32)
    with h5py.File(tmp_path / "c.h5", "w") as f:
        f.create_dataset("ALL", data=values, chunks=(64, 3), compression="gzip")
    rows = rng.integers(0, 1000, 300)
    with VectorsFile(tmp_path / "c.h5") as vf:
        ds = vf.dataset("ALL", "ALL")
        assert np.array_equal(vf.read_rows(ds, "x", rows), values[rows])
        assert np.array_equal(vf.read_rows(ds, "x"), values)


def test_check_against_manifest(exported, f32_vectors):
    report = check_against_manifest(exported / "f32.h5", exported / "per-task")
    assert report == [(t, None) for t in TASK_SET]
    with h5py.File(exported / "f32.h5") as src, h5py.File(exported / "partial.h5", "w") as dst:
        dst["STS13"] = src["STS13"][:]
        dst["STS13"].attrs["sha256"] = "0" * 64
    report = dict(check_against_manifest(exported / "partial.h5", exported / "per-task"))
    assert "fingerprint" in report["STS13"] and report["STS16"] == "absent"
    assert outside_export(exported / "f32.h5", exported / "per-task") == []
    with h5py.File(exported / "partial.h5", "a") as dst:
        dst["OldTask"] = np.zeros((2, 3), dtype=np.float32)  # left from another export: listed, not checked
    assert outside_export(exported / "partial.h5", exported / "per-task") == ["OldTask"]


def test_writer_refuses_to_overwrite_and_rejects_bad_encoders(exported, devbow, tmp_path):
    target = tmp_path / "v.h5"
    target.write_bytes(b"precious")
    with pytest.raises(VectorsError, match="exists"):
        write(target, exported / "per-task", devbow.encode, progress=False)
    assert target.read_bytes() == b"precious"
    with pytest.raises(VectorsError, match="NaN or Inf"):
        write(tmp_path / "nan.h5", exported / "per-task", lambda s: np.full((len(s), 3), np.nan), progress=False)
    with pytest.raises(VectorsError, match="shape"):
        write(tmp_path / "bad.h5", exported / "per-task", lambda s: np.zeros(len(s)), progress=False)
    assert not (tmp_path / "nan.h5").exists() and not (tmp_path / "bad.h5").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["v.h5"]


def test_writer_detects_an_edited_export_file(exported, devbow, tmp_path):
    import shutil

    copy = tmp_path / "export"
    shutil.copytree(exported / "per-task", copy)
    with open(copy / "STS16.txt", "a") as f:
        f.write("an extra line\n")
    with pytest.raises(EmbevalError, match="STS16.*manifest fingerprint"):
        write(tmp_path / "v.h5", copy, devbow.encode, progress=False)


def test_tables_read_for_their_fingerprints_are_kept_for_the_scoring(
    exported, f32_vectors, data_dir, devbow, monkeypatch
):
    """A table the plan reads whole to fingerprint it is the table the scoring gets (not read again):
    the same figures as reading it again, per task and from a union's rows; a table is taken once,
    only for the same rows of the same file unchanged, within the budget."""
    from embeval.formats import vectors as vectors_module

    taken = []
    take = vectors_module.KeptTables.take

    def counted(self, path, name, rows):
        found = take(self, path, name, rows)
        taken.append(found is not None)
        return found

    monkeypatch.setattr(vectors_module.KeptTables, "take", counted)
    union = exported / "f32-union.h5"
    write(union, exported / "union", devbow.encode, progress=False)
    tasks = ["STS13", "STS16"]
    for path in (f32_vectors, union):
        taken.clear()
        kept = scores_of(score(path, data_dir, tasks=tasks, config=CONFIG, progress=False, log=quiet))
        assert taken and all(taken), path
        taken.clear()
        monkeypatch.setattr(vectors_module, "KEPT_BYTES", 0)
        again = scores_of(score(path, data_dir, tasks=tasks, config=CONFIG, progress=False, log=quiet))
        assert again == kept and taken and not any(taken), path
        monkeypatch.setattr(vectors_module, "KEPT_BYTES", 256 << 20)

    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    store = vectors_module.KeptTables(budget=table.nbytes)
    store.keep(f32_vectors, "/STS13", None, table)
    store.keep(f32_vectors, "/STS12", None, table)  # past the budget: not kept
    assert take(store, f32_vectors, "/STS12", None) is None
    assert take(store, f32_vectors, "/STS13", [0, 1, 2, 3]) is None  # other rows
    assert take(store, f32_vectors, "/STS13", None) is table
    assert take(store, f32_vectors, "/STS13", None) is None  # taken once
    store.keep(f32_vectors, "/STS13", [2, 0], table[[2, 0]])
    assert (take(store, f32_vectors, "/STS13", np.array([2, 0])) == table[[2, 0]]).all()
    copy = exported / "kept-copy.h5"
    copy.write_bytes(f32_vectors.read_bytes())
    store.keep(copy, "/STS13", None, table)
    os.utime(copy, ns=(1, 1))  # the file changed (its modification time) since the table was read
    assert take(store, copy, "/STS13", None) is None and store.held == table.nbytes
    store.clear()
    assert store.held == 0 and not store.tables


@pytest.mark.parametrize("layout", ["contiguous", "chunked", "float16"])
@pytest.mark.parametrize("rows", [None, [9, 2, 3, 4, 0, 17, 5]])
def test_a_table_fingerprinted_in_many_blocks_is_kept_whole(tmp_path, layout, rows):
    """A table whose fingerprint reads it in many blocks is kept whole when it fits the room left: the
    same fingerprint as without keeping, and the table read_rows gives (all rows, or a union's rows);
    without room (the store's budget, or a quarter of --memory-budget) it is not kept, and the
    fingerprint is the same."""
    from embeval import memory
    from embeval.formats.vectors import KeptTables
    from embeval.run.plan import table_fingerprint

    values = np.random.default_rng(0).standard_normal((20, 6)).astype(np.float16 if layout == "float16" else np.float32)
    with h5py.File(tmp_path / "v.h5", "w") as f:
        f.create_dataset("X", data=values, chunks=(3, 6) if layout == "chunked" else None)
    table = values.astype(np.float32) if rows is None else values.astype(np.float32)[rows]
    for budget, limit, expect_kept in (
        (1 << 20, None, True),
        (table.nbytes - 1, None, False),
        (1 << 20, 4 * table.nbytes - 4, False),
    ):
        kept = KeptTables(budget)
        with memory.limited(limit), VectorsFile(tmp_path / "v.h5", guard=False, kept=kept) as vf:
            ds = vf.dataset("X", "X")
            sha, count, dim, _ = vf.fingerprint_rows(ds, "X", rows, block_bytes=40, keep=True)
            assert (sha, count, dim) == (table_fingerprint(table), len(table), 6)
            assert bool(kept.tables) == expect_kept and kept.held == (table.nbytes if expect_kept else 0)
            read = vf.read_rows(ds, "X", rows)
            assert read.dtype == np.float32 and (read == table).all() and not kept.tables


def test_row_checks_are_their_definitions():
    """The one pass over the squared norms finds exactly the rows holding NaN or Inf, and the finite rows,
    not all zero, whose float32 squared norm overflows or underflows (read again a block at a time)."""
    from embeval.formats.vectors import _nonfinite_rows, _row_checks

    rng = np.random.default_rng(0)
    for case in range(200):
        x = rng.standard_normal((40, 6)).astype(np.float32)
        for _ in range(rng.integers(0, 6)):
            x[rng.integers(0, 40), rng.integers(0, 6)] = rng.choice([np.nan, np.inf, -np.inf, 1e30, 1e-30, 0.0])
        x[3] = 0.0 if case % 3 == 0 else x[3]
        x[4] = 1e-30 if case % 4 == 0 else x[4]
        with np.errstate(all="ignore"):
            squared = (x.astype(np.float32) ** 2).sum(axis=1, dtype=np.float32)
        finite = np.isfinite(x).all(axis=1)
        degenerate = np.flatnonzero(finite & x.any(axis=1) & (~np.isfinite(squared) | (squared == 0))).tolist()
        found = _row_checks(x, block=int(rng.integers(1, 5)))
        assert found == (np.flatnonzero(~finite).tolist(), degenerate), case
        assert _nonfinite_rows(x) == found[0]
