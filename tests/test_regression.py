"""A fixed small run (devbow vectors, five tasks of four evaluators, both solvers) gives the results
recorded in tests/regression/ before the package was restructured: every figure, interval, chosen
regularization and fingerprint, less timing, versions, device and paths.

Floats are compared to 1e-6. Accuracies are rounded to 0.01, so any changed prediction shows; the
cosine figures moved by at most about 1e-9 when cosines became float64 sums that do not depend on the
BLAS build (identical vectors give exactly 1), and every other correlation is unchanged.
"""
import json
import math
from pathlib import Path

import pytest

from embeval.formats import sentences as export
from embeval.formats.vectors import write
from embeval.run.config import build
from embeval.run.score import score
from embeval.tasks.registry import TASKS

RECORDED = Path(__file__).parent / "regression"
NAMES = ["SST5", "MRPC", "SICKEntailment", "SICKRelatedness", "STS16"]
NOT_COMPARED = ("seconds", "device", "versions", "file", "path", "predictions")


def stripped(value):
    if isinstance(value, dict):
        return {k: stripped(v) for k, v in value.items() if k not in NOT_COMPARED}
    if isinstance(value, list):
        return [stripped(v) for v in value]
    return value


def differences(got, want, where=""):
    """Paths where got and want differ (floats beyond 1e-6)."""
    if isinstance(want, dict) and isinstance(got, dict):
        keys = sorted(set(got) | set(want))
        return [d for k in keys for d in differences(got.get(k, "<absent>"), want.get(k, "<absent>"), f"{where}.{k}")]
    if isinstance(want, list) and isinstance(got, list) and len(got) == len(want):
        return [d for i, (g, w) in enumerate(zip(got, want)) for d in differences(g, w, f"{where}[{i}]")]
    if isinstance(want, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        return [] if math.isclose(got, want, rel_tol=0, abs_tol=1e-6) else [f"{where}: {got!r} != {want!r}"]
    return [] if got == want else [f"{where}: {got!r} != {want!r}"]


@pytest.fixture(scope="module")
def vectors(tmp_path_factory, data_dir, devbow):
    root = tmp_path_factory.mktemp("regression")
    export.export([TASKS[n].load(data_dir) for n in NAMES], root / "sentences")
    write(root / "devbow.h5", root / "sentences", devbow.encode, batch_size=4096, progress=False)
    return root / "devbow.h5"


@pytest.mark.parametrize("solver", ["senteval", "lbfgs"])
def test_fixed_run_equals_the_recorded_results(solver, vectors, data_dir, tmp_path):
    record = score(vectors, data_dir, tasks=NAMES, out=tmp_path / "r.json", device="cpu",
                   config=build("prototype", solver=solver, seed=1111), progress=False, log=lambda m: None,
                   save_predictions=False)
    want = json.loads((RECORDED / f"{solver}.json").read_text())
    got = json.loads(json.dumps(stripped(json.loads((tmp_path / "r.json").read_text()))))
    assert list(record["tasks"]) == NAMES
    assert differences(got, want) == []
