"""Hostile inputs shared by tests/test_hostile.py and tests/test_fuzz.py: a small task file of one's own
with its export, vectors and results (no SentEval data needed), the refusal contract, and the special
files and declarations they put where embeval reads."""

import contextlib
import hashlib
import os
import shutil
import signal
from pathlib import Path

import numpy as np
from click.testing import CliRunner

TASK = 'name = "Mine"\nkind = "sts"\n[files]\ntest = "pairs.tsv"\n[mteb]\nname = "Mine"\nrevision = "r1"\n'
WORDS = ["red", "blue", "green", "cat", "dog", "sun", "moon", "tree", "sky", "sea", "stone", "fire"]
NAMINGS = ("same", "dot", "symlink", "hardlink")
HANG_S = 60  # a read that blocks (a FIFO) fails the test instead of hanging it


MTEB_FILE = "mt/results/o__m/no_revision_available/Mine.json"
MTEB_META = "mt/results/o__m/no_revision_available/model_meta.json"
SCORE = ("score", "v.h5", "--task-file", "t/t.toml", "--data", "none", "--bootstrap", 0)
RESCORE = SCORE[:-1] + (100,)  # as a.json was scored: its entries are reusable
FIGURE = "all.spearman.pooled"  # the task's headline figure
# (command with OUT where the output goes, the input OUT names, the output path a link takes)
ONTO = [
    (("report", "a.json", "--out", "OUT"), "a.json", "r.md"),
    (("report", "a.json", "--out", "OUT", "--format", "csv"), "a.predictions.npz", "r.csv"),
    (("report", "a.json", "--task-file", "t/t.toml", "--out", "OUT"), "t/t.toml", "r.md"),
    (("report", "a.json", "--plots", "p"), "a.json", "p/spectrum.png"),
    (("compare", "a.json", "b.json", "--resamples", 100, "--out", "OUT"), "b.json", "c.md"),
    (("compare", "a.json", "b.json", "--resamples", 100, "--out", "OUT"), "b.predictions.npz", "c.md"),
    (("compare", "a.json", "b.json", "--resamples", 100, "--json", "OUT"), "b.json", "c.json"),
    (("compare", "a.json", "b.json", "--resamples", 100, "--json", "OUT"), "a.predictions.npz", "c.json"),
    (("export-mteb", "a.json", "--model", "o/m", "--out", "mt"), "a.json", MTEB_FILE),
    (("export-mteb", "a.json", "--model", "o/m", "--out", "mt", "--task-file", "t/t.toml"), "t/t.toml", MTEB_META),
    (SCORE + ("--out", "OUT"), "v.h5", "r.json"),
    (SCORE + ("--out", "OUT"), "t/t.toml", "r.json"),
    (SCORE + ("--out", "OUT"), "t/pairs.tsv", "r.json"),
    (SCORE + ("--out", "r.json"), "v.h5", "r.predictions.npz"),
    (SCORE + ("--out", "r.json"), "t/pairs.tsv", "r.json.partial"),
    (("sweep", "v.h5", "--task-file", "t/t.toml", "--data", "none", "--out-dir", "sw"), "t/t.toml", "sw/sweep.json"),
    (("sweep", "v.h5", "--task-file", "t/t.toml", "--data", "none", "--out-dir", "sw"), "v.h5", "sw/sweep.log"),
]


def invoke(*args):
    """The embeval command in-process, stopped by SIGALRM if it blocks."""
    from embeval.cli.main import cli as command

    def stop(signum, frame):
        raise TimeoutError(f"embeval {' '.join(map(str, args))} blocked for {HANG_S} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(HANG_S)
    try:
        return CliRunner().invoke(command, [str(a) for a in args], catch_exceptions=False)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def one_line(result, *fragments):
    """The refusal contract: exit code 2, exactly one line on stderr (the error), no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("embeval: error: "), result.stderr
    for fragment in fragments:
        assert str(fragment) in lines[0], (fragment, lines[0])
    return lines[0]


def state(folder):
    """{relative path: what it is} of everything under folder: a file's sha256, a link's target; FIFOs and
    devices are never opened."""
    found = {}
    for path in sorted(Path(folder).rglob("*")):
        key = str(path.relative_to(folder))
        if path.is_symlink():
            found[key] = ("link", os.readlink(path))
        elif path.is_file():
            found[key] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
        else:
            found[key] = ("other", None)
    return found


def encode(sentences):
    """Deterministic 16-d vectors: hashed words."""
    out = np.zeros((len(sentences), 16), dtype=np.float32)
    for i, text in enumerate(sentences):
        for word in text.split():
            out[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % 16] += 1.0
    return out


def write_pairs(path, seed=1, rows=40):
    rng = np.random.default_rng(seed)
    lines = ["sentence1\tsentence2\tscore"]
    for i in range(rows):
        a, b = (" ".join(rng.choice(WORDS, 4, replace=False)) for _ in range(2))
        lines.append(f"{a} {i}\t{b} {i}\t{int(rng.integers(0, 6))}")
    path.write_text("\n".join(lines) + "\n")


def build(root):
    """In root: a task file of one's own (t/t.toml, STS with an [mteb] table), its export s/, two vectors
    files v.h5 and w.h5, and their results a.json and b.json with predictions."""
    from embeval.formats.sentences import export_sentences
    from embeval.formats.vectors import write
    from embeval.tasks.registry import registry

    (root / "t").mkdir()
    (root / "t" / "t.toml").write_text(TASK)
    write_pairs(root / "t" / "pairs.tsv")
    known = registry([root / "t" / "t.toml"])
    export_sentences(root / "none", root / "s", ["Mine"], registry=known)
    write(root / "v.h5", root / "s", encode, progress=False)
    write(root / "w.h5", root / "s", lambda s: encode(s) + np.float32(0.5), progress=False)
    with contextlib.chdir(root):
        for vectors, out in (("v.h5", "a.json"), ("w.h5", "b.json")):
            args = ("score", vectors, "--task-file", "t/t.toml", "--data", "none", "--out", out, "--bootstrap", 100)
            result = invoke(*args, "--quiet")
            assert result.exit_code == 0, result.stderr
    return root


def copy_of(made, folder):
    """A fresh copy of what build made."""
    shutil.copytree(made, folder, symlinks=True)
    return folder


def spelled(work, input_path, naming, target):
    """The output path that names `input_path` as `naming` says: itself, `./` it, or `target` made a
    symlink or a hard link to it (target's folder created)."""
    if naming == "same":
        return input_path
    if naming == "dot":
        return f"./{input_path}"
    link = work / target
    link.parent.mkdir(parents=True, exist_ok=True)
    if naming == "symlink":
        link.symlink_to(work / input_path)
    else:
        os.link(work / input_path, link)
    return target


SPECIALS = ("fifo", "dev-zero", "folder", "dangling")


def special(path, kind):
    """Put a special file at path (replacing what is there)."""
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    else:
        path.symlink_to(path.parent / "nowhere")


DECLARATIONS = {
    "classification": 'kind = "classification"\nprotocol = "mteb"\n[files]\ntrain = "c.tsv"\ntest = "c.tsv"\n',
    "split-classification": 'kind = "classification"\nprotocol = "split"\n[files]\ntrain = "c.tsv"\n'
    'dev = "c.tsv"\ntest = "c.tsv"\n',
    "multilabel": 'kind = "multilabel-classification"\n[files]\ntrain = "m.jsonl"\ntest = "m.jsonl"\n',
    "regression": 'kind = "regression"\n[files]\ntrain = "r.tsv"\ntest = "r.tsv"\n',
    "clustering": 'kind = "clustering"\nprotocol = "bootstrap"\n[files]\ntest = "k.jsonl"\n',
    "retrieval": 'kind = "retrieval"\n[files]\ncorpus = "c.jsonl"\nqueries = "q.jsonl"\nqrels = "q.tsv"\n',
}
INTEGERS = [
    *[("classification", key) for key in ("samples_per_label", "n_experiments", "max_iter", "seed")],
    ("split-classification", "max_epoch"),
    ("split-classification", "epoch_size"),
    *[("multilabel", k) for k in ("samples_per_label", "n_experiments", "n_neighbors", "max_eval_samples", "seed")],
    *[("regression", k) for k in ("n_experiments", "n_samples", "seed")],
    *[
        ("clustering", k)
        for k in ("max_documents", "documents_per_experiment", "n_experiments", "batch_size", "max_depth", "seed")
    ],
    ("retrieval", "depth"),
]


def declaration(kind, extra):
    head, files = DECLARATIONS[kind].split("[files]")
    return f'name = "Bounded"\n{head}{extra}\n[files]{files}'
