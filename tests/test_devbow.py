"""devbow (tests/devbow.py) gives, bit for bit, the vectors the recorded SentEval outputs were computed on."""

import hashlib

import devbow
import numpy as np

SENTENCES = [
    "",
    "   ",
    "the",
    "the cat sat on the mat .",
    "a a a a a a a",
    "naïve café — 東京 \u00a0nbsp",
    " ".join(f"w{i}" for i in range(300)),
    "tab\tseparated\ntokens",
]
# sha256 of the float32 bytes of the original encoder's vectors of SENTENCES.
RECORDED_SHA256 = "f089d10fada4aba776098ba13945e61663aaf8b27228c9c9594fa52566312f12"


def test_vectors_are_the_recorded_ones():
    vectors = devbow.encode(SENTENCES)
    assert vectors.dtype == np.float32 and vectors.shape == (len(SENTENCES), 128)
    assert hashlib.sha256(vectors.tobytes()).hexdigest() == RECORDED_SHA256


def test_documented_rule():
    """A token's vector is its own seeded draw; a sentence the mean of its tokens; no token, zeros."""
    seed = int.from_bytes(hashlib.sha256(b"the").digest()[:8], "little")
    the = np.random.default_rng(seed).standard_normal(128).astype(np.float32)
    assert devbow.encode(["the"])[0].tobytes() == the.tobytes()
    assert not devbow.encode(["", " \t "]).any()
    pair = devbow.encode(["the cat", "cat the", "the", "cat"])
    np.testing.assert_allclose(pair[0], (pair[2].astype(float) + pair[3]) / 2, atol=1e-7)
    np.testing.assert_allclose(pair[1], pair[0], atol=1e-7)
