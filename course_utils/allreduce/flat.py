"""What every hand-written allreduce starts and ends with: the tensor as one flat view, its
chunks, and receive buffers kept between calls.

The algorithms in `algorithms` differ only in who sends which range of that view to whom;
the plumbing around the messages is here, once.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from .trace import QUIET, Trace

__all__ = ["begin", "chunk_bounds", "finish", "scratch"]


def chunk_bounds(numel: int, parts: int) -> list[tuple[int, int]]:
    """Split 0..numel into `parts` contiguous ranges differing in length by at most one."""
    return [(i * numel // parts, (i + 1) * numel // parts) for i in range(parts)]


def begin(t: torch.Tensor, trace: Trace | None):
    """The flat view the algorithms work on, this rank's place, and the trace to write to."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"allreduce needs a torch.Tensor, got {type(t).__name__}.")
    flat = t.view(-1) if t.is_contiguous() else t.contiguous().view(-1)
    rank, world = dist.get_rank(), dist.get_world_size()
    if trace is None:
        return flat, rank, world, QUIET
    trace.rank, trace.world_size, trace.itemsize = rank, world, t.element_size()
    return flat, rank, world, trace


def finish(t: torch.Tensor, flat: torch.Tensor) -> torch.Tensor:
    """`t` holding the sum: a non-contiguous `t` was summed in a copy, copied back here."""
    if flat.data_ptr() != t.data_ptr() or not t.is_contiguous():
        t.copy_(flat.view_as(t))
    return t


_SCRATCH: dict = {}


def scratch(numel: int, like: torch.Tensor, slot: int = 0) -> torch.Tensor:
    """A receive buffer kept between calls (one allreduce at a time per process; a tree
    node needs one per child: `slot`): a fresh one takes a page fault per 4 KiB on first
    use, which made a 64 MiB ring on 2 ranks about 2x slower than gloo's own, whose
    buffers are reused."""
    key = (like.dtype, like.device, slot)
    if key not in _SCRATCH or _SCRATCH[key].numel() < numel:
        _SCRATCH[key] = torch.empty(numel, dtype=like.dtype, device=like.device)
    return _SCRATCH[key][:numel]
