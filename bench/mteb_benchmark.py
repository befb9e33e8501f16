"""MTEB(eng, v2) synthesized: embeval's scoring against mteb's evaluation of the same vectors, task by task.

Every task of the benchmark (or those of --tasks) gets synthetic data of its real size, read from the
descriptive statistics mteb ships with the task object (its benchmark subset and evaluation split; the
train split for classification), times --scale, and random vectors of --dims dimensions. Both arms
score the same texts, labels and vectors, each arm in a fresh process that imports its own libraries
first (embeval's arms do not import mteb, whose half a gigabyte would slow every fork of the
process: a user's scoring process does not hold it), scores the first task once untimed (a
warm-up) and then the tasks one after the other, its peak
memory reset before each (Linux clear_refs):

embeval   `embeval.score` on the task written as a task file of the matching kind (the task's mteb
          settings: samples per label, experiments, clustering fractions, ignore_identical_ids, main
          score), its vectors in an HDF5 file, default settings (with the 95% intervals, --bootstrap)
embeval_no_intervals
          the same without the intervals (--bootstrap 0): what the intervals add, per task and type
mteb      the task's own mteb class (its settings and evaluator) with the same data held in memory,
          run by `mteb.evaluate` with an encoder that serves the same vectors (no model)

Per task and arm: seconds of the scoring call, the CPU seconds it took (every thread's: over the
seconds, how many cores it kept busy), the process's peak resident memory and the memory the
scoring added to it, and the main score (the arms' must be equal). Then totals per dimension,
over the retrieval and reranking tasks and per task type, and the ratios: mteb / embeval (with the
intervals) and embeval with / without the intervals, in seconds and in CPU seconds. mteb is never
given the network (HF_HUB_OFFLINE): its data is the synthetic data only.

  python bench/mteb_benchmark.py [--tasks A,B] [--scale 0.05] [--dims 384,1024]
                                 [--arms embeval,embeval_no_intervals,mteb]
                                 [--out bench/results/mteb_benchmark.json]
  python bench/mteb_benchmark.py --markdown RESULTS.json ...   # docs/mteb-benchmarks.md's tables of results
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import types
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

BENCHMARK = "MTEB(eng, v2)"
SEARCH_TYPES = ("Retrieval", "Reranking")
ARMS = ("embeval", "embeval_no_intervals", "mteb")


def benchmark_tasks(names=None):
    import mteb

    tasks = list(mteb.get_benchmark(BENCHMARK).tasks)
    if names:
        known = {t.metadata.name: t for t in tasks}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise SystemExit(f"not tasks of {BENCHMARK}: {', '.join(unknown)}")
        tasks = [known[n] for n in names]
    return tasks


def _stats_of(task, split):
    """The task's descriptive statistics of one split, of its benchmark subset when it has several."""
    found = task.metadata.descriptive_stats[split]
    by_subset = found.get("hf_subset_descriptive_stats") or {}
    return by_subset.get(task.hf_subsets[0], found)


def sizes(task):
    """The task's real sizes, from mteb's descriptive statistics (never typed here)."""
    kind = task.metadata.type
    split = task.eval_splits[0]
    s = _stats_of(task, split)
    if kind in SEARCH_TYPES:
        relevant = s["relevant_docs_statistics"]
        queries = s.get("num_queries") or round(
            relevant["num_relevant_docs"] / relevant["average_relevant_docs_per_query"]
        )
        documents = s.get("num_documents") or s["num_samples"] - queries
        out = {"documents": documents, "queries": queries, "relevant": relevant["average_relevant_docs_per_query"]}
        if s.get("top_ranked_statistics"):
            out["candidates"] = s["top_ranked_statistics"]["average_top_ranked_per_query"]
        return out
    if kind == "Classification":
        train = _stats_of(task, "train")
        return {
            "test": s["num_samples"],
            "train": train["num_samples"],
            "labels": s["label_statistics"]["unique_labels"],
        }
    if kind == "Clustering":
        return {"documents": s["num_samples"], "labels": s["labels_statistics"]["unique_labels"]}
    if kind == "PairClassification":  # and the share of positive pairs (1% in SprintDuplicateQuestions)
        counts = {label: c["count"] for label, c in s["labels_statistics"]["labels"].items()}
        return {"pairs": s["num_samples"], "positive": counts.get("1", 0) / sum(counts.values())}
    if kind == "STS":
        return {"pairs": s["num_samples"]}
    if kind == "Summarization":
        texts = s["num_samples"]
        return {
            "texts": texts,
            "human": max(2, round(s["human_summaries_statistics"]["unique_texts"] / texts)),
            "machine": max(2, round(s["machine_summaries_statistics"]["unique_texts"] / texts)),
        }
    raise SystemExit(f"{task.metadata.name}: type {kind} is not synthesized")


def scaled(n, scale, least):
    return max(least, int(round(n * scale)))


# Synthetic data: {"texts": [...], ...} with the texts of each role; vectors: one row per text.


def synthesize(task, scale, seed):
    kind = task.metadata.type
    real = sizes(task)
    rng = np.random.default_rng([seed, zlib.crc32(task.metadata.name.encode())])
    data = {"type": kind, "real": real}
    if kind in SEARCH_TYPES:
        n_docs = scaled(real["documents"], scale, 50)
        n_queries = scaled(real["queries"], scale, 10)
        docs = [f"d{i}" for i in range(n_docs)]
        queries = [f"q{i}" for i in range(n_queries)]
        per = max(1, int(round(real["relevant"])))
        qrels = [(q, docs[j], 1) for q in queries for j in rng.choice(n_docs, size=min(per, n_docs), replace=False)]
        data.update(documents=docs, queries=queries, qrels=qrels)
        if "candidates" in real:
            k = min(n_docs, max(per + 1, int(round(real["candidates"]))))
            relevant = {}
            for q, d, _ in qrels:
                relevant.setdefault(q, []).append(d)
            candidates = []
            for q in queries:
                chosen = list(relevant[q]) + [docs[j] for j in rng.choice(n_docs, size=k, replace=False)]
                candidates += [(q, d) for d in dict.fromkeys(chosen)][:k]
            data["candidates"] = candidates
        data["sizes"] = {"documents": n_docs, "queries": n_queries}
    elif kind == "Classification":
        labels = real["labels"]
        n_train = scaled(real["train"], scale, 8 * labels)
        n_test = scaled(real["test"], scale, 2 * labels)
        data.update(
            train=[(f"r{i}", int(y)) for i, y in enumerate(rng.integers(0, labels, n_train))],
            test=[(f"e{i}", int(y)) for i, y in enumerate(rng.integers(0, labels, n_test))],
        )
        data["sizes"] = {"train": n_train, "test": n_test, "labels": labels}
    elif kind == "Clustering":
        n = scaled(real["documents"], scale, 50 * real["labels"])
        data["documents"] = [(f"c{i}", int(y)) for i, y in enumerate(rng.integers(0, real["labels"], n))]
        data["sizes"] = {"documents": n, "labels": real["labels"]}
    elif kind == "PairClassification":
        n = scaled(real["pairs"], scale, 100)
        labels = (rng.random(n) < real["positive"]).astype(int)
        labels[:2] = 1, 0  # both labels present at any scale
        data["pairs"] = [(f"a{i}", f"b{i}", int(y)) for i, y in enumerate(labels)]
        data["sizes"] = {"pairs": n, "positive": round(float(labels.mean()), 4)}
    elif kind == "STS":
        n = scaled(real["pairs"], scale, 100)
        low, high = task.min_score, task.max_score
        data["pairs"] = [(f"a{i}", f"b{i}", float(y)) for i, y in enumerate(rng.uniform(low, high, n).round(2))]
        data["sizes"] = {"pairs": n}
    elif kind == "Summarization":
        n = scaled(real["texts"], scale, 10)
        data["texts_rows"] = [
            {
                "text": f"t{t}",
                "human_summaries": [f"h{t}.{j}" for j in range(real["human"])],
                "machine_summaries": [f"m{t}.{j}" for j in range(real["machine"])],
                "relevance": rng.integers(1, 6, real["machine"]).astype(float).tolist(),
            }
            for t in range(n)
        ]
        data["sizes"] = {"texts": n}
    return data


def all_texts(data):
    kind = data["type"]
    if kind in SEARCH_TYPES:
        return data["queries"] + data["documents"]
    if kind == "Classification":
        return [t for t, _ in data["train"]] + [t for t, _ in data["test"]]
    if kind == "Clustering":
        return [t for t, _ in data["documents"]]
    if kind in ("PairClassification", "STS"):
        return [a for a, _, _ in data["pairs"]] + [b for _, b, _ in data["pairs"]]
    return [s for row in data["texts_rows"] for s in row["human_summaries"] + row["machine_summaries"]]


# The embeval arm's task file.


def _tsv(path, header, rows):
    path.write_text("\t".join(header) + "\n" + "".join("\t".join(map(str, r)) + "\n" for r in rows), encoding="utf-8")


def own_name(name):
    """The embeval task's name (SentEval's built-in STS tasks hold the MTEB names)."""
    return "Synthetic" + "".join(c for c in name if c.isalnum())


def task_file(task, data, folder):
    """Write the task's data and an embeval task file of the matching kind with the task's settings."""
    name = task.metadata.name
    kind = data["type"]
    revision = task.metadata.dataset["revision"]
    lines = [f'name = "{own_name(name)}"']
    files = {}
    if kind in SEARCH_TYPES:
        with open(folder / "corpus.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps({"_id": d, "text": d}) + "\n" for d in data["documents"])
        with open(folder / "queries.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps({"_id": q, "text": q}) + "\n" for q in data["queries"])
        _tsv(folder / "qrels.tsv", ("query-id", "corpus-id", "score"), data["qrels"])
        files = {"corpus": "corpus.jsonl", "queries": "queries.jsonl", "qrels": "qrels.tsv"}
        if "candidates" in data:
            _tsv(folder / "candidates.tsv", ("query-id", "corpus-id"), data["candidates"])
            files["candidates"] = "candidates.tsv"
            lines.append('kind = "reranking"')
            lines.append('figure = "map_at_1000"')
        else:
            lines.append('kind = "retrieval"')
            lines.append(f'figure = "{task.metadata.main_score}"')
            lines.append(f"ignore_identical_ids = {str(task.ignore_identical_ids).lower()}")
    elif kind == "Classification":
        _tsv(folder / "train.tsv", ("text", "label"), data["train"])
        _tsv(folder / "test.tsv", ("text", "label"), data["test"])
        lines += ['kind = "classification"', 'protocol = "mteb"']
        lines += [f"samples_per_label = {task.samples_per_label}", f"n_experiments = {task.n_experiments}"]
        files = {"train": "train.tsv", "test": "test.tsv"}
    elif kind == "Clustering":
        _tsv(folder / "documents.tsv", ("text", "label"), data["documents"])
        lines.append('kind = "clustering"')
        if task.max_document_to_embed is not None:
            lines.append(f"max_documents = {task.max_document_to_embed}")
        elif task.max_fraction_of_documents_to_embed is not None:
            lines.append(f"max_fraction = {task.max_fraction_of_documents_to_embed}")
        else:
            lines.append("embed_all = true")
        lines += [
            f"documents_per_experiment = {task.max_documents_per_cluster}",
            f"n_experiments = {task.n_clusters}",
            f"batch_size = {task.k_mean_batch_size}",
        ]
        files = {"test": "documents.tsv"}
    elif kind == "PairClassification":
        _tsv(folder / "pairs.tsv", ("sentence1", "sentence2", "label"), data["pairs"])
        lines += ['kind = "pair-classification"', 'protocol = "mteb"']
        files = {"test": "pairs.tsv"}
    elif kind == "STS":
        _tsv(folder / "pairs.tsv", ("sentence1", "sentence2", "score"), data["pairs"])
        lines += ['kind = "sts"', 'cosine = "mteb"']  # mteb's cosine, as `--mteb` STS tasks take it
        files = {"test": "pairs.tsv"}
    elif kind == "Summarization":
        with open(folder / "summaries.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(row) + "\n" for row in data["texts_rows"])
        lines.append('kind = "summarization"')
        files = {"test": "summaries.jsonl"}
    lines.append("[files]")
    lines += [f'{key} = "{value}"' for key, value in files.items()]
    subset = task.hf_subsets[0]
    languages = task.metadata.hf_subsets_to_langscripts.get(subset, ["eng-Latn"])
    lines.append("[mteb]")
    lines.append(f'name = "{name}"\nrevision = "{revision}"\nsubset = "{subset}"\nlanguages = {json.dumps(languages)}')
    path = folder / "task.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def prepare(task, scale, dim, seed, root):
    """Write the task's synthetic data, its task file, its export and vectors: the folder."""
    from embeval import export_sentences
    from embeval.formats.vectors import write

    folder = root / f"{task.metadata.name}-{dim}"
    folder.mkdir(parents=True)
    data = synthesize(task, scale, seed)
    texts = all_texts(data)
    rng = np.random.default_rng([seed, dim, zlib.crc32(task.metadata.name.encode())])
    vectors = rng.standard_normal((len(texts), dim), dtype=np.float32)
    index = {t: i for i, t in enumerate(texts)}
    np.save(folder / "vectors.npy", vectors)
    (folder / "texts.json").write_text(json.dumps(texts))
    (folder / "data.json").write_text(json.dumps(data))
    declared = task_file(task, data, folder)
    export_sentences(folder / "none", folder / "sentences", tasks=[own_name(task.metadata.name)], task_files=[declared])
    write(folder / "vectors.h5", folder / "sentences", lambda s: vectors[[index[t] for t in s]], progress=False)
    return folder, data["sizes"]


# The two arms, each in its own process.


def _rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_seconds():
    """CPU time of this process so far, every thread's, user and system."""
    times = os.times()
    return times.user + times.system


def run_embeval(name, folder, bootstrap, device="auto", vectors=None):
    import embeval
    from embeval.tasks.benchmarks import task_scores

    cpu, start = _cpu_seconds(), time.perf_counter()
    record = embeval.score(
        vectors or folder / "vectors.h5",
        folder / "none",
        tasks=[own_name(name)],
        task_files=[folder / "task.toml"],
        config={"bootstrap": bootstrap},
        device=device,
        progress=False,
        log=lambda line: None,
    )
    seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
    (score,) = task_scores(record["tasks"]).values()
    return {"seconds": seconds, "cpu_seconds": round(cpu, 2), "main_score": score.value}


class ServedVectors:
    """mteb's encoder protocol serving fixed vectors (text -> row), cosine similarity as mteb's
    wrappers compute it."""

    def __init__(self, table):
        from mteb.models.model_meta import ModelMeta

        self.table = table
        self.mteb_model_meta = ModelMeta(
            loader=None,
            name="embeval-bench/served-vectors",
            revision="0",
            release_date=None,
            languages=None,
            n_parameters=None,
            memory_usage_mb=None,
            max_tokens=None,
            embed_dim=None,
            license=None,
            open_weights=None,
            public_training_code=None,
            public_training_data=None,
            framework=[],
            similarity_fn_name="cosine",
            use_instructions=None,
            training_datasets=None,
        )

    def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):
        return np.stack([self.table[text] for batch in inputs for text in batch["text"]])

    def similarity(self, a, b):
        from mteb.models.model_meta import ScoringFunction
        from mteb.similarity_functions import select_similarity

        return select_similarity(a, b, ScoringFunction.COSINE)

    def similarity_pairwise(self, a, b):
        from mteb.models.model_meta import ScoringFunction
        from mteb.similarity_functions import select_pairwise_similarity

        return select_pairwise_similarity(a, b, ScoringFunction.COSINE)


def mteb_task(task, data):
    """The task's own mteb class, its data the synthetic data held in memory."""
    from datasets import Dataset, DatasetDict

    kind = data["type"]
    split, subset = task.eval_splits[0], task.hf_subsets[0]
    if kind in SEARCH_TYPES:
        from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData

        relevant = {}
        for q, d, g in data["qrels"]:
            relevant.setdefault(q, {})[d] = g
        top = None
        if "candidates" in data:
            top = {}
            for q, d in data["candidates"]:
                top.setdefault(q, []).append(d)
        content = {
            subset: {
                split: RetrievalSplitData(
                    corpus=Dataset.from_dict(
                        {"id": data["documents"], "title": [""] * len(data["documents"]), "text": data["documents"]}
                    ),
                    queries=Dataset.from_dict({"id": data["queries"], "text": data["queries"]}),
                    relevant_docs=relevant,
                    top_ranked=top,
                )
            }
        }
    else:
        if kind == "Classification":
            columns = {
                "train": {"text": [t for t, _ in data["train"]], "label": [y for _, y in data["train"]]},
                split: {"text": [t for t, _ in data["test"]], "label": [y for _, y in data["test"]]},
            }
        elif kind == "Clustering":
            columns = {
                split: {"sentences": [t for t, _ in data["documents"]], "labels": [[y] for _, y in data["documents"]]}
            }
        elif kind == "PairClassification":
            pairs = data["pairs"]
            columns = {
                split: {
                    "sentence1": [a for a, _, _ in pairs],
                    "sentence2": [b for _, b, _ in pairs],
                    "labels": [y for *_, y in pairs],
                }
            }
        elif kind == "STS":
            pairs = data["pairs"]
            columns = {
                split: {
                    "sentence1": [a for a, _, _ in pairs],
                    "sentence2": [b for _, b, _ in pairs],
                    "score": [y for *_, y in pairs],
                }
            }
        else:
            rows = data["texts_rows"]
            columns = {split: {key: [row[key] for row in rows] for key in rows[0]}}
        dataset = DatasetDict({s: Dataset.from_dict(c) for s, c in columns.items()})
        content = {subset: dataset} if task.metadata.is_multilingual else dataset

    def load_data(self, **kwargs):
        self.dataset = content
        self.data_loaded = True

    instance = copy.copy(task)  # the benchmark's task object: its subsets, splits and settings
    instance.load_data = types.MethodType(load_data, instance)
    return instance


def run_mteb(name, folder):
    import mteb

    (task,) = benchmark_tasks([name])
    data = json.loads((folder / "data.json").read_text())
    texts = json.loads((folder / "texts.json").read_text())
    vectors = np.load(folder / "vectors.npy")
    table = dict(zip(texts, vectors))
    instance = mteb_task(task, data)
    model = ServedVectors(table)
    cpu, start = _cpu_seconds(), time.perf_counter()
    result = mteb.evaluate(model, instance, cache=None, show_progress_bar=False, encode_kwargs={"batch_size": 512})
    seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
    (task_result,) = result.task_results
    scores = task_result.scores[task.eval_splits[0]][0]
    figure = "map_at_1000" if "candidates" in data else task.metadata.main_score
    return {"seconds": seconds, "cpu_seconds": round(cpu, 2), "main_score": scores.get(figure, scores["main_score"])}


def _peak_reset():
    """Reset the process's peak resident memory (Linux: clear_refs 5), so each task's peak is its own."""
    import gc

    gc.collect()
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _hwm_mb():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return _rss_mb()


def _rss_now_mb():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return _rss_mb()


def worker(arm_name, names, folders, bootstrap, device="auto"):
    """One arm over the tasks, in this process: the imports first, then each task timed on its own."""
    import warnings

    warnings.filterwarnings("ignore")
    import torch  # noqa: F401
    from threadpoolctl import threadpool_limits

    if arm_name == "mteb":  # each arm's own imports before any timing
        import mteb  # noqa: F401
    else:
        import embeval.run.execute  # noqa: F401
        import embeval.run.plan  # noqa: F401
        import embeval.run.score  # noqa: F401

    threads = int(os.environ.get("BENCH_THREADS", "2"))
    results = []
    # a warm-up, untimed: each library's first-call costs paid once (embeval's on a copy of the vectors
    # file: the timed call checks its file as a first call does, the check of an unchanged file being
    # remembered within a process)
    warm = folders[0] / "warm-up.h5"
    with threadpool_limits(threads):
        try:
            if arm_name.startswith("embeval"):
                shutil.copyfile(folders[0] / "vectors.h5", warm)
                run_embeval(names[0], folders[0], 0, device, vectors=warm)
            else:
                run_mteb(names[0], folders[0])
        except Exception:  # the timed run below records it
            pass
        finally:
            warm.unlink(missing_ok=True)
    if arm_name == "embeval_no_intervals":
        arm_name, bootstrap = "embeval", 0
    for name, folder in zip(names, folders):
        _peak_reset()
        before = _rss_now_mb()
        try:
            with threadpool_limits(threads):
                out = run_embeval(name, folder, bootstrap, device) if arm_name == "embeval" else run_mteb(name, folder)
            out.pop("rss_before_mb", None)
            out["peak_rss_mb"] = round(_hwm_mb(), 1)
            out["added_mb"] = round(out["peak_rss_mb"] - before, 1)
        except Exception as err:  # recorded in the results, the other tasks go on
            out = {"error": f"{type(err).__name__}: {err}".splitlines()[0][:300]}
        results.append(out)
        print(json.dumps({"task": name, **out}), flush=True)


def arm(arm_name, names, folders, bootstrap, device="auto"):
    """{task: figures} of one arm over the tasks, run in a fresh process."""
    done = subprocess.run(
        [sys.executable, __file__, "--worker", arm_name, "--task-name", ",".join(names), "--folder",
         os.pathsep.join(map(str, folders)), "--bootstrap", str(bootstrap), "--device", device],
        capture_output=True,
        text=True,
    )  # fmt: skip
    found = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            item = json.loads(line)
            found[item.pop("task")] = item
    lines = (done.stderr or "").strip().splitlines()
    for name in names:
        found.setdefault(name, {"error": lines[-1] if lines else f"exit {done.returncode}"})
    return found


def totals(rows, dim, types=None):
    """The arms' totals over the rows of one dimension (of `types` only, if given) that every arm scored."""
    chosen = [r for r in rows if r["dim"] == dim and (types is None or r["type"] in types)]
    arms = [a for a in ARMS if chosen and all(a in r for r in chosen)]
    ok = [r for r in chosen if all("error" not in r[a] for a in arms)]
    out = {"tasks": len(ok)}
    for a in arms:
        out[f"{a}_seconds"] = round(sum(r[a]["seconds"] for r in ok), 2)
        out[f"{a}_cpu_seconds"] = round(sum(r[a].get("cpu_seconds", 0) for r in ok), 2)
        out[f"{a}_peak_rss_mb"] = max((r[a]["peak_rss_mb"] for r in ok), default=None)
    e, m = out.get("embeval_seconds"), out.get("mteb_seconds")
    out["ratio"] = round(m / e, 2) if e and m is not None else None  # mteb / embeval (intervals on)
    plain = out.get("embeval_no_intervals_seconds")
    out["intervals_factor"] = round(e / plain, 2) if e and plain else None  # embeval with / without
    e_cpu, plain_cpu = out.get("embeval_cpu_seconds"), out.get("embeval_no_intervals_cpu_seconds")
    out["intervals_factor_cpu"] = round(e_cpu / plain_cpu, 2) if e_cpu and plain_cpu else None
    if plain and m is not None:
        out["ratio_no_intervals"] = round(m / plain, 2)
    out["identical"] = all(r["identical"] for r in ok)
    return out


def _number(value, digits=1, suffix=""):
    return "–" if value is None else f"{value:,.{digits}f}{suffix}"


def markdown(paths):
    """The per-type table of docs/mteb-benchmarks.md for each results file: seconds with and without
    the intervals, their factor (seconds; CPU seconds), mteb's seconds and the ratio."""
    lines = []
    for path in paths:
        record = json.loads(Path(path).read_text())
        for dim, parts in record["summary"].items():
            name, threads = Path(path).name, record.get("threads", 2)
            load = record["load_average_at_start"][0]
            lines += [
                f"{name}: {record['scale']:g} x each task's size, {dim} dimensions, {threads} threads, load {load:g}",
                "",
                "| task type | tasks | embeval s | without intervals s | intervals x (CPU x) | mteb s "
                "| mteb / embeval |",
                "|---|---|---|---|---|---|---|",
            ]
            rows = [(kind, t) for kind, t in parts.get("by type", {}).items()] + [("all", parts["all"])]
            for kind, t in rows:
                cells = [
                    "**all**" if kind == "all" else kind,
                    str(t["tasks"]),
                    _number(t.get("embeval_seconds"), 2),
                    _number(t.get("embeval_no_intervals_seconds"), 2),
                    f"{_number(t.get('intervals_factor'), 2, 'x')} ({_number(t.get('intervals_factor_cpu'), 2, 'x')})",
                    _number(t.get("mteb_seconds"), 2),
                    _number(t.get("ratio"), 2, "x"),
                ]
                lines.append("| " + " | ".join(cells) + " |")
            lines.append("")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", help="a comma list of the benchmark's tasks (default: all 41)")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of each task's real size (default 1)")
    parser.add_argument("--dims", default="384,1024")
    parser.add_argument("--bootstrap", type=int, default=1000, help="embeval's resamples for the intervals (0: none)")
    parser.add_argument(
        "--arms", default=",".join(ARMS), help=f"the arms to run, a comma list of {', '.join(ARMS)} (default: all)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto", help="embeval's device (auto: a CUDA device when there is one)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "mteb_benchmark.json"))
    parser.add_argument("--markdown", nargs="+", metavar="RESULTS", help="print the tables of these results files")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--task-name", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.markdown:
        return print(markdown(args.markdown))
    if args.worker:
        folders = [Path(p) for p in args.folder.split(os.pathsep)]
        return worker(args.worker, args.task_name.split(","), folders, args.bootstrap, args.device)
    import mteb

    tasks = benchmark_tasks(args.tasks.split(",") if args.tasks else None)
    dims = [int(d) for d in args.dims.split(",")]
    arms = [a for a in ARMS if a in args.arms.split(",")]
    if "embeval" not in arms or not set(args.arms.split(",")) <= set(ARMS):
        raise SystemExit(f"--arms: a comma list of {', '.join(ARMS)}, with embeval")
    load = os.getloadavg()
    started = time.perf_counter()
    rows = []
    print(
        f"{'task':<40}{'type':<20}{'dim':>5}{'embeval s':>11}{'no CI s':>9}{'mteb s':>9}{'ratio':>7}"
        f"{'CI x':>6}{'e MB':>8}{'m MB':>8}  equal"
    )
    nan = float("nan")
    with tempfile.TemporaryDirectory(prefix="mteb-bench-") as tmp:
        for dim in dims:
            prepared = [prepare(task, args.scale, dim, args.seed, Path(tmp)) for task in tasks]
            names = [t.metadata.name for t in tasks]
            folders = [folder for folder, _ in prepared]
            found = {a: arm(a, names, folders, args.bootstrap, args.device) for a in arms}
            for task, (_folder, used) in zip(tasks, prepared):
                name = task.metadata.name
                got = {a: found[a][name] for a in arms}
                scores = [g["main_score"] for g in got.values() if "error" not in g]
                identical = len(scores) == len(arms) and max(scores) - min(scores) <= 1e-6
                kind = "Reranking" if "candidates" in sizes(task) else task.metadata.type
                row = {"task": name, "type": kind, "dim": dim, "sizes": used, "real_sizes": sizes(task)}
                row.update(got, identical=identical)
                rows.append(row)
                ours, plain, theirs = got["embeval"], got.get("embeval_no_intervals", {}), got.get("mteb", {})
                ratio = theirs.get("seconds", nan) / ours.get("seconds", nan) if "seconds" in ours else nan
                factor = ours.get("seconds", nan) / plain["seconds"] if plain.get("seconds") else nan
                problem = next((g["error"] for g in got.values() if "error" in g), "NO")
                print(
                    f"{name:<40}{kind:<20}{dim:>5}{ours.get('seconds', nan):>11.2f}{plain.get('seconds', nan):>9.2f}"
                    f"{theirs.get('seconds', nan):>9.2f}{ratio:>7.2f}{factor:>6.2f}"
                    f"{ours.get('peak_rss_mb', nan):>8.0f}{theirs.get('peak_rss_mb', nan):>8.0f}  "
                    f"{'yes' if identical else problem}",
                    flush=True,
                )
            for folder in folders:
                shutil.rmtree(folder, ignore_errors=True)
    kinds = list(dict.fromkeys(r["type"] for r in rows))
    summary = {
        str(dim): {
            "all": totals(rows, dim),
            "retrieval and reranking": totals(rows, dim, SEARCH_TYPES),
            "by type": {kind: totals(rows, dim, (kind,)) for kind in kinds},
        }
        for dim in dims
    }
    for dim, parts in summary.items():
        for what, t in [("all", parts["all"]), ("retrieval and reranking", parts["retrieval and reranking"])] + [
            (f"type {kind}", t) for kind, t in parts["by type"].items()
        ]:
            print(
                f"total {dim}-d, {what}: {t['tasks']} tasks, embeval {t.get('embeval_seconds')} s "
                f"(without intervals {t.get('embeval_no_intervals_seconds')} s: x{t['intervals_factor']}, "
                f"CPU x{t['intervals_factor_cpu']}), mteb {t.get('mteb_seconds')} s, mteb / embeval = {t['ratio']}x, "
                f"identical main scores: {t['identical']}"
            )
    import embeval

    record = {
        "benchmark": BENCHMARK,
        "what": (
            "synthetic data of each task's real size (mteb's descriptive statistics) x scale, random float32 "
            "vectors; embeval: embeval.score on a task file of the matching kind with the settings --mteb "
            "gives it (STS: mteb's cosine; "
            f"bootstrap {args.bootstrap}); mteb: mteb.evaluate on the task's own mteb class with the same data "
            "in memory and an encoder serving the same vectors; each arm in a fresh process (imports and a warm-up "
            "on the first task done before timing) scoring the tasks one after the other; seconds of each "
            "scoring call (embeval also without the intervals, in an arm of its own), the CPU seconds of the "
            "process during it (all threads, user and system), the "
            "process's peak RSS during it (the peak reset before each task) and what it added "
            "to the resident memory before it"
        ),
        "scale": args.scale,
        "dims": dims,
        "tasks_run": [t.metadata.name for t in tasks],
        "arms": arms,
        "threads": int(os.environ.get("BENCH_THREADS", "2")),
        "embeval_device": args.device,
        "load_average_at_start": [round(x, 2) for x in load],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "wall_seconds": round(time.perf_counter() - started, 1),
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "versions": {"embeval": embeval.__version__, "mteb": mteb.__version__},
        "summary": summary,
        "rows": rows,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"written: {out}")


if __name__ == "__main__":
    main()
