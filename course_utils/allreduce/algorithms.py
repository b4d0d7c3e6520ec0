"""Notebook 05's all-reduce algorithms by name; their code is `parallel.allreduce`.

The notebook and its runs call an algorithm by the name it goes by in the sweeps. The
course's tree and ring are the answers to 05's exercises, so a checker refuses them.
"""

from __future__ import annotations

import torch

from ..core.own_answers import mark
from ..parallel.allreduce import (
    butterfly_allreduce,
    halving_doubling_allreduce,
    parameter_server_allreduce,
    ring_allreduce,
    tree_allreduce,
)

ALGORITHMS = {  # any number of ranks: every sweep of notebook 05 runs these
    "parameter_server": parameter_server_allreduce,
    "tree": mark(tree_allreduce, "tree"),
    "butterfly": butterfly_allreduce,
    "ring": mark(ring_allreduce, "ring"),
}
POWER_OF_TWO = {"halving_doubling": halving_doubling_allreduce}  # 2, 4, 8, ... ranks


def chunk_bounds(numel: int, parts: int) -> list[tuple[int, int]]:
    """The ring's chunks as element ranges: 0..numel in `parts` pieces of lengths differing by
    at most one, the longer first (as `Tensor.tensor_split` cuts them)."""
    edges = [0]
    for i in range(parts):
        edges.append(edges[-1] + numel // parts + (i < numel % parts))
    return list(zip(edges, edges[1:], strict=False))


def known(algorithm: str) -> str:
    """`algorithm` itself if ALGORITHMS or POWER_OF_TWO has it; else a ValueError naming them."""
    if algorithm not in ALGORITHMS and algorithm not in POWER_OF_TWO:
        names = ", ".join([*ALGORITHMS, *POWER_OF_TWO])
        raise ValueError(f"unknown algorithm {algorithm!r}; choose one of {names}.")
    return algorithm


def implementation(algorithm: str):
    """The function behind a name, looked up when called (a test may swap one in)."""
    return {**ALGORITHMS, **POWER_OF_TWO}[known(algorithm)]


def summed(algorithm: str, t: torch.Tensor) -> torch.Tensor:
    """`t` summed over the ranks in place by `algorithm`, whatever its shape or layout: the
    plain algorithms send contiguous tensors, so a strided one is summed in a copy."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"allreduce needs a torch.Tensor, got {type(t).__name__}.")
    if t.numel() == 0:
        return t
    flat = t if t.is_contiguous() else t.contiguous()
    implementation(algorithm)(flat)
    return t if flat is t else t.copy_(flat)
