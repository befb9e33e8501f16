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


def intervals(task, sets, seed, resamples, level=stats.LEVEL):
    """{"method", "level", "resamples", "seed", "figures": {path: {value, low, high, n}}} for every figure
    (a figure whose statistic is centred says so in its own "method")."""
    figures = {}
    for name, pset in sets.items():
        named = {figure: statistic(pset.kind, figure) for figure in pset.figures}
        for figure, ci in stats.bootstrap_cis(named, pset.arrays, seed, task, resamples, level).items():
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


def read_beside(results, saved, own_names=None):
    """The predictions a results record names (`saved`: its "predictions" entry), from the folder of the
    results file `results`: first under the results file's own name (sidecar_path, or `own_names`), so that
    a results file renamed or moved together with its predictions still finds them, then under the name
    stored in the record. Whichever is read must match the sha256 the record stores."""
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
