"""Two collectives under the names this torch knows.

torch 2.13 renamed `all_gather_into_tensor` and `reduce_scatter_tensor` to
`all_gather_single` and `reduce_scatter_single` (the old names now warn on every rank);
torch 2.10 to 2.12 know only the old ones. The name is looked up at each call, so whatever
wraps `torch.distributed` from outside sees the call.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def all_gather_single(output: torch.Tensor, mine: torch.Tensor, group=None) -> None:
    """Every rank's `mine`, one after another along dim 0 of `output`."""
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    gather(output, mine, group=group)


def reduce_scatter_single(output: torch.Tensor, pieces: torch.Tensor, group=None) -> None:
    """The sum over the ranks of `pieces`, of which this rank keeps its 1/N along dim 0."""
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    scatter(output, pieces, group=group)
