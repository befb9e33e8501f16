"""ImageCaptionRetrieval: SentEval's random draws, ranks against brute force, training end to end
on small COCO pickles, and refusal of pickles that are not plain data."""

import json
import os
import pickle

import numpy as np
import pytest
import torch
from coco_helpers import caption_encoder, chance_recall, write_coco

from embeval.evaluate import ranking as retrieval
from embeval.evaluate.ranking import (
    CaptionSplit,
    RankingModel,
    contrast_draw,
    epoch_batches,
    evaluate_split,
    fold_count,
    fold_ranks,
    ranking_loss,
    recall_metrics,
)
from embeval.formats.vectors import write

TASK = "ImageCaptionRetrieval"


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """These models are tiny: one intra-op thread avoids idle-spinning threads on a shared machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# --- SentEval's random draws ------------------------------------------------------------------


@pytest.mark.parametrize("n, start, size", [(300, 0, 128), (300, 128, 128), (300, 256, 44), (1000, 384, 128)])
def test_contrast_draw_equals_choice_on_the_complement_list(n, start, size):
    """Legacy RandomState.choice(list, k) draws randint(0, len(list), k) positions: drawing the
    positions directly and mapping them past the batch's slice yields the same captions."""
    permutation = np.random.RandomState(7).permutation(n)
    senteval, ours = np.random.RandomState(1111), np.random.RandomState(1111)
    complement = list(permutation[:start]) + list(permutation[start + size :])
    for _ in range(3):
        expected = senteval.choice(complement, 30 * size)
        np.testing.assert_array_equal(contrast_draw(ours, permutation, start, size, 30 * size), expected)
    assert senteval.randint(1 << 30) == ours.randint(1 << 30)  # the streams stay in step


def test_contrast_draw_never_returns_the_batch():
    permutation = np.random.RandomState(0).permutation(50)
    drawn = contrast_draw(np.random.RandomState(1), permutation, 10, 20, 5000)
    assert not set(drawn) & set(permutation[10:30])
    assert set(drawn) == set(permutation[:10]) | set(permutation[30:])


def test_epoch_batches_follow_senteval_draw_order():
    """np.random.seed(s) then per epoch a permutation, per batch 30 images then 30 captions per
    caption drawn by choice on the complement list: the stream RandomState(s) gives."""
    n, seed = 700, 1111
    state = np.random.get_state()
    try:
        np.random.seed(seed)
        expected = []
        for _ in range(2):
            permutation = list(np.random.permutation(n))
            for i in range(0, n, 128):
                batch = permutation[i : i + 128]
                complement = permutation[:i] + permutation[i + 128 :]
                expected.append(
                    (
                        batch,
                        np.random.choice(complement, 30 * len(batch)),
                        np.random.choice(complement, 30 * len(batch)),
                    )
                )
    finally:
        np.random.set_state(state)
    rng = np.random.RandomState(seed)
    got = [b for _ in range(2) for b in epoch_batches(rng, n)]
    assert len(got) == len(expected) == 12
    assert len(got[5][0]) == 700 - 5 * 128
    for (b1, i1, s1), (b2, i2, s2) in zip(got, expected):
        np.testing.assert_array_equal(b1, b2)
        np.testing.assert_array_equal(i1, i2)
        np.testing.assert_array_equal(s1, s2)


def test_projections_are_drawn_as_senteval_builds_them():
    """SentEval: torch.manual_seed(seed), then Linear(imgdim, 1000), then Linear(sentdim, 1000)."""
    with torch.random.fork_rng():
        torch.manual_seed(1111)
        image_proj, sentence_proj = torch.nn.Linear(40, 1000), torch.nn.Linear(24, 1000)
    model = RankingModel(24, 40, 1111)
    for ours, theirs in ((model.image_proj, image_proj), (model.sentence_proj, sentence_proj)):
        assert torch.equal(ours.weight, theirs.weight) and torch.equal(ours.bias, theirs.bias)


def test_ranking_loss_equals_the_pairwise_hinge_written_out():
    g = torch.Generator().manual_seed(0)
    b, k, p = 6, 4, 8
    norm = retrieval.l2_normalize
    img, sent = norm(torch.randn(b, p, generator=g)), norm(torch.randn(b, p, generator=g))
    img_c = norm(torch.randn(b * k, p, generator=g)).view(b, k, p)
    sent_c = norm(torch.randn(b * k, p, generator=g)).view(b, k, p)
    expected = 0.0
    for i in range(b):
        anchor = float(img[i] @ sent[i])
        for j in range(k):
            expected += max(0.0, 0.2 - anchor + float(img[i] @ sent_c[i, j]))
            expected += max(0.0, 0.2 - anchor + float(sent[i] @ img_c[i, j]))
    assert float(ranking_loss(img, sent, img_c, sent_c)) == pytest.approx(expected, rel=1e-5)


# --- ranks and metrics against brute force -----------------------------------------------------


def brute_force_ranks(images, captions):
    """Per query, sort every candidate by score (Python loops, float64) and find the positives."""
    scores = images @ captions.T
    m = len(images)
    i2t = []
    for i in range(m):
        order = list(np.argsort(-scores[i], kind="stable"))
        i2t.append(min(order.index(5 * i + k) for k in range(5)))
    t2i = []
    for c in range(5 * m):
        order = list(np.argsort(-scores[:, c], kind="stable"))
        t2i.append(order.index(c // 5))
    return np.array(i2t), np.array(t2i)


def brute_force_metrics(ranks):
    n = len(ranks)
    out = {f"r{k}": 100.0 * sum(1 for r in ranks if r < k) / n for k in (1, 5, 10)}
    s = sorted(ranks)
    median = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    out["medr"] = float(int(median) + 1)
    return out


def _unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("m, noise", [(40, 4.0), (37, 8.0)])
def test_fold_ranks_and_metrics_match_brute_force(m, noise):
    rng = np.random.default_rng(m)
    images = _unit(rng.standard_normal((m, 16)))
    captions = _unit(np.repeat(images, 5, axis=0) + noise * rng.standard_normal((5 * m, 16)) / 4)
    i2t, t2i = fold_ranks(torch.from_numpy(images), torch.from_numpy(captions))
    bi2t, bt2i = brute_force_ranks(images, captions)
    np.testing.assert_array_equal(i2t.numpy(), bi2t)
    np.testing.assert_array_equal(t2i.numpy(), bt2i)
    assert 0 < np.mean(bi2t < 1) < 1  # neither trivial nor hopeless
    for ours, theirs in ((i2t, bi2t), (t2i, bt2i)):
        assert recall_metrics(ours) == pytest.approx(brute_force_metrics(list(theirs)))


def test_median_rank_is_floor_of_median_plus_one():
    assert recall_metrics(torch.tensor([0, 1, 2, 6]))["medr"] == 2.0  # median 1.5
    assert recall_metrics(torch.tensor([0, 3, 9]))["medr"] == 4.0
    assert recall_metrics(torch.tensor([0, 0, 4, 12]))["r5"] == 75.0


class _IdentityModel:
    """Projections that only L2-normalize: the ranks then depend on the inputs alone."""

    def eval(self):
        return self

    images = sentences = staticmethod(retrieval.l2_normalize)


def test_evaluate_split_averages_five_folds_of_images():
    rng = np.random.default_rng(3)
    m = 12
    images = rng.standard_normal((5 * m, 8)).astype(np.float32)
    captions = np.repeat(images, 5, axis=0) + 1.5 * rng.standard_normal((25 * m, 8)).astype(np.float32)
    table = np.concatenate([rng.standard_normal((3, 8)).astype(np.float32), captions[::-1]])
    rows = len(table) - 1 - np.arange(25 * m)  # captions reached through a shuffled table
    split = CaptionSplit(torch.from_numpy(table), rows, np.repeat(np.arange(5 * m), 5), images, torch.device("cpu"))
    acc, score = evaluate_split(_IdentityModel(), split)
    per_fold = {"i2t": [], "t2i": []}
    for f in range(5):
        ranks = brute_force_ranks(
            _unit(images[f * m : (f + 1) * m].astype(np.float64)),
            _unit(captions[5 * f * m : 5 * (f + 1) * m].astype(np.float64)),
        )
        for d, r in zip(("i2t", "t2i"), ranks):
            per_fold[d].append(brute_force_metrics(list(r)))
    expected_score = sum(fm[f"r{k}"] for d in per_fold for fm in per_fold[d] for k in (1, 5, 10)) / 5
    assert score == pytest.approx(expected_score)
    for d in per_fold:
        for key in ("r1", "r5", "r10", "medr"):
            assert acc[d][key] == pytest.approx(np.mean([fm[key] for fm in per_fold[d]]))
    assert 0 < acc["i2t"]["r1"] < 100


def test_fold_count():
    assert fold_count(5000) == 1000 and fold_count(5) == 1
    for bad in (0, 7, 12):
        with pytest.raises(ValueError, match="multiple of 5"):
            fold_count(bad)


# --- end to end on small COCO pickles ------------------------------------------------------------


def _score(cli, tmp, data, features, **encoder):
    out = tmp / "sentences"
    result = cli("export-sentences", "--data", data, "--out", out, "--tasks", TASK)
    assert result.exit_code == 0, result.stderr
    write(tmp / "v.h5", out, caption_encoder(features, **encoder), batch_size=512, progress=False)
    result = cli(
        "score", tmp / "v.h5", "--data", data, "--tasks", TASK, "--out", tmp / "r.json", "--device", "cpu", "--quiet"
    )
    assert result.exit_code == 0, result.stderr
    return json.loads((tmp / "r.json").read_text())["tasks"][TASK], result.stdout


@pytest.fixture(scope="module")
def related(tmp_path_factory):
    """A small COCO folder (40 train images, 250 dev, 250 test) whose captions are noisy linear
    maps of their image's features."""
    tmp = tmp_path_factory.mktemp("coco_related")
    return tmp, write_coco(tmp / "data", (40, 250, 250))


def test_learnable_captions_are_retrieved(cli, related):
    tmp, features = related
    entry, stdout = _score(cli, tmp, tmp / "data", features)
    r = entry["results"]
    assert entry["kind"] == "caption-ranking"
    assert set(r) == {"devacc", "acc", "ndev", "ntest"} and r["ndev"] == r["ntest"] == 1250
    six = [r["acc"][d][f"r{k}"] for d in ("i2t", "t2i") for k in (1, 5, 10)]
    assert r["acc"]["mean_recall"] == pytest.approx(sum(six) / 6, abs=1e-12)
    for direction in ("i2t", "t2i"):
        assert set(r["acc"][direction]) == {"r1", "r5", "r10", "medr"}
        assert r["acc"][direction]["r10"] > 90, r
        assert r["acc"][direction]["medr"] <= 2
    assert 540 < r["devacc"] <= 600
    assert "image->text R@1 | R@5 | R@10, medr" in stdout and "partial" not in stdout


def test_unrelated_captions_score_at_chance(cli, tmp_path):
    features = write_coco(tmp_path / "data", (40, 250, 250), seed=5)
    r, _ = _score(cli, tmp_path, tmp_path / "data", features, related=False)
    acc = r["results"]["acc"]
    # folds of 50 images / 250 captions: chance R@10 is 20% (t2i) and 18.4% (i2t, 5 relevant of 250)
    assert abs(acc["t2i"]["r10"] - chance_recall(50, 10)) < 8, acc
    assert abs(acc["i2t"]["r10"] - chance_recall(250, 10, 5)) < 8, acc
    assert 17 <= acc["t2i"]["medr"] <= 34, acc


def test_image_count_not_a_multiple_of_five_is_refused(cli, tmp_path):
    features = write_coco(tmp_path / "data", (30, 10, 12))
    out = tmp_path / "sentences"
    assert cli("export-sentences", "--data", tmp_path / "data", "--out", out, "--tasks", TASK).exit_code == 0
    write(tmp_path / "v.h5", out, caption_encoder(features), progress=False)
    result = cli(
        "score",
        tmp_path / "v.h5",
        "--data",
        tmp_path / "data",
        "--tasks",
        TASK,
        "--out",
        tmp_path / "r.json",
        "--device",
        "cpu",
        "--quiet",
    )
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert [line for line in lines if line.startswith("embeval: error:")] == lines[-1:]
    assert "test.pkl" in lines[-1] and TASK in lines[-1] and "multiple of 5" in lines[-1]


# --- bad pickles ---------------------------------------------------------------------------------


class _WritesFile:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


class _RunsCommand:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


@pytest.mark.parametrize("payload", [_WritesFile, _RunsCommand])
def test_pickle_that_would_run_code_is_refused(cli, tmp_path, payload):
    features = write_coco(tmp_path / "data", (30, 10, 10))
    out = tmp_path / "sentences"
    assert cli("export-sentences", "--data", tmp_path / "data", "--out", out, "--tasks", TASK).exit_code == 0
    write(tmp_path / "v.h5", out, caption_encoder(features), progress=False)
    marker = tmp_path / "pwned"
    evil = tmp_path / "data" / "downstream" / "COCO" / "valid.pkl"
    data = {
        "features": features["valid"],
        "image_to_caption_ids": [[1, 2, 3, 4, 5]] * 10,
        "captions": {i: {"cleaned_caption": "x"} for i in range(1, 6)},
        "note": payload(str(marker)),
    }
    evil.write_bytes(pickle.dumps(data, protocol=2))
    for args in (
        ("export-sentences", "--data", tmp_path / "data", "--out", tmp_path / "again", "--tasks", TASK),
        (
            "score",
            tmp_path / "v.h5",
            "--data",
            tmp_path / "data",
            "--tasks",
            TASK,
            "--out",
            tmp_path / "r.json",
            "--quiet",
        ),
    ):
        result = cli(*args)
        assert result.exit_code == 2
        errors = [line for line in result.stderr.splitlines() if line.startswith("embeval: error:")]
        assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
        assert "valid.pkl" in errors[0] and TASK in errors[0] and "not a plain-data pickle" in errors[0]
        assert not marker.exists()
    assert not (tmp_path / "r.json").exists()


def test_truncated_pickle_is_refused(cli, tmp_path):
    write_coco(tmp_path / "data", (30, 10, 10), protocol=4)
    path = tmp_path / "data" / "downstream" / "COCO" / "test.pkl"
    path.write_bytes(path.read_bytes()[:-40])
    result = cli("export-sentences", "--data", tmp_path / "data", "--out", tmp_path / "s", "--tasks", TASK)
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("embeval: error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "test.pkl" in errors[0] and TASK in errors[0] and "corrupt pickle" in errors[0]


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_pickles_of_every_protocol_load(tmp_path, protocol):
    from embeval.tasks.registry import TASKS

    features = write_coco(tmp_path, (30, 10, 10), protocol=protocol)
    data = TASKS[TASK].load(tmp_path)
    train = data.splits["train"]
    np.testing.assert_array_equal(train.images, features["train"])
    assert len(train) == 150 and train.a[7] == "train image 1 caption 2 ."
    np.testing.assert_array_equal(train.y[:10], [0, 0, 0, 0, 0, 1, 1, 1, 1, 1])


# --- the GPU, where there is one -------------------------------------------------------------------


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_and_cpu_agree(related):
    from embeval.evaluate.context import Context
    from embeval.formats.sentences import task_sentences
    from embeval.tasks.registry import TASKS
    from embeval.tasks.samples import split_rows

    tmp, features = related
    data = TASKS[TASK].load(tmp / "data")
    sentences = task_sentences(data)
    table = torch.from_numpy(caption_encoder(features)(sentences))
    row_of = {s: i for i, s in enumerate(sentences)}
    results = {}
    for device in ("cpu", "cuda"):
        ctx = Context(
            TASKS[TASK],
            data,
            table.to(device),
            {k: split_rows(s, row_of) for k, s in data.splits.items()},
            torch.device(device),
        )
        results[device] = retrieval.evaluate_ranking(ctx)
    for direction in ("i2t", "t2i"):
        for key in ("r1", "r5", "r10"):
            assert abs(results["cpu"]["acc"][direction][key] - results["cuda"]["acc"][direction][key]) < 3
    assert abs(results["cpu"]["devacc"] - results["cuda"]["devacc"]) < 10
