"""Sequence parallel on top of tensor parallel (Korthikanti et al. 2022), by hand.

Under tensor parallel the LayerNorms, residual additions (and dropout, which this model
leaves out) run on the whole (batch, seq, width) activations on every rank: N copies of
the same work and the same saved tensors. Sequence parallel gives each rank 1/N of the
sequence there. The region operators change with it:

- g's all-reduce becomes a reduce-scatter along the sequence: each rank keeps the sum
  for its own positions (backward: all-gather);
- f becomes an all-gather along the sequence, rebuilding the whole input the split
  attention and MLP need (backward: reduce-scatter).

A ring all-reduce is a reduce-scatter then an all-gather, so the same bytes cross the
wire as under tensor parallel, only cut at other places. The parameters that now see
1/N of the sequence (LayerNorms, the row-parallel biases) get 1/N of their gradient on
each rank: `sync_sequence_parallel_grads` sums them, a parameter-sized all-reduce.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from . import comm
from .model import Transformer
from .tensor_parallel import Op, RowParallelLinear, tensor_parallel_model

__all__ = [
    "GatherFromSequence",
    "ReduceScatterToSequence",
    "sequence_parallel_model",
    "sequence_parallel_params",
    "sync_sequence_parallel_grads",
]

SEQ = 1  # activations are (batch, seq, width)


class GatherFromSequence(torch.autograd.Function):
    """SP's f: all-gather the sequence; backward, reduce-scatter the gradient, whose parts
    are partial (each rank's heads or neurons) and belong to every rank's positions.

    With `whole_grad` the gradient arriving is already whole on every rank (the replicated
    head), so backward only keeps this rank's positions."""

    @staticmethod
    def forward(ctx, x, where, whole_grad=False):
        ctx.where, ctx.whole_grad = where, whole_grad
        return comm.all_gather(x, SEQ, where, "forward")

    @staticmethod
    def backward(ctx, grad):
        if ctx.whole_grad:
            return _my_positions(grad), None, None
        return comm.reduce_scatter(grad, SEQ, ctx.where, "backward"), None, None


class ReduceScatterToSequence(torch.autograd.Function):
    """SP's g: sum the partial outputs, keeping this rank's positions; backward, all-gather."""

    @staticmethod
    def forward(ctx, partial, where):
        ctx.where = where
        return comm.reduce_scatter(partial, SEQ, where, "forward")

    @staticmethod
    def backward(ctx, grad):
        return comm.all_gather(grad, SEQ, ctx.where, "backward"), None


class _SplitSequence(torch.autograd.Function):
    """After the replicated embedding: keep my positions; backward, all-gather so the
    embedding's gradient is whole on every rank."""

    @staticmethod
    def forward(ctx, x):
        return _my_positions(x)

    @staticmethod
    def backward(ctx, grad):
        return comm.all_gather(grad, SEQ, "embedding", "backward")


def _my_positions(x: torch.Tensor) -> torch.Tensor:
    n, r = dist.get_world_size(), dist.get_rank()
    if x.shape[SEQ] % n:
        raise ValueError(
            f"a sequence of {x.shape[SEQ]} tokens cannot be split evenly over {n} ranks; "
            f"choose seq_len a multiple of {n}."
        )
    return x.chunk(n, dim=SEQ)[r].contiguous()


class _Apply(nn.Module):
    def __init__(self, op: Op):
        super().__init__()
        self.op = op

    def forward(self, x):
        return self.op(x)


def _gather(where: str) -> Op:
    return lambda x: GatherFromSequence.apply(x, where)


def _scatter(where: str) -> Op:
    return lambda x: ReduceScatterToSequence.apply(x, where)


def sequence_parallel_model(model: Transformer) -> Transformer:
    """Tensor parallel with the LayerNorm regions sharded along the sequence (inside a
    launched rank). The embedding and the head stay replicated: the sequence is cut after
    the one and joined before the other."""
    split = tensor_parallel_model(model, enter=_gather, leave=_scatter)
    split.split_sequence = _Apply(_SplitSequence.apply)
    split.join_sequence = _Apply(lambda x: GatherFromSequence.apply(x, "head", True))
    return split


def sequence_parallel_params(model: Transformer) -> list[nn.Parameter]:
    """The parameters that act on this rank's positions only: every LayerNorm's and the
    row-parallel layers' biases (added after the reduce-scatter)."""
    params = []
    for m in model.modules():
        if isinstance(m, nn.LayerNorm):
            params += [m.weight, m.bias]
        elif isinstance(m, RowParallelLinear):
            params.append(m.bias)
    return params


def sync_sequence_parallel_grads(model: Transformer) -> None:
    """Sum the sequence-sharded parameters' gradients over the ranks, in one message."""
    params = sequence_parallel_params(model)
    flat = torch.cat([p.grad.flatten() for p in params])
    flat = comm.all_reduce(flat, "sequence-parallel parameters", "backward")
    for p, part in zip(params, flat.split([p.numel() for p in params]), strict=True):
        p.grad.copy_(part.view_as(p))
