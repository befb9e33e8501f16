"""The first second: every --help, --version and every error found before scoring answers without
importing torch, scikit-learn, scipy, pandas, matplotlib or h5py (each case in a fresh interpreter,
which then lists the heavy modules it imported). bench/startup.py times the same cases."""

import h5py
import numpy as np
import pytest
from startup_cases import all_cases, case_names, command_paths, make_files, probe

from embeval.errors import VectorsError
from embeval.formats.h5guard import check_file


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return make_files(tmp_path_factory.mktemp("startup"))


def test_every_command_is_covered(files):
    """The cases list every command and subcommand's --help (data's, vectors check, sweep, tasks...)."""
    paths = command_paths()
    assert ["data", "fetch"] in paths and ["vectors", "check"] in paths and ["sweep"] in paths and ["tasks"] in paths
    helps = {tuple(args[:-1]) for _, args, _ in all_cases(files) if args[-1] == "--help"}
    assert {tuple(p) for p in paths} <= helps


@pytest.mark.parametrize("name", case_names())
def test_answers_without_heavy_imports(name, files):
    args, code = next((a, c) for n, a, c in all_cases(files) if n == name)
    exit_code, heavy, stdout, stderr = probe(args)
    assert exit_code == code, (stdout, stderr)
    assert heavy == [], f"{name} imported {heavy}"
    assert "Traceback" not in stderr
    if code == 2:
        lines = stderr.strip().splitlines()
        assert lines and all(line.startswith("embeval: error: ") for line in lines), stderr
        assert len(lines) == 1 or name.startswith("sweep"), stderr  # a sweep adds its summary line
    else:
        assert stdout.strip(), name


def test_the_probe_sees_a_heavy_import():
    """The check is only as good as the probe: torch imported in the probed process must show."""
    exit_code, heavy, _, _ = probe(["--version"], preload=["torch"])
    assert exit_code == 0 and heavy == ["torch"]


def test_the_signature_check_agrees_with_hdf5(tmp_path):
    """check_file looks for HDF5's signature (offset 0, 512, 1024, ...) without loading HDF5: it accepts
    and refuses the files h5py.is_hdf5 does (user blocks, truncations, a signature off the grid)."""
    plain, shifted = tmp_path / "plain.h5", tmp_path / "userblock.h5"
    with h5py.File(plain, "w") as f:
        f["x"] = np.zeros((3, 4))
    with h5py.File(shifted, "w", userblock_size=4096) as f:
        f["x"] = np.zeros((3, 4))
    cases = [plain, shifted]
    for source, lengths in ((plain, (1, 7, 8, 100)), (shifted, (600, 4000, 4100, 4104, 5000))):
        for length in lengths:
            path = tmp_path / f"{source.stem}-{length}.h5"
            path.write_bytes(source.read_bytes()[:length])
            cases.append(path)
    signature = b"\x89HDF\r\n\x1a\n"
    for offset in (700, 2048):
        path = tmp_path / f"signature-at-{offset}.h5"
        path.write_bytes(b"\0" * offset + signature + b"\0" * 600)
        cases.append(path)
    (tmp_path / "random.h5").write_bytes(np.random.default_rng(0).bytes(5000))
    cases.append(tmp_path / "random.h5")
    verdicts = []
    for path in cases:
        try:
            check_file(path)
            ours = True
        except VectorsError as err:
            assert str(err).endswith("not an HDF5 file"), err
            ours = False
        verdicts.append((path.name, ours, h5py.is_hdf5(path)))
    assert all(ours == theirs for _, ours, theirs in verdicts), verdicts
    assert {ours for _, ours, _ in verdicts} == {True, False}
