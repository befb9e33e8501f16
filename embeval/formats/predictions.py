"""Per-test-item predictions: what each evaluator exposes, their figures and intervals, and the
sidecar file `--save-predictions` writes next to the results.

A prediction set holds, for the test items of one figure family, the gold values and the
system's outputs, in a fixed order (the test split's file order; for MR, CR, SUBJ and MPQA every
sample, with its outer fold as `group`). Its name is the path of its figures in the task's
results: the set "" gives `acc`, "mlp" gives `mlp.acc`, "all" gives `all.spearman.pooled`,
"cosine" gives `cosine.spearman`. Kinds:

- labels: gold, pred (class ids), optional group (outer fold): figures acc (%), f1 (MRPC)
- scores: gold, system (floats), optional group (STS subset): Spearman and Pearson; with groups,
  Spearman pooled over all items, its mean and n-weighted mean over the groups, and Pearson pooled
- ranks: i2t (per image, 0-based rank of its best caption), t2i (per image, the ranks of its 5
  captions), group (COCO fold of the image): R@K (%) and their mean
"""

import hashlib
import io
import json
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from embeval import stats
from embeval.errors import EmbevalError
from embeval.formats import atomic
from embeval.formats.targets import Output
from embeval.tasks.registry import statistic
from embeval.untrusted import read_bytes

FORMAT = "embeval-predictions"
FORMAT_VERSION = 1
META = "meta"
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


@dataclass
class PredictionSet:
    kind: str  # labels | scores | ranks
    arrays: dict[str, np.ndarray]
    figures: tuple[str, ...]
    order: str = "test split, file order"
    extra: dict = field(default_factory=dict)

    @property
    def items(self):
        return stats.items(self.arrays)


def labels(gold, pred, group=None, f1=False, order="test split, file order"):
    arrays = {"gold": np.asarray(gold, dtype=np.int64), "pred": np.asarray(pred, dtype=np.int64)}
    if group is not None:
        arrays["group"] = np.asarray(group, dtype=np.int64)
    return PredictionSet("labels", arrays, ("acc", "f1") if f1 else ("acc",), order)


def scores(gold, system, group=None, order="test split, file order"):
    arrays = {"gold": np.asarray(gold, dtype=np.float64), "system": np.asarray(system, dtype=np.float64)}
    if group is None:
        figures = ("spearman", "pearson")
    else:
        arrays["group"] = np.asarray(group, dtype=np.int64)
        figures = ("spearman.pooled", "spearman.mean", "spearman.wmean", "pearson.pooled")
    return PredictionSet("scores", arrays, figures, order)


def ranks(i2t, t2i, group):
    arrays = {
        "i2t": np.asarray(i2t, dtype=np.int64),
        "t2i": np.asarray(t2i, dtype=np.int64),
        "group": np.asarray(group, dtype=np.int64),
    }
    figures = ("mean_recall",) + tuple(f"{d}.r{k}" for d in ("i2t", "t2i") for k in (1, 5, 10))
    return PredictionSet("ranks", arrays, figures, "test split: images in file order, their 5 captions")


def figure_path(set_name, figure):
    """Where a figure of a set sits in the task's results, e.g. ("all", "spearman.pooled") -> all.spearman.pooled;
    a ranks set's figures sit under `acc` (COCO's layout): ("acc", "i2t.r1") -> acc.i2t.r1."""
    return f"{set_name}.{figure}" if set_name else figure


PROGRESS_CELLS = 1 << 26  # resamples x items x figures from which computing intervals reports progress


def intervals(task, sets, seed, resamples, level=stats.LEVEL, progress=None):
    """{"method", "level", "resamples", "seed", "figures": {path: {value, low, high, n}}} for every figure
    (a figure whose statistic is centred says so in its own "method"). progress(done, total): resamples
    computed so far, of all the sets' draws (when given, and only for work of PROGRESS_CELLS or more)."""
    figures = {}
    named_sets = {name: {f: statistic(pset.kind, f) for f in pset.figures} for name, pset in sets.items()}
    total = sum(resamples * stats.draws(named_sets[name], pset.arrays) for name, pset in sets.items())
    cells = sum(resamples * pset.items * len(named_sets[name]) for name, pset in sets.items())
    done = [0]

    def advance(count):
        done[0] += count
        progress(done[0], total)

    report = advance if progress is not None and cells >= PROGRESS_CELLS else None
    if report is not None:
        progress(0, total)
    for name, pset in sets.items():
        named = named_sets[name]
        for figure, ci in stats.bootstrap_cis(named, pset.arrays, seed, task, resamples, level, report).items():
            stat = named[figure]
            ci["n"] = pset.items
            if stat.centred:  # not the percentile interval: say which
                ci["method"] = "centred bootstrap (the resamples' spread about their mean, reflected about the figure)"
            figures[figure_path(name, figure)] = ci
    return {
        "method": "percentile bootstrap over test items (paired across runs)",
        "level": level,
        "resamples": resamples,
        "seed": seed,
        "figures": figures,
    }


def sidecar_path(out):
    """OUT.predictions.npz for results file OUT (its .json suffix dropped)."""
    out = Path(out)
    stem = out.name[:-5] if out.name.endswith(".json") else out.name
    return out.with_name(f"{stem}.predictions.npz")


def read_beside(results, saved, own_names=None, opener=None):
    """The predictions a results record names (`saved`: its "predictions" entry), from the folder of the
    results file `results`: first under the results file's own name (sidecar_path, or `own_names`), so that
    a results file renamed or moved together with its predictions still finds them, then under the name
    stored in the record. Whichever is read must match the sha256 the record stores. opener(path, sha256):
    how a file is read (default `read`: every array at once; `Sidecar`: task by task)."""
    read = opener or globals()["read"]
    results = Path(results)
    stored = results.parent / Path(saved["file"]).name
    candidates = list(dict.fromkeys([*(own_names or [sidecar_path(results)]), stored]))
    found = [path for path in candidates if path.is_file()]
    first_problem = None
    for path in found:
        try:
            return read(path, saved.get("sha256"))
        except EmbevalError as err:
            first_problem = first_problem or err
    if first_problem is not None:
        raise first_problem
    if len(candidates) == 1:
        return read(stored)  # not found, in read's words
    raise EmbevalError(
        f"predictions file not found: neither {' nor '.join(path.name for path in candidates)} is beside it "
        "(`embeval score --save-predictions` writes it beside the results)",
        file=results,
    )


def _npy(array):
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def encode(runs, meta_extra=None):
    """The sidecar's bytes: a zip of .npy arrays (fixed timestamps: equal inputs give equal bytes).

    runs: {run name ("encoder", "baseline"): {task: {"data_sha256", "vectors_sha256", "sets": {name: PredictionSet}}}}
    """
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "runs": {}}
    meta.update(meta_extra or {})
    arrays = []
    for run, tasks in runs.items():
        meta["runs"][run] = {}
        for task, entry in tasks.items():
            sets = {}
            for name, pset in entry["sets"].items():
                keys = {}
                for field_name, array in sorted(pset.arrays.items()):
                    keys[field_name] = f"a{len(arrays)}"
                    arrays.append(array)
                sets[name] = {
                    "kind": pset.kind,
                    "figures": list(pset.figures),
                    "items": pset.items,
                    "order": pset.order,
                    "arrays": keys,
                }
            meta["runs"][run][task] = {
                "data_sha256": entry["data_sha256"],
                "vectors_sha256": entry["vectors_sha256"],
                "sets": sets,
            }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:

        def put(name, data):
            info = zipfile.ZipInfo(f"{name}.npy", date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)

        put(META, _npy(np.frombuffer(json.dumps(meta, sort_keys=True).encode(), dtype=np.uint8)))
        for i, array in enumerate(arrays):
            put(f"a{i}", _npy(array))
    return buffer.getvalue()


def write(path, runs, meta_extra=None):
    """Write the sidecar atomically; return its sha256."""
    data = encode(runs, meta_extra)
    atomic.write_bytes(path, data)
    return hashlib.sha256(data).hexdigest()


def is_own(path):
    """Whether the regular file at `path` is an embeval predictions file (what --save-predictions may
    replace)."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            meta = json.loads(bytes(npz[META]).decode())
    except (ValueError, KeyError, TypeError, zipfile.BadZipFile, OSError, UnicodeDecodeError, RecursionError):
        return False
    return isinstance(meta, dict) and meta.get("format") == FORMAT


PREDICTIONS = Output("an embeval predictions file", is_own)


def read(path, sha256=None):
    """{run: {task: {"data_sha256", "vectors_sha256", "sets": {name: PredictionSet}}}} from a sidecar
    (no pickles are loaded); sha256, when given, must match the file's."""
    path = Path(path)
    data = read_bytes(
        path,
        None,
        missing="predictions file not found (it is written beside the results by `embeval score --save-predictions`)",
    )
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise EmbevalError(
            "predictions file does not match its results file (sha256 differs); it was "
            "changed or belongs to another run",
            file=path,
        )
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            meta = json.loads(bytes(npz[META]).decode())
            if meta.get("format") != FORMAT:
                raise ValueError("not an embeval predictions file")
            runs = {}
            for run, tasks in meta["runs"].items():
                runs[run] = {}
                for task, entry in tasks.items():
                    sets = {
                        name: PredictionSet(
                            s["kind"],
                            {f: npz[key] for f, key in s["arrays"].items()},
                            tuple(s["figures"]),
                            s.get("order", ""),
                        )
                        for name, s in entry["sets"].items()
                    }
                    runs[run][task] = {
                        "data_sha256": entry["data_sha256"],
                        "vectors_sha256": entry["vectors_sha256"],
                        "sets": sets,
                    }
    except (ValueError, KeyError, TypeError, AttributeError, zipfile.BadZipFile, OSError) as err:
        raise EmbevalError(f"not a valid embeval predictions file ({err})", file=path)
    except RecursionError:
        raise EmbevalError("not a valid embeval predictions file (nested too deeply)", file=path)
    return runs


class Sidecar:
    """A predictions file opened for reading task by task: its sha256 checked once, as it is opened, and
    each array read from it only when a statistic asks for it (`entry`). The file stays open (a file
    replaced meanwhile is not read); close() or a `with` block closes it."""

    def __init__(self, path, sha256=None):
        self.path = Path(path)
        self._file = _open_regular(self.path)
        digest = hashlib.sha256()
        try:
            while chunk := self._file.read(1 << 24):
                digest.update(chunk)
            self._file.seek(0)
        except OSError as err:
            self._file.close()
            raise EmbevalError(f"cannot read: {err.strerror}", file=self.path)
        if sha256 is not None and digest.hexdigest() != sha256:
            self._file.close()
            raise EmbevalError(
                "predictions file does not match its results file (sha256 differs); it was "
                "changed or belongs to another run",
                file=self.path,
            )
        try:
            self._npz = np.load(self._file, allow_pickle=False)
            self.meta = json.loads(bytes(self._npz[META]).decode())
            if not isinstance(self.meta, dict) or self.meta.get("format") != FORMAT:
                raise ValueError("not an embeval predictions file")
            if not isinstance(self.meta.get("runs"), dict):
                raise ValueError("no runs")
        except (ValueError, KeyError, TypeError, AttributeError, zipfile.BadZipFile, OSError) as err:
            self.close()
            raise EmbevalError(f"not a valid embeval predictions file ({err})", file=self.path)
        except RecursionError:
            self.close()
            raise EmbevalError("not a valid embeval predictions file (nested too deeply)", file=self.path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        npz = getattr(self, "_npz", None)
        if npz is not None:
            npz.close()
        self._file.close()

    def tasks(self, run="encoder"):
        """The tasks whose predictions the file holds for `run`."""
        found = self.meta["runs"].get(run)
        return list(found) if isinstance(found, dict) else []

    def entry(self, task, run="encoder"):
        """{"data_sha256", "vectors_sha256", "sets": {name: PredictionSet}} of one task (None: not saved), the
        sets' arrays read on first use."""
        found = (self.meta["runs"].get(run) or {}).get(task)
        if found is None:
            return None
        try:
            sets = {
                name: PredictionSet(
                    str(s["kind"]),
                    LazyArrays(self._npz, {str(f): str(key) for f, key in s["arrays"].items()}, self.path),
                    tuple(s["figures"]),
                    s.get("order", ""),
                )
                for name, s in found["sets"].items()
            }
            return {"data_sha256": found["data_sha256"], "vectors_sha256": found["vectors_sha256"], "sets": sets}
        except (KeyError, TypeError, AttributeError) as err:
            raise EmbevalError(f"not a valid embeval predictions file ({err!r})", file=self.path, task=task)

    def items(self, task, set_name, run="encoder"):
        """The number of items of a set, as the file records it (no array read)."""
        return self.meta["runs"][run][task]["sets"][set_name]["items"]


def _open_regular(path):
    """A predictions file opened for reading: a regular file (opened without blocking, so that a FIFO
    swapped in is refused, never waited on), each problem one line."""
    import os
    import stat as stat_module

    missing = "predictions file not found (it is written beside the results by `embeval score --save-predictions`)"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise EmbevalError(missing, file=path)
    except OSError as err:
        raise EmbevalError(f"cannot read: {err.strerror}", file=path)
    if not stat_module.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise EmbevalError("not a regular file", file=path)
    return os.fdopen(fd, "rb")


class LazyArrays(Mapping):
    """The arrays of one prediction set, each read from the file on first use and kept."""

    def __init__(self, npz, keys, path):
        self._npz, self._keys, self._path, self._read = npz, keys, path, {}

    def __getitem__(self, name):
        if name not in self._read:
            if name not in self._keys:
                raise KeyError(name)
            try:
                self._read[name] = self._npz[self._keys[name]]
            except (ValueError, KeyError, OSError, zipfile.BadZipFile, EOFError) as err:
                raise EmbevalError(f"not a valid embeval predictions file ({err})", file=self._path)
        return self._read[name]

    def __iter__(self):
        return iter(self._keys)

    def __len__(self):
        return len(self._keys)

    def nbytes(self):
        """Bytes of the arrays read so far."""
        return sum(array.nbytes for array in self._read.values())
