"""Adding a kind of task is one new module and one registration line: a nearest-centroid kind
(numpy only), written here into a temporary folder on sys.path and registered in
embeval.tasks.catalog.KINDS, goes through export-sentences, score, report (markdown and CSV),
compare, the HTML page and a sweep of two files, with no file of embeval edited.

Its figure is checked against a computation of its own from the vectors file and the data files
(numpy, here): the accuracy of assigning each test sentence to the nearest class mean of the
training sentences' vectors (squared Euclidean distance, the first class on ties)."""

import csv as csv_module
import io
import json
import textwrap

import h5py
import numpy as np
import pytest

from embeval.formats.vectors import write
from embeval.tasks import catalog

KIND_MODULE = '''
    """Nearest-centroid classification: each test sentence gets the class whose training sentences'
    mean vector is nearest (squared Euclidean distance; the first class on ties). No training, no
    parameters. Files: train and test, text and label columns. Figure: test accuracy (%)."""

    import numpy as np

    from embeval.formats.predictions import PredictionSet
    from embeval.stats import Statistic
    from embeval.tasks.figures import Column, Figure
    from embeval.tasks.groups import Group
    from embeval.tasks.kind import TEXT, Kind


    def hit_rate(W, arrays):
        """Accuracy (%) of each resample (rows of W: how often each test item is drawn)."""
        return 100.0 * (W @ arrays["hit"]) / W.sum(1)


    class NearestCentroid(Kind):
        name = "nearest-centroid"
        summary = "labelled sentences; the nearest class mean of the training vectors"
        statistics = {"hits": {"acc": Statistic(hit_rate, False)}}
        groups = {"centroid": Group("centroid", "Nearest centroid", "Test accuracy (%) of the nearest class mean")}

        def file_keys(self, protocol):
            return ("train", "test"), (), False

        def column_keys(self, protocol):
            return ("text", "label")

        def load(self, spec, paths):
            from embeval.tasks.samples import read_splits

            return read_splits(spec, paths, ("train", "test"), ("text", "label"), "label", "train")

        def tables(self, spec):
            return ()  # read from ctx.sources, as numpy

        def evaluate(self, ctx):
            table = ctx.sources[TEXT].read()
            train, test = ctx.data.splits["train"], ctx.data.splits["test"]
            x = table[ctx.rows["train"][0]].astype(np.float64)
            classes = len(ctx.data.classes)
            means = np.stack([x[train.y == c].mean(0) for c in range(classes)])
            t = table[ctx.rows["test"][0]].astype(np.float64)
            distance = ((t[:, None, :] - means[None]) ** 2).sum(-1)
            hit = (distance.argmin(1) == test.y).astype(np.float64)
            ctx.keep("", PredictionSet("hits", {"hit": hit}, ("acc",)))
            return {"acc": round(100.0 * float(hit.mean()), 2), "ntest": len(hit)}

        def figures(self, spec):
            return (Figure("acc", "nearest-centroid test accuracy %", True),)

        def columns(self, spec):
            return (Column(spec.report.group or "centroid", "acc", "accuracy %", header=spec.report.header),)


    KIND = NearestCentroid()
'''
TASK_FILE = """name = "Centroids"
short_name = "Cent"
kind = "nearest-centroid"
[files]
train = "c/train.tsv"
test = "c/test.tsv"
"""
WORDS = {"red": ["apple", "cherry", "brick", "rose"], "blue": ["sky", "sea", "ink", "jeans"], "green": ["leaf", "lime"]}


@pytest.fixture
def new_kind(tmp_path, monkeypatch):
    """The kind module in a folder on sys.path, registered with its one line."""
    folder = tmp_path / "kinds"
    folder.mkdir()
    (folder / "toy_centroid.py").write_text(textwrap.dedent(KIND_MODULE), encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    catalog.kind.cache_clear()
    monkeypatch.setitem(catalog.KINDS, "nearest-centroid", "toy_centroid")
    yield
    catalog.kind.cache_clear()


@pytest.fixture
def task(tmp_path):
    """The task file and its data: sentences of three colours, words shared across colours as noise."""
    rng = np.random.default_rng(3)
    for split, count in (("train", 40), ("test", 30)):
        rows = ["text\tlabel"]
        for i in range(count):
            label = list(WORDS)[i % 3]
            words = list(rng.choice(WORDS[label], 2)) + list(rng.choice(sum(WORDS.values(), []), 2))
            rows.append(f"{' '.join(words)} {split}{i}\t{label}")
        (tmp_path / "c").mkdir(exist_ok=True)
        (tmp_path / "c" / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (tmp_path / "centroids.toml").write_text(TASK_FILE, encoding="utf-8")
    return tmp_path / "centroids.toml"


def encoder(seed):
    """Each word a fixed random vector (seeded), a sentence the mean of its words'."""

    def encode(texts):
        out = np.zeros((len(texts), 16), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.split():
                out[i] += np.random.default_rng([seed, *word.encode()]).standard_normal(16).astype(np.float32)
            out[i] /= max(1, len(text.split()))
        return out

    return encode


def expected_accuracy(vectors, export, folder):
    """The nearest-centroid accuracy computed here from the vectors file, the export list and the data."""
    sentences = (export / "Centroids.txt").read_text(encoding="utf-8").splitlines()
    with h5py.File(vectors, "r") as f:
        table = f["Centroids"][:].astype(np.float64)
    row = {s: i for i, s in enumerate(sentences)}

    def split(name):
        lines = (folder / "c" / f"{name}.tsv").read_text(encoding="utf-8").splitlines()[1:]
        texts, labels = zip(*(line.split("\t") for line in lines))
        return table[[row[t] for t in texts]], np.array(labels)

    x, y = split("train")
    t, gold = split("test")
    classes = sorted(set(y))
    means = np.stack([x[y == c].mean(0) for c in classes])
    nearest = np.array([classes[int(np.argmin(((means - v) ** 2).sum(1)))] for v in t])
    return round(100.0 * float(np.mean(nearest == gold)), 2)


def test_a_kind_added_in_one_module_goes_through_every_command(new_kind, task, tmp_path, cli):
    from embeval.reports import html

    folder = tmp_path
    export = folder / "sentences"
    result = cli("tasks", "--task-file", task, "--tasks", "Centroids", "--data", folder / "none")
    assert result.exit_code == 0, result.stderr
    assert "nearest-centroid" in result.stdout and "train 40, test 30" in result.stdout
    result = cli("export-sentences", "--task-file", task, "--data", folder / "none", "--out", export)
    assert result.exit_code == 0, result.stderr
    assert list(json.loads((export / "manifest.json").read_text())["tasks"]) == ["Centroids"]
    outs = []
    for seed in (1, 2):
        vectors = folder / f"enc{seed}.h5"
        write(vectors, export, encoder(seed), progress=False)
        out = folder / f"enc{seed}.results.json"
        result = cli("score", vectors, "--task-file", task, "--data", folder / "none", "--out", out, "--quiet")
        assert result.exit_code == 0, result.stderr
        entry = json.loads(out.read_text())["tasks"]["Centroids"]
        assert entry["kind"] == "nearest-centroid"
        assert entry["results"]["acc"] == expected_accuracy(vectors, export, folder)
        assert entry["results"]["ntest"] == 30 and 50 < entry["results"]["acc"] <= 100
        low, high = entry["ci"]["figures"]["acc"]["low"], entry["ci"]["figures"]["acc"]["high"]
        assert low <= entry["results"]["acc"] <= high and low < high
        assert "nearest-centroid test accuracy %" in result.stdout
        outs.append(out)
    accuracies = [json.loads(p.read_text())["tasks"]["Centroids"]["results"]["acc"] for p in outs]

    markdown = cli("report", *outs)
    assert markdown.exit_code == 0, markdown.stderr
    assert "### Nearest centroid" in markdown.stdout
    assert "Test accuracy (%) of the nearest class mean" in markdown.stdout
    assert "| encoder | dim | Cent |" in markdown.stdout
    csv = cli("report", *outs, "--format", "csv")
    assert csv.exit_code == 0, csv.stderr
    rows = [row for row in csv_module.reader(io.StringIO(csv.stdout)) if row][1:]
    assert [(r[0], r[1], r[3], float(r[5])) for r in rows] == [
        ("centroid", "enc1", "Cent", accuracies[0]),
        ("centroid", "enc2", "Cent", accuracies[1]),
    ]

    compared = cli("compare", *outs, "--json", folder / "compare.json")
    assert compared.exit_code == 0, compared.stderr
    assert "Centroids" in compared.stdout and "nearest-centroid test accuracy %" in compared.stdout
    (row,) = json.loads((folder / "compare.json").read_text())["rows"]
    assert (row["task"], row["figure"]) == ("Centroids", "acc")
    assert (row["a"], row["b"]) == pytest.approx(accuracies, abs=0.005)  # the results round to 2 decimals
    page = html.render(outs)
    assert "Nearest centroid" in page and "Paired comparison" in page and "Centroids" in page

    sweep = folder / "sweep"
    files = [folder / "enc1.h5", folder / "enc2.h5"]
    result = cli("sweep", *files, "--task-file", task, "--data", folder / "none", "--out-dir", sweep, "--quiet")
    assert result.exit_code == 0, result.stderr
    summary = json.loads((sweep / "sweep.json").read_text())
    values = summary["tasks"]["Centroids"]["values"]
    assert [values[label]["value"] for label in ("enc1", "enc2")] == accuracies
    assert summary["tasks"]["Centroids"]["task_label"] == "Cent" and summary["tasks"]["Centroids"]["best"] is None
    for seed, out in zip((1, 2), outs):
        swept = json.loads((sweep / f"enc{seed}.results.json").read_text())["tasks"]["Centroids"]
        assert swept["results"] == json.loads(out.read_text())["tasks"]["Centroids"]["results"]
    assert "Cent" in html.render_sweep(sweep / "sweep.json")
    report = cli("report", sweep, "--format", "html", "--out", folder / "sweep.html")
    assert report.exit_code == 0, report.stderr
    assert "Cent" in (folder / "sweep.html").read_text(encoding="utf-8")
