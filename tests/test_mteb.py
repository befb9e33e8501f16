"""MTEB's protocol beside SentEval's: the packaged all-MiniLM-L6-v2 reproduces MTEB's published figures."""

import numpy as np
from scipy.stats import pearsonr, spearmanr

from embeval.formats import sentences as export
from embeval.reports import mteb
from embeval.run.config import build
from embeval.run.score import score
from embeval.tasks.registry import TASKS

# MTEB's results for sentence-transformers/all-MiniLM-L6-v2: cosine Spearman x 100 on the test sets.
PUBLISHED = {
    "STS12": 72.37,
    "STS13": 80.60,
    "STS14": 75.59,
    "STS15": 85.39,
    "STS16": 78.99,
    "STSBenchmark": 82.03,
    "SICK-R": 77.58,
}


def test_minilm_reproduces_mtebs_published_figure_on_sts16(minilm_sts16, data_dir):
    """STS16 embedded by the sentence-transformers exporter with the packaged all-MiniLM-L6-v2 (the
    session's one MiniLM export, tests/conftest.py) gives MTEB's published figure to its rounding.
    All seven tasks MTEB shares with SentEval: `python bench/minilm_published.py --data DIR`
    (bench/results/minilm_published.json)."""
    _, vectors = minilm_sts16
    record = score(vectors, data_dir, tasks=["STS16"], config=build(bootstrap=0), progress=False, log=lambda m: None)
    figures = {name: parts[0][1]["cosine_spearman"] for name, parts in mteb.scores(record)[0].items()}
    assert set(figures) == {"STS16"}
    assert abs(100 * figures["STS16"] - PUBLISHED["STS16"]) <= 0.01, figures


def test_the_published_figures_bench_reproduces_every_shared_task():
    """bench/minilm_published.py's committed run: every task MTEB shares with SentEval within 0.01 of
    MTEB's published figure, the same list of published figures as this module's."""
    import json
    from pathlib import Path

    bench = Path(__file__).resolve().parents[1] / "bench" / "results" / "minilm_published.json"
    result = json.loads(bench.read_text())
    assert {row["task"]: row["published"] for row in result["rows"]} == PUBLISHED
    for row in result["rows"]:
        assert abs(row["embeval"] - row["published"]) <= 0.01, row


def test_sick_r_mteb_figure_pools_every_split(devbow_vectors, data_dir):
    """SICK-R's `mteb` figure is the cosine Spearman over train + trial + test, computed here from the
    vectors file and the raw SICK files independently."""
    import h5py

    _, vectors = devbow_vectors
    record = score(
        vectors, data_dir, tasks=["SICKRelatedness"], config=build(bootstrap=0), progress=False, log=lambda m: None
    )
    data = TASKS["SICKRelatedness"].load(data_dir)
    row = {s: i for i, s in enumerate(export.task_sentences(data))}
    with h5py.File(vectors) as f:
        table = f["SICKRelatedness"][:].astype(np.float64)
    cosines, gold = [], []
    for name in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"):
        lines = (data_dir / "downstream" / "SICK" / name).read_text(encoding="utf-8").splitlines()[1:]
        for line in lines:
            fields = line.split("\t")
            u, v = table[row[" ".join(fields[1].split())]], table[row[" ".join(fields[2].split())]]
            cosines.append(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)))
            gold.append(float(fields[3]))
    figure = record["tasks"]["SICKRelatedness"]["results"]["mteb"]
    assert figure["nsamples"] == len(gold) == 9927
    assert abs(figure["pearson"] - pearsonr(cosines, gold)[0]) < 1e-6
    # float32 and float64 cosines order SICK's near-tied pairs differently: measured 1.0e-6
    assert abs(figure["spearman"] - spearmanr(cosines, gold)[0]) < 3e-6


def test_raw_sts_benchmark_keeps_the_distributed_text(data_dir):
    """STSBenchmarkRaw reads the cased, untokenized test split; STSBenchmark's export is unchanged."""
    raw = TASKS["STSBenchmarkRaw"].load(data_dir).splits["test"]
    lines = (data_dir / "raw" / "STSBenchmark" / "sts-test.csv").read_text(encoding="utf-8").splitlines()
    assert len(raw) == len(lines) == 1379
    assert (raw.a[0], raw.b[0], raw.y[0]) == ("A girl is styling her hair.", "A girl is brushing her hair.", 2.5)
    assert all(line.split("\t")[5].strip() == a for line, a in zip(lines, raw.a))
    tokenized = TASKS["STSBenchmark"].load(data_dir).splits["test"]
    assert np.array_equal(tokenized.y, raw.y) and tokenized.a[0] == "a girl is styling her hair ."
    sentences = export.task_sentences(TASKS["STSBenchmark"].load(data_dir))
    assert export.fingerprint(sentences) == "b64abb5fcf50219fe7eaef2cf40aca5ea71eb42f56b19fb2ff40f3f622180c79"
