"""MTEB's regression and multilabel classification as kinds of task files, end to end: the task's files
and task file, vectors written by embeval.vectors.write, `embeval score --task-file` through the CLI,
and mteb 2.26.24's own task of that type (its mock task, and a task of realistic size built here)
evaluated on the same vectors through an encoder that looks them up. The vectors are hashed word
counts of texts drawn from a small pool (many rows repeated, many exact ties of distances).

Agreement measured with mteb 2.26.24, scikit-learn 1.9.1: regression and multilabel classification
identical to the last bit under mteb's seeds (the same scikit-learn calls on the same rows).
"""

import json
import zlib

import numpy as np
import pytest
from mteb_helpers import mteb_client
from reliability_helpers import refused
from test_mteb_kinds import MtebRows, check_interval_and_report, jsonl, mteb_task, score, tsv
from threadpoolctl import threadpool_limits

WORDS = [f"w{i}" for i in range(40)]


@pytest.fixture(scope="module")
def client():
    return mteb_client()


@pytest.fixture(autouse=True)
def one_thread():
    with threadpool_limits(1):
        yield


def hashed(text, dim=16):
    """A text's vector: its words' counts hashed into dim buckets (small integers: exact ties)."""
    counts = np.zeros(dim, dtype=np.float32)
    for word in text.split():
        counts[zlib.crc32(word.encode()) % dim] += 1
    return counts


def texts(seed, n, pool):
    """n texts drawn from a pool of `pool` distinct texts of 3 to 7 words (rows repeat)."""
    rng = np.random.default_rng(seed)
    distinct = [" ".join(rng.choice(WORDS, int(rng.integers(3, 8)))) for _ in range(pool)]
    return [distinct[i] for i in rng.integers(0, pool, n)]


def table_of(*lists):
    return {text: hashed(text) for rows in lists for text in rows}


def run(task, table):
    return task.evaluate(MtebRows(table), split="test", encode_kwargs={"batch_size": 64})["default"]


# Regression.


def values_of(rows, seed):
    """A value per text: a linear function of some word counts plus noise, rounded (tied values)."""
    rng = np.random.default_rng(seed)
    weights = np.random.default_rng(7).normal(size=16)
    return [round(float(hashed(t) @ weights + rng.normal(0, 0.8)), 1) for t in rows]


def regression_files(train, train_values, test, test_values):
    return {
        "train.tsv": tsv(zip(train, train_values, strict=True), ("text", "value")),
        "test.tsv": tsv(zip(test, test_values, strict=True), ("text", "value")),
    }


REGRESSION = 'name = "Values"\nkind = "regression"\n{keys}[files]\ntrain = "train.tsv"\ntest = "test.tsv"\n'


def test_regression_equals_mtebs_mock_task(client, cli, tmp_path):
    from mteb.mocks.mock_tasks.regression import MockRegressionTask

    task = MockRegressionTask()
    task.load_data()
    train, test = task.dataset["train"], task.dataset["test"]
    table = table_of(train["text"], test["text"])
    files = regression_files(train["text"], train["value"], test["text"], test["value"])
    entry, _, _ = score(cli, tmp_path, REGRESSION.format(keys=""), files, table, "Values")
    theirs = run(task, table)
    ours = entry["results"]
    for key in ("mae", "mse", "rmse", "r2", "kendalltau", "scores_per_experiment"):
        assert ours[key] == theirs[key], key
    assert theirs["main_score"] == ours["kendalltau"]


@pytest.mark.parametrize(
    "n_train, keys, attributes",
    [
        (240, "", {}),  # every experiment trains on all of train (at most n_samples rows)
        pytest.param(
            700,
            "n_samples = 300\nn_experiments = 4\nseed = 7\n",
            {"n_samples": 300, "n_experiments": 4},
            marks=pytest.mark.slow,  # with compare and the report's formats: ~8 s on a loaded machine
        ),
    ],
)
def test_regression_equals_mtebs(client, cli, tmp_path, n_train, keys, attributes):
    from mteb.abstasks.regression import AbsTaskRegression

    train, test = texts(1, n_train, n_train // 3), texts(2, 160, 90)
    train_values, test_values = values_of(train, 3), values_of(test, 4)
    table = table_of(train, test)
    files = regression_files(train, train_values, test, test_values)
    entry, stdout, out = score(cli, tmp_path, REGRESSION.format(keys=keys), files, table, "Values")
    splits = {"train": {"text": train, "value": train_values}, "test": {"text": test, "value": test_values}}
    task = mteb_task(AbsTaskRegression, "Regression", "kendalltau", splits, **attributes)
    if "seed" in keys:
        task.seed = 7
    theirs = run(task, table)
    ours = entry["results"]
    for key in ("mae", "mse", "rmse", "r2", "kendalltau", "scores_per_experiment"):
        assert ours[key] == theirs[key], key
    assert 0.3 < ours["kendalltau"] < 0.95
    experiments = ours["scores_per_experiment"]
    assert (len({json.dumps(e) for e in experiments}) == 1) == (n_train <= 300 or not keys)
    exported = set((tmp_path / "sentences" / "Values.txt").read_text().splitlines())
    assert exported <= set(train) | set(test) and set(test) <= exported
    assert "Kendall's tau | R² x100 (MTEB" in stdout and "MAE | MSE | RMSE" in stdout
    check_interval_and_report(cli, entry, out, "kendalltau", "Regression (MTEB), x100")
    if keys:
        check_compare_and_tables(cli, tmp_path, REGRESSION.format(keys=keys), files, table, "Values", entry)


# Multilabel classification.

MULTILABEL = (
    'name = "Topics"\nkind = "multilabel-classification"\n{keys}[files]\ntrain = "train.{ext}"\ntest = "test.{ext}"\n'
)


def topics_of(rows, seed, names):
    """Each text's labels: the topics of its hashed buckets with a few flipped (some rows get none)."""
    rng = np.random.default_rng(seed)
    out = []
    for text in rows:
        counts = hashed(text)
        chosen = [names[b % len(names)] for b in range(16) if counts[b] > 0 and (b % 3 == 0) != (rng.random() < 0.1)]
        out.append(sorted(set(chosen), key=names.index))
    return out


def multilabel_files(ext, train, train_labels, test, test_labels):
    if ext == "jsonl":
        return {
            f"{key}.jsonl": jsonl({"text": t, "labels": ls} for t, ls in zip(texts_, lists, strict=True))
            for key, texts_, lists in (("train", train, train_labels), ("test", test, test_labels))
        }
    if ext == "csv":
        import csv
        import io

        out = {}
        for key, texts_, lists in (("train", train, train_labels), ("test", test, test_labels)):
            buffer = io.StringIO()
            writer = csv.writer(buffer)
            writer.writerow(("text", "labels"))
            writer.writerows((t, json.dumps(ls)) for t, ls in zip(texts_, lists, strict=True))
            out[f"{key}.csv"] = buffer.getvalue()
        return out
    return {
        f"{key}.tsv": tsv(((t, json.dumps(ls)) for t, ls in zip(texts_, lists, strict=True)), ("text", "labels"))
        for key, texts_, lists in (("train", train, train_labels), ("test", test, test_labels))
    }


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")  # mteb's side
@pytest.mark.filterwarnings("ignore:unknown class:UserWarning")  # mteb's binarizer drops train-only labels
def test_multilabel_equals_mtebs_mock_task(client, cli, tmp_path):
    from mteb.mocks.mock_tasks.classification import MockMultilabelClassification

    task = MockMultilabelClassification()
    task.load_data()
    train, test = task.dataset["train"], task.dataset["test"]
    table = table_of(train["text"], test["text"])
    files = multilabel_files("jsonl", train["text"], train["label"], test["text"], test["label"])
    declaration = MULTILABEL.format(keys='figure = "lrap"\n', ext="jsonl")
    entry, _, _ = score(cli, tmp_path, declaration, files, table, "Topics")
    theirs = run(task, table)
    ours = entry["results"]
    for key in ("accuracy", "lrap", "f1", "hamming", "scores_per_experiment"):
        assert ours[key] == theirs[key], key
    assert theirs["main_score"] == ours["lrap"]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")  # mteb's side
@pytest.mark.filterwarnings("ignore:unknown class:UserWarning")
@pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning")  # mteb's hamming_score
@pytest.mark.parametrize(
    "ext, keys, attributes, names",
    [
        ("tsv", "", {}, ["sport", "politics", "art", "music", "travel"]),
        ("csv", "samples_per_label = 5\nn_experiments = 3\n", {"samples_per_label": 5, "n_experiments": 3}, [3, 1, 20]),
        # mteb cuts the test split to max_eval_samples rows by iterative stratification (seed 9)
        (
            "jsonl",
            "n_neighbors = 3\nseed = 9\nmax_eval_samples = 130\n",
            {"evaluator_model": "knn3"},
            ["b", "a", "c", "d"],
        ),
    ],
)
def test_multilabel_equals_mtebs(client, cli, tmp_path, ext, keys, attributes, names):
    from mteb.abstasks.multilabel_classification import AbsTaskMultilabelClassification
    from sklearn.neighbors import KNeighborsClassifier

    train, test = texts(21, 600, 150), texts(22, 200, 120)
    train_labels, test_labels = topics_of(train, 1, names), topics_of(test, 2, names)
    table = table_of(train, test)
    files = multilabel_files(ext, train, train_labels, test, test_labels)
    entry, stdout, out = score(cli, tmp_path, MULTILABEL.format(keys=keys, ext=ext), files, table, "Topics")
    if attributes.get("evaluator_model") == "knn3":
        attributes = {"evaluator_model": KNeighborsClassifier(n_neighbors=3), "max_eval_samples": 130}
    splits = {"train": {"text": train, "label": train_labels}, "test": {"text": test, "label": test_labels}}
    task = mteb_task(AbsTaskMultilabelClassification, "MultilabelClassification", "accuracy", splits, **attributes)
    if "seed" in keys:
        task = type(task)(seed=9)
        task.dataset, task.data_loaded = task_dataset(splits), True
    theirs = run(task, table)
    ours = entry["results"]
    for key in ("accuracy", "lrap", "f1", "hamming", "scores_per_experiment"):
        assert ours[key] == theirs[key], key
    assert 0.05 < ours["accuracy"] < 0.9 and ours["label_columns"] == len(names)
    assert ours["test_items"] == (130 if "max_eval_samples" in keys else len(test))
    assert "subset accuracy x100 (MTEB" in stdout and "accuracy | LRAP | macro F1 | Hamming" in stdout
    check_interval_and_report(cli, entry, out, "accuracy", "Multilabel classification (MTEB), x100")
    if ext == "csv":
        check_compare_and_tables(cli, tmp_path, MULTILABEL.format(keys=keys, ext=ext), files, table, "Topics", entry)


def task_dataset(splits):
    from datasets import Dataset, DatasetDict

    return DatasetDict({split: Dataset.from_dict(columns) for split, columns in splits.items()})


@pytest.mark.parametrize(
    "n, labels, kept, share, seed", [(500, 5, 200, 0.3, 42), (3400, 12, 3000, 0.15, 42), (900, 30, 400, 0.05, 7)]
)
def test_test_split_cut_equals_mtebs_iterative_stratification(client, n, labels, kept, share, seed):
    """The rows mteb keeps of a test split longer than max_eval_samples (its default 3000 among them)."""
    from mteb.abstasks._stratification import _iterative_train_test_split

    from embeval.evaluate.mteb_multilabel import stratified_test_rows

    rng = np.random.default_rng(n)
    gold = (rng.random((n, labels)) < share).astype(int)
    gold[:7] = 0  # rows without labels: placed last, at random
    _, theirs = _iterative_train_test_split(np.arange(n).reshape(-1, 1), gold, test_size=kept / n, random_state=seed)
    assert stratified_test_rows(gold, kept, seed).tolist() == theirs.tolist()


# Instruction retrieval and reranking (FollowIR).


def followir(seed, n_docs=220, n_queries=14, candidates=40):
    """A FollowIR task: each query with an original and a changed instruction (the changed one adds
    words); the changed instruction makes some of the original's relevant documents non-relevant.
    Relevant documents share words with their query's instructions (they rank near the top, clear of
    the ties at the search's depth, where mteb's choice among tied documents is torch.topk's);
    the other documents are drawn from a pool (duplicated texts: exact ties)."""
    rng = np.random.default_rng(seed)
    docs = [{"_id": f"d{i}", "text": text} for i, text in enumerate(texts(seed, n_docs, n_docs // 2))]
    queries, instructions, qrels, changed, top_ranked = [], [], [], [], []
    for q in range(n_queries):
        text = " ".join(rng.choice(WORDS, 3))
        original = " ".join(rng.choice(WORDS, 4))
        extra = " ".join(rng.choice(WORDS, 3))
        relevant = np.arange(len(docs), len(docs) + 6)
        for i in relevant:
            words = (text + " " + original + (" " + extra if i % 2 else "")).split()
            docs.append({"_id": f"d{i}", "text": " ".join(rng.choice(words, 5)) + " " + " ".join(rng.choice(WORDS, 2))})
        pool = np.concatenate([relevant, rng.choice(n_docs, candidates - len(relevant), replace=False)])
        dropped = relevant[: int(rng.integers(1, 4))]
        for suffix, instruction in (("-og", original), ("-changed", original + " " + extra)):
            queries.append({"_id": f"q{q}{suffix}", "text": text})
            instructions.append({"query-id": f"q{q}{suffix}", "instruction": instruction})
            for d in relevant:
                if suffix == "-og" or d not in dropped:
                    qrels.append((f"q{q}{suffix}", f"d{d}", int(rng.integers(1, 3))))
            qrels.append((f"q{q}{suffix}", f"d{pool[-1]}", 0))
            top_ranked += [(f"q{q}{suffix}", f"d{d}") for d in pool]
        changed.append({"query-id": f"q{q}", "corpus-ids": [f"d{d}" for d in dropped]})
    return {
        "docs": docs,
        "queries": queries,
        "instructions": instructions,
        "qrels": qrels,
        "changed": changed,
        "candidates": top_ranked,
    }


def followir_files(task, reranking):
    files = {
        "corpus.jsonl": jsonl(task["docs"]),
        "queries.jsonl": jsonl(task["queries"]),
        "qrels/test.tsv": tsv(task["qrels"], ("query-id", "corpus-id", "score")),
        "instructions.jsonl": jsonl(task["instructions"]),
        "changed.jsonl": jsonl(task["changed"]),
    }
    if reranking:
        files["top_ranked.tsv"] = tsv(task["candidates"], ("query-id", "corpus-id"))
    return files


FOLLOWIR = """name = "Follow"
kind = "{kind}"
[files]
corpus = "corpus.jsonl"
queries = "queries.jsonl"
qrels = "qrels/test.tsv"
instructions = "instructions.jsonl"
changed = "changed.jsonl"
{candidates}"""


class MtebSearch(MtebRows):
    """mteb's encoder protocol over the tables of each prompt type, mteb's cosine."""

    def __init__(self, tables):
        super().__init__(None)
        self.tables = tables


def run_followir(task, tables, reranking):
    from datasets import Dataset
    from mteb._evaluators.retrieval_metrics import evaluate_p_mrr_change
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData
    from mteb_helpers import metadata as described

    relevant = {}
    for q, d, g in task["qrels"]:
        relevant.setdefault(q, {})[d] = g
    top_ranked = None
    if reranking:
        top_ranked = {}
        for q, d in task["candidates"]:
            top_ranked.setdefault(q, []).append(d)
    instruction = {row["query-id"]: row["instruction"] for row in task["instructions"]}
    split = RetrievalSplitData(
        corpus=Dataset.from_list([{"id": d["_id"], "title": "", "text": d["text"]} for d in task["docs"]]),
        queries=Dataset.from_list(
            [{"id": q["_id"], "text": q["text"], "instruction": instruction[q["_id"]]} for q in task["queries"]]
        ),
        relevant_docs=relevant,
        top_ranked=top_ranked,
    )
    changed = {row["query-id"]: row["corpus-ids"] for row in task["changed"]}

    class FollowIR(AbsTaskRetrieval):
        metadata = described(
            "EmbevalFollowIR", "InstructionReranking" if reranking else "InstructionRetrieval", "p-MRR"
        )

        def load_data(self, **kwargs):
            self.dataset = {"default": {"test": split}}
            self.data_loaded = True

        def task_specific_scores(self, scores, qrels, results, hf_split, hf_subset):
            return evaluate_p_mrr_change(qrels, results, changed, self.k_values)  # as FollowIR's tasks do

    return FollowIR().evaluate(MtebSearch(tables), split="test", encode_kwargs={"batch_size": 64})["default"]


@pytest.mark.parametrize("kind", ["instruction-reranking", "instruction-retrieval"])
def test_followir_equals_mtebs(client, cli, tmp_path, kind):
    from embeval.kinds.instruction_retrieval import INSTRUCTED
    from embeval.kinds.retrieval import FIGURES, ROUNDED

    reranking = kind == "instruction-reranking"
    # retrieval: a corpus larger than the depth (1000), so changed documents can fall out of a run
    task = followir(31) if reranking else followir(32, n_docs=2500, n_queries=20, candidates=60)
    candidates = 'candidates = "top_ranked.tsv"\n' if reranking else ""
    declaration = FOLLOWIR.format(kind=kind, candidates=candidates)
    instruction = {row["query-id"]: row["instruction"] for row in task["instructions"]}
    joined = [q["text"] + " " + instruction[q["_id"]] for q in task["queries"]]
    tables = {"query": table_of(joined), "document": table_of([d["text"] for d in task["docs"]])}
    both = tables["query"] | tables["document"]
    entry, stdout, out = score(cli, tmp_path, declaration, followir_files(task, reranking), both, "Follow")
    exported = (tmp_path / "sentences" / f"Follow.{INSTRUCTED}.txt").read_text().splitlines()
    assert set(exported) == set(joined)
    theirs = run_followir(task, tables, reranking)
    ours = entry["results"]
    # Reranking scores given candidates as mteb does: equal. Retrieval searches a 2,500-document corpus
    # of hashed counts to depth 1000, where tied documents straddle the cut-off: embeval keeps them in
    # its canonical order (docs/retrieval-search.md), mteb as torch.topk does, so the figures may differ
    # by which tied documents a run keeps (bound measured: p-MRR 3.2e-3; docs/mteb-kinds.md).
    bound = 0.0 if reranking else 0.05 + 1e-9  # one query of the 20 whose tied documents fall otherwise
    assert abs(ours["p-MRR"] - theirs["p-MRR"]) <= (0.0 if reranking else 5e-3)
    assert theirs["main_score"] == theirs["p-MRR"]
    for where, mine, their in (
        ("all", ours, theirs),
        ("og", ours["og"], theirs["og"]),
        ("changed", ours["changed"], theirs["changed"]),
    ):
        for name in FIGURES:
            value = round(mine[name], 5) if name.split("_at_")[0] in ROUNDED else mine[name]
            assert abs(value - their[name]) <= bound, (where, name)
    assert -0.9 < ours["p-MRR"] < 0.9 and ours["p-MRR"] != 0 and ours["depth"] == (40 if reranking else 1000)
    assert "p-MRR x100 (MTEB, FollowIR)" in stdout
    check_interval_and_report(cli, entry, out, "p-MRR", "Instruction following (MTEB, FollowIR), p-MRR x100")
    if reranking:
        check_compare_and_tables(cli, tmp_path, declaration, followir_files(task, reranking), both, "Follow", entry)


# What every new kind shares: a paired comparison, the report's formats, MTEB's result files.


def check_compare_and_tables(cli, tmp_path, declaration, files, table, name, entry):
    """`compare` of the run with a noisier encoder's: the headline's difference, interval and p-value
    on the same resampled items; the headline in the Markdown, LaTeX, CSV and HTML tables."""
    import importlib.util

    from embeval.reports import compare

    rng = np.random.default_rng(5)
    noisy = {text: vector + rng.normal(0, 1.5, vector.shape).astype(np.float32) for text, vector in table.items()}
    other, _, out_b = score(cli, tmp_path / "noisy", declaration, files, noisy, name)
    out_a = tmp_path / "results.json"
    headline = next(iter(entry["ci"]["figures"]))
    result = compare.compare([out_a, out_b], resamples=200)
    row = next(r for r in result["rows"] if r["headline"])
    assert row["figure"] == headline
    assert row["a"] == pytest.approx(entry["results"][headline], abs=1e-12)
    assert row["b"] == pytest.approx(other["results"][headline], abs=1e-12)
    assert row["low"] <= row["diff"] <= row["high"] and 0 < row["p"] <= 1
    same = compare.compare([out_a, out_a], resamples=50)
    assert all(r["diff"] == 0 for r in same["rows"])
    shown = f"{100 * entry['results'][headline]:.1f}"  # CSV writes more digits
    for fmt in ("markdown", "latex", "csv"):
        report = cli("report", out_a, "--format", fmt)
        assert report.exit_code == 0, report.stderr
        assert shown in report.stdout, fmt
    if importlib.util.find_spec("matplotlib") is not None:
        report = cli("report", out_a, "--format", "html", "--out", tmp_path / "report.html")
        assert report.exit_code == 0, report.stderr
        assert shown in (tmp_path / "report.html").read_text(encoding="utf-8")


@pytest.mark.filterwarnings("ignore:.*Missing subsets:UserWarning")  # one subset of a multi-subset task
def test_export_mteb_round_trip(client, cli, tmp_path):
    """Tasks of the new kinds declaring their MTEB counterpart come back through mteb's ResultCache and
    TaskResult with their main scores, mergeable into mteb's tasks."""
    from mteb.results import TaskResult
    from test_mteb_export import MODEL

    from embeval.formats.vectors import write
    from embeval.reports import mteb as export

    train, test = texts(11, 120, 60), texts(12, 60, 40)
    files = regression_files(train, values_of(train, 1), test, values_of(test, 2))
    files |= {
        name.replace(".", "-ml."): text
        for name, text in multilabel_files(
            "tsv", train, topics_of(train, 3, ["a", "b", "c"]), test, topics_of(test, 4, ["a", "b", "c"])
        ).items()
    }
    files |= {f"follow/{name}": text for name, text in followir_files(followir(41, 60, 4, 20), reranking=True).items()}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "mteb.toml").write_text(ROUND_TRIP, encoding="utf-8")
    common = ("--data", tmp_path / "none", "--task-file", tmp_path / "mteb.toml")
    assert cli("export-sentences", *common, "--out", tmp_path / "sentences").exit_code == 0
    write(tmp_path / "v.h5", tmp_path / "sentences", lambda s: np.stack([hashed(x) for x in s]), progress=False)
    scored = cli("score", tmp_path / "v.h5", *common, "--out", tmp_path / "r.json", "--no-save-predictions")
    assert scored.exit_code == 0, scored.stderr
    record = json.loads((tmp_path / "r.json").read_text())
    exported = cli("export-mteb", tmp_path / "r.json", "--model", MODEL, "--out", tmp_path / "cache", *common[2:])
    assert exported.exit_code == 0, exported.stderr
    expected = {
        "Cited": ("RuSciBenchCitedCountRegression", "kendalltau"),
        "FoS": ("SciRepEvalFoSClassification", "accuracy"),
        "Core": ("Core17InstructionRetrieval", "p-MRR"),
    }
    loaded = client.ResultCache(cache_path=tmp_path / "cache").load_results(
        include_remote=False, validate_and_filter=True, require_model_meta=True
    )
    results = {t.task_name: t for t in loaded.model_results[0].task_results}
    assert sorted(results) == sorted(name for name, _ in expected.values())
    folder = tmp_path / "cache" / "results" / "sentence-transformers__all-MiniLM-L6-v2" / export.NO_REVISION
    for task, (mteb_name, headline) in expected.items():
        ours = record["tasks"][task]["results"][headline]
        from_disk = TaskResult.from_disk(folder / f"{mteb_name}.json")
        subset = from_disk.scores[export.SPLIT][0]
        assert results[mteb_name].scores[export.SPLIT][0]["main_score"] == subset["main_score"] == ours
        theirs = client.get_task(mteb_name)
        assert theirs.metadata.main_score == headline and from_disk.is_mergeable(theirs)
        assert subset["languages"] == theirs.metadata.hf_subsets_to_langscripts[subset["hf_subset"]]


ROUND_TRIP = """
[[task]]
name = "Cited"
kind = "regression"
files = {train = "train.tsv", test = "test.tsv"}
[task.mteb]
name = "RuSciBenchCitedCountRegression"
revision = "fbc0599a0b5f00b3c7d87ab4d13490f04fb77f8e"
subset = "cited_count_en"
[[task]]
name = "FoS"
kind = "multilabel-classification"
files = {train = "train-ml.tsv", test = "test-ml.tsv"}
mteb = {name = "SciRepEvalFoSClassification", revision = "781d35d1bf87253b3dcd0fadcb82bfbee9c244f1"}
[[task]]
name = "Core"
kind = "instruction-reranking"
mteb = {name = "Core17InstructionRetrieval", revision = "67d8733dd0691f08f34ed9dda5941578cba8d91c"}
[task.files]
corpus = "follow/corpus.jsonl"
queries = "follow/queries.jsonl"
qrels = "follow/qrels/test.tsv"
candidates = "follow/top_ranked.tsv"
instructions = "follow/instructions.jsonl"
changed = "follow/changed.jsonl"
"""


# Bad input: one line naming the file (and the line), exit code 2.


def everywhere(files, old, new):
    return {name: text.replace(old, new) for name, text in files.items()}


def without(files, query):
    """The files without any line naming `query`."""
    return {
        name: "".join(line + "\n" for line in text.splitlines() if query not in line) for name, text in files.items()
    }


def bad_followir():
    """FollowIR files with one thing wrong each: (files, fragments of the error line)."""
    good = followir_files(followir(40, n_docs=30, n_queries=2, candidates=10), reranking=False)

    def edited(name, old, new):
        assert old in good[name]
        return dict(good, **{name: good[name].replace(old, new, 1)})

    return [
        (
            edited("instructions.jsonl", '"q1-og"', '"q9-og"'),
            ["instructions.jsonl:3", "query-id 'q9-og' is not in the queries file"],
        ),
        (
            everywhere(good, "q1-changed", "q1-new"),
            ["queries.jsonl", "'q1-new' ends neither in '-og' nor in '-changed'"],
        ),
        (
            without(good, "q1-changed"),
            ["queries.jsonl", "query 'q1-og' has no changed instruction: no query 'q1-changed'"],
        ),
        (
            dict(good, **{"instructions.jsonl": without(good, "q0-og")["instructions.jsonl"]}),
            ["instructions.jsonl", "1 queries have no instruction (first: 'q0-og')"],
        ),
        (edited("changed.jsonl", '"q1"', '"q7"'), ["changed.jsonl:2", "query-id 'q7' names no query"]),
        (edited("changed.jsonl", '["d', '["nowhere", "d'), ["changed.jsonl:1", "not in the corpus (first: 'nowhere')"]),
        (edited("changed.jsonl", '"corpus-ids"', '"documents"'), ["changed.jsonl:1", "missing field 'corpus-ids'"]),
    ]


@pytest.mark.parametrize(
    "declaration, files, fragments",
    [
        (
            REGRESSION.format(keys=""),
            {"train.tsv": "text\tvalue\na\t1.5\nb\tmany\n", "test.tsv": "text\tvalue\nc\t2\n"},
            ["train.tsv:3", "value 'many' is not a number"],
        ),
        (
            REGRESSION.format(keys=""),
            {"train.tsv": "text\tvalue\na\t1.5\n", "test.tsv": "text\tvalue\nc\tnan\n"},
            ["test.tsv:2", "value 'nan' is not a finite number"],
        ),
        (
            REGRESSION.format(keys="n_samples = 4\n"),
            {
                "train.tsv": "text\tvalue\n" + "".join(f"t{i}\t{i}\n" for i in range(12)),
                "test.tsv": "text\tvalue\nc\t2\n",
            },
            ["train.tsv", "a quantile bin of the values holds one row"],
        ),
        (
            REGRESSION.format(keys=""),
            {"train.tsv": "text\tscore\na\t1\n", "test.tsv": "text\tvalue\nc\t2\n"},
            ["train.tsv:1", "no column 'value'"],
        ),
        (
            MULTILABEL.format(keys="", ext="tsv"),
            {"train.tsv": "text\tlabels\na\t[1]\nb\tsport\n", "test.tsv": "text\tlabels\nc\t[1, 2]\n"},
            ["train.tsv:3", "labels must be a list of labels", "got 'sport'"],
        ),
        (
            MULTILABEL.format(keys="", ext="jsonl"),
            {"train.jsonl": '{"text": "a", "labels": "x"}\n', "test.jsonl": '{"text": "c", "labels": ["x", "y"]}\n'},
            ["train.jsonl:1", "labels must be a list of labels", "got 'x'"],
        ),
        (
            MULTILABEL.format(keys="", ext="tsv"),
            {"train.tsv": 'text\tlabels\na\t[1]\nb\t["x"]\n', "test.tsv": "text\tlabels\nc\t[1, 2]\n"},
            ["train.tsv:3", "mixes integer and string labels"],
        ),
        (
            MULTILABEL.format(keys="", ext="tsv"),
            {"train.tsv": "text\tlabels\na\t[1, 1]\n", "test.tsv": "text\tlabels\nc\t[1, 2]\n"},
            ["train.tsv:2", "lists 1 twice"],
        ),
        (
            MULTILABEL.format(keys="", ext="tsv"),
            {"train.tsv": "text\tlabels\na\t[1, 2]\n", "test.tsv": "text\tlabels\nc\t[1]\nd\t[]\n"},
            ["test.tsv", "the test split has 1 distinct label(s)"],
        ),
        (
            MULTILABEL.format(keys="", ext="tsv"),
            {"train.tsv": "text\tlabels\na\t[1, 2]\nb\t[2]\n", "test.tsv": "text\tlabels\nc\t[1]\nd\t[2]\n"},
            ["train.tsv", "experiment 0 draws 2 training rows, fewer than n_neighbors = 5"],
        ),
        *[
            (FOLLOWIR.format(kind="instruction-retrieval", candidates=""), files, fragments)
            for files, fragments in bad_followir()
        ],
    ],
)
def test_bad_data_is_one_line(cli, tmp_path, declaration, files, fragments):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "task.toml").write_text(declaration, encoding="utf-8")
    name = declaration.split('"')[1]
    line = refused(cli("tasks", "--task-file", tmp_path / "task.toml", "--tasks", name), *fragments)
    assert str(tmp_path) in line and f": {name}: " in line


@pytest.mark.parametrize(
    "declaration, fragments",
    [
        (REGRESSION.format(keys="n_samples = 1\n"), ["n_samples: must be an integer >= 2"]),
        (REGRESSION.format(keys="samples_per_label = 8\n"), ["unknown key samples_per_label"]),
        (MULTILABEL.format(keys="n_neighbors = 0\n", ext="tsv"), ["n_neighbors: must be an integer >= 1"]),
        (MULTILABEL.format(keys="", ext="tsv").replace("train.tsv", "train.txt"), ["format"]),
        (REGRESSION.format(keys="").replace('test = "test.tsv"\n', ""), ["test is required for a regression task"]),
    ],
)
def test_bad_declaration_is_one_line(cli, tmp_path, declaration, fragments):
    (tmp_path / "task.toml").write_text(declaration, encoding="utf-8")
    refused(cli("tasks", "--no-load", "--task-file", tmp_path / "task.toml"), str(tmp_path / "task.toml"), *fragments)


def test_protocol_modules_name_the_mteb_version_and_the_kinds_their_statistics():
    from embeval.evaluate import followir, mteb_multilabel, mteb_regression
    from embeval.kinds.mteb_shared import MTEB_VERSION
    from embeval.tasks.catalog import kind

    assert MTEB_VERSION == mteb_multilabel.MTEB_VERSION == mteb_regression.MTEB_VERSION
    for name, set_kind, module in (
        ("regression", "mteb-regression", mteb_regression),
        ("multilabel-classification", "mteb-multilabel", mteb_multilabel),
        ("instruction-retrieval", "followir", followir),
    ):
        statistics = kind(name).statistics[set_kind]
        assert set(statistics) == set(module.STATISTICS)
        assert all(statistics[f].stratified == module.STATISTICS[f].stratified for f in statistics)
    assert kind("instruction-reranking").roles(None) == kind("instruction-retrieval").roles(None)
