"""The retrieval and reranking kinds end to end: a task file over BEIR's files, the export's query and
document lists, vectors written per role, `embeval score`, and mteb 2.26's own evaluator on the same
vectors giving the same figures; the intervals, a paired comparison, the MTEB export loaded back by
mteb, a tiny memory budget, and bad input.

The synthetic tasks (tests/test_mteb_retrieval.py) have small-integer vectors and the dot product as
similarity, so every score is exact in float32 and float64 alike and both sides see the same ties.
Agreement measured: every figure equal to mteb's reported (rounded) figure to 0.0."""

import json
import os

import h5py
import numpy as np
import pytest
from mteb_helpers import mteb_client
from test_mteb_retrieval import run_mteb, synthetic, vectors_of, write_task

from embeval.formats.vectors import write
from embeval.tasks import beir

TASK_FILE = """name = "{name}"
kind = "{kind}"
similarity = "dot"
[files]
corpus = "{folder}/corpus.jsonl"
queries = "{folder}/queries.jsonl"
qrels = "{folder}/qrels/test.tsv"
"""


@pytest.fixture(scope="module")
def client():
    return mteb_client()


def declare(tmp_path, task, kind="retrieval", name="Synthetic", extra=""):
    folder = tmp_path / "data"
    write_task(folder, task)
    text = TASK_FILE.format(name=name, kind=kind, folder="data") + extra
    if kind == "reranking":
        text += 'candidates = "data/top_ranked.tsv"\n'
    (tmp_path / "task.toml").write_text(text, encoding="utf-8")
    return tmp_path / "task.toml", folder


def embed(task, tmp_path, export, out, shift=0):
    """The vectors file of an export: each role's texts looked up in the synthetic task's tables."""
    data = beir.load_retrieval(
        tmp_path / "data" / "corpus.jsonl",
        tmp_path / "data" / "queries.jsonl",
        tmp_path / "data" / "qrels" / "test.tsv",
        "T",
    )
    queries, documents = vectors_of(data, task)
    tables = {"query": dict(zip(data.query_texts, queries)), "document": dict(zip(data.doc_texts, documents))}

    def encoder(role):
        return lambda texts: np.array([tables[role][t] + shift for t in texts], dtype=np.float32)

    write(out, export, {"query": encoder("query"), "document": encoder("document")}, progress=False)
    return data


def prepared(tmp_path, cli, task, extra=""):
    """The task file of a declared synthetic task, its export (sentences/) and its vectors (v.h5)."""
    task_file, _ = declare(tmp_path, task, extra=extra)
    export = tmp_path / "sentences"
    cli("export-sentences", "--data", tmp_path / "none", "--out", export, "--task-file", task_file)
    embed(task, tmp_path, export, tmp_path / "v.h5")
    return task_file


def error_line(result):
    """The one error line of a refused command."""
    errors = [line for line in result.stderr.splitlines() if line.startswith("embeval: error:")]
    assert result.exit_code == 2 and len(errors) == 1, result.stderr
    return errors[0]


def score(cli, tmp_path, task_file, out, *extra):
    """`embeval score` of v.h5 with the task file, results to out."""
    return cli("score", tmp_path / "v.h5", "--data", tmp_path / "none", "--task-file", task_file, "--out", out, *extra)


@pytest.mark.parametrize("kind", ["retrieval", "reranking"])
def test_kind_equals_mtebs_evaluator(client, tmp_path, cli, kind):
    task = synthetic(seed=3, span=2)
    task_file, _ = declare(tmp_path, task, kind)
    export = tmp_path / "sentences"
    assert (
        cli(
            "export-sentences",
            "--data",
            tmp_path / "none",
            "--out",
            export,
            "--task-file",
            task_file,
            "--tasks",
            "Synthetic",
        ).exit_code
        == 0
    )
    manifest = json.loads((export / "manifest.json").read_text())
    assert set(manifest["tasks"]["Synthetic"]["roles"]) == {"query", "document"}
    data = embed(task, tmp_path, export, tmp_path / "v.h5")
    result = cli(
        "score",
        tmp_path / "v.h5",
        "--data",
        tmp_path / "none",
        "--task-file",
        task_file,
        "--out",
        tmp_path / "r.json",
        "--bootstrap",
        "200",
    )
    assert result.exit_code == 0, result.stderr
    entry = json.loads((tmp_path / "r.json").read_text())["tasks"]["Synthetic"]
    report = cli("report", tmp_path / "r.json")
    title = "Retrieval (MTEB), x100" if kind == "retrieval" else "Reranking (MTEB), x100"
    assert report.exit_code == 0 and "mteb 2.26.24" in report.stdout.split(f"### {title}")[1], report.stdout
    reported, *_ = run_mteb(client, task, data, reranking=kind == "reranking")
    from embeval.tasks.registry import registry

    spec = registry([task_file])["Synthetic"]
    ours = spec.kind_module.mteb_scores(spec, entry["results"])
    assert set(ours) == set(reported)  # mteb's keys, nAUC figures and accuracy included
    for name, value in ours.items():
        assert value == pytest.approx(reported[name], abs=1e-12, nan_ok=True), name
    main = "ndcg_at_10" if kind == "retrieval" else "map_at_1000"
    ci = entry["ci"]["figures"][main]
    assert ci["low"] <= entry["results"][main] <= ci["high"]
    assert ci["value"] == pytest.approx(entry["results"][main], rel=1e-12)


def test_a_tiny_memory_budget_gives_the_same_figures(client, tmp_path, cli, monkeypatch):
    """The corpus is searched in blocks of a few rows: the same figures as one block."""
    from embeval.run import shards

    task = synthetic(seed=4, span=60)
    task_file = prepared(tmp_path, cli, task)
    runs = {}
    for budget in (1 << 30, 200_000):
        monkeypatch.setattr(shards, "search_budget", lambda device, budget=budget: budget)
        out = tmp_path / f"r{budget}.json"
        assert score(cli, tmp_path, task_file, out, "--bootstrap", "0").exit_code == 0
        runs[budget] = json.loads(out.read_text())["tasks"]["Synthetic"]["results"]
    assert runs[1 << 30] == runs[200_000]


def test_the_results_record_each_lists_prompt(tmp_path, cli):
    """A list's `prompt` attribute (written by the exporters' --prompt) is recorded with its role."""
    task = synthetic(seed=7, span=30)
    task_file = prepared(tmp_path, cli, task)
    with h5py.File(tmp_path / "v.h5", "a") as f:
        f["Synthetic.query"].attrs["prompt"] = "query: "
    out = tmp_path / "r.json"
    assert score(cli, tmp_path, task_file, out, "--bootstrap", "0").exit_code == 0
    roles = json.loads(out.read_text())["tasks"]["Synthetic"]["vectors"]["roles"]
    assert roles["query"]["prompt"] == "query: " and "prompt" not in roles["document"]


def test_a_file_with_one_list_of_a_retrieval_task_is_refused(tmp_path, cli):
    """Queries without documents (an exporter that forgot a list) are an error, not a skip."""
    task = synthetic(seed=8, span=30)
    task_file = prepared(tmp_path, cli, task)
    with h5py.File(tmp_path / "v.h5", "a") as f:
        del f["Synthetic.document"]
    out = tmp_path / "r.json"
    result = score(cli, tmp_path, task_file, out)
    assert "Synthetic: the file holds /Synthetic.query but not /Synthetic.document" in error_line(result)
    assert not out.exists()


def test_a_budget_too_small_for_one_row_is_one_line_naming_the_task(tmp_path, cli, monkeypatch):
    """The need, the budget and what to do, for the task being scored; exit 2, no results written."""
    from embeval.run import shards

    task = synthetic(seed=5, span=40)
    task_file = prepared(tmp_path, cli, task)
    monkeypatch.setattr(shards, "search_budget", lambda device: 1000)
    out = tmp_path / "r.json"
    result = score(cli, tmp_path, task_file, out)
    message = error_line(result)
    assert message.startswith("embeval: error: Synthetic: the exact search of 39 queries"), message
    assert "needs at least" in message and "memory budget is 0.00 MiB" in message and "on the CPU" in message
    assert not out.exists()


def test_paired_comparison_of_two_encoders(tmp_path, cli):
    task = synthetic(seed=6, span=60)
    task_file, _ = declare(tmp_path, task)
    export = tmp_path / "sentences"
    cli("export-sentences", "--data", tmp_path / "none", "--out", export, "--task-file", task_file)
    outputs = []
    for shift in (0, 3):
        vectors = tmp_path / f"v{shift}.h5"
        embed(task, tmp_path, export, vectors, shift=shift)
        out = tmp_path / f"r{shift}.json"
        assert (
            cli(
                "score",
                vectors,
                "--data",
                tmp_path / "none",
                "--task-file",
                task_file,
                "--out",
                out,
                "--bootstrap",
                "200",
            ).exit_code
            == 0
        )
        outputs.append(out)
    compared = cli("compare", *outputs)
    assert compared.exit_code == 0, compared.stderr
    assert "Synthetic" in compared.stdout and "nDCG@10" in compared.stdout


def test_export_mteb_round_trip(client, tmp_path, cli):
    """A retrieval task declared as MTEB's SciFact (its revision from mteb's metadata) is written in MTEB's
    result format and loaded back by mteb with the same main score."""
    meta = client.get_task("SciFact").metadata
    task = synthetic(seed=7, span=60)
    extra = f'[mteb]\nname = "SciFact"\nrevision = "{meta.revision}"\n'
    task_file = prepared(tmp_path, cli, task, extra=extra)
    assert (
        cli(
            "score",
            tmp_path / "v.h5",
            "--data",
            tmp_path / "none",
            "--task-file",
            task_file,
            "--out",
            tmp_path / "r.json",
            "--bootstrap",
            "0",
        ).exit_code
        == 0
    )
    result = cli("export-mteb", tmp_path / "r.json", "--model", "my-org/my-encoder", "--out", tmp_path / "cache")
    assert result.exit_code == 0, result.stderr
    from mteb.results import TaskResult

    path = next((tmp_path / "cache").rglob("SciFact.json"))
    loaded = TaskResult.from_disk(path)
    results = json.loads((tmp_path / "r.json").read_text())["tasks"]["Synthetic"]["results"]
    assert loaded.get_score() == pytest.approx(round(results["ndcg_at_10"], 5), abs=1e-9)
    assert loaded.is_mergeable(client.get_task("SciFact"))


@pytest.mark.parametrize(
    "edit, problem",
    [
        (lambda d: (d / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tnope\t1\n"), "nope"),
        (lambda d: (d / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\thigh\n"), "integer"),
        (lambda d: (d / "corpus.jsonl").write_text(""), "no documents"),
    ],
    ids=["unknown-document", "grade", "empty-corpus"],
)
def test_bad_input_is_one_line(tmp_path, cli, edit, problem):
    from reliability_helpers import refused

    task = synthetic(seed=8, span=2)
    task_file, folder = declare(tmp_path, task)
    edit(folder)
    refused(cli("tasks", "--task-file", task_file), problem)


def test_ray_shards_give_the_single_process_figures(tmp_path, cli):
    """--ray splits the corpus into shards searched by Ray tasks (a local Ray here) and merges their
    top-k lists: the same figures as one search in this process."""
    if os.environ.get("EMBEVAL_REQUIRE_RAY") != "1":  # CI requires Ray: there a missing Ray fails
        pytest.importorskip("ray")
    task = synthetic(seed=9, span=60)
    task_file = prepared(tmp_path, cli, task)
    runs = []
    for extra in ([], ["--ray"]):
        out = tmp_path / f"r{len(extra)}.json"
        result = score(cli, tmp_path, task_file, out, "--bootstrap", "0", *extra)
        assert result.exit_code == 0, result.stderr
        runs.append(json.loads(out.read_text())["tasks"]["Synthetic"]["results"])
    assert runs[0] == runs[1]


def test_bag_of_words_baseline_scores_both_lists(tmp_path, cli):
    """--baseline-bow-dim computes the hashing bag of words of the queries and the documents and
    searches it as it searches the file's vectors."""
    task = synthetic(seed=10, span=60)
    task_file = prepared(tmp_path, cli, task)
    out = tmp_path / "r.json"
    result = score(cli, tmp_path, task_file, out, "--bootstrap", "0", "--baseline-bow-dim", "32")
    assert result.exit_code == 0, result.stderr
    base = json.loads(out.read_text())["baseline"]["tasks"]["Synthetic"]
    assert 0 <= base["results"]["ndcg_at_10"] <= 1 and base["vectors"]["dim"] == 32
    assert set(base["vectors"]) >= {"sha256", "vectors_sha256", "count"}


@pytest.mark.parametrize(
    "body",
    [
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\nq2\td1\t2\n",
        "\ufeffquery-id\tcorpus-id\tscore\r\nq1\td1\t+1\r\n\r\nq2\td2\t 2 \r\n   \n",
        "\n\nquery-id\tcorpus-id\tscore\nq2\td2\t-3",
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td1\t1\n",  # a pair twice: line by line names it
        "query-id\tcorpus-id\tscore\nq1\td9\t1\n",  # an unknown document
        "query-id\tcorpus-id\tscore\nq1\td1\t1_0\n",  # not an integer for trec_eval
        "query-id\tcorpus-id\tscore\nq1\td1\t99999999999\n",  # outside int32
        "query-id\tcorpus-id\tscore\nq1\td1\n",  # a column short
        "query-id\tcorpus-id\tscore\nq1\td1\t1\t\nq2\td2\n",  # a field more, then one fewer: as many tabs
        "query-id\tcorpus-id\tscore\nq1\td1\t1\n\u00e9\td2\t1\n",  # a query id the queries do not hold
    ],
)
def test_qrels_read_at_once_equal_the_line_by_line_reader(tmp_path, body):
    """The whole-file reader keeps the lines and figures of the line-by-line one, or leaves a file
    with anything wrong to it (which names the line)."""
    from embeval.errors import DataFileError
    from embeval.tasks import beir

    path = tmp_path / "qrels.tsv"
    path.write_bytes(body.encode("utf-8"))
    queries, docs = {"q1": 0, "q2": 1}, {"d1": 0, "d2": 1}
    chunks = [beir.PAIR_CHUNK_BYTES, 1, 2, 7, 16]  # whole, and pieces cut within lines and between them
    at_once = [beir._pairs_at_once(path, "T", beir.QRELS_HEADER, queries, docs, chunk) for chunk in chunks]
    try:
        by_line = beir._read_pairs_by_line(path, "T", beir.QRELS_HEADER, queries, docs, "judgment")
    except DataFileError:
        assert all(found is None for found in at_once)
        return
    for found in at_once:
        assert found is not None
        for a, b in zip(found, by_line):
            assert a.dtype == b.dtype and np.array_equal(a, b)


def test_a_large_candidates_file_is_read_in_pieces_as_the_line_by_line_reader_reads_it(tmp_path):
    """Many lines over many pieces (blank lines, CR LF and a BOM among them): the same rows and line
    numbers as the line-by-line reader."""
    from embeval.tasks import beir

    rng = np.random.default_rng(5)
    queries = {f"q{i}": i for i in range(300)}
    docs = {f"doc-{i}": i for i in range(1000)}
    pairs = rng.choice(300 * 1000, size=5000, replace=False)
    lines = ["query-id\tcorpus-id"] + [f"q{p // 1000}\tdoc-{p % 1000}" for p in pairs]
    for at in rng.choice(len(lines) - 1, size=40, replace=False) + 1:
        lines[at] += "\r" if at % 2 else "\n  "
    path = tmp_path / "candidates.tsv"
    path.write_bytes(("\ufeff" + "\n".join(lines) + "\n\n").encode("utf-8"))
    by_line = beir._read_pairs_by_line(path, "T", beir.CANDIDATES_HEADER, queries, docs, "candidate")
    for chunk in (beir.PAIR_CHUNK_BYTES, 997, 4096):
        found = beir._pairs_at_once(path, "T", beir.CANDIDATES_HEADER, queries, docs, chunk)
        assert found is not None
        for a, b in zip(found, by_line):
            assert a.dtype == b.dtype and np.array_equal(a, b)


@pytest.mark.parametrize(
    "body, same",
    [
        ('{"_id": "d1", "title": "T", "text": "one"}\n{"_id": 2, "text": "two"}\n', True),
        ('\ufeff{"_id": "d1", "text": "a"}\r\n\r\n  {"_id": "d2", "text": "b"}  \r\n\n', True),
        ('{"_id": "d1", "text": "a"}, {"_id": "d2", "text": "b"}\n', False),  # two values on a line
        ('[{"_id": "d1", "text": "a"}\n]\n', False),  # one value over two lines
        ('{"_id": "d1", "text": "a", "text": "b"}\n', False),  # a duplicate key: warned with its line
        ('{"_id": "d1", "text": "a"\n', False),  # malformed
        # 80 brackets in the file, 41 a line: read at once; a line nested 65 deep: left to the line reader
        (2 * ('{"_id": "d%s", "text": "a", "x": [' + "[]," * 39 + "[]]}\n") % (1, 2), True),
        ('{"_id": "d1", "text": "a", "x": ' + "[" * 65 + "]" * 65 + '}\n{"_id": "d2", "text": "b"}\n', False),
    ],
)
def test_jsonl_read_at_once_equals_the_line_by_line_reader(tmp_path, body, same):
    """The whole-file parse gives the line-by-line reader's (line, record) pairs, or leaves a file
    with anything odd to it (None)."""
    from embeval.tasks import beir

    path = tmp_path / "corpus.jsonl"
    path.write_bytes(body.encode("utf-8"))
    at_once = beir._records_at_once(path, "T")
    if same:
        assert list(zip(*at_once)) == list(beir._records_by_line(path, "T", [])) and len(at_once[0]) == 2
    else:
        assert at_once is None


@pytest.mark.parametrize(
    "lines",
    [
        ['{"_id": "d1", "title": "T", "text": " one "}', '{"_id": "d2", "title": null, "text": "two"}'],
        ['{"_id": " ", "text": "a"}', '{"_id": "x\\ty", "title": "", "text": "  "}', '{"_id": "d3", "text": ""}'],
        ['{"_id": 7, "text": "int id"}', '{"_id": "d2", "text": "b"}'],  # converted: the record loop reads it
        ['{"_id": "d1", "text": "\\ud800"}'],  # a lone surrogate: refused by the record loop
        ['{"_id": "d1", "text": "a"}', '{"_id": "d1", "text": "b"}'],  # a duplicate id: refused
        ['{"_id": "d1", "text": 3}'],  # not a string: refused
        ['{"_id": "a\\u0000b", "text": "x"}'],  # NUL in an id: refused
        ['{"text": "no id"}'],
    ],
)
@pytest.mark.parametrize("with_title", [True, False])
def test_jsonl_fields_checked_at_once_equal_the_record_loop(tmp_path, monkeypatch, caplog, lines, with_title):
    """read_jsonl's whole-list checks (_fields_at_once) give the record loop's ids, texts, warnings
    and errors: the same results with them and without."""
    from embeval.errors import DataFileError
    from embeval.tasks import beir

    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def read():
        caplog.clear()
        try:
            got = beir.read_jsonl(path, "T", with_title=with_title)
        except DataFileError as err:
            got = str(err)
        return got, [r.getMessage() for r in caplog.records]

    fast = read()
    monkeypatch.setattr(beir, "_fields_at_once", lambda records, with_title: None)
    assert read() == fast


def test_fingerprints_read_ahead_describe_the_vectors_as_read_in_turn(tmp_path, cli, monkeypatch):
    """The plan reads large tables' fingerprints in a background thread while the task data loads:
    the same record as reading each in turn; a table's NaN is the same one-line error, and a data
    error found first is still the error (the reading ahead stops); a degenerate norm is warned."""
    import threading

    from embeval.run import plan as plan_module

    task = synthetic(seed=9, span=30)
    task_file = prepared(tmp_path, cli, task)
    records = {}
    for ahead_bytes in (1 << 40, 1):  # never ahead; every table ahead
        monkeypatch.setattr(plan_module.AheadFingerprints, "AHEAD_BYTES", ahead_bytes)
        out = tmp_path / f"r{ahead_bytes}.json"
        assert score(cli, tmp_path, task_file, out, "--bootstrap", "0").exit_code == 0
        records[ahead_bytes] = json.loads(out.read_text())["tasks"]["Synthetic"]
    assert records[1]["vectors"] == records[1 << 40]["vectors"] and records[1]["results"] == records[1 << 40]["results"]

    with h5py.File(tmp_path / "v.h5", "a") as f:
        documents = f["Synthetic.document"][...]
        documents[3, 1] = np.nan
        f["Synthetic.document"][...] = documents
    out = tmp_path / "nan.json"
    assert "Synthetic: 1 of 300 vectors contain NaN or Inf (first at row 3)" in error_line(
        score(cli, tmp_path, task_file, out)
    )
    queries = tmp_path / "data" / "queries.jsonl"
    good = queries.read_bytes()
    queries.write_bytes(good + b'{"_id": 5}\n')
    message = error_line(score(cli, tmp_path, task_file, out))
    assert "queries.jsonl" in message and "missing field 'text'" in message, message
    assert not out.exists(), [t.name for t in threading.enumerate()]
    assert not [t for t in threading.enumerate() if t.name.startswith("ThreadPoolExecutor")]

    queries.write_bytes(good)
    documents[3] = 1e-30  # squared norm underflows float32
    with h5py.File(tmp_path / "v.h5", "a") as f:
        f["Synthetic.document"][...] = documents
    result = score(cli, tmp_path, task_file, out, "--bootstrap", "0")
    assert result.exit_code == 0
    assert "1 of 300 vectors of /Synthetic.document have a norm that overflows or underflows" in result.stderr


SUBQUERY_TASK = """name = "Impressions"
kind = "reranking"
subqueries = "max"
figure = "max_over_subqueries.map_at_1000"
[files]
corpus = "corpus.jsonl"
queries = "queries.jsonl"
qrels = "qrels.tsv"
candidates = "candidates.tsv"
"""


def test_subqueries_are_scored_merged_in_parts_of_whole_groups(tmp_path, cli, monkeypatch):
    """A reranking task with `subqueries = "max"`: queries "GROUP_PART" merged per group (the main
    figure), the queries taken in parts of whole groups: the same figures whatever the part size,
    and a part never splits a group."""
    from mteb_snapshots import encode, words

    from embeval.evaluate import retrieval

    rng = np.random.default_rng(8)
    docs = [{"_id": f"d{i}", "text": t} for i, t in enumerate(words(rng, 40, 15))]
    queries, qrels, candidates = [], ["query-id\tcorpus-id\tscore"], ["query-id\tcorpus-id"]
    for g in range(9):
        relevant = rng.choice(40, 2, replace=False)
        for k in range(int(rng.integers(1, 4))):
            query = f"u{g}_{k}"
            queries.append({"_id": query, "text": words(rng, 1, 15)[0]})
            qrels += [f"{query}\td{d}\t1" for d in relevant]
            candidates += [f"{query}\td{d}" for d in {*relevant[: 1 + k % 2], *rng.choice(40, 6, replace=False)}]
    rng.shuffle(queries)  # a group's subqueries apart in the file
    for name, rows in (("corpus", docs), ("queries", queries)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (tmp_path / "qrels.tsv").write_text("\n".join(qrels) + "\n", encoding="utf-8")
    (tmp_path / "candidates.tsv").write_text("\n".join(candidates) + "\n", encoding="utf-8")
    (tmp_path / "task.toml").write_text(SUBQUERY_TASK, encoding="utf-8")
    task = ["--task-file", tmp_path / "task.toml", "--data", tmp_path / "none"]
    assert cli("export-sentences", *task, "--out", tmp_path / "export").exit_code == 0
    write(tmp_path / "v.h5", tmp_path / "export", encode, progress=False)
    found = []
    for size in (retrieval.RERANK_QUERIES, 4):
        monkeypatch.setattr(retrieval, "RERANK_QUERIES", size)
        parts = retrieval._parts(len(queries), retrieval.subquery_groups([q["_id"] for q in queries])[0])
        groups = [{queries[i]["_id"].split("_")[0] for i in part} for part in parts]
        assert sum(map(len, groups)) == 9 and sorted(i for part in parts for i in part) == list(range(len(queries)))
        assert (len(parts) == 1) == (size > len(queries)) and all(len(part) <= max(size, 3) for part in parts)
        done = cli("score", tmp_path / "v.h5", *task, "--out", tmp_path / f"{size}.json", "--bootstrap", "100")
        assert done.exit_code == 0, done.stderr
        found.append(json.loads((tmp_path / f"{size}.json").read_text())["tasks"]["Impressions"])
    assert found[0]["results"] == found[1]["results"]
    merged = found[0]["results"]["max_over_subqueries"]
    assert merged["nqueries"] == 9 and merged["tie_exposure"]["queries"] == 9
    assert found[0]["ci"]["figures"]["max_over_subqueries.map_at_1000"]["n"] == 9
