"""Exact nearest-neighbour search: the k best corpus rows of every query, streamed in blocks.

`top_k` reads the corpus block by block through a callable (the caller owns the file), scores a
block of queries against a block of corpus rows with one float32 matmul, and merges the block's
best rows into a running top-k per query held on the device. Neither the whole query x corpus
score matrix nor the whole corpus is ever in memory; block sizes are planned from a memory budget
before anything is allocated (`plan_search`).

Exact scores: the float32 pass only proposes candidates, as its rounding depends on the block
shapes. It keeps a margin beyond each query's k best; those candidates are scored again exactly (the
vectors rounded to integers whose dot products are exact in float64 in any order of summation) and
the k best by these scores are the result, when an error bound on the float32 scores shows that no
row left out could beat them; else the query is searched again with a wider margin, and at last
with every row scored exactly. So the results are the same, bit for bit, for any budget, shards and
device, and mathematically equal similarities are equal scores. The candidates' integer dot
products come, on the CPU, from one sampled matrix product per piece of the corpus
(torch.sparse.sampled_addmm: the products at the candidate pairs only); on a GPU, from their rows
gathered pair by pair.

Order (the tie rule): rows are ranked by score, highest first, and equal scores by corpus row,
lowest first, everywhere: within a block, across blocks and across shards (`merge_top_k`). Each
candidate is one int64 key: in the high 32 bits the float32 score as an int32 of the same order
(-0.0 and 0.0 are one score), in the low 32 bits -1 - row. A larger key is a better row, no two
keys are equal, and every top-k is a top-k of keys.

Selection. A block's rows are cut into groups of g consecutive rows. The k best rows of a block lie
in its k best groups, ranked by their best key: a row outside them would come after the best rows
of k better groups. The corpus block is stored group-major (row j*g+t at t*G+j of the G groups), so
the groups' maxima are an elementwise max over g contiguous slices of the score block. Then, per
block of queries, either
- (every device) the k best groups, by a top-k of the groups' keys; their k*g rows and the running
  top-k go through one top-k in one buffer; or
- (on the CPU, once the running top-k holds k rows) only the rows whose score reaches the query's
  k-th score at its last merge, found in the groups whose maximum does. After the first blocks they
  are few: they wait in `pending` slots per query and are merged when the slots would overflow, so
  the search costs little more than its matmuls. Their number sizes the arrays, which a GPU would
  have to wait for; on the CPU the host is the device and reading it costs nothing, so this path is
  taken only there, and falls back to the first when a block brings more rows than it has room for.
Both give the same keys.

GPU-ready: on a GPU the loops do not wait for the device's results; the only per-block transfer is
the corpus block's copy to the device, in pieces, from two pinned buffers, non-blocking (before a
buffer is refilled the host waits for the copy out of it two pieces back, long done). Results come
back to the host once per sweep of the corpus (once, unless the budget splits the queries into
several sweeps).
"""

import math
import operator
import sys
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from embeval import threads
from embeval.errors import EmbevalError

SIMILARITIES = ("cosine", "dot")
DEFAULT_BUDGET_BYTES = 1 << 30
CORPUS_BLOCK_ROWS = 65536  # largest corpus block scored at once
QUERY_BLOCK_ROWS = 2048  # largest query block
MIN_QUERY_BLOCK = 64  # below this many queries (or corpus rows) a block's matmul runs far below the
MIN_CORPUS_BLOCK = 4096  # machine's rate: the planner takes more sweeps of the queries first
MIN_PENDING = 128  # the CPU filter's slots per query for candidates between merges: max(k, this)
READ_BYTES = 32 << 20  # the corpus is read (and copied to the device) in pieces of about this size
NORM_EPS = 1e-12  # as torch.nn.functional.normalize: a zero vector stays zero and scores 0
MIN_MARGIN = 16  # candidates kept beyond k for the exact re-scoring: max(this, k // 32) ...
MARGIN_DIMS = 384  # ... (widened above this many dimensions, with the error bound) ...
WIDEN = 4  # ... times this, for the queries whose cut-off needs more (many near ties)
RESCORE_PAIRS = 1024  # (query, row) pairs re-scored at once by gathering their rows (a GPU) ...
SAMPLED_PAIRS = 1 << 16  # ... by a sampled matrix product (the CPU)
RESCORE_ROWS = 1024  # corpus rows read at once by the re-scoring (at most a sweep's block)

_MAX_ROWS = 1 << 31  # a row's low word, -1 - row as an int32, must not wrap
_SENTINEL = -(1 << 63)  # below every key: an empty slot of a running top-k
_MAGNITUDE = 0x7FFFFFFF
_HI = 1 if sys.byteorder == "little" else 0  # which int32 word of an int64 holds its high bits


@dataclass(frozen=True)
class Plan:
    """Block sizes of a search and the bytes it allocates at most with them."""

    query_pass: int  # queries whose running top-k is held at once (one sweep of the corpus each)
    query_block: int  # queries scored at once
    corpus_block: int  # corpus rows scored at once
    group: int  # rows per group of the selection (1: every row of a block is a candidate)
    pending: int  # slots per query for the candidates the CPU's filter finds between merges
    read_rows: int  # corpus rows read at once
    bytes: int
    width: int = 0  # candidates kept per query by the float32 pass and re-scored exactly
    pairs: int = 1  # (query, row) pairs re-scored at once
    rescore_rows: int = 1  # corpus rows read at once by the re-scoring


# ---------------------------------------------------------------------------------------------
# Keys


def _halves(keys):
    """The (high, low) int32 words of int64 keys (..., n), as views: writing them writes the keys."""
    words = keys.view(torch.int32).view(*keys.shape, 2)
    return words[..., _HI], words[..., 1 - _HI]


def _order_into(bits, out):
    """out = the int32 of the same order as the float32 scores whose bits are `bits` (the magnitude,
    negated for negative scores, so that -0.0 and 0.0 are both 0). Overwrites bits."""
    torch.bitwise_and(bits, _MAGNITUDE, out=out)
    bits.bitwise_right_shift_(31)  # -1 for a negative score, else 0
    out.bitwise_xor_(bits).sub_(bits)


def _scores_of(high):
    """The float32 scores of the high words of keys."""
    magnitude = high.abs().view(torch.float32)
    return torch.where(high < 0, -magnitude, magnitude)


def encode(scores, rows):
    """int64 keys of float32 scores and int64 rows (0 <= row < 2**31): a larger key is a better row."""
    scores = torch.as_tensor(scores, dtype=torch.float32)
    keys = torch.empty(scores.shape, dtype=torch.int64, device=scores.device)
    high, low = _halves(keys)
    _order_into(scores.clone().view(torch.int32), high)
    low.copy_(-1 - torch.as_tensor(rows, dtype=torch.int64, device=scores.device))
    return keys


def decode(keys):
    """(float32 scores, int64 rows) of int64 keys."""
    high, low = _halves(keys.contiguous())
    return _scores_of(high), -1 - low.to(torch.int64)


# ---------------------------------------------------------------------------------------------
# Planning


def group_size(width, k):
    """Rows per group for a block of `width` rows and a top-k: the power of two that sends the fewest
    elements through a top-k (the group maxima and k groups' rows); 1 when grouping saves nothing."""
    best, cost = 1, width
    g = 2
    while g <= width:
        groups = -(-width // g)
        grouped = groups + g * min(k, groups)
        if grouped < cost:
            best, cost = g, grouped
        g *= 2
    return best


def _sizes(nb, g, k):
    """(groups, groups chosen, candidate rows) of a corpus block of nb rows in groups of g."""
    groups = -(-nb // g)
    chosen = min(k, groups) if g > 1 else 0
    return groups, chosen, chosen * g if g > 1 else nb


def _read_rows(nb, g, d):
    """Corpus rows read at once: about READ_BYTES, a whole number of groups, at most a block."""
    return min(nb, max(g, READ_BYTES // (4 * d) // g * g))


def _sweep_bytes(qb, nb, g, k, pending, d, cuda):
    """Bytes a sweep allocates at once for these blocks: its buffers, the corpus pieces read, and the
    transients of the selection (the grouped merge's, or the CPU filter's: never both at once)."""
    groups, chosen, candidates = _sizes(nb, g, k)
    read = _read_rows(nb, g, d) * (d + 1) * 4 * (4 if cuda else 1)  # a piece read, its norms (CUDA: 2
    # pinned buffers and the device's copy)
    block = g * groups * d * 4 + nb * 4 * 2  # the corpus block, group-major; rows' and positions' low words
    merge = (k + pending + candidates) * 8 * (2 if cuda else 1) + k * 16  # the merge buffer (CUDA: the
    # top-k's workspace), the merged top-k and its positions
    grouped = (groups * 8 + chosen * 28 + candidates * 4) if g > 1 else 0  # groups' keys, chosen groups,
    # their first rows, their rows' scores
    filtered = (groups * 17 + candidates * 5 + pending * 2 * 56) if pending else 0  # groups reached
    # (mask, positions), their rows' scores and mask, rows reached (at most 2 per pending slot:
    # positions, keys, slots)
    per_query = g * groups * 4 + (groups * 4 if g > 1 else 0) + merge + max(grouped, filtered)
    return read + block + qb * per_query


def _pass_bytes(qp, q, k, pending, d, cuda):
    """Bytes of a sweep's queries and running top-k (and pending slots), and of all queries' results."""
    return qp * d * 4 * (2 if cuda else 1) + qp * ((k + pending) * 8 + 12) + q * k * 12


def _end_bytes(qp, k):
    """Bytes of sorting and decoding a sweep's top-k (after the sweep's buffers are freed)."""
    return qp * k * (16 + 4 * 4 + 8 + 12)


def _rescore_bytes(qp, width, k, d, read, pairs, cuda, listed=False, sampled=False):
    """Bytes of the exact re-scoring of a sweep's candidates (after the sweep's buffers are freed):
    the candidates' float32 scores and rows, their sort by row, their exact scores and keys, the
    selection of the k best (listed: and the distinct rows among them: a sort, its order, each
    candidate's place); the queries and one corpus piece as integers (the piece as read: CUDA's
    pinned buffers and copy), and a chunk of pairs (sampled: a sampled product's index and values
    and the pairs' scores; else their rows gathered; or, exhaustive, a block of pairs' scores)."""
    candidates = qp * width * (4 + 8 + 16 + 8 + 8 + 8 + (32 if listed else 0)) + qp * k * 16 + qp * 48
    queries = qp * d * (8 + 8) + qp * 24
    piece = read * d * (4 * (4 if cuda else 1) + 8 + 8) + read * 24
    return candidates + queries + piece + (qp + 1) * 8 + pairs * (160 if sampled else d * 8 * 2 + 96)


def margin(k: int, d: int = 1) -> int:
    """Candidates kept beyond the k best by the float32 pass, for the exact re-scoring: max(16, k // 32),
    widened in proportion to the float32 scores' error bound where it is wider than at MARGIN_DIMS
    dimensions (a wider bound spans more near ties at the cut-off, each one a query searched again)."""
    return math.ceil(max(MIN_MARGIN, k // 32) * max(1.0, _bound_unit(d) / _bound_unit(MARGIN_DIMS)))


def _bound_unit(d):
    """The error bound of a float32 cosine at d dimensions (_error_bound), before its slack."""
    return (2 * d + 16) * 2.0**-24 + 8 * d**0.5 * 2.0 ** -_bits(d)


def _descending(n):
    """n, then the powers of two below it, down to 1."""
    sizes = [n]
    p = 1 << max(0, (n - 1).bit_length() - 1)
    while p >= 1:
        if p < n:
            sizes.append(p)
        p //= 2
    return sizes


def _needs(q, d, k, rows, device, filtered, width, listed):
    """(need(queries per sweep, query block, corpus block): the bytes a search so planned allocates at
    once; pairs_of(query block, corpus block): the re-scoring's chunks and pieces; the candidates kept
    per query; the pending slots), as plan_search plans with them."""
    device = torch.device(device)
    cuda = device.type == "cuda"
    k = min(k, rows)
    width = min(rows, k + margin(k, d)) if width is None else max(k, min(width, rows))
    host = device.type == "cpu" if filtered is None else filtered  # the CPU's paths (top_k's filtered)
    pending = max(width, MIN_PENDING) if host else 0
    sampled = host

    def pairs_of(qb, nb):  # the re-scoring's chunks and pieces, as small as the sweep's blocks
        pairs = min(SAMPLED_PAIRS, qb * nb // 16) if sampled else min(RESCORE_PAIRS, qb * nb // 64)
        return max(1, pairs), max(1, min(RESCORE_ROWS, nb // 4))

    def need(qp, qb, nb):
        g = group_size(nb, width)
        sweep = _sweep_bytes(qb, nb, g, width, pending, d, cuda)
        pairs, pieces = pairs_of(qb, nb)
        rescore = _rescore_bytes(qp, width, k, d, pieces, pairs, cuda, listed, sampled)
        return _pass_bytes(qp, q, width, pending, d, cuda) + max(sweep, _end_bytes(qp, width), rescore)

    return need, pairs_of, width, pending


def least_bytes(q: int, d: int, k: int, rows: int, device="cpu", filtered=None, width=None, listed=True) -> int:
    """The least memory budget under which plan_search finds a plan (one query against one row at a
    time): what a run's --memory-budget must be at least for this search."""
    need, *_ = _needs(q, d, k, rows, device, filtered, width, listed)
    return need(1, 1, 1)


def plan_search(
    q: int, d: int, k: int, rows: int, budget_bytes: int, device="cpu", filtered=None, width=None, listed=False
) -> Plan:
    """The blocks whose allocations fit `budget_bytes`, by preference: all queries in one sweep, with
    blocks of at least MIN_QUERY_BLOCK queries and MIN_CORPUS_BLOCK rows (or all there are); then
    several sweeps with such blocks; then anything, down to one query against one row. Within each:
    the largest sweep, then the largest score block (query block x corpus block), then the larger
    corpus block (the CPU's filter then starts from a k-th score over more rows). filtered: as
    top_k's (default: on the CPU). width: the candidates the float32 pass keeps per query (default
    k + margin(k, d), at most rows); the exact re-scoring of them is planned too (listed: reading only
    the candidates' rows, top_k's read_rows). EmbevalError when not even one query against one row
    fits."""
    need, pairs_of, width, pending = _needs(q, d, k, rows, device, filtered, width, listed)
    k = min(k, rows)
    rounds = [
        (1, min(q, MIN_QUERY_BLOCK), min(rows, MIN_CORPUS_BLOCK)),
        (q, min(q, MIN_QUERY_BLOCK), min(rows, MIN_CORPUS_BLOCK)),
        (q, 1, 1),
    ]
    for sweeps, least_qb, least_nb in rounds:
        for qp in _descending(q):
            if -(-q // qp) > sweeps:
                break
            blocks = [
                (qb, nb)
                for nb in _descending(min(rows, CORPUS_BLOCK_ROWS))
                for qb in _descending(min(qp, QUERY_BLOCK_ROWS))
                if nb >= least_nb and qb >= least_qb
            ]
            for qb, nb in sorted(blocks, key=lambda block: (-block[0] * block[1], -block[1])):
                bytes_ = need(qp, qb, nb)
                if bytes_ <= budget_bytes:
                    g = group_size(nb, width)
                    return Plan(qp, qb, nb, g, pending, _read_rows(nb, g, d), bytes_, width, *pairs_of(qb, nb))
    least = need(1, 1, 1)
    raise EmbevalError(
        f"the exact search of {q} queries in {rows} rows of {d} dimensions (top {k}) needs at least "
        f"{least / 2**20:.2f} MiB, one query against one row at a time, but its memory budget is "
        f"{budget_bytes / 2**20:.2f} MiB: search on a device with more free memory or on the CPU, "
        f"or with fewer queries, dimensions or a smaller k"
    )


# ---------------------------------------------------------------------------------------------
# The corpus on the device


def _prepare(vectors, similarity, out):
    """Write vectors (..., d) into out (same shape), each L2-normalized for cosine."""
    if similarity == "cosine":
        norms = torch.linalg.vector_norm(vectors, dim=-1, keepdim=True).clamp_min_(NORM_EPS)
        torch.div(vectors, norms, out=out)
    else:
        out.copy_(vectors)


class _Upload:
    """Corpus pieces onto the device: as they are on the CPU; through two pinned buffers on CUDA."""

    def __init__(self, rows, d, device):
        self.device = device
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.pinned = [torch.empty((rows, d), dtype=torch.float32, pin_memory=True) for _ in range(2)]
            self.copied = [None, None]
            self.staging = torch.empty((rows, d), dtype=torch.float32, device=device)
            self.turn = 0

    def put(self, piece):
        host = torch.from_numpy(np.ascontiguousarray(piece, dtype=np.float32))
        if not self.cuda:
            return host.to(self.device)
        turn, self.turn = self.turn, 1 - self.turn
        if self.copied[turn] is not None:
            self.copied[turn].synchronize()  # the copy out of this buffer, two pieces ago, is done
        pinned = self.pinned[turn][: len(host)]
        pinned.copy_(host)
        staged = self.staging[: len(host)]
        staged.copy_(pinned, non_blocking=True)
        self.copied[turn] = torch.cuda.Event()
        self.copied[turn].record()
        return staged


def _read(read_corpus, c0, c1, d):
    piece = read_corpus(c0, c1)
    if piece.shape != (c1 - c0, d):
        raise ValueError(f"read_corpus({c0}, {c1}) returned shape {piece.shape}, expected {(c1 - c0, d)}")
    return piece


def _read_listed(read_rows, rows, d):
    piece = read_rows(rows)
    if piece.shape != (len(rows), d):
        raise ValueError(f"read_rows of {len(rows)} rows returned shape {piece.shape}, expected {(len(rows), d)}")
    return piece


def _load(read_corpus, b0, b1, plan, similarity, upload, out, largest=None):
    """Read corpus rows [b0, b1) piece by piece into out (g, G, d), group-major: row b0 + j*g + t at
    [t, j]; the rows after b1 in the last group are zero. largest: a 0-d tensor raised to the
    largest norm of the rows read (dot products' error bound), or None."""
    g, d = out.shape[0], out.shape[2]
    step = max(g, plan.read_rows // g * g)
    for c0 in range(b0, b1, step):
        c1 = min(c0 + step, b1)
        piece = upload.put(_read(read_corpus, c0, c1, d))
        if largest is not None:
            torch.maximum(largest, torch.linalg.vector_norm(piece, dim=1).amax(), out=largest)
        j0, full = (c0 - b0) // g, (c1 - c0) // g
        if full:
            _prepare(piece[: full * g].view(full, g, d).transpose(0, 1), similarity, out[:, j0 : j0 + full])
        rest = c1 - c0 - full * g
        if rest:
            _prepare(piece[full * g :], similarity, out[:rest, j0 + full])
            out[rest:, j0 + full].zero_()


# ---------------------------------------------------------------------------------------------
# The sweep


def _flat(storage, *shape):
    """A view, with `shape`, of the first elements of a flat buffer."""
    n = 1
    for s in shape:
        n *= s
    return storage[:n].view(shape)


class _Buffers:
    """Every buffer of a sweep, allocated once for the largest blocks; views give each block's shapes."""

    def __init__(self, plan, k, d, device):
        qb, nb, g, pending = plan.query_block, plan.corpus_block, plan.group, plan.pending
        groups, chosen, candidates = _sizes(nb, g, k)

        def empty(n, dtype):
            return torch.empty((n,), dtype=dtype, device=device)

        self.corpus = empty(g * groups * d, torch.float32)
        self.scores = empty(qb * g * groups, torch.float32)
        self.maxima = empty(qb * groups if g > 1 else 0, torch.float32)
        self.group_keys = empty(qb * groups if g > 1 else 0, torch.int64)
        self.group_top = empty(qb * chosen, torch.int64)
        self.chosen = empty(qb * chosen, torch.int64)
        self.picked = empty(qb * candidates if g > 1 else 0, torch.float32)
        self.merge = empty(qb * (k + pending + candidates), torch.int64)
        self.room = candidates  # a query's rows the merge buffer holds beyond its top-k and pending slots
        self.merged = empty(qb * k, torch.int64)
        self.merged_at = empty(qb * k, torch.int64)
        self.row_low = empty(nb, torch.int32)
        self.offsets = torch.arange(g, dtype=torch.int32, device=device).view(1, g, 1)
        self.position_low = -1 - torch.arange(nb, dtype=torch.int32, device=device)


class _Running:
    """The running top-k keys of a sweep's queries: (qp, k + pending) int64, the top-k (unsorted) in
    [:, :k], and in [:, k:] the candidates the CPU's filter found since the last merge (empty slots
    hold _SENTINEL), `fill` per query; `kth` (qp, 1) is each query's k-th score at its last merge.
    `waiting`: the query blocks (by first query) with pending candidates, known on the host."""

    def __init__(self, qp, k, pending, device):
        self.k, self.pending = k, pending
        self.keys = torch.full((qp, k + pending), _SENTINEL, dtype=torch.int64, device=device)
        self.fill = torch.zeros(qp, dtype=torch.int64, device=device)
        self.kth = torch.full((qp, 1), float("-inf"), dtype=torch.float32, device=device)
        self.waiting = set()

    def held(self, a):
        """How many leading keys of the query block starting at a hold rows (pending ones included)."""
        return self.k + self.pending if a in self.waiting else self.k

    def merged(self, a, b, buffer, buf):
        """Set the top-k of queries [a, b) to the top k of buffer (r, n) (which holds their pending
        candidates), empty their pending slots and note their k-th scores."""
        r, k = b - a, self.k
        top = _flat(buf.merged, r, k)
        torch.topk(buffer, k, dim=1, sorted=False, out=(top, _flat(buf.merged_at, r, k)))
        self.keys[a:b, :k] = top
        if a in self.waiting:
            self.keys[a:b, k:] = _SENTINEL
            self.fill[a:b] = 0
            self.waiting.discard(a)
        if self.pending:
            self.kth[a:b] = _scores_of(_halves(top.amin(dim=1, keepdim=True))[0])

    def flush(self, a, b, buf):
        """Merge the pending candidates of queries [a, b), if any, into their top-k."""
        if a in self.waiting:
            merge = _flat(buf.merge, b - a, self.k + self.pending)
            merge.copy_(self.keys[a:b])
            self.merged(a, b, merge, buf)


def _merge_grouped(buf, b0, by_group, maxima, run, a, b):
    """Merge the scores by group (r, g, G) of the block starting at corpus row b0, with their maxima
    (r, G), into the running top-k of queries [a, b): the k best groups' rows, the top-k and the
    pending candidates through one top-k. No data-dependent shape."""
    r, g, groups = by_group.shape
    kg, held = min(run.k, groups), run.held(a)
    merge = _flat(buf.merge, r, held + kg * g)
    merge[:, :held] = run.keys[a:b, :held]
    high, low = _halves(merge[:, held:].view(r, g, kg))
    group_keys = _flat(buf.group_keys, r, groups)
    _order_into(maxima.view(torch.int32), _halves(group_keys)[0])
    chosen = _flat(buf.chosen, r, kg)
    torch.topk(group_keys, kg, dim=1, sorted=False, out=(_flat(buf.group_top, r, kg), chosen))
    picked = _flat(buf.picked, r, g, kg)
    torch.gather(by_group, 2, chosen.unsqueeze(1).expand(r, g, kg), out=picked)
    _order_into(picked.view(torch.int32), high)
    first = (-1 - b0 - g * chosen).to(torch.int32).unsqueeze(1)  # -1 - the group's first row
    torch.sub(first, buf.offsets[:, :g], out=low)
    run.merged(a, b, merge, buf)


def _merge_rows(buf, scores, run, a, b):
    """Merge a block's scores (r, w) into the running top-k of queries [a, b), every row a candidate."""
    r, w = scores.shape
    held = run.held(a)
    merge = _flat(buf.merge, r, held + w)
    merge[:, :held] = run.keys[a:b, :held]
    high, low = _halves(merge[:, held:])
    _order_into(scores.view(torch.int32), high)
    low.copy_(buf.row_low[:w].unsqueeze(0))
    run.merged(a, b, merge, buf)


def _merge_filtered(buf, b0, by_group, maxima, run, a, b):
    """Find the rows of the block starting at corpus row b0 whose score (by group (r, g, G), maxima
    (r, G)) reaches the query's k-th score, in the groups whose maximum does, for queries [a, b); add
    them to the pending candidates, or when they do not fit there, merge them with the top-k and the
    pending candidates at once. False (nothing done) when there are more such groups than the grouped
    merge would take, more such rows than twice the pending slots, or a query has more than the merge
    buffer holds. Reads these numbers on the host: for the CPU only."""
    r, g, groups = by_group.shape
    kth = run.kth[a:b]
    row, group = (maxima >= kth).nonzero(as_tuple=True)
    if len(row) > r * min(run.k, groups):
        return False
    if not len(row):
        return True
    picked = by_group[row, :, group]  # (m, g)
    reached = picked >= kth[row]
    if int(reached.sum()) > 2 * r * run.pending:
        return False
    pair, t = reached.nonzero(as_tuple=True)
    query = row[pair]
    counts = torch.bincount(query, minlength=r)
    fill = run.fill[a:b]
    most, most_after = torch.stack([counts.max(), (fill + counts).max()]).tolist()
    if most > buf.room:
        return False
    keys = torch.empty(len(pair), dtype=torch.int64, device=picked.device)
    high, low = _halves(keys)
    _order_into(picked[pair, t].view(torch.int32), high)
    torch.sub(-1 - b0 - g * group.to(torch.int32)[pair], t.to(torch.int32), out=low)
    del pair, t, picked, reached
    slot = torch.arange(len(query), device=row.device) - (torch.cumsum(counts, 0) - counts)[query]
    if most_after <= run.pending:
        run.keys[a:b][query, run.k + fill[query] + slot] = keys
        fill += counts
        run.waiting.add(a)
        return True
    held = run.held(a)
    merge = _flat(buf.merge, r, held + most)
    merge[:, :held] = run.keys[a:b, :held]
    merge[:, held:] = _SENTINEL
    merge[query, held + slot] = keys
    run.merged(a, b, merge, buf)
    return True


def _sweep(queries, run, read_corpus, start, stop, plan, similarity, filtered, largest=None, progress=None):
    """Merge corpus rows [start, stop) into the running top-k `run` of the prepared queries
    (largest: as _load's; progress(rows): called after each corpus block, on the host)."""
    device = queries.device
    k = run.k
    qb, nb, d = plan.query_block, plan.corpus_block, queries.shape[1]
    upload = _Upload(plan.read_rows, d, device)
    buf = _Buffers(plan, k, d, device)
    for b0 in range(start, stop, nb):
        w = min(nb, stop - b0)
        g = plan.group if plan.group > 1 and w > plan.group else 1
        groups = -(-w // g)
        layout = _flat(buf.corpus, g, groups, d)
        _load(read_corpus, b0, b0 + w, plan, similarity, upload, layout, largest)
        table = layout.view(g * groups, d)
        if g > 1:
            _halves(_flat(buf.group_keys, qb, groups))[1].copy_(buf.position_low[:groups])
        else:
            torch.sub(buf.position_low[:w], b0, out=buf.row_low[:w])
        full = b0 - start >= k  # every running top-k holds k rows of the corpus
        for a in range(0, len(queries), qb):
            b = min(a + qb, len(queries))
            scores = _flat(buf.scores, b - a, g * groups)
            torch.mm(queries[a:b], table.T, out=scores)
            if g == 1:
                _merge_rows(buf, scores, run, a, b)
                continue
            by_group = scores.view(b - a, g, groups)
            if g * groups > w:
                by_group[:, w - (groups - 1) * g :, groups - 1] = float("-inf")
            maxima = torch.amax(by_group, dim=1, out=_flat(buf.maxima, b - a, groups))
            if not (filtered and full and _merge_filtered(buf, b0, by_group, maxima, run, a, b)):
                _merge_grouped(buf, b0, by_group, maxima, run, a, b)
        if progress is not None:
            progress(w)
    for a in range(0, len(queries), qb):
        run.flush(a, min(a + qb, len(queries)), buf)


# ---------------------------------------------------------------------------------------------
# Exact re-scoring


def _bits(d):
    """Bits of the integers vectors are rounded to for exact dot products: a sum of d products of
    two of them is an integer below 2**53, exact in float64 whatever the order of the sum (a matrix
    product's blocks, a GPU's reduction)."""
    return (53 - max(1, d - 1).bit_length()) // 2


def _integers(vectors, bits, host=False):
    """(float64 integers (m, d), exponent int32 (m,)): each row scaled by a power of two so that its
    largest entry lies in [2**(bits-1), 2**bits), and rounded; row = integers * 2**(exponent - bits),
    to 2**-bits of its largest entry. A function of the row alone: the same on every device."""
    _, exponent = torch.frexp(vectors.abs().amax(dim=1))  # a float32's exponent, in float64 the same
    shift = bits - exponent
    # One power of two per row, multiplied in: the value torch.ldexp gives, where ldexp itself would
    # raise 2 to a power for every entry (15 times slower). In float32 when every row is scaled up
    # (shift >= 0) by a float32 power of two (shift <= 127): each product then keeps every bit of
    # the entry (no overflow: the largest is below 2**bits), exact in float32 as in float64, and so
    # is its rounding to an integer; else (rows of extreme magnitude) in float64. On the host's
    # paths only (host: the CPU's, top_k's filtered): on a device the check would wait for it.
    if host and vectors.dtype == torch.float32 and bool(((shift >= 0) & (shift <= 127)).all()):
        scale = torch.ldexp(torch.ones_like(exponent, dtype=torch.float32), shift)
        return (vectors * scale.unsqueeze(1)).round_().to(torch.float64), exponent
    scale = torch.ldexp(torch.ones_like(exponent, dtype=torch.float64), shift)
    return (vectors.to(torch.float64) * scale.unsqueeze(1)).round_(), exponent


def _squared_norms(integers, exponent, bits):
    """float64 squared norms of rows held as _integers."""
    return torch.ldexp((integers * integers).sum(dim=1), 2 * (exponent - bits))


def _exact_scores(dot, qe, qn, xe, xn, bits, similarity):
    """float64 scores of pairs of rows held as _integers, from their integer dot products (exact)
    and squared norms: for cosine sign(p) * sqrt(p**2 / (|q|**2 |x|**2)), the norms clamped at
    NORM_EPS. Every step rounds a value that depends on the pair's rows only, once: mathematically
    equal similarities of vectors of integers (or of copies) come out equal."""
    dot = torch.ldexp(dot, qe + xe - 2 * bits)
    if similarity != "cosine":
        return dot
    floor = NORM_EPS * NORM_EPS
    ratio = dot * dot / (qn.clamp_min(floor) * xn.clamp_min(floor))
    return torch.sign(dot) * torch.sqrt(ratio)


def _rescore(raw, found, read_corpus, start, stop, plan, similarity, upload, read_rows=None, sampled=None):
    """float64 exact scores (_exact_scores) of the candidate rows `found` (qp, w) of the queries
    `raw` (qp, d, as given): the corpus is read again in pieces of plan.rescore_rows rows, only
    those holding candidates, each turned into integers once; or, with read_rows and candidates on
    fewer than half the rows, only the candidates' rows are read (read_rows, plan.rescore_rows at a
    time). A piece's candidates, by query then row, plan.pairs at a time: on the CPU their integer
    dot products come from one sampled matrix product (the queries' integers times the piece's, at
    those pairs only: torch.sparse.sampled_addmm); elsewhere their rows are gathered into
    preallocated buffers. Integer dot products are exact in any order of summation: both give the
    same scores (sampled: which of the two; default: on the CPU). One transfer to the host: where
    each piece's candidates begin (and, reading candidates' rows, which rows they are)."""
    qp, w = found.shape
    d = raw.shape[1]
    device = found.device
    bits = _bits(d)
    sampled = device.type == "cpu" if sampled is None else sampled
    qi, qe = _integers(raw, bits, sampled)
    qn = _squared_norms(qi, qe, bits)
    step = plan.rescore_rows
    flat = found.reshape(-1)
    distinct = None
    if read_rows is not None and 2 * len(flat) <= stop - start:  # few candidates: their distinct rows
        distinct, position = torch.unique(flat, sorted=True, return_inverse=True)
    elif read_rows is not None:  # many: counted per row, which costs less than sorting them
        present = torch.bincount(flat - start, minlength=stop - start) > 0
        if 2 * int(present.sum()) <= stop - start:
            distinct = torch.nonzero(present).squeeze(1) + start
            position = (torch.cumsum(present, 0) - 1)[flat - start]
        del present
    if distinct is not None and 2 * len(distinct) > stop - start:
        distinct = None
    if distinct is None:
        position, extent = flat - start, stop - start  # a candidate's place among the rows read
    else:
        extent = len(distinct)
        distinct = distinct.cpu().numpy()
    # One int64 key per candidate: its piece, its query, its row in the piece (< extent * qp + step).
    in_piece = torch.remainder(position, step)
    key = position.sub_(in_piece).mul_(qp)
    key += torch.arange(qp, device=device).repeat_interleave(w).mul_(step)
    key += in_piece
    del position, in_piece
    by_piece, order = torch.sort(key)  # by piece, then by query, then by row
    del key
    rows = torch.remainder(by_piece, step)
    query = torch.div(order, w, rounding_mode="floor")
    pieces = -(-extent // step)
    bounds = torch.searchsorted(by_piece, torch.arange(pieces + 1, device=device) * (qp * step)).tolist()
    del by_piece
    size = max(1, min(plan.pairs, len(flat)))
    if sampled:
        dots = _SampledDots(qi, size)
        context = threads.fair_share(device)  # a few large products: every thread the CPU leaves free
    else:
        dots = _GatheredDots(qi, size, d, device)
        context = threads.one_thread(device)  # many small operations: none waits for another thread
    out = torch.empty(qp * w, dtype=torch.float64, device=device)
    with context as check:
        for p0, lo, hi in zip(range(0, extent, step), bounds, bounds[1:]):
            if lo == hi:
                continue
            if sampled:
                check()
            p1 = min(p0 + step, extent)
            if distinct is None:
                piece = upload.put(_read(read_corpus, start + p0, start + p1, d))
            else:
                piece = upload.put(_read_listed(read_rows, distinct[p0:p1], d))
            xi, xe = _integers(piece, bits, sampled)
            xn = _squared_norms(xi, xe, bits)
            del piece
            for a in range(lo, hi, size):
                b = min(a + size, hi)
                row, who = rows[a:b], query[a:b]
                exact = _exact_scores(
                    dots(xi, row, who),
                    qe.index_select(0, who),
                    qn.index_select(0, who),
                    xe.index_select(0, row),
                    xn.index_select(0, row),
                    bits,
                    similarity,
                )
                out.index_copy_(0, order[a:b], exact)
    return out.view(qp, w)


class _SampledDots:
    """Integer dot products of pairs (queries' rows `who`, sorted; piece rows `row`, increasing
    within a query) as one sampled matrix product (the CPU): a CSR pattern over the queries the
    pairs span."""

    def __init__(self, qi, size):
        self.qi = qi
        self.zeros = torch.zeros(size, dtype=torch.float64, device=qi.device)

    def __call__(self, xi, row, who):
        first, last = int(who[0]), int(who[-1]) + 1
        counts = torch.bincount(who - first, minlength=last - first)
        crow = torch.zeros(last - first + 1, dtype=torch.int64, device=xi.device)
        torch.cumsum(counts, 0, out=crow[1:])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's notice that sparse CSR tensors are in beta
            pattern = torch.sparse_csr_tensor(
                crow, row, self.zeros[: len(row)], size=(last - first, len(xi)), check_invariants=False
            )
            product = torch.sparse.sampled_addmm(pattern, self.qi[first:last], xi.T, beta=0.0)
        return product.values()


class _GatheredDots:
    """Integer dot products of pairs, their rows gathered into preallocated buffers (a GPU: no
    per-pair transfer, no sparse kernels)."""

    def __init__(self, qi, size, d, device):
        self.qi = qi
        self.x = torch.empty((size, d), dtype=torch.float64, device=device)
        self.q = torch.empty((size, d), dtype=torch.float64, device=device)
        self.dot = torch.empty(size, dtype=torch.float64, device=device)

    def __call__(self, xi, row, who):
        n = len(row)
        product = torch.index_select(xi, 0, row, out=self.x[:n])
        product.mul_(torch.index_select(self.qi, 0, who, out=self.q[:n]))
        return torch.sum(product, dim=1, out=self.dot[:n])


def _exhaustive(raw, read_corpus, start, stop, k, similarity, plan, progress=None):
    """The k best rows of the queries `raw` by exact scores, every row of the corpus scored exactly
    (integer matrix products in float64): (float32 scores, int64 rows) (qp, k) best first. For the
    queries whose cut-off lies among more near ties than a float32 pass keeps; pieces and blocks of
    the plan's re-scoring."""
    qp, d = raw.shape
    bits = _bits(d)
    qi, qe = _integers(raw, bits)
    qn = _squared_norms(qi, qe, bits)
    device = raw.device
    step = plan.rescore_rows
    qs = max(1, min(qp, plan.pairs // step))
    best = torch.full((qp, k), _SENTINEL, dtype=torch.int64, device=device)
    upload = _Upload(step, d, device)
    for p0 in range(start, stop, step):
        p1 = min(p0 + step, stop)
        piece = upload.put(_read(read_corpus, p0, p1, d))
        xi, xe = _integers(piece, bits)
        xn = _squared_norms(xi, xe, bits)
        rows = torch.arange(p0, p1, device=device)
        for a in range(0, qp, qs):
            b = min(a + qs, qp)
            exact = _exact_scores(qi[a:b] @ xi.T, qe[a:b, None], qn[a:b, None], xe[None], xn[None], bits, similarity)
            keys = encode(exact.to(torch.float32), rows.expand(b - a, p1 - p0))
            best[a:b] = torch.topk(torch.cat([best[a:b], keys], dim=1), k, dim=1).values
        if progress is not None:
            progress(p1 - p0)
    return decode(best)


def _error_bound(raw, largest, similarity):
    """float64 (qp,): how far a float32 pass's score may be from the exact score, for each query:
    the normalization's and the float32 sum's rounding (at most about 2d units of 2**-24 of |q||x|,
    whatever the order of the sum), the integers' (2 * sqrt(d) units of 2**-bits), and slack."""
    unit = _bound_unit(raw.shape[1])
    if similarity == "cosine":
        return torch.full((len(raw),), unit * 1.01, dtype=torch.float64, device=raw.device)
    norms = torch.linalg.vector_norm(raw.to(torch.float64), dim=1)
    return norms * largest.to(torch.float64) * unit * 1.01


def _search_pass(raw, read_corpus, start, stop, k, plan, similarity, filtered, progress=None, read_rows=None):
    """The k best rows of the queries `raw` (on the device) by exact scores: (float32 scores,
    int64 rows) (qp, k) best first, and whether each query's list is certain (bool (qp,)): the
    float32 pass keeps plan.width candidates; every row it left out scores, exactly, below the k-th
    kept one (by the error bound) unless the list is not certain."""
    device = raw.device
    qp, d = raw.shape
    prepared = torch.empty((qp, d), dtype=torch.float32, device=device)
    _prepare(raw, similarity, prepared)
    run = _Running(qp, plan.width, plan.pending, device)
    largest = torch.zeros((), dtype=torch.float32, device=device) if similarity != "cosine" else None
    _sweep(prepared, run, read_corpus, start, stop, plan, similarity, filtered, largest, progress)
    del prepared
    fast, found = decode(torch.sort(run.keys[:, : plan.width], dim=1, descending=True).values)
    del run
    upload = _Upload(plan.rescore_rows, d, device)
    exact = _rescore(raw, found, read_corpus, start, stop, plan, similarity, upload, read_rows, filtered)
    keys = torch.topk(encode(exact.to(torch.float32), found), k, dim=1).values
    del exact
    scores, rows = decode(keys)
    if plan.width >= stop - start:
        return scores, rows, torch.ones(qp, dtype=torch.bool, device=device)
    outside = (fast[:, -1].to(torch.float64) + _error_bound(raw, largest, similarity)).to(torch.float32)
    return scores, rows, outside < scores[:, -1]


def _whole(value, name):
    """An integer argument as a Python int (numpy's integers too); TypeError for anything else."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not a bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}") from None


def top_k(
    queries,
    read_corpus,
    corpus_size: int,
    k: int,
    similarity: str = "cosine",
    budget_bytes: int = DEFAULT_BUDGET_BYTES,
    device="cpu",
    rows: tuple[int, int] | None = None,
    filtered: bool | None = None,
    progress=None,
    read_rows=None,
    planned=None,
) -> tuple[np.ndarray, np.ndarray]:
    """The k best corpus rows of every query: (scores float32 (q, k'), rows int64 (q, k')), best first
    (equal scores: lowest row first), k' = min(k, rows searched). Scores are the exact scores
    (_exact_scores) rounded to float32: the same, bit for bit, whatever the budget, shards or device.

    queries: float32 (q, d), finite; read_corpus(start, stop): float32 (stop - start, d) corpus rows,
    finite (the search is done with them before its next read: a reader may reuse its array);
    similarity "cosine" (L2-normalized; a zero vector scores 0) or "dot"; budget_bytes: what the
    search may allocate at once; rows: (start, stop), the shard of the corpus to search (default
    all), results in corpus rows. filtered: the CPU's paths, the filter of the groups that can enter
    and the re-scoring's sampled product (default: on the CPU only; results are the same either
    way). progress(rows): called on the host after each block of `rows` corpus rows a float32 pass
    has scored for a sweep of queries (no wait for the device). read_rows(rows) (optional): float32
    (len(rows), d), the corpus rows `rows` (an increasing int64 array within the shard), as
    read_corpus's; with it the exact re-scoring reads only its candidates'
    rows when they are fewer than half the shard (few queries in a large corpus). planned(rows): called
    when a round of passes is planned, with the corpus rows it will score (the shard's rows times its
    passes: one per block of queries the budget holds; a widened round for the queries left uncertain
    adds more), so that progress can say how much is left.
    """
    if similarity not in SIMILARITIES:
        raise ValueError(f"similarity must be one of {SIMILARITIES}, not {similarity!r}")
    corpus_size, k, budget_bytes = _whole(corpus_size, "corpus_size"), _whole(k, "k"), _whole(budget_bytes, "budget")
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    start, stop = (0, corpus_size) if rows is None else (_whole(rows[0], "rows"), _whole(rows[1], "rows"))
    if not 0 <= start <= stop <= corpus_size:
        raise ValueError(f"rows {rows} are not a range of the corpus's {corpus_size} rows")
    if corpus_size > _MAX_ROWS:
        raise ValueError(f"a corpus of {corpus_size} rows is over the {_MAX_ROWS} rows a key can hold")
    device = torch.device(device)
    filtered = device.type == "cpu" if filtered is None else filtered
    queries = torch.as_tensor(queries, dtype=torch.float32)
    q, d = queries.shape
    n = stop - start
    k = min(k, n)
    scores = np.empty((q, k), dtype=np.float32)
    indices = np.empty((q, k), dtype=np.int64)
    if k == 0 or q == 0:
        return scores, indices
    todo = np.arange(q)
    width = min(n, k + margin(k, d))
    listed = read_rows is not None
    while len(todo):
        whole = len(todo) == q
        try:
            plan = plan_search(len(todo), d, k, n, budget_bytes, device, filtered, width, listed)
        except EmbevalError:
            if width == min(n, k + margin(k, d)):
                raise
            plan, width = plan_search(len(todo), d, k, n, budget_bytes, device, filtered, listed=listed), n
        if planned is not None:
            planned(n * -(-len(todo) // plan.query_pass))
        if width >= n:  # every row scored exactly
            for p0 in range(0, len(todo), plan.query_pass):
                which = todo[p0 : p0 + plan.query_pass]
                part = queries[p0 : p0 + len(which)] if whole else queries[torch.from_numpy(which)]
                best, found = _exhaustive(part.to(device), read_corpus, start, stop, k, similarity, plan, progress)
                scores[which], indices[which] = best.cpu().numpy(), found.cpu().numpy()
            break
        left = []
        for p0 in range(0, len(todo), plan.query_pass):
            which = todo[p0 : p0 + plan.query_pass]
            part = queries[p0 : p0 + len(which)] if whole else queries[torch.from_numpy(which)]
            best, found, certain = _search_pass(
                part.to(device), read_corpus, start, stop, k, plan, similarity, filtered, progress, read_rows
            )
            certain = certain.cpu().numpy()
            scores[which[certain]] = best.cpu().numpy()[certain]
            indices[which[certain]] = found.cpu().numpy()[certain]
            left.append(which[~certain])
        todo = np.concatenate(left)
        width = min(n, width * WIDEN)
    return scores, indices


def merge_top_k(parts, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The top-k of shards' results [(scores (q, k_i), rows (q, k_i)), ...] (rows of the whole
    corpus): what one search of the whole corpus returns, with the same tie rule."""
    keys = torch.cat([encode(np.array(s, dtype=np.float32), np.array(r, dtype=np.int64)) for s, r in parts], dim=1)
    best, rows = decode(torch.topk(keys, min(k, keys.shape[1]), dim=1).values)
    return best.numpy(), rows.numpy()
