"""Layers drawn from a local torch.Generator exactly as PyTorch draws them from its global RNG.

SentEval calls torch.manual_seed(seed) and then builds nn.Linear layers; building them here with
`torch.Generator().manual_seed(seed)` gives the same weights without touching global state.
"""

import math

import torch


def generator(seed):
    """A CPU generator in the state torch.manual_seed(seed) leaves the global one in."""
    return torch.Generator().manual_seed(seed)


def linear(in_dim, out_dim, gen):
    """nn.Linear(in_dim, out_dim) with PyTorch's default initialization, drawn from `gen` (on the CPU)."""
    layer = torch.nn.utils.skip_init(torch.nn.Linear, in_dim, out_dim)
    with torch.no_grad():
        torch.nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=gen)
        bound = 1 / math.sqrt(in_dim) if in_dim > 0 else 0
        torch.nn.init.uniform_(layer.bias, -bound, bound, generator=gen)
    return layer
