"""Similarities computed as mteb 2.26.24 computes them (mteb.similarity_functions), so that ties and
near-ties fall the same way: float32 torch tensors, cosine as torch.nn.functional.normalize (L2,
eps 1e-12) of both sides then a matrix product, dot as the plain matrix product. The evaluators call
them on the shapes mteb uses (one query against its candidates, one summary against the human
summaries, 100 first sentences against the whole second side): a matrix product's last bit may
depend on the shapes it is given.
"""

import numpy as np
import torch

SIMILARITIES = ("cosine", "dot")
# Whether torch's batched product (bmm, two or more queries) gives the bits of the one-query product
# for a (candidates, dimension, threads) shape: measured once per shape (_batched_agrees). It does not
# below about 400 multiply-adds a query (another kernel), nor where the one-query product splits its
# sums over threads (on some CPUs, from about 15,000 multiply-adds with two threads).
_BATCHED_AGREES: dict[tuple[int, int, int], bool] = {}


def tensor(x: np.ndarray | torch.Tensor) -> torch.Tensor:
    """A float32 CPU tensor of `x` (mteb's conversion: numpy input of any float type becomes float32)."""
    if isinstance(x, torch.Tensor):
        return x.to(torch.float32)
    return torch.as_tensor(np.asarray(x, dtype=np.float32))


def matrix(a: torch.Tensor, b: torch.Tensor, similarity: str) -> torch.Tensor:
    """(len(a), len(b)) similarities of float32 rows, mteb's cos_sim or dot_score."""
    if a.dim() == 1:
        a = a.unsqueeze(0)
    if b.dim() == 1:
        b = b.unsqueeze(0)
    return normalized(a, similarity) @ normalized(b, similarity).transpose(0, 1)


def normalized(rows: torch.Tensor, similarity: str) -> torch.Tensor:
    """float32 rows as matrix() takes them into its product: each L2-normalized for cosine (a row's
    bits depend on the row alone), unchanged for dot."""
    if similarity == "cosine":
        return torch.nn.functional.normalize(rows, p=2, dim=1)
    if similarity != "dot":
        raise ValueError(f"similarity must be one of {SIMILARITIES}, got {similarity!r}")
    return rows


def per_query(queries: torch.Tensor, candidates: torch.Tensor, similarity: str, prepared: bool = False) -> torch.Tensor:
    """(G, C) similarities of each of G queries (G, d) with its own C candidates (G, C, d): for each
    query the same values, bit for bit, as `matrix(query, its candidates)`, the one-query product
    mteb's reranking takes, computed for the G queries at once (a batched product of the same
    shapes; rows normalized one by one either way). Where torch's batched product would give other bits
    than the one-query product for this shape and thread count, each query is taken alone.
    prepared: both sides are already normalized() (a row that is many queries' candidate once)."""
    g, c, d = candidates.shape
    if not prepared:
        queries = normalized(queries, similarity)
        candidates = normalized(candidates.reshape(g * c, d), similarity).reshape(g, c, d)
    if g < 2 or not _batched_agrees(c, d):
        return torch.cat([queries[i : i + 1] @ candidates[i].transpose(0, 1) for i in range(g)])
    return torch.bmm(queries.unsqueeze(1), candidates.transpose(1, 2))[:, 0]


def _batched_agrees(c: int, d: int) -> bool:
    """Whether a batched product of queries with c candidates of dimension d gives, at this thread
    count, each query's one-query product bit for bit: tried once per shape on Gaussian rows (a
    product's order of summation depends on its shapes and threads, not on the values, and Gaussian
    values show any change of order in their last bits). A batch's bits do not depend on its size
    from two queries on."""
    key = (c, d, torch.get_num_threads())
    if key not in _BATCHED_AGREES:
        generator = torch.Generator().manual_seed(c * 100_003 + d)
        queries = torch.randn(3, d, generator=generator)
        candidates = torch.randn(3, c, d, generator=generator)
        alone = torch.cat([queries[i : i + 1] @ candidates[i].transpose(0, 1) for i in range(3)])
        batched = torch.bmm(queries.unsqueeze(1), candidates.transpose(1, 2))[:, 0]
        _BATCHED_AGREES[key] = torch.equal(batched, alone)
    return _BATCHED_AGREES[key]
