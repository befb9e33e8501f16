"""COCO retrieval against SentEval's code written out: ranks with exact ties, and one training step."""

import copy

import numpy as np
import pytest
import torch

from embeval.evaluate import ranking as retrieval
from embeval.evaluate.ranking import (
    CaptionSplit,
    RankingModel,
    evaluate_split,
    fold_ranks,
)


def senteval_i2t(images, captions):
    """SentEval's i2t: images (5N, K) with each image repeated for its 5 captions, captions (5N, K)."""
    npts = images.shape[0] // 5
    ranks = np.zeros(npts)
    for index in range(npts):
        scores = torch.mm(images[5 * index].view(1, -1), captions.transpose(0, 1)).view(-1).numpy()
        inds = np.argsort(scores)[::-1]
        ranks[index] = min(np.where(inds == i)[0][0] for i in range(5 * index, 5 * index + 5))
    return ranks


def senteval_t2i(images, captions):
    npts = images.shape[0] // 5
    ims = torch.cat([images[i].unsqueeze(0) for i in range(0, len(images), 5)])
    ranks = np.zeros(5 * npts)
    for index in range(npts):
        scores = torch.mm(captions[5 * index : 5 * index + 5], ims.transpose(0, 1)).numpy()
        for i in range(len(scores)):
            inds = np.argsort(scores[i])[::-1]
            ranks[5 * index + i] = np.where(inds == index)[0][0]
    return ranks


def strictly_higher(images, captions):
    """Ranks counting only strictly higher scores (ties in the query's favour): not SentEval's."""
    scores = (images[::5] @ captions.T).numpy()
    m = len(scores)
    own = scores.reshape(m, m, 5)[np.arange(m), np.arange(m)]
    return (scores > own.max(1, keepdims=True)).sum(1), (own.reshape(-1, 1) < scores.T).sum(1)


@pytest.mark.parametrize("m", [6, 40])
def test_ranks_with_exact_ties_are_sentevals(m):
    """Integer-valued embeddings make every score exact, so duplicate captions, duplicate images and
    different vectors with equal scores tie exactly; embeval ranks them where SentEval's argsort does."""
    rng = np.random.default_rng(m)
    image_rows = rng.integers(0, m - 2, m)  # some images share a vector
    caption_rows = rng.integers(0, 3 * m, 5 * m)  # many captions share a sentence
    image_table = torch.tensor(rng.integers(-1, 2, (m - 2, 4)), dtype=torch.float32)
    caption_table = torch.tensor(rng.integers(-1, 2, (3 * m, 4)), dtype=torch.float32)
    images, captions = image_table[image_rows], caption_table[caption_rows]
    i2t, t2i = fold_ranks(image_table, caption_table, torch.tensor(image_rows), torch.tensor(caption_rows))
    repeated = images.repeat_interleave(5, dim=0)
    assert np.array_equal(i2t.numpy(), senteval_i2t(repeated, captions))
    assert np.array_equal(t2i.numpy(), senteval_t2i(repeated, captions))
    assert np.array_equal(fold_ranks(images, captions)[1].numpy(), senteval_t2i(repeated, captions))
    higher_i2t, higher_t2i = strictly_higher(repeated, captions)
    assert not np.array_equal(t2i.numpy(), higher_t2i) or not np.array_equal(i2t.numpy(), higher_i2t)


class _IdentityModel:
    def eval(self):
        return self

    images = sentences = staticmethod(lambda x: x)


def test_duplicate_sentences_tie_through_evaluate_split():
    """A split whose captions repeat sentences (one table row each) ranks as SentEval on the
    expanded vectors, fold by fold."""
    rng = np.random.default_rng(0)
    m = 8
    table = torch.tensor(rng.integers(-1, 2, (30, 4)), dtype=torch.float32)
    rows = rng.integers(0, 30, 25 * m)
    images = rng.integers(-1, 2, (5 * m, 4)).astype(np.float32)
    split = CaptionSplit(table, rows, np.repeat(np.arange(5 * m), 5), images, torch.device("cpu"))
    ranks = {}
    evaluate_split(_IdentityModel(), split, ranks)
    for f in range(5):
        repeated = torch.from_numpy(images[f * m : (f + 1) * m]).repeat_interleave(5, dim=0)
        captions = table[rows[5 * f * m : 5 * (f + 1) * m]]
        assert np.array_equal(ranks["i2t"][f], senteval_i2t(repeated, captions))
        assert np.array_equal(ranks["t2i"][f], senteval_t2i(repeated, captions))


def senteval_loss(model_state, images, sentences, contrast_images, contrast_sentences, margin):
    """SentEval's COCOProjNet.forward and PairwiseRankingLoss, written as SentEval writes them."""
    image_proj, sentence_proj = model_state

    def normalized(projection, x):
        y = projection(x)
        return y / torch.sqrt(torch.pow(y, 2).sum(1, keepdim=True)).expand_as(y)

    b, k = contrast_images.shape[:2]
    img = images.unsqueeze(1).expand_as(contrast_images).contiguous().view(b * k, -1)
    sent = sentences.unsqueeze(1).expand_as(contrast_sentences).contiguous().view(b * k, -1)
    imgproj, sentproj = normalized(image_proj, img), normalized(sentence_proj, sent)
    imgcproj = normalized(image_proj, contrast_images.reshape(b * k, -1))
    sentcproj = normalized(sentence_proj, contrast_sentences.reshape(b * k, -1))
    anchor1 = torch.sum(imgproj * sentproj, 1)
    anchor2 = torch.sum(sentproj * imgproj, 1)
    img_sentc = torch.sum(imgproj * sentcproj, 1)
    sent_imgc = torch.sum(sentproj * imgcproj, 1)
    cost_sent = torch.clamp(margin - anchor1 + img_sentc, min=0.0).sum()
    cost_img = torch.clamp(margin - anchor2 + sent_imgc, min=0.0).sum()
    return cost_sent + cost_img


def _related_split(rng, n_images=60, dim=8):
    """Captions near their image in a shared space, so that hinge terms are both active and inactive."""
    images = rng.standard_normal((n_images, dim)).astype(np.float32)
    captions = np.repeat(images, 5, axis=0) + 0.7 * rng.standard_normal((5 * n_images, dim)).astype(np.float32)
    return CaptionSplit(
        torch.from_numpy(captions),
        np.arange(5 * n_images),
        np.repeat(np.arange(n_images), 5),
        images,
        torch.device("cpu"),
    )


def _independent_step(model, train, batch, margin, swap=False):
    """One torch.optim.Adam step on SentEval's loss (autograd) from a copy of the model: the weights after it."""
    theirs = copy.deepcopy(model)
    optimizer = torch.optim.Adam(theirs.parameters())
    idx, image_c, sentence_c = (torch.from_numpy(a) for a in batch)
    if swap:
        image_c, sentence_c = sentence_c, image_c
    b = len(idx)
    loss = senteval_loss(
        (theirs.image_proj, theirs.sentence_proj),
        train.images[train.image_of[idx]],
        train.table[train.rows[idx]],
        train.images[train.image_of[image_c]].view(b, retrieval.NCONTRAST, -1),
        train.table[train.rows[sentence_c]].view(b, retrieval.NCONTRAST, -1),
        margin,
    )
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return [p.detach() for p in theirs.parameters()], float(loss.detach())


def test_one_training_step_equals_sentevals_loss_and_gradient():
    """embeval's first step equals one Adam step on SentEval's loss written out (margin 0.2, 30
    contrastive images against the caption and 30 contrastive captions against the image); the same
    step with the contrast sets swapped or another margin gives other weights, so the check sees them."""
    rng = np.random.default_rng(2)
    train = _related_split(rng)
    model = RankingModel(8, 8, 1111)
    with torch.no_grad():  # a shared projection: scores spread over [-1, 1], some hinge terms vanish
        model.sentence_proj.weight.copy_(model.image_proj.weight)
        model.sentence_proj.bias.copy_(model.image_proj.bias)
    batch = next(retrieval.epoch_batches(np.random.RandomState(1111), len(train)))
    expected, loss = _independent_step(model, train, batch, 0.2)
    ours = copy.deepcopy(model)
    retrieval.train_step(ours, torch.optim.Adam(ours.parameters()), train, batch)
    for a, b in zip(ours.parameters(), expected):
        assert torch.allclose(a.detach(), b, rtol=0, atol=1e-6)
    assert np.isclose(loss, float(retrieval.ranking_loss(*_embedded(model, train, batch))), rtol=1e-5)
    for variant in ({"margin": 0.1}, {"margin": 0.3}, {"margin": 0.2, "swap": True}):
        other, _ = _independent_step(model, train, batch, **variant)
        assert max(float((a - b).abs().max()) for a, b in zip(other, expected)) > 1e-4, variant


def _embedded(model, train, batch):
    idx, image_c, sentence_c = (torch.from_numpy(a) for a in batch)
    b = len(idx)
    with torch.no_grad():
        return (
            model.images(train.image_vectors(idx)),
            model.sentences(train.caption_vectors(idx)),
            model.images(train.image_vectors(image_c)).view(b, retrieval.NCONTRAST, -1),
            model.sentences(train.caption_vectors(sentence_c)).view(b, retrieval.NCONTRAST, -1),
        )
