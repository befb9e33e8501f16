"""What `embeval` must answer at once, without importing its heavy libraries: every --help, --version,
and every error that can be found before scoring. Shared by tests/test_startup.py (which checks the
modules each case imports) and bench/startup.py (which times them)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "sklearn", "scipy", "pandas", "matplotlib", "h5py")

# Runs embeval's command in this process with the given arguments, then prints the exit code and the
# heavy modules that got imported (one JSON line on stdout, after the command's own output).
PROBE = """
import json, sys
args, watched = json.loads(sys.argv[1]), set(json.loads(sys.argv[2]))
for name in json.loads(sys.argv[3]):
    __import__(name)
sys.argv = ["embeval"] + args
code = 0
try:
    from embeval.cli import main
    main()
except SystemExit as stop:
    code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
heavy = sorted({m.split(".")[0] for m in sys.modules} & watched)
print("\\n" + json.dumps({"exit": code, "heavy": heavy}))
"""


def command_paths():
    """Every command and subcommand of `embeval`, as argument lists (["score"], ["data", "fetch"], ...)."""
    from embeval.cli.main import cli

    paths = []

    def walk(group, prefix):
        for name, command in sorted(group.commands.items()):
            paths.append(prefix + [name])
            if hasattr(command, "commands"):
                walk(command, prefix + [name])

    walk(cli, [])
    return paths


FILES = ("vectors", "text", "empty", "other_json", "folder", "missing", "missing_json", "bad_toml", "bad_kind")


def make_files(folder):
    """The files the error cases name: a tiny HDF5 file, a text file, an empty file, a JSON file that is
    not a results file; returns {name: path}."""
    import h5py
    import numpy as np

    folder = Path(folder)
    files = {
        "vectors": folder / "tiny.h5",
        "text": folder / "notes.txt",
        "empty": folder / "empty.h5",
        "other_json": folder / "other.json",
        "folder": folder / "a-folder",
        "missing": folder / "missing.h5",
        "missing_json": folder / "missing.json",
        "bad_toml": folder / "broken.toml",
        "bad_kind": folder / "unknown-kind.toml",
    }
    with h5py.File(files["vectors"], "w") as f:
        f["STS16"] = np.zeros((3, 4), dtype=np.float32)
    files["text"].write_text("not vectors\n")
    files["empty"].write_bytes(b"")
    files["other_json"].write_text(json.dumps({"format": "something-else", "tasks": {}}))
    files["folder"].mkdir(exist_ok=True)
    files["bad_toml"].write_text('name = "Mine"\nkind = \n')
    files["bad_kind"].write_text('name = "Mine"\nkind = "regression"\n[files]\ntest = "test.tsv"\n')
    return files


def error_cases(files):
    """(name, arguments) of errors found before scoring; each must exit with code 2."""
    f = {k: str(v) for k, v in files.items()}
    bad_optim = '{"optim": "adam,lr=x"}'
    return [
        ("score: missing file", ["score", f["missing"]]),
        ("score: a folder", ["score", f["folder"]]),
        ("score: not HDF5", ["score", f["text"]]),
        ("score: empty file", ["score", f["empty"]]),
        ("score: unknown task", ["score", f["vectors"], "--tasks", "NOPE"]),
        ("score: unknown device", ["score", f["vectors"], "--device", "tpu"]),
        ("score: unknown preset", ["score", f["vectors"], "--config", "fast"]),
        ("score: bad optimizer", ["score", f["vectors"], "--classifier", bad_optim]),
        ("score: bad JSON", ["score", f["vectors"], "--classifier", "{nope"]),
        ("score: kfold 1", ["score", f["vectors"], "--kfold", "1"]),
        ("score: bootstrap 5", ["score", f["vectors"], "--bootstrap", "5"]),
        ("score: unknown normalization", ["score", f["vectors"], "--normalize", "minmax"]),
        ("score: --out not results", ["score", f["vectors"], "--out", f["other_json"]]),
        ("sweep: missing file", ["sweep", f["missing"], "--out-dir", f["folder"]]),
        ("sweep: bad optimizer", ["sweep", f["vectors"], "--classifier", bad_optim]),
        ("sweep: unknown task", ["sweep", f["vectors"], "--tasks", "NOPE"]),
        ("quickstart: unknown task", ["quickstart", "--tasks", "NOPE", "--data", f["folder"]]),
        ("quickstart: unknown encoder", ["quickstart", "--encoder", "gpt"]),
        ("export-sentences: unknown task", ["export-sentences", "--out", f["folder"], "--tasks", "NOPE"]),
        ("vectors check: missing export", ["vectors", "check", f["missing"], "--export", f["missing"]]),
        ("report: other JSON", ["report", f["other_json"]]),
        ("report: missing file", ["report", f["missing_json"]]),
        ("compare: other JSON", ["compare", f["other_json"], f["other_json"]]),
        ("rank: other JSON", ["rank", f["other_json"], f["other_json"]]),
        ("rank: one file", ["rank", f["other_json"]]),
        ("export-mteb: other JSON", ["export-mteb", f["other_json"], "--model", "a/b", "--out", f["folder"]]),
        ("tasks: missing task file", ["tasks", "--task-file", f["missing_json"]]),
        ("tasks: malformed TOML", ["tasks", "--task-file", f["bad_toml"]]),
        ("score: unknown kind in a task file", ["score", f["vectors"], "--task-file", f["bad_kind"]]),
        ("data verify: unknown task", ["data", "verify", "--tasks", "NOPE", "--data", f["folder"]]),
    ]


def all_cases(files):
    """(name, arguments, expected exit code) of every case."""
    cases = [("--help", ["--help"], 0), ("--version", ["--version"], 0)]
    cases += [(" ".join(path) + " --help", path + ["--help"], 0) for path in command_paths()]
    cases += [(name, args, 2) for name, args in error_cases(files)]
    return cases


def case_names():
    return [name for name, _, _ in all_cases({key: key for key in FILES})]


def probe(args, python=sys.executable, cwd=ROOT, preload=()):
    """Run one case in a fresh interpreter: (exit code, heavy modules imported, stdout, stderr).
    preload: modules imported before the command (to check that the probe sees them)."""
    done = subprocess.run(
        [python, "-c", PROBE, json.dumps([str(a) for a in args]), json.dumps(HEAVY), json.dumps(list(preload))],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["exit"], result["heavy"], done.stdout, done.stderr
