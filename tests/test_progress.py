"""Progress lines a person can follow through a long run: every stage numbered and named (the classifier
and the normalization it trains), a time bound that only shrinks unless the pace slows (and then says
so), a retrieval search that knows how much is left under a small memory budget, and long bootstrap
intervals that report progress too."""

import io
import re

import numpy as np
import pytest

from embeval import stats
from embeval.formats import predictions
from embeval.run.progress import TaskProgress
from embeval.train import search


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


BOUND = re.compile(r"this stage ends within (?:(\d+) min )?(\d+) s at the present pace")


def bound_of(line):
    m = BOUND.search(line)
    return None if m is None else 60 * int(m.group(1) or 0) + int(m.group(2))


def test_the_bound_only_shrinks_while_the_pace_holds_and_says_when_it_is_raised():
    """Early stopping: fits stop as they converge, so passes get quicker (with some noise); the bound
    shown never grows. Then the machine gets five times slower: the bound is raised, and says why."""
    clock, stream = Clock(), io.StringIO()
    progress = TaskProgress("MR", stream=stream, tty=False, every=0, clock=clock)
    progress.stage("choosing the regularization", total=200, unit="pass")
    rng = np.random.default_rng(0)
    for done in range(1, 121):
        clock.now += (3.0 - 2.0 * done / 120) * (1 + 0.1 * rng.standard_normal())
        progress.step(done)
    bounds = [bound_of(line) for line in stream.getvalue().splitlines()]
    bounds = [b for b in bounds if b is not None]
    assert len(bounds) > 100 and all(later <= earlier for earlier, later in zip(bounds, bounds[1:]))
    assert "raised" not in stream.getvalue()
    for done in range(121, 200):
        clock.now += 5 * 1.0
        progress.step(done)
    lines = stream.getvalue().splitlines()
    raised = [line for line in lines if "(raised: the pace slowed, or the stage grew)" in line]
    assert raised and bound_of(raised[0]) > bounds[-1]
    assert bound_of(lines[-1]) <= 5 * 1 + 5  # one pass left at the slow pace


def test_a_new_stage_is_numbered_and_its_count_starts_again():
    clock, stream = Clock(), io.StringIO()
    progress = TaskProgress("MR", stream=stream, tty=False, every=0, clock=clock)
    for label in ("logistic regression: choosing the regularization", "MLP (50 hidden units): choosing it"):
        progress.stage(label, total=200, unit="pass")
        for done in (4, 52):
            clock.now += 10
            progress.step(done)
    lines = stream.getvalue().splitlines()
    assert [line.split(":")[0] for line in lines] == ["MR, stage 1"] * 3 + ["MR, stage 2"] * 3
    assert lines[4].startswith("MR, stage 2: MLP (50 hidden units): choosing it, pass 4 of at most 200;")


@pytest.mark.slow  # scores a small task with two classifiers (about 8 s on 2 cores)
def test_a_classification_run_names_each_classifier_and_normalization(tmp_path, monkeypatch, capsys):
    """--classifiers logreg,mlp --normalize zscore: every stage line says which classifier it trains, on
    which vectors; the pass count starts again only at a new stage."""
    import devbow
    from test_docs import write_reviews

    import embeval
    from embeval.formats.vectors import write
    from embeval.run import progress as progress_module
    from embeval.run.score import score
    from embeval.settings import build
    from embeval.tasks.registry import registry

    write_reviews(tmp_path / "reviews.tsv")
    toml = tmp_path / "reviews.toml"
    toml.write_text('name = "Reviews"\nkind = "classification"\nprotocol = "kfold"\n[files]\ntrain = "reviews.tsv"\n'
                    'test = "reviews.tsv"\n', encoding="utf-8")  # fmt: skip
    tasks = registry([toml])
    embeval.export_sentences(tmp_path, tmp_path / "sentences", tasks=["Reviews"], task_files=[toml])
    write(tmp_path / "v.h5", tmp_path / "sentences", devbow.encode, progress=False)
    stream = io.StringIO()
    monkeypatch.setattr(
        progress_module, "TaskProgress", lambda name: TaskProgress(name, stream=stream, tty=False, every=0)
    )
    config = build("prototype", classifiers="logreg,mlp", normalize="zscore", bootstrap=0)
    score(tmp_path / "v.h5", tmp_path, out=tmp_path / "r.json", registry=tasks, config=config)
    assert "note: --classifiers logreg,mlp trains an MLP beside logistic regression on Reviews: expect" in (
        capsys.readouterr().err
    )
    lines = stream.getvalue().splitlines()
    stages = {}
    for line in lines:
        m = re.match(r"Reviews, stage (\d+): (.*?), pass (\d+) of at most", line)
        assert m, line
        stages.setdefault(int(m.group(1)), (m.group(2), []))[1].append(int(m.group(3)))
    labels = [label for label, _ in stages.values()]
    expected = [
        r"logistic regression, zscore-normalized vectors: choosing the regularization \(5 folds\), \d+ fits at once",
        r"logistic regression, zscore-normalized vectors: retraining on all of train, 1 fits at once",
        r"MLP \(\d+ hidden units\), zscore-normalized vectors: choosing the regularization \(5 folds\), \d+ fits at "
        "once",
        r"MLP \(\d+ hidden units\), zscore-normalized vectors: retraining on all of train, 1 fits at once",
    ]
    assert len(labels) == len(expected) and all(re.fullmatch(e, label) for e, label in zip(expected, labels)), labels
    for _, counts in stages.values():  # within a stage the count never starts again
        assert counts == sorted(counts)


def test_a_search_in_many_passes_knows_its_total():
    """Under a small budget the queries are searched in blocks, each a pass over the corpus: planned()
    announces the rows the passes will score, and progress() reports exactly those."""
    rng = np.random.default_rng(1)
    corpus = rng.standard_normal((1500, 16)).astype(np.float32)
    queries = rng.standard_normal((300, 16)).astype(np.float32)
    planned, scored = [], []
    found = search.top_k(
        queries,
        lambda a, b: corpus[a:b],
        len(corpus),
        10,
        budget_bytes=1 << 19,
        progress=scored.append,
        planned=planned.append,
    )
    alone = search.top_k(queries, lambda a, b: corpus[a:b], len(corpus), 10, budget_bytes=1 << 19)
    assert np.array_equal(found[1], alone[1]) and np.array_equal(found[0], alone[0])
    assert sum(planned) > len(corpus) and sum(planned) % len(corpus) == 0  # several passes
    assert sum(scored) == sum(planned)


def test_long_bootstrap_intervals_report_progress(monkeypatch):
    """Intervals over many resamples say how far they are, up to the total; the figures are the same."""
    rng = np.random.default_rng(2)
    gold = rng.integers(0, 2, 500)
    pset = predictions.PredictionSet(
        "labels", {"gold": gold, "pred": np.where(rng.random(500) < 0.8, gold, 1 - gold)}, ("acc",), "test split"
    )
    monkeypatch.setattr(predictions, "PROGRESS_CELLS", 0)
    seen = []
    with_progress = predictions.intervals(
        "T", {"": pset}, 1111, 3000, progress=lambda done, total: seen.append((done, total))
    )
    assert seen[0] == (0, 3000) and seen[-1] == (3000, 3000)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen) and len(seen) > 2
    assert with_progress == predictions.intervals("T", {"": pset}, 1111, 3000)
    assert stats.draws({"acc": stats.STATISTICS["labels"]["acc"]}, pset.arrays) == 1


@pytest.mark.parametrize("cells, calls", [(1 << 40, 0)])
def test_short_intervals_stay_quiet(monkeypatch, cells, calls):
    monkeypatch.setattr(predictions, "PROGRESS_CELLS", cells)
    pset = predictions.PredictionSet("labels", {"gold": np.zeros(10), "pred": np.zeros(10)}, ("acc",), "test split")
    seen = []
    predictions.intervals("T", {"": pset}, 1111, 100, progress=lambda done, total: seen.append(done))
    assert len(seen) == calls


def test_a_run_with_the_mlp_says_it_will_be_slow(cli):
    """--classifiers logreg,mlp: the option's help warns, and a run names the tasks it slows down."""
    from types import SimpleNamespace

    from embeval.run.score import mlp_note
    from embeval.settings import build
    from embeval.tasks.registry import TASKS

    flat = " ".join(cli("score", "--help").stdout.split())
    assert "with mlp a classification task takes many times as long" in flat
    units = [SimpleNamespace(task=name, spec=TASKS[name]) for name in ("STS16", "MR", "MRPC", "Tense")]
    assert mlp_note(build("literature", classifiers="logreg"), units) is None
    assert mlp_note(build("literature"), units) is None
    note = mlp_note(build("literature", classifiers="logreg,mlp"), units)
    assert note.startswith("note: --classifiers logreg,mlp trains an MLP beside logistic regression on MR, MRPC: ")
    assert mlp_note(build("literature", classifiers="logreg,mlp"), units[:1]) is None


def test_a_large_file_says_its_checks_take_a_while(tmp_path, monkeypatch, capsys):
    """Before the first task, a large vectors file is read once (values, fingerprints): a line says so
    (here before the plan finds nothing to score)."""
    import h5py

    from embeval.errors import EmbevalError
    from embeval.run import score as scoring

    with h5py.File(tmp_path / "v.h5", "w") as f:
        f["Unknown"] = np.zeros((2, 4), dtype=np.float32)
    monkeypatch.setattr(scoring, "CHECK_NOTE_BYTES", 1)
    with pytest.raises(EmbevalError):
        scoring.score(tmp_path / "v.h5", tmp_path, config={"bootstrap": 0}, progress=False)
    assert f"checking {tmp_path / 'v.h5'} (0.0 GiB: every vector it holds for the tasks is read once) ..." in (
        capsys.readouterr().err
    )
