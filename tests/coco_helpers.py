"""Small COCO data folders in SentEval's pickle layout, and encoders for their captions."""

import pickle

import numpy as np

PICKLES = ("train", "valid", "test")


def caption_text(split, image, k):
    return f"{split} image {image} caption {k}"


def write_coco(root, sizes, feat_dim=32, seed=0, protocol=2, extra_captions=1):
    """Write root/downstream/COCO/{train,valid,test}.pkl: dicts with `features` (one vector per
    image), `image_to_caption_ids` (5 + extra ids per image; SentEval uses the first 5) and
    `captions` (id -> {"cleaned_caption": text}). Returns {pickle name: features}."""
    rng = np.random.default_rng(seed)
    folder = root / "downstream" / "COCO"
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for split, n in zip(PICKLES, sizes):
        features = rng.standard_normal((n, feat_dim)).astype(np.float32)
        links, captions, next_id = [], {}, 1000
        for image in range(n):
            ids = []
            for k in range(5 + extra_captions):
                captions[next_id] = {"cleaned_caption": caption_text(split, image, k), "image_id": image}
                ids.append(next_id)
                next_id += 7
            links.append(ids)
        with open(folder / f"{split}.pkl", "wb") as f:
            pickle.dump(
                {"features": features, "image_to_caption_ids": links, "captions": captions}, f, protocol=protocol
            )
        out[split] = features
    return out


def caption_encoder(features, dim=24, noise=0.3, related=True, seed=1):
    """encode(sentences) for an export of the COCO task: a caption's vector is a fixed linear map
    of its image's features plus Gaussian noise (related), or pure noise (not related)."""
    rng = np.random.default_rng(seed)
    feat_dim = next(iter(features.values())).shape[1]
    mix = rng.standard_normal((feat_dim, dim)) / np.sqrt(feat_dim)
    vectors = {}
    for split, feats in features.items():
        for image, f in enumerate(feats):
            for k in range(5):
                signal = f @ mix if related else np.zeros(dim)
                vectors[caption_text(split, image, k) + " ."] = signal + noise * rng.standard_normal(dim)

    def encode(sentences):
        return np.array([vectors[s] for s in sentences], dtype=np.float32)

    return encode


def chance_recall(n_candidates, k, n_relevant=1):
    """P(at least one of n_relevant items is in the top k of n_candidates) under a random order."""
    miss = 1.0
    for j in range(k):
        miss *= (n_candidates - n_relevant - j) / (n_candidates - j)
    return 100.0 * (1 - miss)
