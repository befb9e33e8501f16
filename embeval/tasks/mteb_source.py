"""MTEB's tasks and benchmarks by name: the one module (with embeval.reports.mteb's export) that
imports mteb. A name given to `--mteb` is resolved through the installed mteb; each of its tasks is
loaded by mteb's own task object (`load_data` and `dataset_transform`) from a local copy of its
dataset, with the network off, and each (subset, split) it evaluates becomes a TaskSpec of the
matching kind, its facts read from the task object: name, dataset path and revision, splits,
subsets (a benchmark's own choice included), main score and the type's settings.

The data mteb loaded is written, as the files the kind reads (BEIR's layout, JSON lines), to a
folder under embeval's cache (EMBEVAL_CACHE, else ~/.cache/embeval/mteb); the spec is a declaration
of those files, read by the same reader as a task file, so scoring runs no code of mteb's.

Names: a comma separates names, except inside parentheses, so `MTEB(eng, v2),BEIR,STS12` is three.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embeval.errors import EmbevalError, install_hint
from embeval.tasks.mteb_cache import Slot, checked_root
from embeval.tasks.spec import TaskSpec, read_spec
from embeval.untrusted import ALLOW_OUTSIDE_OPTION, read_bytes

TESTED = ((2, 26), (2, 27))  # the mteb versions whose loaders and evaluators embeval follows: >= first, < second
EXTRA = install_hint("mteb")
OPTION = "--mteb"
SOURCE = "mteb"  # a spec's source: "mteb TASK"
SAFE = re.compile(r"[^A-Za-z0-9_-]")


class MtebError(EmbevalError):
    """A name, a task or a dataset `--mteb` cannot use."""


# mteb's task types: the kind of each, and the function that writes one (subset, split) as its files.
Writer = Callable[[Any, "Part", Path], dict[str, Any]]


@dataclass(frozen=True)
class Part:
    """One (subset, split) of an mteb task: its spec's name and where its files go."""

    task: Any
    subset: str
    split: str
    name: str


@dataclass
class Requested:
    """An mteb task object and the benchmarks it was asked through (empty: by its own name)."""

    task: Any
    benchmarks: list[str] = field(default_factory=list)


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def require_mteb() -> Any:
    """The mteb module, with the network off; a missing mteb or one outside TESTED is one line."""
    import importlib.metadata

    try:
        installed = importlib.metadata.version("mteb")
    except importlib.metadata.PackageNotFoundError:
        raise MtebError(f"MTEB's tasks by name need the mteb package ({EXTRA})", file=OPTION)
    low, high = TESTED
    if not low <= version_tuple(installed)[:2] < high:
        raise MtebError(
            f"mteb {installed} is outside the tested range >={low[0]}.{low[1]},<{high[0]}.{high[1]} ({EXTRA})",
            file=OPTION,
        )
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    import mteb

    for name in ("mteb", "datasets", "huggingface_hub"):
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        import datasets

        datasets.disable_progress_bars()
        datasets.config.HF_HUB_OFFLINE = True  # read when datasets was imported: set it again
    except (ImportError, AttributeError):  # pragma: no cover
        pass
    return mteb


def split_names(text: str) -> list[str]:
    """Names from a --mteb value: commas separate them except inside parentheses."""
    names: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "," and depth == 0:
            names.append("".join(current).strip())
            current = []
            continue
        depth += (char == "(") - (char == ")")
        current.append(char)
    names.append("".join(current).strip())
    names = [n for n in names if n]
    if not names:
        raise MtebError("names no task or benchmark", file=OPTION)
    return names


def resolve(text: str) -> list[Requested]:
    """The task objects a --mteb value names, each once, in the order given (a benchmark's tasks
    filtered to its subsets and splits)."""
    mteb = require_mteb()
    from mteb.benchmarks.get_benchmark import _build_aliases_registry, _build_registry
    from mteb.get_tasks import _TASKS_REGISTRY

    benchmarks = {**_build_registry(), **_build_aliases_registry()}
    found: dict[str, Requested] = {}
    for name in split_names(text):
        if name in benchmarks:
            bench = benchmarks[name]
            for task in bench.tasks:
                found.setdefault(task.metadata.name, Requested(task)).benchmarks.append(bench.name)
        elif name in _TASKS_REGISTRY:
            if name not in found:
                found[name] = Requested(mteb.get_task(name))
        else:
            lowered = {known.lower(): known for known in [*_TASKS_REGISTRY, *benchmarks]}  # case aside first
            close = [name.lower()] if name.lower() in lowered else difflib.get_close_matches(name.lower(), lowered, n=1)
            hint = f" (did you mean {lowered[close[0]]}?)" if close else ""
            raise MtebError(f"{name!r} is not an mteb {mteb.__version__} task or benchmark{hint}", file=OPTION)
    return list(found.values())


PART_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*__[A-Za-z0-9_-]+__[A-Za-z0-9_-]+$")  # TASK__SUBSET__SPLIT


def exported_hint(datasets: Iterable[str]) -> str:
    """For a run that scores nothing: '; ...--mteb...' when some of a file's dataset names that match
    no known task (their task part) are named as `--mteb` exports them (an installed mteb's task names,
    or TASK__SUBSET__SPLIT); else ''. The file records no origin, so this is a hint."""
    tasks = sorted({name.split(".", 1)[0] for name in datasets})
    if not tasks:
        return ""
    known: set[str] = set()
    try:
        require_mteb()
        from mteb.get_tasks import _TASKS_REGISTRY

        known = {safe_name(name) for name in _TASKS_REGISTRY}
    except (MtebError, ImportError):
        pass
    found = [t for t in tasks if t in known or PART_NAME.match(t)]
    if not found:
        return ""
    shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
    return (
        f"; the file's {shown} {'is named like an MTEB task' if len(found) == 1 else 'are named like MTEB tasks'}: "
        "if it was exported with --mteb, score it with --mteb NAMES, the names you exported"
    )


# Where a dataset is.


HF_CLI_SINCE = (0, 34)  # huggingface_hub's `hf` command; `huggingface-cli` before it, and not from 1.0 on


def download_program() -> str:
    """The Hugging Face command the installed huggingface_hub has: `hf` (0.34 and later), else
    `huggingface-cli`. Both download a dataset at a revision with the same options and record it."""
    import importlib.metadata

    try:
        installed = version_tuple(importlib.metadata.version("huggingface_hub"))
    except importlib.metadata.PackageNotFoundError:
        return "hf"
    return "hf" if installed[:2] >= HF_CLI_SINCE else "huggingface-cli"


METADATA_BYTES = 64 << 10  # a revision record is three short lines


def metadata_revision(
    folder: Path, task: str | None = None, root: Path | None = None, allow_outside: bool = False
) -> str | None:
    """The revision a `hf download --local-dir` copy records (None: none recorded): huggingface_hub
    writes each file's commit in `.cache/huggingface/download/FILE.metadata`, its first line. A
    record that is not a regular file, larger than METADATA_BYTES or (unless allow_outside) leading
    out of `root` is one line."""
    records = folder / ".cache" / "huggingface" / "download"
    for path in sorted(records.rglob("*.metadata")) if records.is_dir() else []:
        if root is not None:
            confined(path, root, allow_outside, task)
        data = read_bytes(path, METADATA_BYTES, MtebError, task=task)
        try:
            first = data.decode("utf-8").split("\n", 1)[0].strip()
        except UnicodeDecodeError:
            continue
        if first:
            return first
    return None


def confined(path: Path, root: Path, allow_outside: bool, task: str | None) -> None:
    """Refuse a path of a dataset copy that resolves (links followed) outside root, the folder the
    copies are in, unless allow_outside."""
    if allow_outside:
        return
    try:
        inside = path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError) as err:  # a link loop
        raise MtebError(f"cannot resolve ({err})", file=path, task=task)
    if not inside:
        raise MtebError(
            f"leads outside {root.resolve()} (a dataset copy's files must stay inside the folder of the copies; "
            f"symlinks are followed); to read it anyway, give {ALLOW_OUTSIDE_OPTION} on the command line",
            file=path,
            task=task,
        )


def fetch_command(dataset: str, revision: str, data_dir: str | Path | None = None) -> str:
    """The command that fetches a dataset's copy into --mteb-data's folder (DIR when none is given)."""
    folder = "DIR" if data_dir is None else str(data_dir).rstrip("/")
    return (
        f"{download_program()} download {dataset} --repo-type dataset --revision {revision} "
        f"--local-dir {folder}/{dataset}"
    )


@dataclass(frozen=True)
class Located:
    folder: Path
    recorded: str | None  # the revision the copy records
    root: Path | None = None  # the folder its files must stay inside (links followed): --mteb-data's


def find(task: Any, data_dir: str | Path | None, allow_outside: bool = False) -> Located | None:
    """The local copy of a task's dataset: DIR/ORG/NAME under --mteb-data, else the Hugging Face cache
    (None: no copy)."""
    dataset = task.metadata.dataset["path"]
    revision = task.metadata.dataset.get("revision") or "main"
    if data_dir is not None:
        folder = Path(data_dir) / dataset
        if not folder.is_dir():
            return None
        root = Path(data_dir)
        confined(folder, root, allow_outside, task.metadata.name)
        return Located(folder, metadata_revision(folder, task.metadata.name, root, allow_outside), root)
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        path = snapshot_download(dataset, repo_type="dataset", revision=revision, local_files_only=True)
    except (LocalEntryNotFoundError, OSError, ValueError):
        return None
    return Located(Path(path), revision, Path(path).parents[1])  # the repository's folder: snapshots and blobs


def _nowhere(data_dir: str | Path | None) -> str:
    return f"not in {data_dir}" if data_dir is not None else "not in the Hugging Face cache (give --mteb-data DIR)"


def locate_all(tasks: Sequence[Any], data_dir: str | Path | None, allow_outside: bool = False) -> dict[str, Located]:
    """{task name: its dataset's local copy} of every task; MtebError naming every dataset without one
    (one: its fetch command; several: the first's, and where to find the others')."""
    found, absent = {}, []
    for task in tasks:
        located = find(task, data_dir, allow_outside)
        if located is None:
            absent.append(task)
        else:
            found[task.metadata.name] = located
    if not absent:
        return found
    commands = [
        fetch_command(t.metadata.dataset["path"], t.metadata.dataset.get("revision") or "main", data_dir)
        for t in absent
    ]
    if len(absent) == 1:
        meta = absent[0].metadata
        raise MtebError(
            f"dataset {meta.dataset['path']} at revision {meta.dataset.get('revision') or 'main'} is "
            f"{_nowhere(data_dir)}; on a connected machine: {commands[0]}",
            task=meta.name,
            file=OPTION,
        )
    names = ", ".join(f"{t.metadata.name} ({t.metadata.dataset['path']})" for t in absent)
    raise MtebError(
        f"{len(absent)} of {len(tasks)} datasets are {_nowhere(data_dir)}: {names}; on a connected machine "
        f"fetch each at mteb's revision, the first: {commands[0]} (`embeval tasks --mteb NAMES --no-load` "
        "prints every command)",
        file=OPTION,
    )


# The kinds' files.


def _write(path: Path, text: str) -> None:
    """A cache file, whole or not at all (written beside it, then renamed)."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def _jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    _write(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def _tsv_field(value: Any, part: Part, what: str) -> str:
    text = str(value)
    if any(c in text for c in "\t\r\n"):
        raise MtebError(f"a {what} holds a tab or a line break, which embeval's qrels cannot hold", task=part.name)
    return text


def _subset(task: Any, part: Part) -> Any:
    """A subset's splits, as mteb's evaluate finds them (a task without subsets: the splits)."""
    if part.subset not in task.dataset and part.subset == "default":
        return task.dataset
    return task.dataset[part.subset]


def _column(task: Any, attribute: str, part: Part) -> str:
    column = getattr(task, attribute)
    if not isinstance(column, str):
        raise MtebError(f"a {attribute} other than one text column is not supported", task=part.name)
    return column


def _write_corpus(task: Any, part: Part, data: Any, folder: Path) -> list[str]:
    """Write corpus.jsonl; the ids of its rows in order. A document listed twice (the same id and
    text) is written once; the same id with other texts is refused (mteb's search would keep one of
    their scores per query, by the order of its heap)."""
    from embeval.tasks.beir import document_text

    corpus = data["corpus"]
    has_title = "title" in corpus.column_names
    ids = [str(i) for i in corpus["id"]]  # whole columns: far faster than rows
    texts = list(corpus["text"])
    titles = list(corpus["title"]) if has_title else [""] * len(ids)
    first = dict(zip(reversed(ids), range(len(ids) - 1, -1, -1)))
    rows: Iterable[int] = range(len(ids))
    if len(first) < len(ids):
        for row, doc in enumerate(ids):
            other = first[doc]
            if other != row and document_text(titles[row], texts[row]) != document_text(titles[other], texts[other]):
                raise MtebError(
                    f"document id {doc!r} is listed with two texts (mteb's figures would depend on which of "
                    "their scores its search keeps)",
                    file=data_file(task, part, "corpus"),
                    task=part.name,
                )
        rows = sorted(first.values())
    _jsonl(folder / "corpus.jsonl", ({"_id": ids[r], "title": titles[r] or "", "text": texts[r]} for r in rows))
    return ids


def _write_qrels(relevant: Mapping[str, Mapping[Any, Any]], part: Part, folder: Path) -> None:
    lines = ["query-id\tcorpus-id\tscore"]
    for query, docs in relevant.items():
        for doc, grade in docs.items():
            lines.append(f"{_tsv_field(query, part, 'query id')}\t{_tsv_field(doc, part, 'document id')}\t{int(grade)}")
    _write(folder / "qrels.tsv", "\n".join(lines) + "\n")


def _write_candidates(top_ranked: Mapping[Any, Any], keep: Iterable[str], part: Part, folder: Path) -> None:
    """candidates.tsv, query by query, streamed to the file (MindSmallReranking has 97 million lines)."""

    def pieces() -> Iterator[str]:
        yield "query-id\tcorpus-id\n"
        kept = set(keep)
        for query, docs in top_ranked.items():
            query = str(query)
            if query not in kept or not len(docs):
                continue
            docs = [str(d) for d in dict.fromkeys(docs)]
            if any(c in query for c in "\t\r\n") or any(c in "".join(docs) for c in "\t\r\n"):
                _tsv_field(query, part, "query id")
                for doc in docs:
                    _tsv_field(doc, part, "document id")
            yield query + "\t" + ("\n" + query + "\t").join(docs) + "\n"

    _write_pieces(folder / "candidates.tsv", pieces())


def _write_pieces(path: Path, pieces: Iterable[str], size: int = 1 << 22) -> None:
    """A cache file written from text pieces, about `size` characters at a time, whole or not at all."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    with open(partial, "w", encoding="utf-8") as f:
        buffer: list[str] = []
        held = 0
        for piece in pieces:
            buffer.append(piece)
            held += len(piece)
            if held >= size:
                f.write("".join(buffer))
                buffer, held = [], 0
        f.write("".join(buffer))
    os.replace(partial, path)


def _quoted(ids: Sequence[str], shown: int = 3) -> str:
    return ", ".join(repr(i) for i in ids[:shown]) + (", ..." if len(ids) > shown else "")


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def data_file(task: Any, part: Part, role: str) -> str:
    """The file of the dataset's copy that mteb read a retrieval part's `role` (corpus, queries, qrels,
    top_ranked) from, for messages: the data file of the config mteb's loader reads (its first, when
    several); the copy's folder when that cannot be told."""
    folder = str(task.metadata.dataset.get("path") or "")
    if part.subset != "default":
        configs = [f"{part.subset}-{role}"]
    else:
        configs = ["default", "qrels"] if role == "qrels" else [role]
    try:
        import datasets

        with _scratch_cache():
            names = datasets.get_dataset_config_names(folder)
            config = next(c for c in configs if c in names)
            files = datasets.load_dataset_builder(folder, config).config.data_files or {}
        chosen = files.get(part.split) or (next(iter(files.values())) if len(files) == 1 else [])
        return str(chosen[0]) if chosen else folder
    except Exception:  # not a dataset folder datasets reads (a mock task, a loader of the task's own)
        return folder


def _retrieval_notes(
    task: Any,
    part: Part,
    relevant: Mapping[str, Mapping[str, int]],
    unknown_queries: Mapping[str, int],
    corpus_ids: Sequence[str],
    duplicate_queries: Sequence[str],
    candidates: Mapping[str, Sequence[str]] | None,
    empty_queries: Sequence[str] = (),
) -> tuple[list[str], bool]:
    """What mteb does silently with a retrieval part's data, each said naming the dataset's file, and
    whether judgments name documents outside the corpus (then counted as mteb counts them)."""
    notes = []
    known = set(corpus_ids)
    if len(known) < len(corpus_ids):
        seen: set[str] = set()
        twice = sorted({i for i in corpus_ids if i in seen or seen.add(i)})  # type: ignore[func-returns-value]
        notes.append(
            f"{data_file(task, part, 'corpus')}: {_count(len(twice), 'document is', 'documents are')} listed "
            f"more than once (first: {_quoted(twice)}); each is one document, as in mteb's results (where its "
            "copies take two of a query's places at the depth limit)"
        )
    if duplicate_queries:
        notes.append(
            f"{data_file(task, part, 'queries')}: {_count(len(duplicate_queries), 'query is', 'queries are')} "
            f"listed more than once (first: {_quoted(sorted(duplicate_queries))}); each is one query, as in mteb's "
            "results (where each of its documents takes two places at the depth limit)"
        )
    if unknown_queries:
        names = sorted(unknown_queries)
        lines = _count(sum(unknown_queries.values()), "judgment names", "judgments name")
        notes.append(
            f"{data_file(task, part, 'qrels')}: {lines} {_count(len(names), 'query', 'queries')} not in the "
            f"queries (first: {_quoted(names)}); left out, as mteb leaves them out"
        )
    outside = [(d, g) for docs in relevant.values() for d, g in docs.items() if d not in known]
    if outside:
        documents = sorted({d for d, _ in outside})
        counted = sum(1 for _, g in outside if int(g) >= 1)
        lines = _count(len(outside), "judgment names", "judgments name")
        notes.append(
            f"{data_file(task, part, 'qrels')}: {lines} {_count(len(documents), 'document', 'documents')} not in "
            f"the corpus (first: {_quoted(documents)}); the {counted} of grade >= 1 count as relevant documents "
            "never retrieved (in Recall's and MAP's denominators and the ideal DCG), as mteb (pytrec_eval) "
            "counts them"
        )
    if empty_queries:
        notes.append(
            f"{data_file(task, part, 'queries')}: {_count(len(empty_queries), 'query has', 'queries have')} an "
            f"empty text (first: {_quoted(sorted(empty_queries))}); embedded as mteb embeds it"
        )
    none = [q for q, docs in relevant.items() if not any(int(g) >= 1 for g in docs.values())]
    if none:
        notes.append(
            f"{data_file(task, part, 'qrels')}: {len(none)} of {len(relevant)} queries have no judgment of grade "
            f">= 1 (first: {_quoted(sorted(none))}); kept, they score 0 on every figure, as in mteb"
        )
    if candidates is not None:
        without = [q for q in relevant if not candidates.get(q)]
        if without:
            notes.append(
                f"{data_file(task, part, 'top_ranked')}: {len(without)} of {len(relevant)} queries have no "
                f"candidate (first: {_quoted(sorted(without))}); kept, they score 0 on every figure, as in mteb"
            )
    return notes, bool(outside)


def _check_subqueries(task: Any, part: Part, relevant: Mapping[str, Mapping[str, int]]) -> None:
    """mteb's max_over_subqueries judges a group of subqueries (ids alike but for their last
    '_'-separated part) by one of them, as their judgments are alike: refused when they are not."""
    if task.ignore_identical_ids:
        raise MtebError("ignore_identical_ids with subqueries is not supported", task=part.name)
    judged: dict[str, Mapping[str, int]] = {}
    for query, docs in relevant.items():
        group = "_".join(query.split("_")[:-1])
        if judged.setdefault(group, docs) != docs:
            raise MtebError(
                f"the subqueries of {group!r} are judged differently (mteb's {SUBQUERIES} figures would "
                "depend on which of them its dictionary lists last)",
                file=data_file(task, part, "qrels"),
                task=part.name,
            )


def write_retrieval(task: Any, part: Part, folder: Path) -> dict[str, Any]:
    data = _subset(task, part)[part.split]
    judged = {str(q): {str(d): int(g) for d, g in docs.items()} for q, docs in data["relevant_docs"].items()}
    relevant = {q: docs for q, docs in judged.items() if docs}  # mteb drops the others
    queries = data["queries"]
    if "instruction" in queries.column_names:
        raise MtebError("queries with instructions are not scored as retrieval", task=part.name)
    if getattr(task, "skip_first_result", False):
        raise MtebError("skip_first_result is not supported", task=part.name)
    corpus_ids = _write_corpus(task, part, data, folder)
    kept: dict[str, str] = {}
    duplicate_queries = []
    for query, text in zip(map(str, queries["id"]), list(queries["text"]), strict=True):
        if query in relevant:
            if not isinstance(text, str):
                raise MtebError("queries that are not one text (conversations) are not supported", task=part.name)
            if query in kept:
                if text != kept[query]:
                    raise MtebError(
                        f"query id {query!r} is listed with two texts (mteb would merge their results under the id)",
                        file=data_file(task, part, "queries"),
                        task=part.name,
                    )
                duplicate_queries.append(query)
                continue
            kept[query] = text
    _jsonl(folder / "queries.jsonl", ({"_id": q, "text": t} for q, t in kept.items()))
    unknown_queries = {q: len(docs) for q, docs in relevant.items() if q not in kept}
    relevant = {q: docs for q, docs in relevant.items() if q in kept}  # mteb's results have none for the others
    _write_qrels(relevant, part, folder)
    files = {"corpus": "corpus.jsonl", "queries": "queries.jsonl", "qrels": "qrels.tsv"}
    top_ranked = data.get("top_ranked")  # mteb's, its ids strings (MindSmallReranking's: 97 million of them)
    candidates = None
    if top_ranked is not None:
        candidates = (
            top_ranked if all(isinstance(q, str) for q in top_ranked) else {str(q): d for q, d in top_ranked.items()}
        )
        _write_candidates(candidates, relevant, part, folder)
        files["candidates"] = "candidates.tsv"
    empty = [q for q, text in kept.items() if not text.strip()]
    notes, outside = _retrieval_notes(
        task, part, relevant, unknown_queries, corpus_ids, list(dict.fromkeys(duplicate_queries)), candidates, empty
    )
    extra: dict[str, Any] = {"mteb_notes": notes}
    if outside:
        extra["missing_documents"] = "count"
    if str(task.metadata.main_score).startswith(SUBQUERIES + "_"):
        _check_subqueries(task, part, relevant)
        extra["subqueries"] = "max"
    if top_ranked is None:
        extra.update(depth=max(task.k_values), ignore_identical_ids=bool(task.ignore_identical_ids))
    elif task.ignore_identical_ids:
        raise MtebError("ignore_identical_ids on a reranking task is not supported", task=part.name)
    return {"kind": "reranking" if "candidates" in files else "retrieval", "files": files, **extra}


def write_sts(task: Any, part: Part, folder: Path) -> dict[str, Any]:
    first, second = task.column_names
    if not isinstance(first, str) or not isinstance(second, str):
        raise MtebError("STS columns other than two text columns are not supported", task=part.name)
    data = _subset(task, part)[part.split]
    _jsonl(
        folder / "pairs.jsonl",
        ({"sentence1": r[first], "sentence2": r[second], "score": float(r["score"])} for r in data),
    )
    return {"kind": "sts", "files": {part.split: "pairs.jsonl"}, "cosine": "mteb"}


def _label(value: Any) -> Any:
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) else str(value)


def write_classification(task: Any, part: Part, folder: Path) -> dict[str, Any]:
    from sklearn.linear_model import LogisticRegression

    model = task.evaluator_model
    max_iter = model.get_params().get("max_iter") if isinstance(model, LogisticRegression) else None
    reference = LogisticRegression(max_iter=max_iter).get_params() if max_iter is not None else None
    ours = dict(model.get_params(), random_state=None) if reference is not None else None
    if max_iter is None or reference is None or ours != dict(reference, random_state=None):
        raise MtebError(f"the classifier {model!r} is not embeval's LogisticRegression", task=part.name)
    text, label = _column(task, "input_column_name", part), task.label_column_name
    subset = _subset(task, part)
    keys = {"samples_per_label": int(task.samples_per_label), "max_iter": int(max_iter), "seed": int(task.seed)}
    if task.is_cross_validation:  # k folds of the evaluation split, which must be the train split (as in mteb)
        if task.train_split != part.split:
            raise MtebError(
                f"cross-validated classification of split {part.split} with another train split "
                f"({task.train_split}): mteb refuses it too",
                task=part.name,
            )
        _jsonl(folder / "all.jsonl", ({"text": r[text], "label": _label(r[label])} for r in subset[part.split]))
        keys["n_splits"] = int(task.n_splits)
        return {"kind": "classification", "protocol": "mteb-kfold", "files": {"all": "all.jsonl"}, **keys}
    for key, split in (("train", task.train_split), ("test", part.split)):
        _jsonl(folder / f"{key}.jsonl", ({"text": r[text], "label": _label(r[label])} for r in subset[split]))
    keys["n_experiments"] = int(task.n_experiments)
    return {
        "kind": "classification",
        "protocol": "mteb",
        "files": {"train": "train.jsonl", "test": "test.jsonl"},
        **keys,
    }


def write_pairs(task: Any, part: Part, folder: Path) -> dict[str, Any]:
    first, second = task.input1_column_name, task.input2_column_name
    if not isinstance(first, str) or not isinstance(second, str):
        raise MtebError("pair columns other than two text columns are not supported", task=part.name)
    data = _subset(task, part)[part.split]
    rows = list(data)
    if rows and isinstance(rows[0][first], list):  # mteb's one-row layout: lists of pairs
        rows = [
            {first: a, second: b, task.label_column_name: y}
            for r in rows
            for a, b, y in zip(r[first], r[second], r[task.label_column_name], strict=True)
        ]
    _jsonl(
        folder / "pairs.jsonl",
        ({"sentence1": r[first], "sentence2": r[second], "label": int(r[task.label_column_name])} for r in rows),
    )
    return {"kind": "pair-classification", "protocol": "mteb", "files": {"test": "pairs.jsonl"}}


def write_clustering(task: Any, part: Part, folder: Path) -> dict[str, Any]:
    from mteb.abstasks.clustering_legacy import AbsTaskClusteringLegacy

    text, label = _column(task, "input_column_name", part), task.label_column_name
    data = _subset(task, part)[part.split]
    if isinstance(task, AbsTaskClusteringLegacy):
        rows = (
            {"text": t, "label": _label(y), "set": f"set{i}"}
            for i, r in enumerate(data)
            for t, y in zip(r[text], r[label], strict=True)
        )
        _jsonl(folder / "documents.jsonl", rows)
        return {"kind": "clustering", "protocol": "sets", "files": {"test": "documents.jsonl"}, "seed": int(task.seed)}

    def level(value: Any) -> Any:
        return [_label(v) for v in value] if isinstance(value, list) else _label(value)

    _jsonl(folder / "documents.jsonl", ({"text": r[text], "label": level(r[label])} for r in data))
    keys: dict[str, Any] = {
        "documents_per_experiment": int(task.max_documents_per_cluster),
        "n_experiments": int(task.n_clusters),
        "batch_size": int(task.k_mean_batch_size),
        "seed": int(task.seed),
    }
    if task.max_document_to_embed is not None:
        keys["max_documents"] = int(task.max_document_to_embed)
    elif task.max_fraction_of_documents_to_embed is not None:
        keys["max_fraction"] = float(task.max_fraction_of_documents_to_embed)
    else:
        keys["embed_all"] = True
    if task.max_depth is not None:
        keys["max_depth"] = int(task.max_depth)
    return {"kind": "clustering", "protocol": "bootstrap", "files": {"test": "documents.jsonl"}, **keys}


def write_summarization(task: Any, part: Part, folder: Path) -> dict[str, Any]:
    from mteb._evaluators import SummarizationEvaluator

    data = _subset(task, part)[part.split]
    human, machine = task.human_summaries_column_name, task.machine_summaries_column_name
    relevance = task.relevancy_column_name
    _jsonl(
        folder / "summaries.jsonl",
        (
            {
                "human_summaries": r[human],
                "machine_summaries": r[machine],
                "relevance": [float(x) for x in r[relevance]],
            }
            for r in data
        ),
    )
    protocol = "mteb" if task.evaluator is SummarizationEvaluator else "summeval"
    return {"kind": "summarization", "protocol": protocol, "files": {"test": "summaries.jsonl"}}


def write_bitext(task: Any, part: Part, folder: Path) -> dict[str, Any]:
    if task.parallel_subsets:
        return _write_parallel(task, part, folder)
    data = _subset(task, part)[part.split]
    _jsonl(folder / "pairs.jsonl", ({"sentence1": r["sentence1"], "sentence2": r["sentence2"]} for r in data))
    return {"kind": "bitext-mining", "files": {"test": "pairs.jsonl"}}


def _write_parallel(task: Any, part: Part, folder: Path) -> dict[str, Any]:
    """A split of parallel subsets: one row per sentence, a column per language its pairs match."""
    data = task.dataset[part.split]
    if "gold" in data.column_names:
        raise MtebError("parallel subsets with gold pairs of their own are not supported", task=part.name)
    pairs = [subset.split("-") for subset in task.hf_subsets]
    languages = list(dict.fromkeys(language for pair in pairs for language in pair))
    missing = [language for language in languages if language not in data.column_names]
    if any(len(pair) != 2 for pair in pairs) or missing:
        raise MtebError(
            "parallel subsets must name two columns 'A-B' of the split"
            + (f" (no column {missing[0]})" if missing else ""),
            task=part.name,
        )
    columns = [list(data[language]) for language in languages]  # whole columns: far faster than rows
    _jsonl(folder / "sentences.jsonl", (dict(zip(languages, row, strict=True)) for row in zip(*columns, strict=True)))
    mapping = task.metadata.hf_subsets_to_langscripts
    return {
        "kind": "bitext-mining",
        "protocol": "parallel",
        "files": {"test": "sentences.jsonl"},
        "pairs": list(task.hf_subsets),
        "mteb": {"subset_languages": {subset: list(mapping.get(subset, [])) for subset in task.hf_subsets}},
    }


def _sklearn_model(task: Any, part: Part, model_class: Any, keep: tuple[str, ...] = ()) -> Any:
    """The task's evaluator_model, checked to be `model_class` with scikit-learn's defaults (but `keep`)."""
    model = task.evaluator_model
    ours = model.get_params() if isinstance(model, model_class) else None
    reference: dict[str, Any] = model_class().get_params()
    if ours is None or {k: v for k, v in ours.items() if k not in keep} != {
        k: v for k, v in reference.items() if k not in keep
    }:
        raise MtebError(f"the evaluator model {model!r} is not embeval's {model_class.__name__}", task=part.name)
    return model


def _mteb_attributes(kind: str) -> dict[str, str]:
    """A kind's mteb attributes and the task-file keys that take them (its module's MTEB_ATTRIBUTES)."""
    import importlib

    from embeval.tasks.catalog import KINDS

    return dict(importlib.import_module(KINDS[kind]).MTEB_ATTRIBUTES)


def _train_and_test(task: Any, part: Part, folder: Path, key: str, value: Callable[[Any], Any]) -> dict[str, str]:
    """The train split (task.train_split) and the part's split as JSON lines of text and `key`."""
    text, label = _column(task, "input_column_name", part), task.label_column_name
    subset = _subset(task, part)
    for name, split in (("train", task.train_split), ("test", part.split)):
        rows = subset[split]
        _jsonl(
            folder / f"{name}.jsonl",
            ({"text": t, key: value(y)} for t, y in zip(list(rows[text]), list(rows[label]), strict=True)),
        )
    return {"train": "train.jsonl", "test": "test.jsonl"}


def write_regression(task: Any, part: Part, folder: Path) -> dict[str, Any]:
    from sklearn.linear_model import LinearRegression

    _sklearn_model(task, part, LinearRegression)
    files = _train_and_test(task, part, folder, "value", float)
    keys = {key: int(getattr(task, attribute)) for attribute, key in _mteb_attributes("regression").items()}
    return {"kind": "regression", "files": files, **keys}


def write_multilabel(task: Any, part: Part, folder: Path) -> dict[str, Any]:
    from sklearn.neighbors import KNeighborsClassifier

    model = _sklearn_model(task, part, KNeighborsClassifier, keep=("n_neighbors",))
    files = _train_and_test(task, part, folder, "labels", lambda labels: [_label(y) for y in labels])
    keys: dict[str, Any] = {}
    for attribute, key in _mteb_attributes("multilabel-classification").items():
        value = model.n_neighbors if attribute == "n_neighbors" else getattr(task, attribute)
        keys[key] = 0 if value is None else int(value)  # max_eval_samples None: the whole split (0)
    return {"kind": "multilabel-classification", "files": files, **keys}


def _changed_judgments(task: Any, part: Part) -> dict[str, list[str]]:
    """Each query's documents whose relevance the changed instruction alters, as the task's own
    task_specific_scores reads them (caught where it hands them to mteb's evaluate_p_mrr_change)."""
    import sys

    module = sys.modules[type(task).__module__]
    real = getattr(module, "evaluate_p_mrr_change", None)
    if real is None:
        raise MtebError("its scores are not FollowIR's p-MRR", task=part.name)
    caught: list[Any] = []

    def catch(qrels: Any, results: Any, changed: Any, *args: Any, **kwargs: Any) -> dict[str, float]:
        caught.append(changed)
        return {}

    setattr(module, "evaluate_p_mrr_change", catch)  # noqa: B010
    try:
        with _scratch_cache() as logged:
            try:
                task.task_specific_scores({}, {}, {}, part.split, part.subset)
            except EmbevalError:
                raise
            except Exception as err:  # datasets' own errors: one line
                raise loading_error(err, logged, None, part.name, "its changed judgments") from None
    finally:
        setattr(module, "evaluate_p_mrr_change", real)  # noqa: B010
    if len(caught) != 1 or not isinstance(caught[0], Mapping):
        raise MtebError("its changed judgments could not be read", task=part.name)
    return {str(q): [str(d) for d in docs] for q, docs in caught[0].items()}


def write_instruction_reranking(task: Any, part: Part, folder: Path) -> dict[str, Any]:
    data = _subset(task, part)[part.split]
    queries = data["queries"]
    if "instruction" not in queries.column_names or data.get("top_ranked") is None:
        raise MtebError("FollowIR's protocol needs queries with instructions and candidates", task=part.name)
    changed = _changed_judgments(task, part)
    _write_corpus(task, part, data, folder)
    ids = [str(q) for q in queries["id"]]
    texts, instructions = list(queries["text"]), list(queries["instruction"])
    if not all(isinstance(t, str) and isinstance(i, str) for t, i in zip(texts, instructions, strict=True)):
        raise MtebError("queries and instructions that are not one text each are not supported", task=part.name)
    _jsonl(folder / "queries.jsonl", ({"_id": q, "text": t} for q, t in zip(ids, texts, strict=True)))
    _jsonl(
        folder / "instructions.jsonl",
        ({"query-id": q, "instruction": i} for q, i in zip(ids, instructions, strict=True)),
    )
    _jsonl(folder / "changed.jsonl", ({"query-id": q, "corpus-ids": docs} for q, docs in changed.items()))
    _write_qrels({str(q): docs for q, docs in data["relevant_docs"].items()}, part, folder)
    _write_candidates(data["top_ranked"], ids, part, folder)
    files = {
        "corpus": "corpus.jsonl",
        "queries": "queries.jsonl",
        "qrels": "qrels.tsv",
        "candidates": "candidates.tsv",
        "instructions": "instructions.jsonl",
        "changed": "changed.jsonl",
    }
    return {"kind": "instruction-reranking", "files": files}


# What IFIR's and InstructIR's task_specific_scores give for made-up per-query figures (query id:
# pytrec_eval's nDCG@20, nDCG@10): their protocols' figures of these, worked out by hand, name the protocol.
PROBE = {"a_v1": (0.1, 0.5), "a_v2": (0.2, 0.6), "b_v3": (0.4, 0.7), "b_v1": (0.3, 0.05), "c_x": (0.9, 0.8)}
PROBED = {
    "instructed": {},
    "levels": {"level_scores": {"level_1": 0.2, "level_2": 0.2, "level_3": 0.4}},  # nDCG@20 means per "vN"
    "robustness": {"robustness_at_10": 0.45},  # groups a, b, c: lowest nDCG@10 0.5, 0.05, 0.8
}


def _instruction_protocol(task: Any, part: Part) -> str:
    """The protocol of an InstructionRetrieval task's own scores, found by giving its
    task_specific_scores the PROBE's figures (it reads nothing else of the data)."""
    import math

    scores = {q: {"ndcg_cut_20": a, "ndcg_cut_10": b} for q, (a, b) in PROBE.items()}
    qrels = {q: {"d": 1} for q in PROBE}
    try:
        found = task.task_specific_scores(scores, qrels, {q: {"d": 1.0} for q in PROBE}, part.split, part.subset)
    except Exception as err:  # a figure the probe does not give, or another shape: not a protocol embeval has
        found = {"error": f"{type(err).__name__}: {err}"}

    def same(a: Any, b: Any) -> bool:
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
        return isinstance(a, float) and isinstance(b, float) and math.isclose(a, b, abs_tol=1e-12)

    for protocol, expected in PROBED.items():
        if same(dict(found), expected):
            return protocol
    raise MtebError(
        f"its task_specific_scores give {sorted(found)}: not IFIR's levels, InstructIR's robustness@10 or none",
        task=part.name,
    )


def write_instruction_retrieval(task: Any, part: Part, folder: Path) -> dict[str, Any]:
    """IFIR's and InstructIR's tasks: retrieval of queries joined with their instructions, and the
    task's own figures (embeval's instruction-retrieval protocols levels, robustness, instructed)."""
    protocol = _instruction_protocol(task, part)
    data = _subset(task, part)[part.split]
    if data.get("top_ranked") is not None or getattr(task, "skip_first_result", False):
        raise MtebError("instruction retrieval with candidates or skip_first_result is not supported", task=part.name)
    judged = {str(q): {str(d): int(g) for d, g in docs.items()} for q, docs in data["relevant_docs"].items()}
    relevant = {q: docs for q, docs in judged.items() if docs}  # mteb drops the others
    queries = data["queries"]
    ids, texts = [str(q) for q in queries["id"]], list(queries["text"])
    instructions = list(queries["instruction"]) if "instruction" in queries.column_names else [None] * len(ids)
    kept = [i for i, query in enumerate(ids) if query in relevant]
    if not all(isinstance(texts[i], str) and isinstance(instructions[i], str) for i in kept):  # mteb needs them too
        raise MtebError("queries without an instruction, or not one text each, are not supported", task=part.name)
    corpus_ids = _write_corpus(task, part, data, folder)
    _jsonl(folder / "queries.jsonl", ({"_id": ids[i], "text": texts[i]} for i in kept))
    _jsonl(folder / "instructions.jsonl", ({"query-id": ids[i], "instruction": instructions[i]} for i in kept))
    listed = set(ids)
    unknown_queries = {q: len(docs) for q, docs in relevant.items() if q not in listed}
    relevant = {q: docs for q, docs in relevant.items() if q in listed}  # mteb's results have none for the others
    _write_qrels(relevant, part, folder)
    notes, outside = _retrieval_notes(task, part, relevant, unknown_queries, corpus_ids, [], None)
    files = {"corpus": "corpus.jsonl", "queries": "queries.jsonl", "qrels": "qrels.tsv"}
    extra: dict[str, Any] = {"mteb_notes": notes}
    if outside:
        extra["missing_documents"] = "count"
    return {
        "kind": "instruction-retrieval",
        "protocol": protocol,
        "files": {**files, "instructions": "instructions.jsonl"},
        "depth": max(task.k_values),
        "ignore_identical_ids": bool(task.ignore_identical_ids),
        **extra,
    }


# mteb's type -> the writer of its files (a type not here is one embeval does not score).
TYPES: dict[str, Writer] = {
    "Retrieval": write_retrieval,
    "Reranking": write_retrieval,
    "STS": write_sts,
    "Classification": write_classification,
    "PairClassification": write_pairs,
    "Clustering": write_clustering,
    "Summarization": write_summarization,
    "BitextMining": write_bitext,
    "MultilabelClassification": write_multilabel,
    "Regression": write_regression,
    "InstructionRetrieval": write_instruction_retrieval,
    "InstructionReranking": write_instruction_reranking,
    "Any2AnyRetrieval": write_retrieval,  # its text-only tasks (WebQAT2TRetrieval): retrieval
}
# Settings of a supported type that embeval does not follow yet: (attribute, what it means).
LIMITS = (("skip_first_result", "retrieval skipping each query's first result"),)
# mteb's main score -> the kind's figure, where their names differ.
FIGURE_OF = {"sts": {"cosine_spearman": "all.spearman.pooled", "cosine_pearson": "all.pearson.pooled"}}
SUBQUERIES = "max_over_subqueries"  # mteb's prefix of the figures of queries merged with their subqueries


def figure_of(kind: str, main_score: str) -> str:
    """The kind's figure of mteb's main score (max_over_subqueries_NAME: max_over_subqueries.NAME)."""
    if main_score.startswith(SUBQUERIES + "_"):
        return f"{SUBQUERIES}.{main_score.removeprefix(SUBQUERIES + '_')}"
    return FIGURE_OF.get(kind, {}).get(main_score, main_score)


def unsupported(task: Any) -> str | None:
    """Why a task cannot be scored (None: it can)."""
    meta = task.metadata
    if list(meta.modalities) != ["text"]:
        return f"{meta.name} ({meta.type}, {'+'.join(meta.modalities)}): not text"
    if meta.type not in TYPES:
        return f"{meta.name} ({meta.type}): a type embeval does not score"
    if meta.type == "InstructionReranking" and meta.main_score != "p-MRR":
        return f"{meta.name} ({meta.type}): main score {meta.main_score}, not FollowIR's p-MRR; not scored"
    for attribute, what in LIMITS:
        if getattr(task, attribute, False):
            return f"{meta.name} ({meta.type}): {what}, not scored yet"
    return None


def safe_name(text: str) -> str:
    """A name that can be a task name and a file name: characters other than letters, digits, '_'
    and '-' become '_'; a name not starting with a letter gets the prefix 'mteb_'."""
    name = SAFE.sub("_", text)
    return name if name[:1].isalpha() and name.isascii() else f"mteb_{name}"


PARALLEL = "parallel"  # the subset of a part holding every language pair of a task of parallel subsets


def parts(task: Any) -> list[Part]:
    """A task's (subset, split) parts; a task of parallel subsets (its language pairs are columns of
    one split, mteb's parallel_subsets): one part per split, holding every pair."""
    subsets = [PARALLEL] if getattr(task, "parallel_subsets", False) else list(task.hf_subsets) or ["default"]
    splits = list(task.eval_splits)
    base = safe_name(task.metadata.name)
    single = len(subsets) * len(splits) == 1
    return [
        Part(task, subset, split, base if single else f"{base}__{safe_name(subset)}__{safe_name(split)}")
        for subset in subsets
        for split in splits
    ]


def languages(task: Any, subset: str) -> list[str]:
    """A subset's languages (a part of parallel subsets, or an unknown subset: every language, once)."""
    mapping = task.metadata.hf_subsets_to_langscripts
    return list(mapping.get(subset) or dict.fromkeys(lang for langs in mapping.values() for lang in langs))


def part_slot(part: Part, stamp: str | None) -> Slot:
    """Where a (subset, split)'s files are cached (embeval.tasks.mteb_cache), for files written from
    `stamp`."""
    meta = part.task.metadata
    revision = str(meta.dataset.get("revision") or "none")
    relative = (safe_name(meta.name), safe_name(revision), safe_name(part.subset), safe_name(part.split))
    return Slot(relative, stamp, part.name)


def copy_files(task: Any, located: Located, allow_outside: bool = False) -> list[tuple[str, int, int]]:
    """(path, size, modification time) of every file of a dataset copy but its .cache folders,
    links followed. A file that is not a regular file (a FIFO, a device, a dangling link) or, unless
    allow_outside, that leads out of the copies' folder is one line naming it, before mteb reads it."""
    name = task.metadata.name
    found: list[tuple[str, int, int]] = []
    seen: set[tuple[int, int]] = set()
    pending = [located.folder]
    while pending:
        folder = pending.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as err:
            raise MtebError(f"cannot list: {err.strerror}", file=folder, task=name)
        for entry in entries:
            path = Path(entry.path)
            if entry.name == ".cache":
                continue
            if entry.is_symlink() and located.root is not None:
                confined(path, located.root, allow_outside, name)
            try:
                info = path.stat()
            except FileNotFoundError:
                raise MtebError("a symbolic link to a file that does not exist", file=path, task=name)
            except OSError as err:
                raise MtebError(f"cannot read: {err.strerror}", file=path, task=name)
            if stat.S_ISDIR(info.st_mode):
                if (info.st_dev, info.st_ino) not in seen:  # a folder linked twice (or a loop): once
                    seen.add((info.st_dev, info.st_ino))
                    pending.append(path)
            elif stat.S_ISREG(info.st_mode):
                found.append((path.relative_to(located.folder).as_posix(), info.st_size, info.st_mtime_ns))
            else:
                raise MtebError("not a regular file (a FIFO, device or socket)", file=path, task=name)
    return sorted(found)


WRITTEN_AS = 2  # the writers' version: parts written by an earlier one are written again (2: data notes)


def copy_stamp(task: Any, located: Located | None, allow_outside: bool = False) -> str | None:
    """A fingerprint of what a task's parts are written from: mteb's version, the task's facts and
    every file of the local copy (path, size, modification time; see copy_files). None: not from a
    copy."""
    if located is None:
        return None
    import hashlib
    import importlib.metadata

    facts = [
        WRITTEN_AS,
        importlib.metadata.version("mteb"),
        str(located.folder.resolve()),
        task.metadata.name,
        dict(task.metadata.dataset),
        list(task.hf_subsets),
        list(task.eval_splits),
        copy_files(task, located, allow_outside),
    ]
    return hashlib.sha256(json.dumps(facts, default=str).encode()).hexdigest()


def part_spec(
    part: Part,
    benchmarks: Sequence[str],
    mismatch: str | None,
    dataset: str,
    stamp: str | None = None,
    unverified: str | None = None,
    written: tuple[Path, dict[str, Any]] | None = None,
    scored_revision: str | None = None,
    allow_outside: bool = False,
) -> TaskSpec:
    """Write one (subset, split)'s files, from the data loaded from the copy `stamp` fingerprints
    (unless `written`: (the folder, the declaration) written from it before), and read its declaration
    (allow_outside: the copy was read with --allow-paths-outside, which its results record)."""
    task, meta = part.task, part.task.metadata
    revision = str(meta.dataset.get("revision") or "")
    if written is None:
        writer = TYPES[meta.type]
        written = part_slot(part, stamp).store(lambda folder: writer(task, part, folder))
    folder, declaration = written
    figure = figure_of(declaration["kind"], meta.main_score)
    notes = list(declaration.get("mteb_notes", ()))  # what mteb does silently with the data, said once a run
    table: dict[str, Any] = {
        "name": part.name,
        "short_name": part.name,
        **{key: value for key, value in declaration.items() if key not in ("mteb", "mteb_notes")},
        "figure": figure,
        "description": f"mteb {meta.name}, subset {part.subset}, split {part.split}",
        "mteb": {
            "name": meta.name,
            "dataset": dataset,
            "revision": revision,
            "subset": part.subset,
            "split": part.split,
            "languages": languages(task, part.subset),
            "type": meta.type,
            "main_score": meta.main_score,
            "benchmarks": list(benchmarks),
            "parts": len(parts(task)),
            **declaration.get("mteb", {}),  # the writer's own facts (a parallel part's subsets' languages)
        },
    }
    if mismatch:
        table["mteb"]["revision_mismatch"] = mismatch
        if scored_revision:
            table["mteb"]["revision_scored"] = scored_revision  # the copy's, written by export-mteb
    if unverified:
        table["mteb"]["revision_unverified"] = unverified
    if notes:
        table["mteb"]["notes"] = notes
    source = f"{SOURCE} {meta.name}"
    try:
        spec = read_spec(table, source, str(folder), allow_outside)
    except EmbevalError as err:
        raise MtebError(f"cannot be scored: {err}", task=part.name) from None
    return spec


def load(task: Any, located: Located | None) -> None:
    """Load a task's data with mteb's own code, from the local copy (None: the task loads itself,
    as mteb's mock tasks do)."""
    if task.data_loaded:
        return
    if located is not None:
        meta = task.metadata.model_copy(deep=True)
        meta.dataset["path"] = str(located.folder)
        task.metadata = meta  # this task object only: mteb's class keeps its own
    with _scratch_cache() as logged:
        try:
            task.load_data()
            if hasattr(task, "convert_v1_dataset_format_to_v2"):
                task.convert_v1_dataset_format_to_v2(num_proc=None)
        except EmbevalError:
            raise
        except Exception as err:  # mteb's and datasets' own errors: one line, naming the file
            raise loading_error(err, logged, located, task.metadata.name, "its data") from None


def loading_error(err: BaseException, logged: list[str], located: Located | None, task: str, what: str) -> MtebError:
    """One line for an error of mteb's or datasets' code loading a copy: the file it names (in the
    error or in what datasets logged) when that is a file of the copy, else the copy's folder."""
    chain: list[BaseException] = []
    cause: BaseException | None = err
    while cause is not None and len(chain) < 8:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    texts = [str(c) for c in chain] + logged
    file: object = located.folder if located is not None else OPTION
    if located is not None:
        prefixes = "|".join(re.escape(str(f)) for f in {located.folder, located.folder.absolute()})
        pattern = re.compile(f"(?:{prefixes})" + r"/[^'\"\s,\]\)]+")
        named = [m.group() for text in texts for m in pattern.finditer(text)]
        file = next((n for n in named if Path(n).is_file()), file)
    said = [f"{type(c).__name__}: {' '.join(str(c).split())}" for c in (chain[0], chain[-1])]
    text = said[0] if said[0] == said[1] else f"{said[0]} ({said[1]})"  # the error and what caused it
    text = text if len(text) <= 400 else text[:400] + "..."
    return MtebError(f"mteb could not load {what}: {text}", file=file, task=task)


_SCRATCH: list[Any] = []


@contextmanager
def _scratch_cache() -> Iterator[list[str]]:
    """datasets' cache in a folder of this load's own: datasets' cache of a local folder does not
    follow the folder's content, so tables are built afresh each time (the folders are removed by
    drop_scratch once the parts are written; the loaded tables stay mapped). What datasets logs
    meanwhile is kept, not printed (the list yielded): an error says it in one line."""
    import tempfile

    import datasets

    log = logging.getLogger("datasets")
    logged: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            logged.append(record.getMessage())

    saved, handlers, propagate = datasets.config.HF_DATASETS_CACHE, log.handlers[:], log.propagate
    scratch = tempfile.TemporaryDirectory(prefix="embeval-mteb-", ignore_cleanup_errors=True)
    _SCRATCH.append(scratch)
    datasets.config.HF_DATASETS_CACHE = Path(scratch.name)
    log.handlers, log.propagate = [Keep()], False
    try:
        yield logged
    finally:
        datasets.config.HF_DATASETS_CACHE = saved
        log.handlers, log.propagate = handlers, propagate


def drop_scratch() -> None:
    """Remove datasets' scratch folders of the loads so far."""
    while _SCRATCH:
        _SCRATCH.pop().cleanup()


def task_specs(
    requested: Sequence[Requested],
    data_dir: str | Path | None = None,
    allow_revision_mismatch: bool = False,
    skip_unsupported: bool = False,
    offline_copy: bool = True,
    allow_outside: bool = False,
) -> tuple[list[TaskSpec], list[str]]:
    """(the specs of every (subset, split) of the tasks, the tasks left out as unsupported).
    Every dataset is located and its files checked before any is loaded (allow_outside: they may lead
    out of data_dir); offline_copy False: the tasks load themselves (mteb's mock tasks)."""
    refused = [why for r in requested if (why := unsupported(r.task))]
    if refused and (not skip_unsupported or len(refused) == len(requested)):
        hint = "" if skip_unsupported else "; --skip-unsupported scores the others"
        raise MtebError(f"cannot score: {'; '.join(refused)}{hint}", file=OPTION)
    chosen = [r for r in requested if not unsupported(r.task)]
    located: dict[str, Located | None] = {}
    mismatches: dict[str, str] = {}
    unverified: dict[str, str] = {}
    copies = locate_all([r.task for r in chosen], data_dir, allow_outside) if offline_copy else {}
    for r in chosen:
        meta = r.task.metadata
        if not offline_copy:
            located[meta.name] = None
            continue
        found = copies[meta.name]
        wanted = meta.dataset.get("revision")
        if found.recorded is not None and wanted and found.recorded != wanted:
            note = f"local copy at revision {found.recorded}, mteb evaluates {wanted}"
            if not allow_revision_mismatch:
                raise MtebError(
                    f"dataset {meta.dataset['path']}: {note} (--allow-revision-mismatch scores it anyway; "
                    f"or {fetch_command(meta.dataset['path'], wanted, data_dir)})",
                    task=meta.name,
                    file=OPTION,
                )
            mismatches[meta.name] = note
        elif found.recorded is None:
            unverified[meta.name] = (
                f"the local copy records no revision; mteb evaluates {wanted or 'none'}: not verified"
            )
            logging.getLogger("embeval").warning(
                f"{meta.name}: {found.folder} records no revision (not made by `{download_program()} download "
                f"--local-dir`?); mteb evaluates {wanted or 'none'}, not verified (recorded in the results)"
            )
        located[meta.name] = found
    checked_root()  # an unusable EMBEVAL_CACHE is one line before anything is read
    stamps = {r.task.metadata.name: copy_stamp(r.task, located[r.task.metadata.name], allow_outside) for r in chosen}
    specs: list[TaskSpec] = []
    names: dict[str, str] = {}
    try:
        for r in chosen:
            with _as_it_was(r.task):
                specs += _task_part_specs(r, located, stamps, mismatches, unverified, names, allow_outside)
    finally:
        drop_scratch()  # on SIGTERM and Ctrl-C too
    return specs, refused if skip_unsupported else []


@contextmanager
def _as_it_was(task: Any) -> Iterator[None]:
    """The task object as it was after the block: mteb's objects live as long as the process (a
    benchmark's are shared by every run in it), so a load's pointing of its metadata at the local copy,
    and the data it loaded, are undone once the parts are written: a second run in the same process
    finds the same stamp (the cache reused, the copy read again when changed) and no data held."""
    own = task.__dict__.get("metadata", _UNSET)
    loaded = task.data_loaded
    try:
        yield
    finally:
        if own is _UNSET:
            task.__dict__.pop("metadata", None)
        else:
            task.metadata = own
        if task.data_loaded and not loaded:
            try:
                task.dataset, task.data_loaded = None, False
            except AttributeError:  # a task whose loaded state is computed (mteb's aggregates): left as is
                pass


_UNSET = object()


def _task_part_specs(
    r: Requested,
    located: dict[str, Located | None],
    stamps: dict[str, str | None],
    mismatches: dict[str, str],
    unverified: dict[str, str],
    names: dict[str, str],
    allow_outside: bool,
) -> list[TaskSpec]:
    """The specs of one requested task's parts (task_specs, one task)."""
    specs: list[TaskSpec] = []
    meta = r.task.metadata
    dataset, stamp = str(meta.dataset["path"]), stamps[meta.name]
    slots = {part.name: part_slot(part, stamp) for part in parts(r.task)}
    written = {name: slot.reuse() for name, slot in slots.items()}
    if any(w is None for w in written.values()):  # else written from this very copy before: not loaded
        for name, slot in slots.items():
            if written[name] is None:
                slot.prepare()
        load(r.task, located[meta.name])
    copy = located[meta.name]
    for part in parts(r.task):
        if part.name in names:
            raise MtebError(f"two mteb tasks give the name {part.name} ({names[part.name]})", file=OPTION)
        names[part.name] = meta.name
        spec = part_spec(
            part,
            r.benchmarks,
            mismatches.get(meta.name),
            dataset,
            stamp,
            unverified.get(meta.name),
            written[part.name],
            allow_outside=allow_outside,
            scored_revision=copy.recorded if copy is not None and meta.name in mismatches else None,
        )
        for note in spec.mteb.notes if spec.mteb else ():
            logging.getLogger("embeval").warning(f"{part.name}: {note}")
        specs.append(spec)
    return specs


def describe(text: str, data_dir: str | Path | None = None, allow_outside: bool = False) -> list[str]:
    """Lines of `embeval tasks --mteb NAMES --no-load`: each task a --mteb value names, its type,
    benchmarks, subsets and splits, its dataset and revision, and its local copy or the command that
    fetches it; then how many copies are missing. Reads no data."""
    requested = resolve(text)
    width = max(len(r.task.metadata.name) for r in requested) + 2
    lines, absent = [], 0
    for r in requested:
        meta = r.task.metadata
        dataset, revision = meta.dataset["path"], meta.dataset.get("revision") or "main"
        shown = parts(r.task)
        subsets = list(dict.fromkeys(p.subset for p in shown))
        if subsets == [PARALLEL]:
            about = f"{len(r.task.hf_subsets)} language pairs of parallel subsets, "
        elif subsets == ["default"]:
            about = ""
        elif len(subsets) <= 3:
            about = f"subset{'s' if len(subsets) > 1 else ''} {', '.join(subsets)}, "
        else:
            about = f"{len(subsets)} subsets, "
        splits = ", ".join(dict.fromkeys(p.split for p in shown))
        head = f"{meta.name:<{width}}{meta.type:24s} {about}split {splits}"
        if r.benchmarks:
            head += f"; in {', '.join(r.benchmarks)}"
        why = unsupported(r.task)
        if why:
            lines.append(f"{head}\n{'':<{width}}not scored: {why.split(': ', 1)[-1]}")
            continue
        located = find(r.task, data_dir, allow_outside)
        if located is None:
            absent += 1
            where = f"missing; on a connected machine: {fetch_command(dataset, revision, data_dir)}"
        elif located.recorded not in (None, revision):
            where = f"{located.folder} (revision {located.recorded}, mteb evaluates {revision})"
        else:
            where = str(located.folder)
        lines.append(f"{head}\n{'':<{width}}{dataset}@{revision}: {where}")
    count = len(requested)
    lines.append(
        f"{count} task{'s' if count > 1 else ''}: "
        + (f"{absent} dataset{'s' if absent > 1 else ''} {_nowhere(data_dir)}" if absent else "every dataset found")
    )
    return lines


def specs_by_name(
    text: str,
    data_dir: str | Path | None = None,
    allow_revision_mismatch: bool = False,
    skip_unsupported: bool = False,
    allow_outside: bool = False,
) -> tuple[list[TaskSpec], list[str]]:
    """The specs of the tasks and benchmarks a --mteb value names (see task_specs)."""
    return task_specs(resolve(text), data_dir, allow_revision_mismatch, skip_unsupported, allow_outside=allow_outside)
