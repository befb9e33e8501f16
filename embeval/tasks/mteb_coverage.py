"""How much of the installed mteb `--mteb` scores: its text tasks (those `mteb.get_tasks()` lists whose
only modality is text) by type, and its benchmarks, whole or in part (`--skip-unsupported`). Counted
from mteb's own registries and embeval.tasks.mteb_source.unsupported, never re-typed:
scripts/mteb_coverage.py prints it, and a test holds docs/mteb-by-name.md's figures to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from embeval.tasks.mteb_source import require_mteb, unsupported


@dataclass
class Coverage:
    version: str
    tasks: int  # mteb's text tasks
    refused: list[str]  # why each text task that is not scored is not
    types: dict[str, int]  # text tasks per mteb type
    benchmarks: int  # mteb's benchmarks
    whole: list[str] = field(default_factory=list)  # benchmarks whose every task is scored
    partial: dict[str, tuple[int, int]] = field(default_factory=dict)  # benchmark: (tasks scored, tasks)
    none: list[str] = field(default_factory=list)  # benchmarks without a task scored (image, audio, video)


def coverage() -> Coverage:
    """The installed mteb's coverage (instantiates its tasks: a few seconds)."""
    mteb = require_mteb()
    from mteb.benchmarks.get_benchmark import _build_registry

    text = [t for t in mteb.get_tasks() if list(t.metadata.modalities) == ["text"]]
    types: dict[str, int] = {}
    for task in text:
        types[task.metadata.type] = types.get(task.metadata.type, 0) + 1
    refused = [why for task in text if (why := unsupported(task))]
    benchmarks = _build_registry()
    found = Coverage(mteb.__version__, len(text), refused, dict(sorted(types.items())), len(benchmarks))
    for name, benchmark in benchmarks.items():
        scored = sum(1 for task in benchmark.tasks if unsupported(task) is None)
        if scored == len(benchmark.tasks):
            found.whole.append(name)
        elif scored:
            found.partial[name] = (scored, len(benchmark.tasks))
        else:
            found.none.append(name)
    return found


def lines(found: Coverage) -> list[str]:
    """The coverage in words, as scripts/mteb_coverage.py prints it."""
    out = [
        f"mteb {found.version}: {found.tasks} text tasks, {found.tasks - len(found.refused)} scored by name",
        "types: " + ", ".join(f"{name} {count}" for name, count in found.types.items()),
    ]
    out += [f"  not scored: {why}" for why in found.refused]
    out.append(f"benchmarks: {found.benchmarks}; scored whole: {len(found.whole)}")
    out.append("  " + ", ".join(found.whole))
    out.append(f"scored in part (--skip-unsupported): {len(found.partial)}")
    out += [f"  {name}: {scored} of {total} tasks" for name, (scored, total) in found.partial.items()]
    out.append(f"no task scored (not text): {len(found.none)}")
    out.append("  " + ", ".join(found.none))
    return out
