"""A deterministic hashing bag of words, with numpy and h5py only: the smallest correct exporter.

    python exporters/bow_numpy.py --export sentences/ --out bow.h5 [--dim 1024] [--prompt ROLE=TEXT ...]

The vector of a sentence (exporters/cpp computes exactly the same one):
1. Tokens: the sentence's UTF-8 bytes with ASCII letters A-Z lowercased (other bytes unchanged),
   split on runs of ASCII whitespace (space, \\t, \\n, \\v, \\f, \\r); no empty tokens.
2. Each token's 64-bit FNV-1a hash h over its bytes (offset basis 0xcbf29ce484222325, prime
   0x100000001b3, arithmetic modulo 2**64) selects dimension h mod D and a sign: +1 when bit 63
   of h is 0, else -1.
3. v[d] = the sum of the signs of the tokens that select d (an exact integer).
4. The vector is v / sqrt(sum of v[d]**2), computed in float64 and rounded once to float32; it is
   all zeros when v is (the empty sentence, or tokens whose signs cancel).
Every step before the rounding is exact or correctly rounded (IEEE sqrt and division), so any
correct implementation gives the same float32 bits. A --prompt of a role is prepended to the
sentence before step 1.
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _format  # noqa: E402

PROG = "bow_numpy"
FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MASK64 = (1 << 64) - 1


def fnv1a64(data):
    """64-bit FNV-1a hash of bytes."""
    h = FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * FNV_PRIME) & MASK64
    return h


def tokens(sentence):
    """The sentence's tokens: UTF-8 bytes, ASCII-lowercased, split on ASCII whitespace."""
    return sentence.encode("utf-8").lower().split()


class HashingBagOfWords:
    """encode(sentences) -> (n, dim) float32, as specified in the module docstring."""

    def __init__(self, dim):
        self.dim = dim
        self._slots = {}

    def slot(self, token):
        """(dimension, sign) of a token, cached."""
        found = self._slots.get(token)
        if found is None:
            h = fnv1a64(token)
            found = self._slots[token] = (h % self.dim, -1.0 if h >> 63 else 1.0)
        return found

    def encode(self, sentences):
        rows, cols, signs = [], [], []
        for i, sentence in enumerate(sentences):
            for token in tokens(sentence):
                d, s = self.slot(token)
                rows.append(i)
                cols.append(d)
                signs.append(s)
        counts = np.zeros((len(sentences), self.dim), dtype=np.float64)
        np.add.at(
            counts,
            (np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)),
            np.asarray(signs, dtype=np.float64),
        )
        norms = np.sqrt((counts * counts).sum(axis=1, keepdims=True))
        np.divide(counts, norms, out=counts, where=norms > 0)
        return counts.astype(np.float32)


def main(argv=None):
    parser = _format.arguments(__doc__.splitlines()[0], prog=PROG)
    parser.add_argument("--dim", type=int, default=1024, help="vector dimension (default 1024)")
    parser.add_argument("--batch-size", type=int, default=4096, help="sentences per batch (default 4096)")
    args = parser.parse_args(argv)
    if args.dim < 1 or args.batch_size < 1:
        raise _format.ExportError("--dim and --batch-size must be positive")
    prompts = _format.parse_prompts(args.prompt)
    out = _format.check_output(args.out, args.overwrite)
    jobs = _format.read_export(args.export)
    _format.apply_prompts(jobs, prompts, PROG, args.quiet)
    encoder = HashingBagOfWords(args.dim)
    _format.write_vectors(
        out, jobs, args.dim, encoder.encode, args.batch_size, PROG, args.quiet, progress_every=args.progress_every
    )
    if not args.quiet:
        print(f"{PROG}: wrote {out} ({', '.join(j.name for j in jobs)}; dim {args.dim})", file=sys.stderr)


if __name__ == "__main__":
    _format.run(main, PROG)
