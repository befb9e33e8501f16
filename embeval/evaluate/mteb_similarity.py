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
    if similarity == "cosine":
        a = torch.nn.functional.normalize(a, p=2, dim=1)
        b = torch.nn.functional.normalize(b, p=2, dim=1)
    elif similarity != "dot":
        raise ValueError(f"similarity must be one of {SIMILARITIES}, got {similarity!r}")
    return a @ b.transpose(0, 1)
