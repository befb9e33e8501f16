"""The agreement matrix: every MTEB kind x three families of vectors x the similarities the kind takes,
scored by `embeval score` and exported by `embeval export-mteb`, against mteb 2.26.24's own task of
that type evaluated on the same vectors (an encoder that computes them from the texts; mteb's own
similarity functions).

Families: "gaussian" (each word a Gaussian vector, a text the sum of its words' plus Gaussian noise:
no ties), "counts" (hashed word counts: small integers, many mathematically equal similarities) and
"duplicates" (Gaussian, a third of the texts given one of five shared vectors: exact ties).

Per cell, two checks: the exported file's score keys are mteb's own (the same set, main_score
included), and every figure is within the kind's bound of AGREEMENT below (1e-6: "equal"; a kind
that keeps another rule on purpose has a larger bound, the one measured, stated in docs/mteb-kinds.md).
docs/mteb-kinds.md's agreement table is checked against AGREEMENT.

A new kind joins with one entry of CASES (how to build a small task of it and run mteb's task on the
same texts) and one of AGREEMENT.
"""

import json
import math
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from mteb_helpers import metadata, mteb_client
from threadpoolctl import threadpool_limits

from embeval.formats.vectors import write

ROOT = Path(__file__).resolve().parent.parent
DIM = 16
EQUAL = 1e-6

# Each kind: the similarities its task files take ("-": it uses none), and the bound of its figures
# against mteb's per family of vectors (gaussian, counts, duplicates). docs/mteb-kinds.md's agreement
# table states the same. STS keeps float64 cosines on purpose (identical vectors tie exactly;
# docs/sts-cosine.md): mteb's float32 cosines order mathematically equal cosines by rounding noise,
# which moves Spearman's ranks with count vectors (measured 1.7e-2; 1.5e-8 on the other families).
AGREEMENT = {
    "retrieval": (("cosine", "dot"), (EQUAL, 4e-2, EQUAL)),  # hashed counts: which tied documents a cut-off keeps
    "reranking": (("cosine", "dot"), (EQUAL, EQUAL, EQUAL)),
    "pair-classification": (("cosine", "dot"), (EQUAL, EQUAL, EQUAL)),
    "classification": (("-",), (EQUAL, EQUAL, EQUAL)),
    "clustering": (("-",), (EQUAL, EQUAL, EQUAL)),
    "summarization": (("cosine", "dot"), (EQUAL, EQUAL, EQUAL)),
    "bitext-mining": (("cosine", "dot"), (EQUAL, EQUAL, EQUAL)),
    "sts": (("cosine",), (1e-7, 2e-2, 1e-7)),
}
# mteb's keys an export does not write (the figures embeval does not compute), per kind.
NOT_WRITTEN = {
    "sts": {"manhattan_pearson", "manhattan_spearman", "euclidean_pearson", "euclidean_spearman"},
}
FAMILIES = ("gaussian", "counts", "duplicates")
# Figures that follow the order of tied scores, left out of a kind's bound for the tie-heavy families:
# retrieval's exact search keeps mathematically tied documents in one canonical order whatever the
# blocks (docs/retrieval-search.md), where mteb keeps torch.topk's; the nAUC figures rank queries by
# their top scores' max, std and differences, which the tie order and the last bit of each score move.
TIE_ORDER = {"retrieval": ("nauc_",)}


# Vectors: pure functions of the text, so embeval's vectors file and mteb's encoder hold the same rows.


def _seed(text):
    return zlib.crc32(text.encode("utf-8"))


def _words(text):
    return sum(np.random.default_rng(_seed(word)).normal(size=DIM) for word in text.split())


def gaussian(text):
    return _words(text) + 0.3 * np.random.default_rng(_seed(text) + 1).normal(size=DIM)


def counts(text):
    vector = np.zeros(DIM)
    for word in text.split():
        vector[_seed(word) % DIM] += 1
    return vector


def duplicates(text):
    return _words(f"shared{_seed(text) % 5}") if _seed(text) % 3 == 0 else gaussian(text)


def encoder_of(family):
    function = {"gaussian": gaussian, "counts": counts, "duplicates": duplicates}[family]
    return lambda texts: np.stack([function(t) for t in texts]).astype(np.float32)


class MtebModel:
    """mteb's encoder protocol: the family's vectors of the texts, mteb's own similarity functions."""

    mteb_model_meta = None

    def __init__(self, family, similarity):
        self.vectors = encoder_of(family)
        self.function = "cosine" if similarity == "-" else similarity

    def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):
        return self.vectors([text for batch in inputs for text in batch["text"]])

    def similarity(self, a, b):
        from mteb.models.model_meta import ScoringFunction
        from mteb.similarity_functions import select_similarity

        return select_similarity(a, b, ScoringFunction(self.function))

    def similarity_pairwise(self, a, b):
        from mteb.models.model_meta import ScoringFunction
        from mteb.similarity_functions import select_pairwise_similarity

        return select_pairwise_similarity(a, b, ScoringFunction(self.function))


# Small tasks of each kind: texts of topic words and common words (repeated texts happen).


def text(rng, topic, n_words=None):
    n = n_words or int(rng.integers(3, 7))
    words = [f"t{topic}w{rng.integers(0, 5)}" if rng.random() < 0.6 else f"c{rng.integers(0, 8)}" for _ in range(n)]
    return " ".join(words)


def tsv(header, rows):
    return "\t".join(header) + "\n" + "".join("\t".join(map(str, row)) + "\n" for row in rows)


def jsonl(rows):
    return "".join(json.dumps(row) + "\n" for row in rows)


def in_memory_task(base, task_type, main_score, splits, **attributes):
    from datasets import Dataset, DatasetDict

    name = f"Agree{base.__name__}"
    namespace = {"metadata": metadata(name, task_type, main_score), "load_data": lambda self, **kwargs: None}
    task = type(name, (base,), dict(namespace, **attributes))()
    task.dataset = DatasetDict({split: Dataset.from_dict(columns) for split, columns in splits.items()})
    task.data_loaded = True
    return task


@dataclass
class Built:
    declaration: str  # the task file's kind keys (before [files])
    files: dict  # relative path -> content
    run_mteb: object  # (MtebModel) -> mteb's scores of the default subset


def retrieval_case(rng, reranking=False):
    from datasets import Dataset
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData

    docs = [(f"d{i}", text(rng, i % 4, 8)) for i in range(80)]
    queries = [(f"q{i}", text(rng, i % 4, 4)) for i in range(30)]
    qrels = [(q, f"d{j}", int(rng.integers(1, 3))) for i, (q, _) in enumerate(queries) for j in range(i % 4, 80, 16)]
    # 4 to 20 candidates a query: reranking scores each number's queries together
    candidates = [(q, f"d{j}") for i, (q, _) in enumerate(queries) for j in rng.permutation(80)[:20][: 4 + i * 7 % 17]]
    files = {
        "corpus.jsonl": jsonl({"_id": d, "text": t} for d, t in docs),
        "queries.jsonl": jsonl({"_id": q, "text": t} for q, t in queries),
        "qrels.tsv": tsv(("query-id", "corpus-id", "score"), qrels),
    }
    if reranking:
        files["candidates.tsv"] = tsv(("query-id", "corpus-id"), candidates)

    def run(model):
        relevant, top_ranked = {}, None
        for q, d, g in qrels:
            relevant.setdefault(q, {})[d] = g
        if reranking:
            top_ranked = {}
            for q, d in candidates:
                top_ranked.setdefault(q, []).append(d)
        split = RetrievalSplitData(
            corpus=Dataset.from_list([{"id": d, "title": "", "text": t} for d, t in docs]),
            queries=Dataset.from_list([{"id": q, "text": t} for q, t in queries]),
            relevant_docs=relevant,
            top_ranked=top_ranked,
        )

        class Task(AbsTaskRetrieval):
            metadata = metadata(
                "AgreeReranking" if reranking else "AgreeRetrieval",
                "Reranking" if reranking else "Retrieval",
                "map_at_1000" if reranking else "ndcg_at_10",
            )

            def load_data(self, **kwargs):
                self.dataset = {"default": {"test": split}}
                self.data_loaded = True

        kwargs = {"batch_size": 64, "show_progress_bar": False}
        return Task().evaluate(model, split="test", encode_kwargs=kwargs)["default"]

    return Built("", files, run)


def reranking_case(rng):
    return retrieval_case(rng, reranking=True)


def pairs_case(rng):
    from mteb.abstasks.pair_classification import AbsTaskPairClassification

    rows = []
    for i in range(160):
        a = text(rng, i % 4)
        b = text(rng, i % 4) if i % 2 else text(rng, (i + 1) % 4)
        rows.append((a, b, int(i % 2 if rng.random() < 0.8 else 1 - i % 2)))
    rows += rows[:20]  # repeated pairs

    def run(model):
        columns = {"sentence1": [r[0] for r in rows], "sentence2": [r[1] for r in rows], "labels": [r[2] for r in rows]}
        task = in_memory_task(AbsTaskPairClassification, "PairClassification", "max_ap", {"test": columns})
        return task.evaluate(model, split="test", encode_kwargs={"batch_size": 64})["default"]

    return Built('protocol = "mteb"\n', {"test.tsv": tsv(("sentence1", "sentence2", "label"), rows)}, run)


def classification_case(rng):
    from mteb.abstasks.classification import AbsTaskClassification

    def split(n):
        labels = rng.integers(0, 3, n)
        return [text(rng, int(y)) for y in labels], labels

    (train, train_y), (test, test_y) = split(240), split(120)
    files = {
        "train.tsv": tsv(("text", "label"), zip(train, train_y)),
        "test.tsv": tsv(("text", "label"), zip(test, test_y)),
    }

    def run(model):
        splits = {
            "train": {"text": train, "label": train_y.tolist()},
            "test": {"text": test, "label": test_y.tolist()},
        }
        task = in_memory_task(AbsTaskClassification, "Classification", "accuracy", splits, n_experiments=3)
        return task.evaluate(model, split="test", encode_kwargs={"batch_size": 64})["default"]

    return Built('protocol = "mteb"\nn_experiments = 3\n', files, run)


def clustering_case(rng):
    from mteb.abstasks.clustering import AbsTaskClustering

    labels = rng.integers(0, 4, 240)
    texts = [text(rng, int(y)) for y in labels]
    keys = "embed_all = true\ndocuments_per_experiment = 120\nn_experiments = 3\n"

    def run(model):
        columns = {"sentences": texts, "labels": [[int(y)] for y in labels]}
        task = in_memory_task(
            AbsTaskClustering,
            "Clustering",
            "v_measure",
            {"test": columns},
            max_documents_per_cluster=120,
            n_clusters=3,
            max_fraction_of_documents_to_embed=None,
        )
        return task.evaluate(model, split="test", encode_kwargs={"batch_size": 64})["default"]

    return Built(keys, {"test.tsv": tsv(("text", "label"), zip(texts, labels))}, run)


def summarization_case(rng):
    from mteb._evaluators.text.summarization_evaluator import SummarizationEvaluator
    from mteb.abstasks.text.summarization import AbsTaskSummarization

    rows = []
    for t in range(14):
        human = [text(rng, t % 4) for _ in range(int(rng.integers(2, 5)))]
        machine = [text(rng, t % 4) if rng.random() < 0.7 else human[0] for _ in range(int(rng.integers(5, 10)))]
        rows.append(
            {
                "text": f"text {t}",
                "human_summaries": human,
                "machine_summaries": machine,
                "relevance": rng.integers(1, 6, len(machine)).tolist(),
            }
        )

    def run(model):
        columns = {key: [row[key] for row in rows] for key in rows[0]}
        task = in_memory_task(
            AbsTaskSummarization,
            "Summarization",
            "cosine_spearman",
            {"test": columns},
            evaluator=SummarizationEvaluator,
            min_score=1,
            max_score=5,
        )
        return task.evaluate(model, split="test", encode_kwargs={"batch_size": 64})["default"]

    return Built("", {"test.jsonl": jsonl(rows)}, run)


def bitext_case(rng):
    from mteb.abstasks.text.bitext_mining import AbsTaskBitextMining

    first = [text(rng, i % 4) for i in range(150)]
    second = [" ".join(rng.permutation(t.split())[: max(2, len(t.split()) - 1)]) for t in first]

    def run(model):
        columns = {"sentence1": first, "sentence2": second}
        task = in_memory_task(AbsTaskBitextMining, "BitextMining", "f1", {"test": columns})
        return task.evaluate(model, split="test", encode_kwargs={"batch_size": 64})["default"]

    return Built("", {"test.tsv": tsv(("sentence1", "sentence2"), zip(first, second))}, run)


def sts_case(rng):
    from mteb.abstasks.sts import AbsTaskSTS

    rows = []
    for i in range(150):
        a = text(rng, i % 4)
        b = text(rng, i % 4 if i % 3 else (i + 1) % 4)
        rows.append((a, b, float(rng.integers(0, 6))))

    def run(model):
        columns = {"sentence1": [r[0] for r in rows], "sentence2": [r[1] for r in rows], "score": [r[2] for r in rows]}
        task = in_memory_task(AbsTaskSTS, "STS", "cosine_spearman", {"test": columns}, min_score=0, max_score=5)
        return task.evaluate(model, split="test", encode_kwargs={"batch_size": 64})["default"]

    return Built("", {"test.tsv": tsv(("sentence1", "sentence2", "score"), rows)}, run)


CASES = {
    "retrieval": retrieval_case,
    "reranking": reranking_case,
    "pair-classification": pairs_case,
    "classification": classification_case,
    "clustering": clustering_case,
    "summarization": summarization_case,
    "bitext-mining": bitext_case,
    "sts": sts_case,
}


def task_name(kind):
    return "Agree" + kind.title().replace("-", "")


def files_section(kind, files):
    keys = {
        "retrieval": {"corpus": "corpus.jsonl", "queries": "queries.jsonl", "qrels": "qrels.tsv"},
        "reranking": {
            "corpus": "corpus.jsonl",
            "queries": "queries.jsonl",
            "qrels": "qrels.tsv",
            "candidates": "candidates.tsv",
        },
        "classification": {"train": "train.tsv", "test": "test.tsv"},
    }.get(kind, {"test": next(iter(files))})
    return "".join(f'{key} = "{kind}/{path}"\n' for key, path in keys.items())


def score_cell(cli, folder, family, similarity, built):
    """Write every kind's task, embed with the family, score and export: {kind: exported scores}."""
    tasks = folder / "tasks"
    tasks.mkdir(parents=True)
    for kind, case in built.items():
        for relative, content in case.files.items():
            (tasks / kind / relative).parent.mkdir(parents=True, exist_ok=True)
            (tasks / kind / relative).write_text(content, encoding="utf-8")
        declaration = f'name = "{task_name(kind)}"\nkind = "{kind}"\n{case.declaration}'
        if similarity != "-" and kind != "sts":
            declaration += f'similarity = "{similarity}"\n'
        declaration += (
            f'[files]\n{files_section(kind, case.files)}[mteb]\nname = "{task_name(kind)}"\nrevision = "r1"\n'
        )
        (tasks / f"{kind}.toml").write_text(declaration, encoding="utf-8")
    names = ",".join(task_name(kind) for kind in built)
    export, vectors, out = folder / "sentences", folder / "vectors.h5", folder / "results.json"
    result = cli("export-sentences", "--data", folder / "none", "--out", export, "--task-file", tasks, "--tasks", names)
    assert result.exit_code == 0, result.stderr
    write(vectors, export, encoder_of(family), progress=False)
    result = cli("score", vectors, "--data", folder / "none", "--task-file", tasks, "--tasks", names, "--out", out)
    assert result.exit_code == 0, result.stderr
    result = cli("export-mteb", out, "--model", "agree/model", "--out", folder / "mteb")
    assert result.exit_code == 0, result.stderr
    written = folder / "mteb" / "results" / "agree__model" / "no_revision_available"
    exported = {}
    for kind in built:
        content = json.loads((written / f"{task_name(kind)}.json").read_text())
        assert content["dataset_revision"] == "r1"  # the task file's [mteb] revision
        (entry,) = content["scores"]["test"]
        notes = entry.get("embeval_notes", {})  # embeval's own key, beside mteb's: the tie exposure
        assert set(notes) <= {"tie_exposure"} and ("tie_exposure" in notes) == (kind in ("retrieval", "reranking"))
        exported[kind] = {k: v for k, v in entry.items() if k not in ("hf_subset", "languages", "embeval_notes")}
    return exported


def difference(ours, theirs):
    """The largest absolute difference over the figures (lists element-wise; NaN equals NaN)."""
    if isinstance(theirs, dict):
        return max((difference(ours[k], v) for k, v in theirs.items()), default=0.0)
    if isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs)
        return max((difference(a, b) for a, b in zip(ours, theirs, strict=True)), default=0.0)
    if theirs is None:  # mteb's null (e.g. a multi-class experiment's ap)
        assert ours is None
        return 0.0
    if isinstance(theirs, float) and math.isnan(theirs):
        assert isinstance(ours, float) and math.isnan(ours)
        return 0.0
    return abs(float(ours) - float(theirs))


CELLS = [(family, similarity) for family in FAMILIES for similarity in ("cosine", "dot", "-")]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::RuntimeWarning")
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")
@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")
@pytest.mark.parametrize("family, similarity", CELLS)
def test_agreement_matrix(cli, tmp_path, family, similarity, monkeypatch):
    from embeval.evaluate import retrieval

    monkeypatch.setattr(retrieval, "RERANK_QUERIES", 4)  # reranking's queries in parts, as at a large task's size
    monkeypatch.setattr(retrieval, "RERANK_CELLS", 24 * DIM)  # gathers of 1 to 6 queries' candidates (4 to 20 each)
    mteb_client()
    kinds = [kind for kind, (similarities, _) in AGREEMENT.items() if similarity in similarities]
    built = {kind: CASES[kind](np.random.default_rng(7)) for kind in kinds}
    failures = []
    with threadpool_limits(1):
        exported = score_cell(cli, tmp_path, family, similarity, built)
        for kind in kinds:
            theirs = built[kind].run_mteb(MtebModel(family, similarity))
            written = set(theirs) - NOT_WRITTEN.get(kind, set())
            assert set(exported[kind]) == written, (kind, set(exported[kind]) ^ written)
            bounded = {
                key for key in written if family == "gaussian" or not key.startswith(TIE_ORDER.get(kind, ("\0",)))
            }
            measured = difference(exported[kind], {key: theirs[key] for key in bounded})
            print(f"AGREEMENT {kind} {family} {similarity} {measured:.3g}")
            if measured > AGREEMENT[kind][1][FAMILIES.index(family)]:
                failures.append((kind, family, similarity, measured))
    assert not failures, failures


def test_every_kind_has_a_case_and_the_docs_state_its_agreement():
    assert set(CASES) == set(AGREEMENT)
    text = (ROOT / "docs" / "mteb-kinds.md").read_text()
    rows = {}
    for line in text.split("<!-- agreement table -->")[1].strip().splitlines():
        if not line.startswith("|"):
            break
        cells = [cell.strip().strip("`") for cell in line.strip().strip("|").split("|")]
        if cells[0] in AGREEMENT:
            similarities = tuple(s.strip() for s in cells[1].split(","))
            rows[cells[0]] = (similarities, tuple(float(cell) for cell in cells[2:5]))
    assert rows == AGREEMENT


@pytest.mark.parametrize("threads", [1, 2])
def test_reranking_batched_product_gives_the_one_query_products_bits(threads):
    """Reranking scores queries with as many candidates at once (mteb_similarity.per_query): every
    score must be the bit of mteb's one-query product, on both sides of torch's kernel threshold,
    for Gaussian and tie-heavy vectors, cosine and dot."""
    import torch

    from embeval.evaluate import mteb_similarity as ms

    rng = np.random.default_rng(7)
    before = torch.get_num_threads()
    with threadpool_limits(threads):
        torch.set_num_threads(threads)
        try:
            _check_batched_products(ms, rng)
        finally:
            torch.set_num_threads(before)


def _check_batched_products(ms, rng):
    import torch

    for d, c in [(16, 20), (16, 25), (100, 3), (100, 4), (384, 1), (384, 2), (384, 41), (1024, 1), (768, 100)]:
        for ties in (False, True):
            shape_q, shape_d = (12, d), (12, c, d)
            if ties:
                q = torch.as_tensor(rng.integers(-3, 4, shape_q).astype(np.float32) * 0.37)
                docs = torch.as_tensor(rng.integers(-3, 4, shape_d).astype(np.float32) * 0.11)
            else:
                q = torch.as_tensor(rng.standard_normal(shape_q, dtype=np.float32))
                docs = torch.as_tensor(rng.standard_normal(shape_d, dtype=np.float32))
            for similarity in ("cosine", "dot"):
                one_by_one = torch.cat([ms.matrix(q[i], docs[i], similarity) for i in range(len(q))])
                assert torch.equal(ms.per_query(q, docs, similarity), one_by_one), (d, c, ties, similarity)
                # the whole table normalized once (the reranking's way): the same bits
                table = ms.normalized(docs.reshape(-1, d), similarity)
                prepared = ms.per_query(ms.normalized(q, similarity), table.view(12, c, d), similarity, prepared=True)
                assert torch.equal(prepared, one_by_one), (d, c, ties, similarity)
