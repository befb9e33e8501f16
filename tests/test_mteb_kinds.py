"""MTEB's task types as kinds of task files, end to end: a small task written as files and a task file,
vectors written by embeval.vectors.write from fixed rows, `embeval score --task-file` through the CLI,
and mteb's own task of that type evaluated on the same rows (an encoder that looks them up; no model,
no network). Then the interval of the headline figure, the terminal lines and the report's table.

Agreement measured with mteb 2.26.24, scikit-learn 1.9.1 (and asserted below): pair classification at
most 2.2e-16 apart (the pair scores are bit-identical; the tests allow 1e-12); classification and
clustering (both protocols) identical to the last bit under mteb's seeds; bitext mining identical;
summarization at most 5.6e-17 (the same float32 similarities; the tests allow 1e-12). The agreement
matrix over families of vectors and similarities is tests/test_mteb_agreement.py.
"""

import json

import numpy as np
import pytest
from mteb_helpers import TableEncoder, assert_clustering_figures_equal, metadata, mteb_client
from reliability_helpers import refused
from threadpoolctl import threadpool_limits

from embeval.formats.vectors import write
from embeval.kinds.pair_classification import MTEB_FIGURES as PAIR_FIGURES

EXACT = 1e-12  # pair classification (measured 2.2e-16), summarization, classification, clustering, bitext


@pytest.fixture(scope="module")
def client():
    return mteb_client()


@pytest.fixture(autouse=True)
def one_thread():
    """scikit-learn's k-means and BLAS on one thread (a loaded 2-core machine makes its thread pool
    crawl); clusterings were measured identical on one and two threads."""
    with threadpool_limits(1):
        yield


class MtebRows(TableEncoder):
    """mteb's encoder protocol over fixed rows, with the similarity functions mteb gives a model whose
    similarity is `similarity` (what mteb's own wrappers do)."""

    def __init__(self, table, similarity="cosine"):
        super().__init__({None: table})
        self.name = similarity

    def similarity(self, a, b):
        from mteb.models.model_meta import ScoringFunction
        from mteb.similarity_functions import select_similarity

        return select_similarity(a, b, ScoringFunction(self.name))

    def similarity_pairwise(self, a, b):
        from mteb.models.model_meta import ScoringFunction
        from mteb.similarity_functions import select_pairwise_similarity

        return select_pairwise_similarity(a, b, ScoringFunction(self.name))


def mteb_task(base, task_type, main_score, splits, **attributes):
    """An instance of a subclass of mteb's `base` holding `splits` ({split: {column: values}}) in memory."""
    from datasets import Dataset, DatasetDict

    name = f"Embeval{base.__name__}"
    namespace = {"metadata": metadata(name, task_type, main_score), "load_data": lambda self, **kwargs: None}
    task = type(name, (base,), dict(namespace, **attributes))()
    task.dataset = DatasetDict({split: Dataset.from_dict(columns) for split, columns in splits.items()})
    task.data_loaded = True
    return task


def run_mteb(task, table, similarity="cosine"):
    return task.evaluate(MtebRows(table, similarity), split="test", encode_kwargs={"batch_size": 64})["default"]


def tsv(rows, header):
    return "\t".join(header) + "\n" + "".join("\t".join(map(str, row)) + "\n" for row in rows)


def jsonl(rows):
    return "".join(json.dumps(row) + "\n" for row in rows)


def score(cli, folder, declaration, files, table, name, *options):
    """Write the task file and its data under `folder`, export the task's sentences, write their vectors
    (table: text -> row) and score them with a bootstrap: (the task's entry, the run's stdout, results path)."""
    folder.mkdir(parents=True, exist_ok=True)
    for relative, text in files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text, encoding="utf-8")
    task_file = folder / "task.toml"
    task_file.write_text(declaration, encoding="utf-8")
    export, vectors, out = folder / "sentences", folder / "vectors.h5", folder / "results.json"
    result = cli(
        "export-sentences", "--data", folder / "none", "--out", export, "--task-file", task_file, "--tasks", name
    )
    assert result.exit_code == 0, result.stderr
    write(vectors, export, lambda sentences: np.stack([table[s] for s in sentences]), progress=False)
    result = cli(
        "score", vectors, "--data", folder / "none", "--task-file", task_file, "--tasks", name,
        "--bootstrap", "200", "--out", out, *options,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    entry = json.loads(out.read_text())["tasks"][name]
    return entry, result.stdout, out


def check_interval_and_report(cli, entry, out, path, title):
    """The headline figure's 95% interval holds it, and `embeval report` shows it x100 in its group's table."""
    ci = entry["ci"]["figures"][path]
    value = entry["results"][path]
    assert ci["value"] == pytest.approx(value, abs=1e-12) and ci["low"] <= value <= ci["high"] and ci["n"] > 0
    report = cli("report", out)
    assert report.exit_code == 0, report.stderr
    table = report.stdout.split(f"### {title}")[1].split("###")[0]
    assert "mteb 2.26.24" in table
    assert f"{100 * value:.2f} [{100 * ci['low']:.1f}, {100 * ci['high']:.1f}]" in table


# Pair classification.

PAIRS_TASK = """name = "MRPCPairs"
kind = "pair-classification"
protocol = "mteb"               # MTEB's (no training); split | kfold: SentEval's classifier on pair features
[files]
test = "mrpc/test.tsv"          # header: sentence1<TAB>sentence2<TAB>label (0/1)
"""


def pairs(seed, n=240):
    """Pairs of small-integer float32 vectors (equal scores across pairs), a third of them repeats of
    others (the same sentences: exact ties); labels follow the cosine loosely."""
    rng = np.random.default_rng(seed)
    distinct = 2 * n // 3
    first = np.round(rng.normal(size=(distinct, 6)) * 2)
    second = np.round(first * rng.uniform(0, 1, (distinct, 1)) + rng.normal(size=(distinct, 6)) * 2)
    index = np.concatenate([np.arange(distinct), rng.integers(0, distinct, n - distinct)])
    table = {f"first {i}": first[i].astype(np.float32) for i in range(distinct)}
    table |= {f"second {i}": second[i].astype(np.float32) for i in range(distinct)}
    a, b = first[index], second[index]
    cosine = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-9)
    labels = (cosine + rng.normal(0, 0.3, n) > 0.4).astype(int)
    return [(f"first {i}", f"second {i}", label) for i, label in zip(index, labels, strict=True)], table


@pytest.mark.parametrize("similarity", ["cosine", "dot"])
def test_pair_classification_equals_mtebs(client, cli, tmp_path, similarity):
    from mteb.abstasks.pair_classification import AbsTaskPairClassification

    rows, table = pairs(1 if similarity == "cosine" else 2)
    declaration = PAIRS_TASK
    if similarity == "dot":
        declaration = declaration.replace('protocol = "mteb"', 'protocol = "mteb"\nsimilarity = "dot"')
    files = {"mrpc/test.tsv": tsv(rows, ("sentence1", "sentence2", "label"))}
    entry, stdout, out = score(cli, tmp_path, declaration, files, table, "MRPCPairs")
    columns = {"sentence1": [r[0] for r in rows], "sentence2": [r[1] for r in rows], "labels": [r[2] for r in rows]}
    theirs = run_mteb(
        mteb_task(AbsTaskPairClassification, "PairClassification", "max_ap", {"test": columns}), table, similarity
    )
    ours = entry["results"]
    assert set(theirs) - {"main_score"} <= set(ours)
    assert max(abs(ours[key] - value) for key, value in theirs.items() if key != "main_score") <= EXACT
    assert theirs["main_score"] == theirs["max_ap"] and 0.5 < ours["max_ap"] < 0.99
    assert ours["pairs"] == len(rows)
    assert "max AP | F1 | accuracy x100 (MTEB)" in stdout and "Manhattan distance AP | F1 | accuracy" in stdout
    check_interval_and_report(cli, entry, out, "max_ap", "Pair classification (MTEB), x100")


def test_pair_classification_headline_can_be_another_figure(cli, tmp_path):
    rows, table = pairs(3, n=90)
    declaration = PAIRS_TASK.replace('protocol = "mteb"', 'protocol = "mteb"\nfigure = "max_accuracy"')
    entry, stdout, out = score(
        cli,
        tmp_path,
        declaration,
        {"mrpc/test.tsv": tsv(rows, ("sentence1", "sentence2", "label"))},
        table,
        "MRPCPairs",
    )
    assert "max_accuracy" in entry["ci"]["figures"]
    report = cli("report", out)
    assert f"{100 * entry['results']['max_accuracy']:.2f}" in report.stdout


# Classification.


def classification_rows(seed, n_classes, n, prefix, dim=10):
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(99).normal(size=(n_classes, dim))
    labels = rng.integers(0, n_classes, n)
    vectors = (centres[labels] + 1.3 * rng.normal(size=(n, dim))).astype(np.float32)
    texts = [f"{prefix} {i}" for i in range(n)]
    return texts, labels, dict(zip(texts, vectors, strict=True))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")  # mteb's side
@pytest.mark.parametrize("n_classes, options", [(2, ""), (4, "samples_per_label = 5\nn_experiments = 4\n")])
def test_classification_equals_mtebs(client, cli, tmp_path, n_classes, options):
    from mteb.abstasks.classification import AbsTaskClassification

    train_texts, train_labels, table = classification_rows(1, n_classes, 300, "train")
    test_texts, test_labels, test_table = classification_rows(2, n_classes, 150, "test")
    table |= test_table
    if n_classes > 2:
        test_labels[:5] = n_classes  # a label the train split lacks: never predicted, as in mteb
    declaration = (
        f'name = "Topics"\nkind = "classification"\nprotocol = "mteb"\n{options}'
        '[files]\ntrain = "train.tsv"\ntest = "test.tsv"\n'
    )
    files = {
        "train.tsv": tsv(zip(train_texts, train_labels, strict=True), ("text", "label")),
        "test.tsv": tsv(zip(test_texts, test_labels, strict=True), ("text", "label")),
    }
    entry, stdout, out = score(cli, tmp_path, declaration, files, table, "Topics")
    attributes = {}
    if options:
        attributes = {"samples_per_label": 5, "n_experiments": 4}
    splits = {
        "train": {"text": train_texts, "label": train_labels.tolist()},
        "test": {"text": test_texts, "label": test_labels.tolist()},
    }
    theirs = run_mteb(mteb_task(AbsTaskClassification, "Classification", "accuracy", splits, **attributes), table)
    ours = entry["results"]
    for key, value in theirs.items():
        if key == "main_score":
            assert value == ours["accuracy"]
        elif isinstance(value, float) and np.isnan(value):
            assert ours[key] is None and n_classes > 2, key  # NaN is written as null
        else:
            assert ours[key] == value, key
    exported = (tmp_path / "sentences" / "Topics.txt").read_text().splitlines()
    drawn = {t for t in exported if t.startswith("train")}
    assert len(exported) == len(drawn) + len(test_texts) and len(drawn) < len(train_texts)
    assert "accuracy | macro F1 x100 (MTEB" in stdout
    check_interval_and_report(cli, entry, out, "accuracy", "Classification (MTEB), x100")


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")  # mteb's side
def test_classification_under_several_seeds_is_each_seeds_mteb_run(client, cli, tmp_path):
    """`seeds = [42, 7]`: each seed's figures are mteb's under that seed, the figures the mean over all
    their experiments, the export (one seed's figure in MTEB) left out."""
    from mteb.abstasks.classification import AbsTaskClassification

    train_texts, train_labels, table = classification_rows(3, 3, 200, "train")
    test_texts, test_labels, test_table = classification_rows(4, 3, 90, "test")
    table |= test_table
    declaration = (
        'name = "Seeds"\nkind = "classification"\nprotocol = "mteb"\nn_experiments = 3\nseeds = [42, 7]\n'
        '[files]\ntrain = "train.tsv"\ntest = "test.tsv"\n[mteb]\nname = "Seeds"\nrevision = "r"\n'
    )
    files = {
        "train.tsv": tsv(zip(train_texts, train_labels, strict=True), ("text", "label")),
        "test.tsv": tsv(zip(test_texts, test_labels, strict=True), ("text", "label")),
    }
    entry, _, out = score(cli, tmp_path, declaration, files, table, "Seeds")
    splits = {
        "train": {"text": train_texts, "label": train_labels.tolist()},
        "test": {"text": test_texts, "label": test_labels.tolist()},
    }
    ours = entry["results"]
    theirs = {}
    for seed in (42, 7):
        task = mteb_task(AbsTaskClassification, "Classification", "accuracy", splits, n_experiments=3)
        task.seed = seed  # mteb's task seed (its constructor's)
        theirs[seed] = run_mteb(task, table)
        assert ours["per_seed"][str(seed)]["accuracy"] == theirs[seed]["accuracy"]
    assert ours["seeds"] == [42, 7] and theirs[42]["accuracy"] != theirs[7]["accuracy"]
    assert ours["accuracy"] == pytest.approx((theirs[42]["accuracy"] + theirs[7]["accuracy"]) / 2, abs=1e-12)
    assert len(ours["scores_per_experiment"]) == 6
    result = cli("export-mteb", out, "--model", "a/b", "--out", tmp_path / "mteb")
    assert result.exit_code == 2 and "Seeds: left out" in result.stderr


# Two labels other than 0 and 1 (text in the files, mteb's values in memory): mteb's average precision
# takes the label values as scores and 1 as the positive label; embeval's figures are mteb's.
AP_LABELS = {  # (the train split's labels, the test split's), as mteb's data holds them
    "1 and 2": ((1, 2), (1, 2)),
    "-1 and 1, 0 in train only": ((-1, 0, 1), (-1, 1)),
    "2 and 1 of train's 1, 2, 3": ((1, 2, 3), (1, 2)),
    "decimals": ((0.0, 1.0), (0.0, 1.0)),
    "booleans": ((False, True), (False, True)),
}
AP_UNDEFINED = {"0 and 2": ((0, 2), (0, 2)), "text": (("neg", "pos"), ("neg", "pos"))}  # scikit-learn raises


def labelled_rows(values, seed, n, prefix):
    """Rows of classification_rows whose labels are `values` (a label of train only kept out of test)."""
    texts, ids, table = classification_rows(seed, 3, n, prefix)
    ids = ids % len(values)
    return texts, [values[i] for i in ids], table


def ap_task(tmp_path, labels, protocol):
    """(declaration, files, mteb's splits, table) of a task whose labels are `labels` (AP_LABELS' form)."""
    train_values, test_values = labels  # written as str() spells them, as an --mteb copy's writer does
    train, train_labels, table = labelled_rows(train_values, 5, 160, "train")
    test, test_labels, test_table = labelled_rows(test_values, 6, 80, "test")
    table |= test_table
    if protocol == "mteb-kfold":
        files = {"all.tsv": tsv(((t, str(v)) for t, v in zip(train, train_labels, strict=True)), ("text", "label"))}
        declaration = 'name = "AP"\nkind = "classification"\nprotocol = "mteb-kfold"\n[files]\nall = "all.tsv"\n'
        return declaration, files, {"test": {"text": train, "label": train_labels}}, table
    files = {
        f"{key}.tsv": tsv(((t, str(v)) for t, v in zip(texts, values, strict=True)), ("text", "label"))
        for key, texts, values in (("train", train, train_labels), ("test", test, test_labels))
    }
    declaration = (
        'name = "AP"\nkind = "classification"\nprotocol = "mteb"\n[files]\ntrain = "train.tsv"\ntest = "test.tsv"\n'
    )
    splits = {"train": {"text": train, "label": train_labels}, "test": {"text": test, "label": test_labels}}
    return declaration, files, splits, table


def mteb_classification_task(splits, protocol):
    from mteb.abstasks.classification import AbsTaskClassification

    attributes = {"is_cross_validation": True, "train_split": "test"} if protocol == "mteb-kfold" else {}
    return mteb_task(AbsTaskClassification, "Classification", "accuracy", splits, **attributes)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")  # both arms' unpredicted labels
@pytest.mark.parametrize(
    "labels, protocol",
    [("1 and 2", "mteb"), ("booleans", "mteb-kfold")]
    + [pytest.param(name, "mteb", marks=pytest.mark.slow) for name in AP_LABELS if name != "1 and 2"]
    + [pytest.param("1 and 2", "mteb-kfold", marks=pytest.mark.slow)],
)
def test_classification_average_precision_of_two_labels_equals_mtebs(client, cli, tmp_path, labels, protocol):
    declaration, files, splits, table = ap_task(tmp_path, AP_LABELS[labels], protocol)
    entry, _, _ = score(cli, tmp_path, declaration, files, table, "AP", "--bootstrap", "0")
    theirs, ours = run_mteb(mteb_classification_task(splits, protocol), table), entry["results"]
    assert isinstance(theirs["ap"], float) and 0 < theirs["ap"] < 1
    for key in ("accuracy", "f1", "ap", "ap_weighted", "scores_per_experiment"):
        assert ours[key] == theirs[key], key


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")
@pytest.mark.parametrize("labels", ["text", pytest.param("0 and 2", marks=pytest.mark.slow)])
def test_classification_average_precision_mteb_cannot_compute_is_left_undefined(client, cli, tmp_path, labels):
    """scikit-learn raises for two labels without 1, or text labels, and mteb's run stops: embeval gives
    ap and ap_weighted as null and every other figure as mteb gives it for the same labels as 0 and 1."""
    declaration, files, splits, table = ap_task(tmp_path, AP_UNDEFINED[labels], "mteb")
    with pytest.raises(ValueError, match="pos_label=1 is not a valid label"):
        run_mteb(mteb_classification_task(splits, "mteb"), table)
    entry, _, _ = score(cli, tmp_path, declaration, files, table, "AP", "--bootstrap", "0")
    recoded = {
        split: dict(columns, label=[AP_UNDEFINED[labels][1].index(v) for v in columns["label"]])
        for split, columns in splits.items()
    }
    theirs, ours = run_mteb(mteb_classification_task(recoded, "mteb"), table), entry["results"]
    assert ours["ap"] is None and ours["ap_weighted"] is None
    for ours_one, theirs_one in zip(ours["scores_per_experiment"], theirs["scores_per_experiment"], strict=True):
        assert ours_one == dict(theirs_one, ap=None, ap_weighted=None)
    for key in ("accuracy", "f1", "f1_weighted", "precision", "recall"):
        assert ours[key] == theirs[key], key


# Clustering.


def documents(seed, n=400, dim=12):
    """Documents around 6 centres; labels: the centre (level 1) under one of 3 groups (level 0)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(6, dim)) * 2
    fine = rng.integers(0, 6, n)
    vectors = (centres[fine] + 1.5 * rng.normal(size=(n, dim))).astype(np.float32)
    texts = [f"document {i}" for i in range(n)]
    return texts, fine // 2, fine, dict(zip(texts, vectors, strict=True))


@pytest.mark.parametrize(
    "form, keys, attributes",
    [
        ("levels", "max_documents = 250\n", {"max_fraction_of_documents_to_embed": None, "max_document_to_embed": 250}),
        ("jsonl", "max_fraction = 0.5\nmax_depth = 1\n", {"max_fraction_of_documents_to_embed": 0.5, "max_depth": 1}),
        ("label", "embed_all = true\n", {"max_fraction_of_documents_to_embed": None}),
    ],
)
def test_bootstrap_clustering_equals_mtebs(client, cli, tmp_path, monkeypatch, form, keys, attributes):
    from mteb.abstasks.clustering import AbsTaskClustering

    from embeval.evaluate import clustering

    offered = []  # the threads the experiments may run on, side by side: the run's (--threads 2)
    side_by_side = clustering._side_by_side
    monkeypatch.setattr(
        clustering, "_side_by_side", lambda f, items, most=None: (offered.append(most), side_by_side(f, items, most))[1]
    )
    texts, coarse, fine, table = documents(5)
    # every seventh document without the finer level (left out of that level)
    labels = [[int(c), int(f)] if i % 7 else [int(c)] for i, (c, f) in enumerate(zip(coarse, fine, strict=True))]
    keys += "documents_per_experiment = 256\nn_experiments = 3\n"
    if form == "levels":
        files = {
            "docs.tsv": tsv(
                [(t, f"g{ls[0]}", f"c{ls[1]}" if len(ls) > 1 else "") for t, ls in zip(texts, labels, strict=True)],
                ("text", "group", "centre"),
            )
        }
        keys += 'levels = ["group", "centre"]\n'
        path = "docs.tsv"
    elif form == "jsonl":
        files = {"docs.jsonl": jsonl({"text": t, "label": ls} for t, ls in zip(texts, labels, strict=True))}
        path = "docs.jsonl"
    else:
        labels = [[int(f)] for f in fine]
        files = {"docs.csv": "text,label\n" + "".join(f"{t},{ls[0]}\n" for t, ls in zip(texts, labels, strict=True))}
        path = "docs.csv"
    declaration = f'name = "Centres"\nkind = "clustering"\n{keys}[files]\ntest = "{path}"\n'
    entry, stdout, out = score(cli, tmp_path, declaration, files, table, "Centres", "--threads", "2")
    assert offered and set(offered) == {2}
    task = mteb_task(
        AbsTaskClustering,
        "Clustering",
        "v_measure",
        {"test": {"sentences": texts, "labels": labels}},
        max_documents_per_cluster=256,
        n_clusters=3,
        **attributes,
    )
    theirs = run_mteb(task, table)
    ours = entry["results"]
    assert_clustering_figures_equal(ours, theirs)
    exported = (tmp_path / "sentences" / "Centres.txt").read_text().splitlines()
    assert len(exported) == ours["embedded"] < len(texts) or form == "label"
    assert "v-measure | AMI x100 (MTEB)" in stdout
    check_interval_and_report(cli, entry, out, "v_measure", "Clustering (MTEB), v-measure x100")


def test_set_clustering_equals_mtebs(client, cli, tmp_path):
    from mteb.abstasks.clustering_legacy import AbsTaskClusteringLegacy

    texts, _, fine, table = documents(6, n=300)
    sets = [(texts[i : i + 60], fine[i : i + 60]) for i in range(0, 300, 60)]
    rows = [(t, f"c{f}", f"set{s}") for s, (ts, fs) in enumerate(sets) for t, f in zip(ts, fs, strict=True)]
    declaration = 'name = "Sets"\nkind = "clustering"\nprotocol = "sets"\n[files]\ntest = "sets.tsv"\n'
    entry, stdout, out = score(
        cli, tmp_path, declaration, {"sets.tsv": tsv(rows, ("text", "label", "set"))}, table, "Sets"
    )
    columns = {"sentences": [list(ts) for ts, _ in sets], "labels": [[f"c{f}" for f in fs] for _, fs in sets]}
    theirs = run_mteb(mteb_task(AbsTaskClusteringLegacy, "Clustering", "v_measure", {"test": columns}), table)
    ours = entry["results"]
    assert ours["v_measures"] == theirs["v_measures"] and ours["v_measure"] == theirs["v_measure"]
    assert ours["v_measure_std"] == theirs["v_measure_std"] and ours["sets"] == 5
    assert "v-measure x100 (MTEB, mean of 5 sets)" in stdout
    check_interval_and_report(cli, entry, out, "v_measure", "Clustering (MTEB), v-measure x100")


# Summarization.


def summaries(seed=0, n_texts=20, dim=12):
    rng = np.random.default_rng(seed)
    rows, table = [], {}
    for t in range(n_texts):
        n_human, n_machine = int(rng.integers(2, 5)), int(rng.integers(5, 12))
        human = rng.normal(size=(n_human, dim))
        machine = human[rng.integers(0, n_human, n_machine)] * 0.5 + rng.normal(size=(n_machine, dim))
        grades = rng.integers(1, 6, n_machine) if t != 0 else np.full(n_machine, 3)  # text 0: left out
        row = {
            "text": f"text {t}",
            "human_summaries": [f"human {t}.{j}" for j in range(n_human)],
            "machine_summaries": [f"machine {t}.{j}" for j in range(n_machine)],
            "relevance": grades.tolist(),
        }
        table |= dict(zip(row["human_summaries"], human.astype(np.float32), strict=True))
        table |= dict(zip(row["machine_summaries"], machine.astype(np.float32), strict=True))
        rows.append(row)
    return rows, table


@pytest.mark.filterwarnings("ignore:The used Evaluator is deprecated:DeprecationWarning")
@pytest.mark.parametrize("protocol", ["mteb", "summeval"])
def test_summarization_equals_mtebs(client, cli, tmp_path, protocol):
    from mteb._evaluators.text.summarization_evaluator import DeprecatedSummarizationEvaluator, SummarizationEvaluator
    from mteb.abstasks.text.summarization import AbsTaskSummarization

    rows, table = summaries()
    declaration = (
        f'name = "Summaries"\nkind = "summarization"\nprotocol = "{protocol}"\n[files]\ntest = "summeval.jsonl"\n'
    )
    entry, stdout, out = score(cli, tmp_path, declaration, {"summeval.jsonl": jsonl(rows)}, table, "Summaries")
    columns = {key: [row[key] for row in rows] for key in rows[0]}
    evaluator = DeprecatedSummarizationEvaluator if protocol == "summeval" else SummarizationEvaluator
    task = mteb_task(
        AbsTaskSummarization,
        "Summarization",
        "cosine_spearman",
        {"test": columns},
        evaluator=evaluator,
        min_score=1,
        max_score=5,
    )
    theirs = run_mteb(task, table)
    ours = entry["results"]
    assert max(abs(ours[key] - theirs[key]) for key in theirs if key != "main_score") <= EXACT
    assert ours["texts_kept"] == 19 and ours["texts"] == 20
    assert "cosine Spearman | Pearson x100 (MTEB" in stdout and "19 of 20 texts" in stdout
    check_interval_and_report(cli, entry, out, "cosine_spearman", "Summarization (MTEB), Spearman x100")


# Bitext mining.


@pytest.mark.filterwarnings("ignore:To copy construct from a tensor:UserWarning")  # mteb's
def test_bitext_mining_equals_mtebs(client, cli, tmp_path):
    from mteb.abstasks.text.bitext_mining import AbsTaskBitextMining

    rng = np.random.default_rng(4)
    first = rng.normal(size=(200, 10))
    second = first + rng.normal(size=(200, 10)) * np.linspace(0.1, 2.0, 200)[:, None]
    one, two = [f"eins {i}" for i in range(200)], [f"one {i}" for i in range(200)]
    table = dict(zip(one, first.astype(np.float32), strict=True)) | dict(
        zip(two, second.astype(np.float32), strict=True)
    )
    declaration = 'name = "Pairs"\nkind = "bitext-mining"\n[files]\ntest = "deu-eng.tsv"\n'
    entry, stdout, out = score(
        cli,
        tmp_path,
        declaration,
        {"deu-eng.tsv": tsv(zip(one, two, strict=True), ("sentence1", "sentence2"))},
        table,
        "Pairs",
    )
    theirs = run_mteb(
        mteb_task(AbsTaskBitextMining, "BitextMining", "f1", {"test": {"sentence1": one, "sentence2": two}}), table
    )
    ours = entry["results"]
    assert max(abs(ours[key] - theirs[key]) for key in theirs if key != "main_score") <= EXACT
    assert 0.3 < ours["accuracy"] < 0.95 and ours["precision"] < ours["accuracy"]
    assert "F1 | accuracy x100 (MTEB)" in stdout and "precision | recall (support-weighted)" in stdout
    check_interval_and_report(cli, entry, out, "f1", "Bitext mining (MTEB), F1 x100")


# Bad input: one line naming the file (and the line), exit code 2.

PAIR = 'name = "P"\nkind = "pair-classification"\nprotocol = "mteb"\n[files]\ntest = "p.tsv"\n'
CLUSTERS = 'name = "C"\nkind = "clustering"\n{keys}[files]\ntest = "c.{suffix}"\n'
SETS = 'name = "S"\nkind = "clustering"\nprotocol = "sets"\n[files]\ntest = "s.tsv"\n'
SUMMARIES = 'name = "M"\nkind = "summarization"\n[files]\ntest = "m.jsonl"\n'
TOPICS = 'name = "T"\nkind = "classification"\nprotocol = "mteb"\n[files]\ntrain = "train.tsv"\ntest = "test.tsv"\n'
BITEXT = 'name = "B"\nkind = "bitext-mining"\n[files]\ntest = "b.tsv"\n'
SUMMARY = {"human_summaries": ["h"], "machine_summaries": ["m1", "m2"], "relevance": [1, 2]}


@pytest.mark.parametrize(
    "declaration, files, fragments",
    [
        (PAIR, {"p.tsv": "sentence1\tsentence2\tlabel\na\tb\t1\nc\td\t2\n"}, ["p.tsv:3", "label '2' is not 0 or 1"]),
        (PAIR, {"p.tsv": "sentence1\tsentence2\tlabel\na\tb\t1\nc\td\n"}, ["p.tsv:3", "2 fields, the header has 3"]),
        (PAIR, {"p.tsv": "sentence1\tsentence2\tlabel\n"}, ["p.tsv", "no rows (an empty split)"]),
        (PAIR, {"p.tsv": "sentence1\tlabel\na\t1\n"}, ["p.tsv:1", "no column 'sentence2'"]),
        (
            CLUSTERS.format(keys="", suffix="tsv"),
            {"c.tsv": "text\tlabel\na\tx\nb\tx\n"},
            ["c.tsv", "level 0 of the labels has one label ('x'); clustering needs two or more"],
        ),
        (
            CLUSTERS.format(keys="", suffix="jsonl"),
            {"c.jsonl": jsonl([{"text": "a", "label": ["x", "y"]}, {"text": "b", "label": ["z", "y"]}])},
            ["c.jsonl", "level 1 of the labels has one label ('y')"],
        ),
        (
            CLUSTERS.format(keys='levels = ["top", "sub"]\n', suffix="tsv"),
            {"c.tsv": "text\ttop\tsub\na\t\tq\nb\tx\tr\n"},
            ["c.tsv:2", "no label in 'top'"],
        ),
        (
            SETS,
            {"s.tsv": "text\tlabel\tset\na\tx\t1\nb\ty\t1\nc\tx\t2\nd\tx\t2\n"},
            ["s.tsv:4", "set '2' has one label ('x')"],
        ),
        (SETS, {"s.tsv": "text\tlabel\tset\n"}, ["s.tsv", "an empty split"]),
        (
            CLUSTERS.format(keys="", suffix="tsv"),
            {"c.tsv": "text\tlabel\n" + "".join(f"d{i}\t{i % 2}\n" for i in range(24))},
            ["c.tsv", "24 documents: the sample embeds none; embed more"],
        ),
        (
            CLUSTERS.format(keys="max_documents = 2\n", suffix="tsv"),
            {"c.tsv": "text\tlabel\n" + "".join(f"d{i}\t{int(i == 0)}\n" for i in range(40))},  # draws 7 and 1
            ["c.tsv", "the 2 documents embedded hold one label at level 0"],
        ),
        (
            SUMMARIES,
            {"m.jsonl": jsonl([SUMMARY, dict(SUMMARY, relevance=[1])])},
            ["m.jsonl:2", "1 relevance grades for 2 machine summaries"],
        ),
        (SUMMARIES, {"m.jsonl": jsonl([dict(SUMMARY, human_summaries="h")])}, ["m.jsonl:1", "human_summaries must be"]),
        (
            TOPICS,
            {"train.tsv": "text\tlabel\na\tx\nb\tx\n", "test.tsv": "text\tlabel\nc\tx\nd\ty\n"},
            ["train.tsv", "the train split has one label ('x')"],
        ),
        (
            TOPICS,
            {"train.tsv": "text\tlabel\na\tx\nb\ty\n", "test.tsv": "text\tlabel\n"},
            ["test.tsv", "an empty split"],
        ),
        (BITEXT, {"b.tsv": "sentence1\tsentence2\na\tb\tc\n"}, ["b.tsv:2", "3 fields, the header has 2"]),
    ],
)
def test_bad_data_is_one_line(cli, tmp_path, declaration, files, fragments):
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "task.toml").write_text(declaration, encoding="utf-8")
    name = declaration.split('"')[1]
    line = refused(cli("tasks", "--task-file", tmp_path / "task.toml", "--tasks", name), *fragments)
    assert str(tmp_path) in line and f": {name}: " in line


@pytest.mark.parametrize(
    "declaration, fragments",
    [
        (PAIR.replace("[files]", 'features = "|u-v|,u*v"\n[files]'), ["unknown key features"]),
        (PAIR.replace("[files]", 'similarity = "euclidean"\n[files]'), ["similarity: 'euclidean' is not one of"]),
        (CLUSTERS.format(keys="max_fraction = 0.1\nmax_documents = 9\n", suffix="tsv"), ["max_documents", "keep one"]),
        (CLUSTERS.format(keys="max_fraction = 1.5\n", suffix="tsv"), ["max_fraction: must be a fraction in (0, 1]"]),
        (SETS.replace("[files]", 'levels = ["a"]\n[files]'), ["unknown key levels"]),
        (TOPICS.replace("[files]", "samples_per_label = 0\n[files]"), ["samples_per_label: must be an integer >= 1"]),
        (TOPICS.replace('train = "train.tsv"\n', ""), ["train is required for a classification task (mteb)"]),
        (SUMMARIES.replace("m.jsonl", "m.tsv"), ["format", "jsonl"]),
        (
            PAIR.replace("[files]", 'figure = "max_precision"\n[files]'),
            ["'max_precision' is not a figure of this task"],
        ),
    ],
)
def test_bad_declaration_is_one_line(cli, tmp_path, declaration, fragments):
    (tmp_path / "task.toml").write_text(declaration, encoding="utf-8")
    refused(cli("tasks", "--no-load", "--task-file", tmp_path / "task.toml"), str(tmp_path / "task.toml"), *fragments)


# Comparisons, normalization, statistics, imports.


def test_compare_two_encoders_on_pairs(cli, tmp_path):
    """`embeval compare` tests every figure of the task on the same resampled pairs: B - A, its
    interval and p-value; a run compared with itself differs by exactly 0 (p = 1)."""
    from embeval.reports import compare

    rows, table = pairs(7, n=150)
    rng = np.random.default_rng(8)
    noisy = {text: (vector + rng.normal(size=vector.shape) * 2).astype(np.float32) for text, vector in table.items()}
    files = {"mrpc/test.tsv": tsv(rows, ("sentence1", "sentence2", "label"))}
    a, _, out_a = score(cli, tmp_path / "a", PAIRS_TASK, files, table, "MRPCPairs")
    b, _, out_b = score(cli, tmp_path / "b", PAIRS_TASK, files, noisy, "MRPCPairs")
    result = compare.compare([out_a, out_b], resamples=300)
    by_figure = {row["figure"]: row for row in result["rows"]}
    # The model's similarity is the cosine here: its figures and the cosine's are one test each, one row.
    merged = {o["figure"]: row["figure"] for row in result["rows"] for o in row.get("same_test_as", [])}
    assert merged == {f"cosine_{m}": f"similarity_{m}" for m in ("ap", "f1", "accuracy")}
    assert list(by_figure) == [f.path for f in PAIR_FIGURES if f.path not in merged] and by_figure["max_ap"]["headline"]
    for path, twin in merged.items():
        assert a["results"][path] == a["results"][twin] and b["results"][path] == b["results"][twin]
    for path, row in by_figure.items():
        assert row["a"] == pytest.approx(a["results"][path], abs=1e-12)
        assert row["b"] == pytest.approx(b["results"][path], abs=1e-12)
        assert row["low"] <= row["diff"] <= row["high"] and 0 < row["p"] <= 1
    assert by_figure["max_ap"]["diff"] < 0 and by_figure["max_ap"]["p"] < 0.05  # the noise costs AP
    same = compare.compare([out_a, out_a], resamples=100)
    assert all(row["diff"] == 0 and row["p"] == 1 for row in same["rows"])
    shown = cli("compare", out_a, out_b, "--resamples", "200")
    assert shown.exit_code == 0, shown.stderr
    assert "MRPCPairs" in shown.stdout and "max AP over the five scores" in shown.stdout


def test_mteb_protocols_score_the_vectors_as_given(cli, tmp_path):
    """--normalize does not apply to MTEB's protocols: the same figures, and no normalization recorded."""
    rows, table = pairs(9, n=60)
    files = {"mrpc/test.tsv": tsv(rows, ("sentence1", "sentence2", "label"))}
    plain, _, _ = score(cli, tmp_path / "plain", PAIRS_TASK, files, table, "MRPCPairs")
    zscored, _, _ = score(cli, tmp_path / "zscore", PAIRS_TASK, files, table, "MRPCPairs", "--normalize", "zscore")
    assert zscored["results"] == plain["results"] and "normalize" not in zscored and "normalize" not in plain


def test_kind_statistics_are_the_protocol_modules():
    from embeval.evaluate import clustering, mteb_classification, pair_scores
    from embeval.tasks.catalog import kind

    modules = {
        ("pair-classification", "mteb-pairs"): (pair_scores, {f.path: f.path for f in PAIR_FIGURES}),
        ("classification", "mteb-classification"): (mteb_classification, {"accuracy": "accuracy", "f1": "f1"}),
        ("clustering", "mteb-clustering"): (clustering, {"v_measure": "bootstrap.v_measure"}),
        ("clustering", "mteb-clustering-sets"): (clustering, {"v_measure": "sets.v_measure"}),
    }
    for (name, set_kind), (module, figures) in modules.items():
        statistics = kind(name).statistics[set_kind]
        assert set(statistics) == set(figures)
        for figure, their_name in figures.items():
            assert statistics[figure].stratified == module.STATISTICS[their_name].stratified


def test_kind_modules_import_no_torch_scipy_or_sklearn():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from embeval.tasks.catalog import KINDS, kind\n"
        "for name in KINDS: kind(name).statistics\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'scipy', 'sklearn'})\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_mteb_version_is_the_protocol_modules():
    from embeval.evaluate import clustering, mteb_classification, pair_scores
    from embeval.kinds.mteb_shared import MTEB_VERSION

    assert MTEB_VERSION == pair_scores.MTEB_VERSION == clustering.MTEB_VERSION == mteb_classification.MTEB_VERSION


def test_the_docs_task_files_are_valid_declarations(tmp_path):
    """Every task file of docs/mteb-kinds.md reads as a declaration of its kind."""
    import re
    from pathlib import Path

    import tomllib

    from embeval.tasks.spec import read_spec

    text = (Path(__file__).resolve().parents[1] / "docs" / "mteb-kinds.md").read_text(encoding="utf-8")
    declarations = re.findall(r"```toml\n(.*?)```", text, re.S)
    assert len(declarations) == 15
    kinds = set()
    for declaration in declarations:
        spec = read_spec(tomllib.loads(declaration), "docs/mteb-kinds.md", str(tmp_path))
        kinds.add((spec.kind, spec.protocol))
    assert kinds >= {
        ("retrieval", None),
        ("reranking", None),
        ("pair-classification", "mteb"),
        ("classification", "mteb"),
        ("classification", "mteb-kfold"),
        ("clustering", "bootstrap"),
        ("clustering", "sets"),
        ("summarization", "mteb"),
        ("bitext-mining", "pairs"),
        ("bitext-mining", "parallel"),
        ("multilabel-classification", None),
        ("regression", None),
        ("instruction-reranking", None),
        ("instruction-retrieval", "robustness"),
    }


def test_a_near_chance_v_measure_and_its_interval_in_the_html_report(cli, tmp_path):
    """Resampling repeats documents, which a small sample's v-measure reads as agreement: the resamples
    of a near-chance v-measure sit above it, and the centred interval takes that shift out, so the
    interval holds the figure. The HTML report draws it."""
    import importlib.util

    from report_helpers import need

    if importlib.util.find_spec("matplotlib") is None:
        need("matplotlib", "pip install '.[report]'")
    rng = np.random.default_rng(11)
    texts = [f"noise {i}" for i in range(120)]
    table = {text: rng.normal(size=6).astype(np.float32) for text in texts}
    rows = [(text, i % 3) for i, text in enumerate(texts)]
    declaration = (
        'name = "Noise"\nkind = "clustering"\nembed_all = true\ndocuments_per_experiment = 64\n'
        '[files]\ntest = "noise.tsv"\n'
    )
    entry, _, out = score(cli, tmp_path, declaration, {"noise.tsv": tsv(rows, ("text", "label"))}, table, "Noise")
    ci = entry["ci"]["figures"]["v_measure"]
    assert ci["low"] <= entry["results"]["v_measure"] <= ci["high"] < 0.2
    report = cli("report", out, "--format", "html", "--out", tmp_path / "report.html")
    assert report.exit_code == 0, report.stderr
    assert "Clustering (MTEB), v-measure x100" in (tmp_path / "report.html").read_text(encoding="utf-8")
