"""ImageCaptionRetrieval (COCO): SentEval's ranking model and its 5-fold R@K (SPEC §4 "COCO retrieval").

Captions and images are projected to 1000-d, L2-normalized and scored by dot product. Training
pairs each caption with its image against 30 contrastive images and 30 contrastive captions
(margin 0.2, both directions). Dev and test are ranked in 5 folds of images and their captions.

The random streams are SentEval's: numpy's from RandomState(seed), the projections drawn as
nn.Linear draws them after torch.manual_seed(seed). SentEval draws the contrastive samples with
np.random.choice on a Python list of every caption outside the batch; legacy `choice(list, size)`
draws `randint(0, len(list), size)` positions, so drawing positions in the complement directly
and mapping them past the batch's slice gives the same samples without building the list.
Train image features are held once and indexed through each caption's image, never copied per caption.
"""

import copy

import numpy as np
import torch

from embeval.errors import DataFileError
from embeval.evaluate import normalize, seeded
from embeval.evaluate.context import QUIET
from embeval.formats import predictions
from embeval.train import rounds
from embeval.train.features import to_device

PROJ_DIM = 1000
MARGIN = 0.2
BATCH_SIZE = 128
NCONTRAST = 30
MAX_EPOCH = 20  # SentEval's maxepoch: a new epoch starts while the epoch count is <= this
TENACITY = 3
NFOLDS = 5
CAPTIONS_PER_IMAGE = 5
RECALLS = (1, 5, 10)
SPLITS = ("train", "dev", "test")


def l2_normalize(x):
    """Rows divided by their Euclidean norm (no epsilon, as SentEval)."""
    return x / torch.sqrt(torch.pow(x, 2).sum(1, keepdim=True))


class RankingModel(torch.nn.Module):
    """Linear projections of images and sentences to a common space, L2-normalized."""

    def __init__(self, sentence_dim, image_dim, seed):
        super().__init__()
        gen = seeded.generator(seed)
        self.image_proj = seeded.linear(image_dim, PROJ_DIM, gen)  # SentEval builds the image side first
        self.sentence_proj = seeded.linear(sentence_dim, PROJ_DIM, gen)

    def images(self, x):
        return l2_normalize(self.image_proj(x))

    def sentences(self, x):
        return l2_normalize(self.sentence_proj(x))


def ranking_loss(image, sentence, contrast_images, contrast_sentences, margin=MARGIN):
    """Summed hinge loss of positive pairs (B, P) against contrastive items (B, K, P), both ways."""
    anchor = (image * sentence).sum(1, keepdim=True)
    image_vs_sentences = torch.bmm(contrast_sentences, image.unsqueeze(2)).squeeze(2)
    sentence_vs_images = torch.bmm(contrast_images, sentence.unsqueeze(2)).squeeze(2)
    return (margin - anchor + image_vs_sentences).clamp(min=0).sum() + (margin - anchor + sentence_vs_images).clamp(
        min=0
    ).sum()


def contrast_draw(rng, permutation, start, size, count):
    """`count` captions drawn uniformly with replacement from `permutation` outside its slice
    [start, start + size): SentEval's np.random.choice(permutation[:start] + permutation[start + size:], count)."""
    position = rng.randint(0, len(permutation) - size, count)
    return permutation[position + (position >= start) * size]


def descending_positions(scores):
    """Each candidate's 0-based position in its row's np.argsort(scores)[::-1] (numpy's default sort,
    as SentEval ranks): exact ties fall in the order that sort leaves them, reversed."""
    order = np.argsort(scores, axis=1)[:, ::-1]
    positions = np.empty_like(order)
    np.put_along_axis(positions, order, np.broadcast_to(np.arange(scores.shape[1]), order.shape), axis=1)
    return positions


def _positions(scores, targets):
    """Position of candidate targets[i, j] in row i's descending argsort, (n, t). Without an exact tie
    it is the count of higher scores, whatever the sort; rows where a target ties go through numpy."""
    own = scores.gather(1, targets)
    out = (scores[:, None, :] > own[:, :, None]).sum(-1)
    tied = ((scores[:, None, :] == own[:, :, None]).sum(-1) > 1).any(1).nonzero().flatten()
    if len(tied):
        positions = descending_positions(scores[tied].cpu().numpy())
        rows = torch.from_numpy(np.take_along_axis(positions, targets[tied].cpu().numpy(), axis=1))
        out[tied] = rows.to(out.device)
    return out


def fold_ranks(image_emb, caption_emb, image_index=None, caption_index=None):
    """0-based ranks within one fold of m images and their 5m captions (caption 5i+k shows image i),
    as SentEval's i2t and t2i count them: the position in the descending argsort of the scores.

    i2t (m,): the best position of any of the image's captions among the fold's captions;
    t2i (5m,): the position of the caption's image among the fold's images. image_index and
    caption_index map each image and caption to its row of image_emb / caption_emb (default: one
    row each), so that duplicates (captions sharing a sentence) score exactly alike and tie.
    """
    scores = image_emb @ caption_emb.t()
    if image_index is not None:
        scores = scores.index_select(0, image_index)
    if caption_index is not None:
        scores = scores.index_select(1, caption_index)
    m = len(scores)
    captions = torch.arange(CAPTIONS_PER_IMAGE * m, device=scores.device)
    i2t = _positions(scores, captions.view(m, CAPTIONS_PER_IMAGE)).min(1).values
    t2i = _positions(scores.t().contiguous(), (captions // CAPTIONS_PER_IMAGE)[:, None])[:, 0]
    return i2t, t2i


def recall_metrics(ranks):
    """R@1, R@5, R@10 in % and the median rank floor(median) + 1 of 0-based ranks (array or tensor)."""
    r = ranks.detach().cpu().numpy() if isinstance(ranks, torch.Tensor) else np.asarray(ranks)
    out = {f"r{k}": 100.0 * float(np.mean(r < k)) for k in RECALLS}
    out["medr"] = float(np.floor(np.median(r)) + 1)
    return out


def fold_count(n_images):
    """Images per fold; `n_images` must be a positive multiple of 5."""
    if n_images <= 0 or n_images % NFOLDS:
        raise ValueError(f"{n_images} images cannot form {NFOLDS} equal folds (need a positive multiple of {NFOLDS})")
    return n_images // NFOLDS


class CaptionSplit:
    """One split on the device: image features, the table rows of each caption, each caption's image."""

    def __init__(self, table, rows, image_of, images, device):
        self.table = table
        self.rows, self.image_of, self.images = to_device(
            [np.asarray(rows, dtype=np.int64), np.asarray(image_of, dtype=np.int64), np.asarray(images)], device
        )

    def __len__(self):
        return len(self.rows)

    def caption_vectors(self, captions):
        return self.table.index_select(0, self.rows[captions])

    def image_vectors(self, captions):
        return self.images.index_select(0, self.image_of[captions])


def evaluate_split(model, split, ranks_out=None):
    """Averages over the 5 folds of R@K and medr both ways, and SentEval's dev score
    (sum over folds of (R@1 + R@5 + R@10, both ways) / 5). ranks_out (a dict), when given,
    receives each fold's 0-based ranks: "i2t" per image, "t2i" per caption.

    SentEval slices its 25,000 dev or test captions into 5 folds of 5,000 (1,000 images); embeval
    cuts any split into 5 equal folds of images, the same folds for COCO's real sizes. Each distinct
    sentence and image is projected once, so duplicates tie exactly. The ranks of every fold reach
    the host in one copy."""
    m = fold_count(len(split.images))
    model.eval()
    with torch.no_grad():
        ranks = []
        for f in range(NFOLDS):
            images, image_index = torch.unique(split.images[f * m : (f + 1) * m], dim=0, return_inverse=True)
            rows, caption_index = torch.unique(
                split.rows[f * m * CAPTIONS_PER_IMAGE : (f + 1) * m * CAPTIONS_PER_IMAGE], return_inverse=True
            )
            ranks += fold_ranks(
                model.images(images), model.sentences(split.table.index_select(0, rows)), image_index, caption_index
            )
        host = torch.cat(ranks).cpu().numpy()
    per_fold, score, start = {"i2t": [], "t2i": []}, 0.0, 0
    for _ in range(NFOLDS):
        for direction, size in (("i2t", m), ("t2i", m * CAPTIONS_PER_IMAGE)):
            r = host[start : start + size]
            start += size
            if ranks_out is not None:
                ranks_out.setdefault(direction, []).append(r)
            metrics = recall_metrics(r)
            per_fold[direction].append(metrics)
            score += sum(metrics[f"r{k}"] for k in RECALLS) / NFOLDS
    averaged = {
        d: {key: float(np.mean([fm[key] for fm in folds])) for key in folds[0]} for d, folds in per_fold.items()
    }
    return averaged, score


def epoch_batches(rng, n):
    """(captions, contrastive-image captions, contrastive captions) of each batch of one epoch,
    drawn in SentEval's order: the epoch's permutation, then per batch 30 per caption of each."""
    permutation = rng.permutation(n)
    for start in range(0, n, BATCH_SIZE):
        batch = permutation[start : start + BATCH_SIZE]
        image_c = contrast_draw(rng, permutation, start, len(batch), NCONTRAST * len(batch))
        sentence_c = contrast_draw(rng, permutation, start, len(batch), NCONTRAST * len(batch))
        yield batch, image_c, sentence_c


def device_batches(rng, n, device):
    """The batches of `epoch_batches` as device tensors, the whole epoch drawn first and moved to
    the device in one copy (the draws do not depend on the model)."""
    batches = list(epoch_batches(rng, n))
    (ids,) = to_device([np.concatenate([b[i] for i in range(3) for b in batches])], device)
    captions, image_c, sentence_c = ids[:n], ids[n : n * (1 + NCONTRAST)], ids[n * (1 + NCONTRAST) :]
    start = 0
    for batch, _, _ in batches:
        size = len(batch)
        yield (
            captions[start : start + size],
            image_c[start * NCONTRAST : (start + size) * NCONTRAST],
            sentence_c[start * NCONTRAST : (start + size) * NCONTRAST],
        )
        start += size


def train_step(model, optimizer, train, batch):
    """One Adam step on a batch of caption ids (captions, contrastive-image captions, contrastive
    captions), as device tensors (`device_batches`) or numpy arrays (`epoch_batches`)."""
    batch, image_c, sentence_c = (torch.as_tensor(a, device=train.rows.device) for a in batch)
    size = len(batch)
    loss = ranking_loss(
        model.images(train.image_vectors(batch)),
        model.sentences(train.caption_vectors(batch)),
        model.images(train.image_vectors(image_c)).view(size, NCONTRAST, -1),
        model.sentences(train.caption_vectors(sentence_c)).view(size, NCONTRAST, -1),
    )
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def train_epoch(model, optimizer, train, rng):
    """One pass over a fresh permutation of the train captions in batches of 128."""
    model.train()
    for batch in device_batches(rng, len(train), train.rows.device):
        train_step(model, optimizer, train, batch)


def train_ranker(train, dev, seed, max_epoch=MAX_EPOCH, progress=QUIET, log=None):
    """SentEval's ImageSentenceRankingPytorch.run: (best dev score, best model, epochs run).

    After every epoch the dev score; the best model is kept (strictly greater replaces); a counter
    of non-improving epochs is never reset and stops training at the first non-improving epoch
    that finds it at 3, or once more than `max_epoch` epochs have run.
    """
    rng = np.random.RandomState(seed)
    model = RankingModel(train.table.shape[1], train.images.shape[1], seed).to(train.rows.device)
    optimizer = torch.optim.Adam(model.parameters())
    kept, epochs = {}, [0]
    progress.stage("training the ranker", total=max_epoch + 1, unit="epoch")

    def train_round(running):
        train_epoch(model, optimizer, train, rng)
        epochs[0] += 1

    def score():
        _, value = evaluate_split(model, dev)
        progress.step(epochs[0], f"dev score {value:.2f}")
        if log:
            log(epochs[0], value)
        return value

    def keep_best(improved, stopping):
        if improved:
            kept["model"] = copy.deepcopy(model)

    stopping, epochs_run = rounds.run(train_round, score, keep_best, (), TENACITY, 1, max_epoch)
    return float(stopping.best), kept.get("model"), epochs_run


def caption_split(ctx, name, table=None):
    """A checked CaptionSplit of the task's split (5 captions per image, image by image)."""
    split = ctx.data.splits[name]
    files = ctx.data.files
    file = files[SPLITS.index(name)] if len(files) == len(SPLITS) else None

    def fail(what):
        raise DataFileError(f"{name} split: {what}", file=file, task=ctx.task.name)

    n_images = 0 if split.images is None else len(split.images)
    expected = np.repeat(np.arange(n_images), CAPTIONS_PER_IMAGE)
    if len(split.y) != len(expected) or not np.array_equal(split.y, expected):
        fail(f"expected {CAPTIONS_PER_IMAGE} captions per image, in image order")
    if name == "train" and len(split.y) <= BATCH_SIZE:
        fail(f"{len(split.y)} captions; training needs more than one batch ({BATCH_SIZE})")
    if name != "train":
        try:
            fold_count(n_images)
        except ValueError as err:
            fail(str(err))
    return CaptionSplit(ctx.table if table is None else table, ctx.rows[name][0], split.y, split.images, ctx.device)


def evaluate_ranking(ctx):
    """COCO: {"devacc": best dev score, "acc": {"i2t": {r1, r5, r10, medr}, "t2i": {...}, "mean_recall":
    the mean of the six R@K}, "ndev": dev captions, "ntest": test captions}, R@K in % averaged over 5 folds.

    The test ranks are kept as the prediction set "acc" (per image: its rank image->text and the
    ranks of its 5 captions text->image, with its fold). With a normalization the captions'
    vectors are normalized with statistics of the train captions."""
    table = normalize.table(ctx)
    train, dev, test = (caption_split(ctx, name, table) for name in SPLITS)
    devacc, model, _ = train_ranker(train, dev, ctx.seed, progress=ctx.progress)
    ranks = {}
    acc, _ = evaluate_split(model, test, ranks)
    acc["mean_recall"] = float(np.mean([acc[direction][f"r{k}"] for direction in ("i2t", "t2i") for k in RECALLS]))
    m = fold_count(len(test.images))
    ctx.keep(
        "acc",
        predictions.ranks(
            np.concatenate(ranks["i2t"]),
            np.concatenate(ranks["t2i"]).reshape(-1, CAPTIONS_PER_IMAGE),
            np.repeat(np.arange(NFOLDS), m),
        ),
    )
    return {"devacc": float(devacc), "acc": acc, "ndev": len(dev), "ntest": len(test)}
