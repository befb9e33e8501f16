"""embeval: offline, encoder-agnostic evaluation of sentence embeddings on the SentEval suite.

The Python API mirrors the command line::

    import embeval

    manifest, skipped = embeval.export_sentences("data/", "sentences/", tasks=["STS16", "MR"])
    embeval.vectors.write("vectors.h5", "sentences/", encode)      # encode(list of str) -> array
    record = embeval.score("vectors.h5", "data/", out="results.json")
    print(embeval.report(["results.json", "other.json"]))
    comparison = embeval.compare(["results.json", "other.json"])
    leaderboard = embeval.rank(["results.json", "other.json", "third.json"])

Bad input raises embeval.errors.EmbevalError, whose text is one line naming the file, the task and
what is wrong. Modules are imported on first use, so `import embeval` is cheap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from embeval._version import __version__
from embeval.threads import prepare_environment as _prepare_environment

_prepare_environment()  # before torch loads OpenMP: idle threads spin only briefly (docs/scoring.md)

if TYPE_CHECKING:
    from types import ModuleType

    from embeval.settings import RunConfig

__all__ = ["__version__", "export_sentences", "vectors", "score", "report", "compare", "rank"]


def export_sentences(
    data_dir: str | Path,
    out_dir: str | Path,
    tasks: Sequence[str] | None = None,
    union: bool = False,
    task_files: Sequence[str | Path] = (),
) -> tuple[dict[str, Any], list[str]]:
    """Write each task's distinct sentences to out_dir/TASK.txt (or one ALL.txt with union=True) and
    out_dir/manifest.json with each list's count and sha256 fingerprint. tasks: names (None: every
    task whose data is in data_dir); task_files: task files (or folders of them) declaring tasks
    beyond the built-ins (docs/tasks.md). Returns (manifest, tasks skipped for want of data)."""
    from embeval.formats.sentences import export_sentences as run
    from embeval.tasks.registry import registry

    return run(data_dir, out_dir, tasks, union, registry=registry(task_files))


def score(
    vectors: str | Path,
    data_dir: str | Path,
    tasks: Sequence[str] | None = None,
    out: str | Path | None = None,
    device: str = "auto",
    config: RunConfig | Mapping[str, Any] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Score a vectors file on SentEval's tasks (and those of task_files) and return the results record
    (a dict, the JSON that `out` receives). config: embeval.run.config.build(...), a RunConfig
    (embeval.settings), or a results file's `config` object (default: the literature configuration).
    options: task_files, strict, resume, save_predictions, progress, log, ray, threads (see
    embeval.run.score.score)."""
    from embeval.run.score import score as run

    return run(vectors, data_dir, tasks=tasks, out=out, device=device, config=config, **options)


def report(
    results: Iterable[str | Path],
    fmt: str = "markdown",
    labels: Sequence[str] | None = None,
    baselines: bool = True,
    ci: bool = True,
) -> str:
    """The paper-ready tables of one or more results files, as text in fmt (markdown, latex, csv); in
    markdown, for several files with saved predictions, their leaderboard with rank intervals too."""
    from embeval.reports import tables

    paths = [str(p) for p in results]
    built, _rows = tables.build(paths, labels=labels, baselines=baselines, ci=ci)
    text = tables.render(built, fmt, ci=ci)
    if fmt == "markdown":
        from embeval.reports import rank as ranking

        text += ranking.report_markdown(paths, labels)
    return text


def compare(
    results: Iterable[str | Path],
    labels: Sequence[str] | None = None,
    tasks: Sequence[str] | None = None,
    resamples: int | None = None,
    seed: int | None = None,
) -> dict[str, Any]:
    """The paired comparison of results files (each against the first) on the same test items: per
    task and headline figure the difference, its 95% bootstrap interval and Holm-adjusted p-value."""
    from embeval.reports import compare as run

    return run.compare([str(p) for p in results], labels=labels, tasks=tasks, resamples=resamples, seed=seed)


def rank(
    results: Iterable[str | Path],
    labels: Sequence[str] | None = None,
    tasks: Sequence[str] | None = None,
    resamples: int | None = None,
    seed: int | None = None,
) -> dict[str, Any]:
    """The leaderboard of 2 to 100 results files (scored with saved predictions) with rank intervals: per
    benchmark aggregate and per task, each run's figure, its 95% interval, its rank and 95% rank interval
    (simultaneous over the runs), the runs that cannot be told apart from the best, and the paired
    differences of every pair with adjusted p-values (docs/ranking.md). embeval.reports.rank.formatted(
    result, "text" | "markdown") and embeval.reports.html.render_rank(result) render it."""
    from embeval.reports import rank as run

    return run.rank([str(p) for p in results], labels=labels, tasks=tasks, resamples=resamples, seed=seed)


def __getattr__(name: str) -> ModuleType:
    if name == "vectors":
        from embeval.formats import vectors

        return vectors
    raise AttributeError(f"module 'embeval' has no attribute {name!r}")
