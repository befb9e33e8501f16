"""`embeval compare`'s table as a person reads it: each distinct test once (an STS task with one subset has
one row for its mean, weighted mean and pooled Spearman, which are one test), Holm's adjustment over the
distinct tests only, the encoders named once, and the terminal table within 100 columns."""

import json
import random

import numpy as np
import pytest

from embeval import stats

STS_TOML = """name = "OnePair"
kind = "sts"
[files]
test = "pairs.tsv"
"""


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Two encoders (a good and a poor one) scored on an STS task with a single subset."""
    import embeval
    from embeval.formats.vectors import write
    from embeval.run.score import score
    from embeval.settings import RunConfig
    from embeval.tasks.registry import registry

    root = tmp_path_factory.mktemp("compare")
    rng = random.Random(3)
    words = [f"w{i}" for i in range(40)]
    rows = ["sentence1\tsentence2\tscore"]
    for _ in range(150):
        a = rng.sample(words, 5)
        keep = rng.randint(0, 5)
        b = a[:keep] + rng.sample(words, 5 - keep)
        rows.append(f"{' '.join(a)}\t{' '.join(b)}\t{keep:.1f}")
    (root / "pairs.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (root / "one.toml").write_text(STS_TOML, encoding="utf-8")
    tasks = registry([root / "one.toml"])
    embeval.export_sentences(root, root / "sentences", tasks=["OnePair"], task_files=[root / "one.toml"])

    def bag(noise):
        def encode(texts):
            out = np.zeros((len(texts), len(words)), dtype=np.float32)
            for i, text in enumerate(texts):
                for word in text.split():
                    out[i, words.index(word)] += 1
            return out + noise * np.random.default_rng(len(texts)).standard_normal(out.shape).astype(np.float32)

        return encode

    paths = []
    for name, noise in (("good", 0.0), ("poor", 2.0)):
        write(root / f"{name}.h5", root / "sentences", bag(noise), progress=False)
        out = root / f"{name}.json"
        config = RunConfig(bootstrap=200)
        score(root / f"{name}.h5", root, out=out, registry=tasks, config=config, progress=False)
        paths.append(out)
    return root, paths


def test_one_subset_sts_is_one_test_counted_once_by_holm(two_runs, cli):
    root, (good, poor) = two_runs
    results = json.loads(good.read_text())["tasks"]["OnePair"]["results"]["all"]["spearman"]
    assert results["mean"] == pytest.approx(results["pooled"], abs=1e-12)  # one subset: one figure, three names
    assert results["wmean"] == pytest.approx(results["pooled"], abs=1e-12)
    done = cli("compare", good, poor, "--task-file", root / "one.toml", "--json", root / "cmp.json")
    assert done.exit_code == 0, done.stderr
    compared = json.loads((root / "cmp.json").read_text())
    rows = compared["rows"]
    assert [r["figure"] for r in rows] == ["all.spearman.pooled", "all.pearson.pooled"]
    assert [o["figure"] for o in rows[0]["same_test_as"]] == ["all.spearman.wmean", "all.spearman.mean"]
    assert "same_test_as" not in rows[1]
    # Holm over the two distinct tests, as scipy-free arithmetic: the smaller p times 2, then the larger.
    p = sorted(r["p"] for r in rows)
    expected = {p[0]: min(1, 2 * p[0]), p[1]: max(min(1, 2 * p[0]), p[1])}
    assert [r["p_holm"] for r in rows] == [pytest.approx(expected[r["p"]]) for r in rows]
    counted_twice = stats.holm([rows[0]["p"]] * 3 + [rows[1]["p"]])  # the duplicates as separate tests
    assert counted_twice[0] > rows[0]["p_holm"]  # they would have inflated the adjusted p-value
    assert compared["resamples"] == max(stats.RESAMPLES, int(np.ceil(2 * 2 / 0.05)) - 1)
    flat = " ".join(done.stdout.split())
    assert "OnePair: cosine Spearman, all pairs pooled is the same test as" in flat
    assert "adjusted for the 2 comparisons" in flat


def test_the_terminal_table_fits_100_columns_and_names_each_encoder_once(two_runs, cli):
    root, (good, poor) = two_runs
    labels = ("a-rather-long-encoder-name", "another-long-encoder-name")
    done = cli("compare", good, poor, "--task-file", root / "one.toml", "--label", labels[0], "--label", labels[1])
    assert done.exit_code == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines if not line.startswith("  A ") and not line.startswith("  B ")) <= 100
    assert [done.stdout.count(label) for label in labels] == [1, 1]
    assert lines[1].startswith(f"  A  {labels[0]} (") and lines[2].startswith(f"  B  {labels[1]} (")
    markdown = cli("compare", good, poor, "--task-file", root / "one.toml", "--format", "markdown")
    assert "| task | figure | good | poor | Delta | p | p (Holm) | significant |" in markdown.stdout


def test_one_stratum_resamples_as_the_pooled_figure():
    """A stratified figure over one stratum is the pooled figure: the same resamples, the same interval."""
    rng = np.random.default_rng(0)
    arrays = {"gold": rng.normal(size=60), "system": rng.normal(size=60), "group": np.zeros(60, dtype=np.int64)}
    scores = stats.STATISTICS["scores"]
    named = {name: scores[f"spearman.{name}"] for name in ("pooled", "mean", "wmean")}
    cis = stats.bootstrap_cis(named, arrays, 1111, "OnePair", resamples=300)
    assert cis["mean"] == cis["pooled"]
    assert cis["wmean"] == pytest.approx(cis["pooled"], rel=1e-12)
    two = dict(arrays, group=np.arange(60) % 2)  # two strata: resampled within each
    assert stats.bootstrap_cis(named, two, 1111, "OnePair", resamples=300)["mean"] != cis["mean"]


def test_the_geometry_figure_shows_its_scale_honestly():
    """Two encoders 0.0003 apart in alignment: the axes reach 0 (a window fitted around 0.5843-0.5847 would
    draw the gap as large), and the caption gives the spread."""
    from embeval.reports.tables import geometry_scale

    points = [{"alignment": 0.5843, "uniformity": -2.31}, {"alignment": 0.5846, "uniformity": -2.35}]
    (x_low, x_high), (y_low, y_high), text = geometry_scale(points)
    assert y_low == 0 and 0.5846 < y_high < 0.7 and x_low < -2.35 and 0 <= x_high < 0.2
    assert (0.5846 - 0.5843) / (y_high - y_low) < 0.001  # the gap is under a thousandth of the axis
    assert "alignment 0.5843 to 0.5846 (a spread of 0.0003)" in text
    assert "uniformity -2.35 to -2.31 (a spread of 0.04)" in text
    assert geometry_scale([{"alignment": 0.0, "uniformity": 0.0}])[:2] == ((-1.0, 0.05), (0.0, 1.0))


def test_the_geometry_figure_caption_carries_the_spread(tmp_path):
    pytest.importorskip("matplotlib")
    from types import SimpleNamespace

    from embeval.reports import tables

    rows = [
        SimpleNamespace(label=name, dim=8, tasks={"STSBenchmark": {"geometry": geo}})
        for name, geo in (
            ("a", {"alignment": 0.5843, "uniformity": -2.31, "singular_values": [3.0, 1.0]}),
            ("b", {"alignment": 0.5846, "uniformity": -2.35, "singular_values": [2.0, 1.0]}),
        )
    ]
    from embeval.tasks.registry import TASKS

    found = tables.plots(rows, tmp_path, relative_to=tmp_path, specs=[TASKS["STSBenchmark"]])
    caption, path = found["geometry"][0]
    assert "a spread of 0.0003" in caption and (tmp_path / path).is_file()
