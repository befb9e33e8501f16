"""Copies of MTEB's datasets on disk, as `hf download ORG/NAME --repo-type dataset --local-dir
DIR/ORG/NAME` leaves them and mteb's own loaders read them: a README.md whose YAML names each
config's data files, the files as parquet, JSON lines or gzipped JSON lines, and the revision
recorded under .cache/huggingface/download. Used by bench/mteb_by_name.py (copies of each task's
real size, read from mteb's descriptive statistics) and by tests/test_mteb_acceptance.py (a few
hundred rows each, with real data's quirks).

Each task's copy is written in the layout its mteb class reads (the task object decides: its type,
its columns, whether its dataset_transform flattens sets of documents or renames `sent1`/`sent2`, its
subsets and splits); the texts come from a function the caller gives, so a test can use a small
vocabulary (many exact ties) and a bench distinct texts.

  write_copy(task, root, shape, texts, rng, form="parquet", ...) -> the copy's folder
  shape(task, scale, least)                                      -> sizes read from mteb's statistics
"""

from __future__ import annotations

import gzip
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

SEARCH = ("Retrieval", "Reranking")
FORMS = ("parquet", "jsonl", "jsonl.gz")
Texts = Callable[[int, str], list[str]]  # (how many, role) -> texts


# Sizes


def _stats_of(task: Any, split: str) -> dict:
    """The task's descriptive statistics of one split, of its benchmark subset when it has several."""
    found = task.metadata.descriptive_stats[split]
    by_subset = found.get("hf_subset_descriptive_stats") or {}
    return by_subset.get(task.hf_subsets[0], found)


def _scaled(n: float, scale: float, least: int) -> int:
    return max(least, int(round(n * scale)))


def shape(task: Any, scale: float = 1.0, least: int = 1) -> dict[str, Any]:
    """A task's sizes from mteb's descriptive statistics (of the evaluation split, after mteb's own
    sub-sampling), times `scale`, each at least `least` (and what its layout needs)."""
    kind = task.metadata.type
    split = task.eval_splits[0]
    s = _stats_of(task, split)
    if kind in SEARCH:
        relevant = s["relevant_docs_statistics"]
        queries = s.get("num_queries") or round(
            relevant["num_relevant_docs"] / relevant["average_relevant_docs_per_query"]
        )
        documents = s.get("num_documents") or s["num_samples"] - queries
        out = {
            "documents": _scaled(documents, scale, max(least, 20)),
            "queries": _scaled(queries, scale, max(1, least // 10)),
            "relevant": max(1, int(round(relevant["average_relevant_docs_per_query"]))),
            "missing": _scaled(relevant.get("num_missing_corpus_ids") or 0, scale, 0),
        }
        distinct = (s.get("queries_text_statistics") or {}).get("unique_texts")
        if distinct and queries and distinct < queries:  # queries sharing a text (MindSmallReranking's)
            out["distinct_queries"] = max(1, round(out["queries"] * distinct / queries))
        if s.get("top_ranked_statistics"):
            top = s["top_ranked_statistics"]
            out["candidates"] = max(out["relevant"] + 1, int(round(top["average_top_ranked_per_query"])))
        return out
    if kind == "Classification":
        labels = s["label_statistics"]["unique_labels"]
        train = _stats_of(task, task.train_split)["num_samples"]
        return {
            "labels": labels,
            "train": _scaled(train, scale, max(least, 8 * labels)),
            "test": _scaled(s["num_samples"], scale, max(least, 2 * labels)),
        }
    if kind == "Clustering":
        labels = s["labels_statistics"]["unique_labels"]
        documents = _scaled(s["num_samples"], scale, max(least, 4 * min(labels, 40)))
        if "train_test_split" in _transform_source(task):  # mteb samples its statistics' number of documents
            documents = max(documents, s["num_samples"] + s["num_samples"] // 10)
        return {"documents": documents, "labels": labels}
    if kind in ("PairClassification", "STS"):
        return {"pairs": _scaled(s["num_samples"], scale, least)}
    if kind == "Summarization":
        texts = _scaled(s["num_samples"], scale, max(2, least // 10))
        return {
            "texts": texts,
            "human": max(2, round(s["human_summaries_statistics"]["unique_texts"] / s["num_samples"])),
            "machine": max(2, round(s["machine_summaries_statistics"]["unique_texts"] / s["num_samples"])),
        }
    raise ValueError(f"{task.metadata.name}: type {kind} is not written by this module")


# The files


def write_snapshot(root: Path, dataset: str, revision: str | None, configs: dict, form: str = "parquet") -> Path:
    """DIR/ORG/NAME with configs {config: {split: rows or a pyarrow table}} in one form, a README.md naming them, and
    the revision as `hf download --local-dir` records it (none when `revision` is None)."""
    folder = Path(root) / dataset
    lines = ["---", "configs:"]
    for config, splits in configs.items():
        lines += [f"- config_name: {config}", "  data_files:"]
        for split, rows in splits.items():  # rows: a list of dicts, or a pyarrow table
            relative = f"data/{config}/{split}.{form}"
            path = folder / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            if form == "parquet":
                import pyarrow as pa
                import pyarrow.parquet as pq

                pq.write_table(rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(rows), path)
            else:
                rows = rows if isinstance(rows, list) else rows.to_pylist()
                data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
                path.write_bytes(gzip.compress(data, mtime=0) if form == "jsonl.gz" else data)
            lines += [f"  - split: {split}", f"    path: {relative}"]
    lines.append("---")
    (folder / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if revision is not None:
        record = folder / ".cache" / "huggingface" / "download" / "README.md.metadata"
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(f"{revision}\netag\n0\n", encoding="utf-8")
    return folder


def _transform_source(task: Any) -> str:
    """The source of the task class's own dataset_transform ('' when it has none)."""
    own = type(task).__dict__.get("dataset_transform")
    return inspect.getsource(own) if own is not None else ""


def _spread(rng: np.random.Generator, n: int, rows: int, width: int) -> np.ndarray:
    """(rows, width) distinct values of 0..n-1 in each row: a random start and stride, no row repeating one."""
    width = min(width, n)
    start = rng.integers(0, n, rows)
    stride = rng.integers(1, max(1, (n - 1) // max(1, width - 1)) + 1, rows) if width > 1 else np.ones(rows, int)
    return (start[:, None] + stride[:, None] * np.arange(width)) % n


def _retrieval(task: Any, size: dict, texts: Texts, rng: np.random.Generator, quirks: bool) -> dict:
    """corpus, queries, qrels (the "default" config) and, for reranking, top_ranked, as columns (a
    reranking task at its real size has a hundred million candidates); queries named like their own
    document when the task ignores identical ids (ArguAna's layout); a task scored over subqueries
    (MindSmallReranking) gets ids "GROUP_PART", a group's parts judged alike."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n_docs, n_queries = size["documents"], size["queries"]
    doc_ids = [f"d{i}" for i in range(n_docs)]
    titles = texts(n_docs, "title")
    corpus = {"_id": doc_ids, "title": [t if i % 3 == 0 else "" for i, t in enumerate(titles)]}
    corpus["text"] = texts(n_docs, "document")
    distinct = texts(size.get("distinct_queries", n_queries), "query")
    parts = 3 if str(task.metadata.main_score).startswith("max_over_subqueries_") else 1
    if task.ignore_identical_ids:
        names = [doc_ids[int(i)] for i in rng.choice(n_docs, n_queries, replace=False)]
    elif parts > 1:
        names = [f"g{q // parts}_{q % parts}" for q in range(n_queries)]
    else:
        names = [f"q{q}" for q in range(n_queries)]
    queries = {"_id": names, "text": [distinct[q % len(distinct)] for q in range(n_queries)]}
    per = min(size["relevant"], n_docs - 1)
    group = np.arange(n_queries) // parts
    judged = _spread(rng, n_docs, int(group[-1]) + 1, per)[group]  # (queries, per): a group's alike
    grades = rng.integers(1, 3, (int(group[-1]) + 1, per))[group]
    ids = pa.array(doc_ids)
    qrels = {
        "query-id": pc.take(pa.array(names), pa.array(np.repeat(np.arange(n_queries), per))),
        "corpus-id": pc.take(ids, pa.array(judged.ravel())),
        "score": pa.array(grades.ravel()),
    }
    missing = size.get("missing", 0) + (2 if quirks else 0)  # judgments naming documents not in the corpus
    extra = {
        "query-id": [names[i % n_queries] for i in range(missing)],
        "corpus-id": [f"missing-{i}" for i in range(missing)],
        "score": [1 + i % 2 for i in range(missing)],
    }
    if quirks:
        for key, value in (("_id", doc_ids[1]), ("title", corpus["title"][1]), ("text", corpus["text"][1])):
            corpus[key] = [*corpus[key], value]  # a document listed twice
        queries = {"_id": [*names, "unjudged"], "text": [*queries["text"], distinct[0]]}  # mteb leaves it out
        extra = {
            "query-id": [*extra["query-id"], names[0]],
            "corpus-id": [*extra["corpus-id"], doc_ids[int(judged[0, 0]) - 1]],
            "score": [*extra["score"], 0],
        }
    columns = pa.schema([("query-id", pa.string()), ("corpus-id", pa.string()), ("score", pa.int64())])
    table = pa.concat_tables([pa.table(qrels, schema=columns), pa.table(extra, schema=columns)])
    configs: dict = {
        "corpus": {"corpus": pa.table(corpus)},
        "queries": {"queries": pa.table(queries)},
        "default": {"test": table},
    }
    if "candidates" in size:  # the judged documents and others, each list without repeats
        width = min(n_docs, size["candidates"])
        others = _spread(rng, n_docs, n_queries, width)
        lists = np.concatenate([judged, others], axis=1)
        ordered = np.sort(lists, axis=1)
        fresh = np.ones(lists.shape, dtype=bool)
        fresh[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
        flat = ordered[fresh]
        counts = fresh.sum(axis=1)
        offsets = pa.array(np.r_[0, np.cumsum(counts)].astype(np.int64))
        values = pc.take(ids, pa.array(flat))
        candidates = pa.LargeListArray.from_arrays(offsets, values)
        configs["top_ranked"] = {"test": pa.table({"query-id": pa.array(names), "corpus-ids": candidates})}
    return configs


def _classification(task: Any, size: dict, texts: Texts, rng: np.random.Generator) -> dict:
    text, label = task.input_column_name, task.label_column_name
    splits = {task.train_split: size["train"], **dict.fromkeys(task.eval_splits, size["test"])}
    out = {}
    for split, n in splits.items():
        labels = np.r_[np.arange(size["labels"]), rng.integers(0, size["labels"], max(0, n - size["labels"]))]
        out[split] = [{text: t, label: int(y)} for t, y in zip(texts(n, split), rng.permutation(labels), strict=True)]
    return out


def _clustering(task: Any, size: dict, texts: Texts, rng: np.random.Generator) -> dict:
    """Sets of documents (rows of lists) when the task's transform flattens them, else one document a
    row; hierarchical labels ("main.sub") when it splits them."""
    source = _transform_source(task)
    text, label = task.input_column_name, task.label_column_name
    n, k = size["documents"], size["labels"]
    labels = [f"c{y}" for y in np.r_[np.arange(k), rng.integers(0, k, max(0, n - k))]]
    if "split_labels" in source:
        labels = [f"{y}.s{int(rng.integers(2))}" for y in labels]
    documents = texts(n, "document")
    if "chain.from_iterable" not in source:
        return {task.eval_splits[0]: [{text: t, label: y} for t, y in zip(documents, labels, strict=True)]}
    sets = max(1, min(10, n // (4 * k)))
    bounds = np.linspace(0, n, sets + 1).astype(int)
    order = rng.permutation(n)  # every set holds every label when n is large enough
    rows = []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        chosen = sorted(order[a:b], key=lambda i: labels[i])
        rows.append({text: [documents[i] for i in chosen], label: [labels[i] for i in chosen]})
    return {task.eval_splits[0]: rows}


def _pairs(task: Any, size: dict, texts: Texts, rng: np.random.Generator, one_row: bool) -> dict:
    renamed = '"sent1"' in _transform_source(task)
    first, second = ("sent1", "sent2") if renamed else (task.input1_column_name, task.input2_column_name)
    n = size["pairs"]
    a, b = texts(n, "sentence1"), texts(n, "sentence2")
    labels = [int(y) for y in rng.permutation(np.r_[[0, 1], rng.integers(0, 2, max(0, n - 2))])]
    if one_row:  # mteb's one-row layout: the whole split as lists in one row
        return {task.eval_splits[0]: [{first: a, second: b, task.label_column_name: labels}]}
    rows = [{first: x, second: y, task.label_column_name: z} for x, y, z in zip(a, b, labels, strict=True)]
    return {task.eval_splits[0]: rows}


def _sts(task: Any, size: dict, texts: Texts, rng: np.random.Generator) -> dict:
    first, second = task.column_names
    n = size["pairs"]
    scores = rng.uniform(task.min_score, task.max_score, n).round(2)
    rows = [
        {first: x, second: y, "score": float(s)}
        for x, y, s in zip(texts(n, "sentence1"), texts(n, "sentence2"), scores, strict=True)
    ]
    return {task.eval_splits[0]: rows}


def _summarization(task: Any, size: dict, texts: Texts, rng: np.random.Generator) -> dict:
    rows = []
    for text in texts(size["texts"], "text"):
        rows.append(
            {
                "text": text,
                task.human_summaries_column_name: texts(size["human"], "human"),
                task.machine_summaries_column_name: texts(size["machine"], "machine"),
                task.relevancy_column_name: [float(x) for x in rng.integers(1, 6, size["machine"])],
            }
        )
    return {task.eval_splits[0]: rows}


def write_copy(
    task: Any,
    root: Path,
    size: dict,
    texts: Texts,
    rng: np.random.Generator,
    form: str = "parquet",
    revision: bool = True,
    one_row: bool = False,
    quirks: bool = False,
) -> Path:
    """Write the copy of a task's dataset under root (root/ORG/NAME): its benchmark subsets (a config
    each, named as the subset, "default" when it has none; one "default" config with a "lang" column
    for a task of mteb's fast loading) and splits. revision: record mteb's
    revision (False: a copy that records none); one_row: pair classification in mteb's one-row
    layout; quirks: retrieval with real data's quirks (a document listed twice, a judgment of grade 0,
    judgments naming documents that are not in the corpus, a query without judgments)."""
    kind = task.metadata.type
    dataset, wanted = task.metadata.dataset["path"], task.metadata.dataset.get("revision")
    if kind in SEARCH:
        configs = _retrieval(task, size, texts, rng, quirks)
    else:
        write = {
            "Classification": lambda: _classification(task, size, texts, rng),
            "Clustering": lambda: _clustering(task, size, texts, rng),
            "PairClassification": lambda: _pairs(task, size, texts, rng, one_row),
            "STS": lambda: _sts(task, size, texts, rng),
            "Summarization": lambda: _summarization(task, size, texts, rng),
        }[kind]
        subsets = list(task.hf_subsets) or ["default"]
        configs = {subset: write() for subset in subsets}
        if getattr(task, "fast_loading", False) and task.metadata.is_multilingual:
            merged: dict[str, list] = {}  # mteb's fast loading: one "default" config, a "lang" column
            for subset, splits in configs.items():
                for split, rows in splits.items():
                    merged.setdefault(split, []).extend(dict(row, lang=subset) for row in rows)
            configs = {"default": merged}
    return write_snapshot(root, dataset, wanted if revision else None, configs, form)
