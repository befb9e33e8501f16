"""devbow: the deterministic 128-d encoder the recorded SentEval outputs in tests/reference/ were computed on.

A token is a whitespace-separated piece of an exported sentence (str.split). Its vector is 128 draws
of numpy.random.default_rng(seed).standard_normal, cast to float32, where seed is the first 8 bytes
of the SHA-256 of the token's UTF-8 bytes read as a little-endian unsigned integer. A sentence's
vector is the float32 mean of its tokens' vectors: the sum in token order, in float32, divided by
the number of tokens; a sentence without tokens is all zeros.
"""

import hashlib

import numpy as np

DIM = 128
_token_vectors = {}


def token_vector(token):
    """The float32 vector of one token (cached)."""
    if token not in _token_vectors:
        digest = hashlib.sha256(token.encode("utf-8")).digest()
        seed = int.from_bytes(digest[:8], byteorder="little", signed=False)
        _token_vectors[token] = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return _token_vectors[token]


def sentence_vector(sentence):
    """The float32 mean of the sentence's token vectors (zeros without tokens)."""
    tokens = sentence.split()
    total = np.zeros(DIM, dtype=np.float32)
    for token in tokens:
        total += token_vector(token)
    if tokens:
        total /= np.float32(len(tokens))
    return total


def encode(sentences):
    """float32 array (len(sentences), 128): one row per sentence, in order."""
    out = np.zeros((len(sentences), DIM), dtype=np.float32)
    for row, sentence in enumerate(sentences):
        out[row] = sentence_vector(sentence)
    return out
