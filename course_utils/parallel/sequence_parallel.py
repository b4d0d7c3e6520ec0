"""Sequence parallel on top of tensor parallel (Korthikanti et al. 2022), notebook 10.

Under tensor parallel the LayerNorms and residual additions (and dropout) run on the whole
(batch, seq, width) activations on every rank: N copies of the same work and of the same
saved tensors. Sequence parallel gives each rank 1/N of the sequence there, and the
operators at the ends of each tensor-parallel region change with it:

- g's all-reduce becomes a reduce-scatter along the sequence (`leave`): each rank keeps
  the sum for its own positions; backward, an all-gather;
- f becomes an all-gather along the sequence (`enter`), rebuilding the whole input the
  split attention and MLP need; backward, a reduce-scatter.

A ring all-reduce is a reduce-scatter then an all-gather, so each rank sends the same bytes
as under tensor parallel, only cut at other places. The parameters that see 1/N of the
sequence (LayerNorms, the row-parallel biases) get 1/N of their gradient on each rank:
`sum_gradients` adds them up, one parameter-sized all-reduce.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from .renamed import all_gather_single, reduce_scatter_single

SEQ = 1  # activations are (batch, seq, width)


def my_positions(x: torch.Tensor, group=None) -> torch.Tensor:
    """This rank's consecutive 1/N of the sequence."""
    n = dist.get_world_size(group)
    if x.shape[SEQ] % n:
        raise ValueError(
            f"a sequence of {x.shape[SEQ]} tokens cannot be split evenly over {n} ranks; "
            f"choose seq_len a multiple of {n}."
        )
    return x.chunk(n, dim=SEQ)[dist.get_rank(group)].contiguous()


def all_gather_sequence(x: torch.Tensor, group=None) -> torch.Tensor:
    """Every rank's positions, joined in rank order along the sequence."""
    n = dist.get_world_size(group)
    pieces = x.new_empty((n * x.shape[0], *x.shape[1:]))  # rank after rank along dim 0
    all_gather_single(pieces, x.contiguous(), group)
    return torch.cat(pieces.chunk(n), dim=SEQ)


def reduce_scatter_sequence(x: torch.Tensor, group=None) -> torch.Tensor:
    """The sum over the ranks of `x`, of which this rank keeps its own positions."""
    my_positions(x, group)  # the same check: the sequence must split evenly
    n = dist.get_world_size(group)
    pieces = torch.cat(x.chunk(n, dim=SEQ))  # rank r's positions r-th along dim 0
    mine = pieces.new_empty((x.shape[0], *pieces.shape[1:]))
    reduce_scatter_single(mine, pieces, group)
    return mine


class _Gather(torch.autograd.Function):
    """SP's f: all-gather the sequence; backward, reduce-scatter the gradient, whose parts
    are partial (each rank's heads or neurons) and belong to every rank's positions.
    With `whole_grad` the gradient arriving is already whole on every rank (the replicated
    head after it), so backward only keeps this rank's positions."""

    @staticmethod
    def forward(ctx, x, group, whole_grad):
        ctx.group, ctx.whole_grad = group, whole_grad
        return all_gather_sequence(x, group)

    @staticmethod
    def backward(ctx, grad):
        if ctx.whole_grad:
            return my_positions(grad, ctx.group), None, None
        return reduce_scatter_sequence(grad, ctx.group), None, None


class _ToMyPositions(torch.autograd.Function):
    """Keep this rank's positions: of the sum over the ranks (`summed`, SP's g after a
    row-parallel layer), or of an input every rank holds whole (the replicated embedding's
    output). Backward, all-gather: the gradient before it is whole on every rank."""

    @staticmethod
    def forward(ctx, x, group, summed):
        ctx.group = group
        return reduce_scatter_sequence(x, group) if summed else my_positions(x, group)

    @staticmethod
    def backward(ctx, grad):
        return all_gather_sequence(grad, ctx.group), None, None


def enter(x: torch.Tensor, group=None) -> torch.Tensor:
    return _Gather.apply(x, group, False)


def leave(x: torch.Tensor, group=None) -> torch.Tensor:
    return _ToMyPositions.apply(x, group, True)


def split(x: torch.Tensor, group=None) -> torch.Tensor:
    """After the replicated embedding: this rank's positions."""
    return _ToMyPositions.apply(x, group, False)


def join(x: torch.Tensor, group=None) -> torch.Tensor:
    """Before the replicated head: the whole sequence again."""
    return _Gather.apply(x, group, True)


def sum_gradients(params: list[torch.nn.Parameter], group=None) -> None:
    """Add up the sequence-sharded parameters' gradients over the ranks, in one message."""
    flat = torch.cat([p.grad.flatten() for p in params])
    dist.all_reduce(flat, group=group)
    for p, part in zip(params, flat.split([p.numel() for p in params]), strict=True):
        p.grad.copy_(part.view_as(p))
