"""The protocols of mteb's text tasks that embeval scores by name since 0.2.0, each against
`mteb.evaluate` on the same dataset copies (Hugging Face's layout, loaded through `--mteb-data`) and
the same vectors, with the network off: cross-validated classification (the SciRepEval tasks),
bitext mining over parallel subsets (IN22ConvBitextMining's 506 language pairs, mteb's mock parallel
task), IFIR's instruction levels and InstructIR's robustness@10 (and the IFIR tasks that score
retrieval only), and WebQAT2TRetrieval (typed Any2AnyRetrieval). Two families of vectors: hashed
word counts (small integers: many exact ties of similarities) and Gaussian vectors (no ties).

Agreement measured with mteb 2.26.24 (asserted below): every figure of every (subset, split) equal
to mteb's within 1e-12 (classification, bitext mining and retrieval's figures identical; the level
and robustness means within float rounding of a sum's order)."""

import json
import math
import zlib
from fractions import Fraction

import numpy as np
import pytest
from mteb_helpers import mteb_client
from mteb_snapshots import DIM, hashed_counts, words, write_snapshot
from threadpoolctl import threadpool_limits

from embeval.formats.vectors import write

EXACT = 1e-12


def gaussian(text):
    """A text's Gaussian vector, seeded by the text (the same in every process; distinct texts: no ties)."""
    return np.random.default_rng(zlib.crc32(text.encode("utf-8"))).standard_normal(DIM)


FAMILIES = {"hashed": hashed_counts, "gaussian": gaussian}


@pytest.fixture(scope="module")
def client():
    return mteb_client()


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """embeval's cache and datasets' own cache in the test's folder; scikit-learn on one thread."""
    monkeypatch.setenv("EMBEVAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets")
    with threadpool_limits(1):
        yield


class Served:
    """mteb's encoder protocol serving a family's vectors, with mteb's cosine similarity (float32); with
    `exact`, integer vectors' cosines rounded once from their exact value, so that mathematically
    equal cosines are equal scores, as embeval's exact search scores them (mteb's float32 products
    order such documents by rounding noise: docs/mteb-kinds.md's agreement table)."""

    mteb_model_meta = None

    def __init__(self, family, exact=False):
        self.vector = FAMILIES[family]
        self.exact = exact

    def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):
        return np.stack([self.vector(text) for batch in inputs for text in batch["text"]]).astype(np.float32)

    def similarity(self, a, b):
        from mteb.models.model_meta import ScoringFunction
        from mteb.similarity_functions import select_similarity

        if not self.exact:
            return select_similarity(a, b, ScoringFunction("cosine"))
        import torch

        a, b = (np.atleast_2d(np.asarray(x)).astype(np.int64) for x in (a, b))
        dot, norms = a @ b.T, np.outer((a * a).sum(1), (b * b).sum(1))
        exact = [
            [math.copysign(math.sqrt(Fraction(int(d) ** 2, int(n))), d) for d, n in zip(*row)]
            for row in zip(dot, norms)
        ]
        return torch.tensor(exact, dtype=torch.float64)

    def similarity_pairwise(self, a, b):
        from mteb.models.model_meta import ScoringFunction
        from mteb.similarity_functions import select_pairwise_similarity

        return select_pairwise_similarity(a, b, ScoringFunction("cosine"))


def revision_of(client, name):
    return client.get_task(name).metadata.dataset["revision"]


def theirs(client, names, root, family, exact=False):
    """{task: TaskResult} of mteb.evaluate on the copies under root (each task's path pointed there)."""
    tasks = []
    for name in names.split(","):
        task = client.get_task(name)
        meta = task.metadata.model_copy(deep=True)
        meta.dataset["path"] = str(root / task.metadata.dataset["path"])
        task.metadata = meta
        tasks.append(task)
    result = client.evaluate(Served(family, exact), tasks, cache=None, show_progress_bar=False)
    return {r.task_name: r for r in result.task_results}


def ours(cli, tmp_path, names, root, family, *options):
    """(results record, export manifest) of export-sentences, vectors of the family, score."""
    export, vectors, out = tmp_path / "export", tmp_path / f"{family}.h5", tmp_path / f"{family}.json"
    done = cli("export-sentences", "--mteb", names, "--mteb-data", root, "--out", export, *options)
    assert done.exit_code == 0, done.stderr
    vector = FAMILIES[family]
    write(vectors, export, lambda texts: np.stack([vector(t) for t in texts]), progress=False)
    done = cli("score", vectors, "--mteb", names, "--mteb-data", root, "--out", out, "--bootstrap", "200", *options)
    assert done.exit_code == 0, done.stderr
    return json.loads(out.read_text()), json.loads((export / "manifest.json").read_text())


def exported(cli, client, tmp_path, record_path):
    """{task: TaskResult} of `embeval export-mteb`, read back by mteb's own ResultCache."""
    done = cli("export-mteb", record_path, "--model", "my-org/served", "--out", tmp_path / "mteb")
    assert done.exit_code == 0, done.stderr
    loaded = client.ResultCache(cache_path=tmp_path / "mteb").load_results(
        include_remote=False, validate_and_filter=True, require_model_meta=True
    )
    return {t.task_name: t for t in loaded.model_results[0].task_results}


def same_scores(mine, reference, tolerance=EXACT, leave_out=("mteb_version",)):
    """Every key of mteb's score entry is in ours with the same value (nested dicts and lists of
    dicts compared likewise; mteb_version aside, which mteb's loader fills in)."""
    reference = {k: v for k, v in reference.items() if not k.startswith(leave_out)}
    assert set(reference) <= set(mine), sorted(set(reference) - set(mine))
    for key, value in reference.items():
        if key in ("hf_subset", "languages"):
            assert mine[key] == value, key
        elif isinstance(value, dict):
            same_scores(mine[key], value, tolerance)
        elif isinstance(value, list):
            assert len(mine[key]) == len(value), key
            for a, b in zip(mine[key], value, strict=True):
                same_scores(a, b, tolerance) if isinstance(b, dict) else None
        elif isinstance(value, float) and math.isnan(value):  # a results file holds NaN as null
            assert mine[key] is None or math.isnan(mine[key]), key
        elif isinstance(value, (int, float)):
            assert mine[key] == pytest.approx(value, abs=tolerance), (key, mine[key], value)


def check_export(cli, client, tmp_path, family, reference, leave_out=("mteb_version",)):
    """export-mteb's files, read by mteb, hold mteb's own entries: every (split, subset), every key."""
    mine = exported(cli, client, tmp_path, tmp_path / f"{family}.json")
    assert set(mine) == set(reference)
    for task, result in reference.items():
        for split, entries in result.scores.items():
            by_subset = {e["hf_subset"]: e for e in mine[task].scores[split]}
            assert set(by_subset) == {e["hf_subset"] for e in entries}, task
            for entry in entries:
                same_scores(by_subset[entry["hf_subset"]], entry, 1e-5, leave_out)  # export writes mteb's rounding
        assert mine[task].get_score() == pytest.approx(result.get_score(), abs=1e-5), task


# Cross-validated classification: allenai/scirepeval's three configs, as the SciRepEval tasks read them.


def scirepeval_copy(client, root, rng):
    def paper():
        return {"title": " ".join(words(rng, 2, 10)), "abstract": " ".join(words(rng, 2, 10))}

    configs = {
        "biomimicry": {"evaluation": [dict(paper(), label=int(rng.integers(0, 2))) for _ in range(83)]},
        "drsm": {"evaluation": [dict(paper(), **{"class": str(rng.choice(["a", "b", "c"]))}) for _ in range(90)]},
        "mesh_descriptors": {
            "evaluation": [
                dict(paper(), corpus_id=int(rng.integers(0, 70)), descriptor=str(rng.choice(["x", "y", "z", "w"])))
                for _ in range(110)
            ]
        },
    }
    write_snapshot(root, "allenai/scirepeval", revision_of(client, "SciRepEvalBiomimicryClassification"), configs)


SCIREPEVAL = "SciRepEvalBiomimicryClassification,SciRepEvalDRSMClassification,SciRepEvalMeSHDescriptorsClassification"


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")  # both arms' F1 of unpredicted labels
def test_cross_validated_classification_by_name_equals_mtebs(client, cli, tmp_path, family):
    root = tmp_path / "datasets"
    scirepeval_copy(client, root, np.random.default_rng(11))
    record, _ = ours(cli, tmp_path, SCIREPEVAL, root, family)
    reference = theirs(client, SCIREPEVAL, root, family)
    for name in SCIREPEVAL.split(","):
        entry = record["tasks"][name]
        assert entry["kind"] == "classification" and entry["declaration"]["declaration"]["protocol"] == "mteb-kfold"
        (expected,) = reference[name].scores["evaluation"]
        results = dict(entry["results"], main_score=entry["results"]["accuracy"])
        same_scores(results, {k: v for k, v in expected.items() if k not in ("hf_subset", "languages")})
        assert record["mteb"][name]["value"] == pytest.approx(reference[name].get_score(), abs=EXACT)
        assert len(entry["results"]["scores_per_experiment"]) == 5  # mteb's five folds
        assert entry["ci"]["figures"]["accuracy"]["low"] <= entry["results"]["accuracy"]
    check_export(cli, client, tmp_path, family, reference)


# Bitext mining over parallel subsets: IN22ConvBitextMining's 23 languages, its 506 ordered pairs.


def in22_copy(client, root, rng, rows=24):
    task = client.get_task("IN22ConvBitextMining")
    languages = list(dict.fromkeys(language for pair in task.hf_subsets for language in pair.split("-")))
    shared = words(rng, rows, 8)  # every language shares some words with the others: matches, ties, mistakes
    table = [{language: f"{shared[i]} {' '.join(words(rng, 1, 30))}" for language in languages} for i in range(rows)]
    write_snapshot(root, task.metadata.dataset["path"], task.metadata.dataset["revision"], {"default": {"test": table}})
    return task


@pytest.mark.slow
def test_parallel_bitext_mining_by_name_equals_mtebs(client, cli, tmp_path):
    """All 506 pairs by name, hashed counts (the Gaussian family: the next test)."""
    family = "hashed"
    root = tmp_path / "datasets"
    task = in22_copy(client, root, np.random.default_rng(12))
    name = "IN22ConvBitextMining"
    record, manifest = ours(cli, tmp_path, name, root, family)
    reference = theirs(client, name, root, family)[name]
    entry = record["tasks"][name]  # one embeval task: the split, all 506 pairs
    assert entry["declaration"]["declaration"]["protocol"] == "parallel" and len(record["tasks"]) == 1
    subsets = entry["results"]["subsets"]
    assert len(subsets) == len(reference.scores["test"]) == len(task.hf_subsets) == 506
    for expected in reference.scores["test"]:
        mine = dict(subsets[expected["hf_subset"]], main_score=subsets[expected["hf_subset"]]["f1"])
        same_scores(mine, {k: v for k, v in expected.items() if k not in ("hf_subset", "languages")})
    assert record["mteb"][name]["value"] == pytest.approx(reference.get_score(), abs=EXACT)
    assert entry["results"]["f1"] == record["mteb"][name]["value"]
    interval = entry["ci"]["figures"]["f1"]
    assert interval["low"] <= entry["results"]["f1"] <= interval["high"] and interval["n"] == 24
    assert manifest["tasks"][name]["count"] == len(set(sum(json_rows(root, task), [])))  # each sentence once
    check_export(cli, client, tmp_path, family, {name: reference})


@pytest.mark.slow
def test_a_choice_of_parallel_pairs_equals_mtebs(client, tmp_path):
    """A task object holding some of its pairs (as a benchmark chooses subsets), Gaussian vectors,
    through embeval's API on the copy: the pairs chosen, each equal to mteb's on the same object."""
    import embeval
    from embeval.tasks import mteb_source

    root = tmp_path / "datasets"
    in22_copy(client, root, np.random.default_rng(16))
    chosen = ["asm_Beng-ben_Beng", "ben_Beng-eng_Latn", "eng_Latn-asm_Beng", "hin_Deva-eng_Latn"]
    task = client.get_task("IN22ConvBitextMining", hf_subsets=chosen)
    specs, _ = mteb_source.task_specs([mteb_source.Requested(task)], root)
    out, vectors = tmp_path / "results.json", tmp_path / "vectors.h5"
    embeval.export_sentences(tmp_path / "none", tmp_path / "export", tasks=specs)
    write(vectors, tmp_path / "export", lambda texts: np.stack([gaussian(t) for t in texts]), progress=False)
    record = embeval.score(vectors, tmp_path / "none", tasks=specs, out=out, progress=False, log=lambda m: None)
    # embeval leaves the task object as it was (its metadata published, no data held): mteb's run is
    # pointed at the same copy
    assert task.metadata.dataset["path"] == "mteb/IN22ConvBitextMining" and not task.data_loaded
    meta = task.metadata.model_copy(deep=True)
    meta.dataset["path"] = str(root / task.metadata.dataset["path"])
    task.metadata = meta
    reference = client.evaluate(Served("gaussian"), [task], cache=None, show_progress_bar=False).task_results[0]
    subsets = record["tasks"][specs[0].name]["results"]["subsets"]
    assert sorted(subsets) == sorted(e["hf_subset"] for e in reference.scores["test"]) == sorted(chosen)
    for expected in reference.scores["test"]:
        mine = dict(subsets[expected["hf_subset"]], main_score=subsets[expected["hf_subset"]]["f1"])
        same_scores(mine, {k: v for k, v in expected.items() if k not in ("hf_subset", "languages")})
    assert record["mteb"]["IN22ConvBitextMining"]["value"] == pytest.approx(reference.get_score(), abs=EXACT)


def json_rows(root, task):
    path = root / task.metadata.dataset["path"] / "data" / "default" / "test.jsonl"
    return [list(json.loads(line).values()) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")
def test_mtebs_mock_parallel_task_equals_mtebs(client, tmp_path):
    """mteb's own mock task of parallel subsets (its pairs' languages not those of its columns), through
    embeval's API: equal figures, and export-mteb's entries carry mteb's languages of each pair."""
    from mteb.mocks.mock_tasks.bitext_mining import MockMultilingualParallelBitextMiningTask as Mock

    import embeval
    from embeval.reports.mteb import export
    from embeval.tasks import mteb_source

    specs, _ = mteb_source.task_specs([mteb_source.Requested(Mock())], offline_copy=False)
    (spec,) = specs
    out, vectors = tmp_path / "results.json", tmp_path / "vectors.h5"
    embeval.export_sentences(tmp_path / "none", tmp_path / "export", tasks=specs)
    write(vectors, tmp_path / "export", lambda texts: np.stack([hashed_counts(t) for t in texts]), progress=False)
    record = embeval.score(vectors, tmp_path / "none", tasks=specs, out=out, progress=False, log=lambda m: None)
    reference = client.evaluate(Served("hashed"), [Mock()], cache=None, show_progress_bar=False).task_results[0]
    subsets = record["tasks"][spec.name]["results"]["subsets"]
    for expected in reference.scores["test"]:
        mine = dict(subsets[expected["hf_subset"]], main_score=subsets[expected["hf_subset"]]["accuracy"])
        same_scores(mine, {k: v for k, v in expected.items() if k not in ("hf_subset", "languages")})
    folder, written, _ = export(out, "my-org/served", tmp_path / "mteb", registry=None)
    (entries,) = json.loads((folder / f"{spec.mteb.name}.json").read_text())["scores"].values()
    assert (
        {e["hf_subset"]: e["languages"] for e in entries}
        == {e["hf_subset"]: e["languages"] for e in reference.scores["test"]}
        == {"eng_Latn-fra_Latn": ["eng-Latn", "fra-Latn"], "fra_Latn-eng_Latn": ["eng-Latn", "fra-Latn"]}
    )


def test_parallel_statistics_equal_each_pairs_figures_on_the_resampled_rows():
    """A resample weights the rows: each pair's figures are scikit-learn's on the repeated rows (a
    row's precision depends on how many other rows chose its match), the statistic their mean."""
    from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score

    from embeval import stats
    from embeval.evaluate import bitext

    rng = np.random.default_rng(13)
    n, pairs = 40, 9
    right = rng.random((n, pairs)) < 0.5
    pred = np.where(right, np.arange(n)[:, None], rng.integers(0, 6, (n, pairs)))  # rows 0-5 chosen often
    W = stats.resample_counts(stats.rng_for(3, "parallel", "all"), n, 8)
    values = bitext.parallel_figures(W, pred)
    for b, row in enumerate(W):
        repeated = np.repeat(np.arange(n), row.astype(np.int64))
        expected = {
            name: np.mean([score(repeated, pred[repeated, p]) for p in range(pairs)])
            for name, score in (
                ("accuracy", accuracy_score),
                ("f1", lambda g, p: f1_score(g, p, average="weighted", zero_division=0)),
                ("precision", lambda g, p: precision_score(g, p, average="weighted", zero_division=0)),
                ("recall", lambda g, p: recall_score(g, p, average="weighted", zero_division=0)),
            )
        }
        for name, value in expected.items():
            assert values[name][b] == pytest.approx(value, abs=1e-12), name
    each = bitext.parallel_figures(np.ones((1, n)), pred, per_pair=True)
    for p in range(pairs):
        assert each["f1"][p] == pytest.approx(f1_score(np.arange(n), pred[:, p], average="weighted"), abs=1e-15)


# Instruction retrieval: IFIR's levels (IFIRScifact), InstructIR's robustness@10, IFIR's retrieval-only
# tasks (IFIRNFCorpus); and WebQAT2TRetrieval, text-to-text retrieval typed Any2AnyRetrieval.


def instructed_copy(client, root, rng, name, query_ids, instructions=True):
    """A retrieval copy whose queries (ids given) carry instructions: each query shares words with
    its relevant documents; an instruction adds words of its own."""
    corpus = [{"_id": f"d{i}", "title": "", "text": t} for i, t in enumerate(words(rng, 60, 20))]
    queries, given, qrels = [], [], []
    for q in query_ids:
        relevant = [int(d) for d in rng.choice(60, size=3, replace=False)]
        text = " ".join(corpus[relevant[0]]["text"].split()[:2]) + " " + words(rng, 1, 20)[0]
        queries.append({"_id": q, "text": text})
        given.append({"query-id": q, "instruction": " ".join(words(rng, 2, 20))})
        qrels += [{"query-id": q, "corpus-id": f"d{d}", "score": int(rng.integers(1, 3))} for d in relevant]
    configs = {"corpus": {"corpus": corpus}, "queries": {"queries": queries}, "default": {"test": qrels}}
    if instructions:
        configs["instruction"] = {"instruction": given}
    task = client.get_task(name)
    write_snapshot(root, task.metadata.dataset["path"], task.metadata.dataset["revision"], configs)


INSTRUCTED = "IFIRScifact,InstructIR,IFIRNFCorpus,WebQAT2TRetrieval"


def instructed_copies(client, root, rng):
    instructed_copy(client, root, rng, "IFIRScifact", [f"q{i}-v{1 + i % 3}" for i in range(14)])
    instructed_copy(client, root, rng, "InstructIR", [f"{i // 3}_{i % 3}" for i in range(15)])
    instructed_copy(client, root, rng, "IFIRNFCorpus", [f"n{i}" for i in range(10)])
    instructed_copy(client, root, rng, "WebQAT2TRetrieval", [f"w{i}" for i in range(10)], instructions=False)


def mteb_fields(record):
    """{embeval task: (its mteb task, MTEB's score fields of its results)}."""
    from embeval.tasks.mteb_tasks import part_score
    from embeval.tasks.registry import recorded_spec

    out = {}
    for name, entry in record["tasks"].items():
        spec = recorded_spec(name, entry)
        out[name] = (spec.mteb.name, part_score(spec, entry["results"])[0])
    return out


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_instruction_retrieval_and_webqa_by_name_equal_mtebs(client, cli, tmp_path, family):
    root = tmp_path / "datasets"
    instructed_copies(client, root, np.random.default_rng(14))
    record, manifest = ours(cli, tmp_path, INSTRUCTED, root, family)
    exact = family == "hashed"  # mathematically equal cosines equal in both arms (mteb's float32: rounding noise)
    reference = theirs(client, INSTRUCTED, root, family, exact)
    # nAUC ranks the queries by their scores' spread, which the tie-heavy family's float64 scores move
    leave_out = ("mteb_version", "nauc_") if exact else ("mteb_version",)
    protocols = {name: entry["declaration"]["declaration"].get("protocol") for name, entry in record["tasks"].items()}
    assert protocols == {
        "IFIRScifact": "levels",
        "InstructIR": "robustness",
        "IFIRNFCorpus": "instructed",
        "WebQAT2TRetrieval": None,
    }
    assert record["tasks"]["WebQAT2TRetrieval"]["kind"] == "retrieval"
    assert record["mteb"]["WebQAT2TRetrieval"]["type"] == "Any2AnyRetrieval"
    for task, fields in mteb_fields(record).values():
        (expected,) = reference[task].scores["test"]
        same_scores(
            fields, {k: v for k, v in expected.items() if k not in ("hf_subset", "languages")}, EXACT, leave_out
        )
        assert record["mteb"][task]["value"] == pytest.approx(reference[task].get_score(), abs=EXACT), task
    levels = record["tasks"]["IFIRScifact"]
    assert set(levels["ci"]["figures"]) >= {"level_scores.level_1", "level_scores.level_3", "ndcg_at_20"}
    robust = record["tasks"]["InstructIR"]
    assert robust["results"]["query_groups"] == 5 and robust["ci"]["figures"]["robustness_at_10"]["n"] == 5
    assert manifest["tasks"]["InstructIR"]["mteb"]["encode_as"] == {"instructed_query": "query", "document": "document"}
    check_export(cli, client, tmp_path, family, reference, leave_out)


# The protocols in task files: what reports, comparisons and refusals make of them.

PARALLEL_TASK = (
    'name = "Parallel"\nkind = "bitext-mining"\nprotocol = "parallel"\n{keys}[files]\ntest = "parallel.jsonl"\n'
)
KFOLD_TASK = 'name = "Folds"\nkind = "classification"\nprotocol = "mteb-kfold"\n{keys}[files]\nall = "all.jsonl"\n'
INSTRUCTED_TASK = (
    'name = "Instructed"\nkind = "instruction-retrieval"\nprotocol = "{protocol}"\n[files]\ncorpus = "corpus.jsonl"\n'
    'queries = "queries.jsonl"\nqrels = "qrels.tsv"\ninstructions = "instructions.jsonl"\n'
)


def lines(rows):
    return "".join(json.dumps(row) + "\n" for row in rows)


def parallel_files(rng, rows=30):
    shared = words(rng, rows, 10)
    return {"parallel.jsonl": lines({c: f"{shared[i]} {words(rng, 1, 30)[0]}" for c in "abc"} for i in range(rows))}


def instructed_files(rng, ids):
    corpus = [{"_id": f"d{i}", "title": "", "text": t} for i, t in enumerate(words(rng, 40, 20))]
    qrels = ["query-id\tcorpus-id\tscore"] + [f"{q}\td{int(rng.integers(0, 40))}\t1" for q in ids]
    return {
        "corpus.jsonl": lines(corpus),
        "queries.jsonl": lines({"_id": q, "text": words(rng, 1, 20)[0]} for q in ids),
        "qrels.tsv": "\n".join(qrels) + "\n",
        "instructions.jsonl": lines({"query-id": q, "instruction": words(rng, 1, 20)[0]} for q in ids),
    }


def scored(cli, folder, declaration, files, name, family):
    """(results path) of the task file's task scored with the family's vectors (export, vectors, score)."""
    folder.mkdir(parents=True, exist_ok=True)
    for relative, text in files.items():
        (folder / relative).write_text(text, encoding="utf-8")
    (folder / "task.toml").write_text(declaration, encoding="utf-8")
    export, vectors, out = folder / f"export-{family}", folder / f"{family}.h5", folder / f"{family}.json"
    common = ("--data", folder / "none", "--task-file", folder / "task.toml", "--tasks", name)
    done = cli("export-sentences", *common, "--out", export)
    assert done.exit_code == 0, done.stderr
    vector = FAMILIES[family]
    write(vectors, export, lambda texts: np.stack([vector(t) for t in texts]), progress=False)
    done = cli("score", vectors, *common, "--bootstrap", "100", "--out", out, "--save-predictions")
    assert done.exit_code == 0, done.stderr
    return out, done.stdout


@pytest.mark.parametrize(
    "name, declaration, files",
    [
        ("Parallel", PARALLEL_TASK.format(keys=""), parallel_files),
        ("Folds", KFOLD_TASK.format(keys="n_splits = 3\n"), None),
        ("Instructed", INSTRUCTED_TASK.format(protocol="robustness"), None),
        ("Instructed", INSTRUCTED_TASK.format(protocol="levels"), None),
    ],
)
def test_new_protocols_are_reported_and_compared(cli, tmp_path, name, declaration, files):
    """Each protocol scored from a task file with two families of vectors: its headline and interval in
    the terminal, `embeval report` and `embeval compare` (paired on the same resampled items)."""
    rng = np.random.default_rng(15)
    if name == "Folds":
        files = {"all.jsonl": lines({"text": t, "label": int(rng.integers(0, 3))} for t in words(rng, 40, 12))}
    elif name == "Instructed":
        files = instructed_files(rng, [f"{i // 3}_v{1 + i % 3}" for i in range(18)])
    else:
        files = files(rng)
    runs = [scored(cli, tmp_path, declaration, files, name, family) for family in sorted(FAMILIES)]
    entry = json.loads(runs[0][0].read_text())["tasks"][name]
    headline = {"Parallel": "f1", "Folds": "accuracy"}.get(
        name, "robustness_at_10" if "robust" in declaration else "ndcg_at_10"
    )
    interval = entry["ci"]["figures"][headline]
    assert interval["low"] <= entry["results"][headline] <= interval["high"]
    assert name in runs[0][1]
    report = cli("report", runs[0][0])
    assert report.exit_code == 0 and name in report.stdout, report.stderr
    compared = cli("compare", runs[0][0], runs[1][0])
    assert compared.exit_code == 0 and name in compared.stdout, compared.stderr
    if "levels" in declaration:
        assert set(entry["results"]["level_scores"]) == {"level_1", "level_2", "level_3"}
        assert "level_scores.level_2" in entry["ci"]["figures"]


@pytest.mark.parametrize(
    "declaration, files, fragments",
    [
        (
            KFOLD_TASK.format(keys=""),
            {"all.jsonl": lines({"text": f"t{i}", "label": i % 2} for i in range(4))},
            ["4 sentences, fewer than the n_splits = 5 folds"],
        ),
        (KFOLD_TASK.format(keys="n_splits = 1\n"), {"all.jsonl": ""}, ["n_splits", "must be an integer >= 2"]),
        (PARALLEL_TASK.format(keys='pairs = ["a-b-c"]\n'), {"parallel.jsonl": ""}, ["pairs", "'a-b-c'"]),
        (
            PARALLEL_TASK.format(keys='pairs = ["a-z"]\n'),
            {"parallel.jsonl": lines([{"a": "x", "b": "y"}])},
            ["parallel.jsonl", "z"],
        ),
        (
            INSTRUCTED_TASK.format(protocol="levels"),
            {**instructed_files(np.random.default_rng(1), ["q_v1", "q_v2"])},
            ["no evaluated query id holds 'v3'"],
        ),
        (
            INSTRUCTED_TASK.format(protocol="robustness"),
            {
                **instructed_files(np.random.default_rng(1), ["a_1", "a_2"]),
                "instructions.jsonl": lines([{"query-id": "a_1", "instruction": "x"}]),
            },
            ["instructions.jsonl", "1 queries have no instruction (first: 'a_2')"],
        ),
    ],
)
def test_bad_new_protocol_data_is_one_line(cli, tmp_path, declaration, files, fragments):
    from reliability_helpers import refused

    for relative, text in files.items():
        (tmp_path / relative).write_text(text, encoding="utf-8")
    (tmp_path / "task.toml").write_text(declaration, encoding="utf-8")
    refused(cli("tasks", "--task-file", tmp_path / "task.toml", "--data", tmp_path / "none"), *fragments)
