"""05's ring, cut into its two phases, so that ZeRO can stop half way (notebook 08).

`reduce_scatter_` leaves on rank r the sum over all ranks of chunk r of the buffer;
`all_gather_` sends every rank's own chunk round until everyone holds every chunk. One
after the other they are the ring allreduce of notebook 05 (DDP's all-reduce below is
exactly that). Every message goes through 05's `ring_step`, and a `Trace` counts the
bytes this rank sends.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..allreduce.algorithms import Trace, chunk_bounds, ring_step

__all__ = ["Trace", "all_gather_", "all_reduce_", "own_chunk", "reduce_scatter_"]


def own_chunk(flat: torch.Tensor) -> torch.Tensor:
    """This rank's chunk of a buffer whose length is a multiple of the world size (a view)."""
    start, stop = chunk_bounds(flat.numel(), dist.get_world_size())[dist.get_rank()]
    return flat[start:stop]


def _ring(flat: torch.Tensor, trace: Trace, add: bool, offset: int) -> torch.Tensor:
    rank, world = dist.get_rank(), dist.get_world_size()
    if world == 1:
        return flat
    trace.itemsize = flat.element_size()
    bounds = chunk_bounds(flat.numel(), world)
    right, left = (rank + 1) % world, (rank - 1) % world
    incoming = torch.empty(max(b - a for a, b in bounds), dtype=flat.dtype, device=flat.device)
    for step in range(world - 1):
        trace.next_round("reduce-scatter" if add else "all-gather")
        send = bounds[(rank - step - offset) % world]
        recv = bounds[(rank - step - offset - 1) % world]
        ring_step(flat, send, recv, right, left, incoming, trace, add=add)
    return flat


def reduce_scatter_(flat: torch.Tensor, trace: Trace) -> torch.Tensor:
    """Sum chunk r over all ranks into this buffer's chunk r on rank r (the rest is scratch).

    Each rank sends N-1 chunks, (N-1)/N of the buffer, whatever N is.
    """
    return _ring(flat, trace, add=True, offset=1)


def all_gather_(flat: torch.Tensor, trace: Trace) -> torch.Tensor:
    """Copy every rank's chunk r into chunk r of every rank's buffer: (N-1)/N of it sent."""
    return _ring(flat, trace, add=False, offset=0)


def all_reduce_(flat: torch.Tensor, trace: Trace) -> torch.Tensor:
    """The ring allreduce: reduce-scatter, then all-gather; 2(N-1)/N of the buffer sent."""
    return all_gather_(reduce_scatter_(flat, trace), trace)
