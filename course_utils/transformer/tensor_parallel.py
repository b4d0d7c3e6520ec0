"""Megatron-LM's tensor parallel (Shoeybi et al. 2019), by hand on the logged collectives.

In each block the attention's heads and the MLP's hidden neurons are split over the N
ranks. A column-parallel layer (q, k, v; fc1) holds some output neurons, so its output
is a slice that the head-wise attention or the element-wise GELU can use as it is; the
row-parallel layer after it (out; fc2) holds the matching inputs and produces a partial
sum. Two conjugate operators bracket each such region:

- f at its entry: identity forward; backward, all-reduce (each rank's input gradient
  covers only its own heads or neurons);
- g at its exit: all-reduce forward (the partial sums); identity backward (the gradient
  after it is the same on every rank).

So a block costs two all-reduces of the (batch, seq, width) activations forward and two
backward, and everything outside the regions (LayerNorms, residuals, embeddings, head)
runs replicated, identical on every rank.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from . import comm
from .model import MLP, Attention, Transformer

__all__ = [
    "ColumnParallelLinear",
    "CopyToTensorRegion",
    "ReduceFromTensorRegion",
    "RowParallelLinear",
    "TensorParallelAttention",
    "TensorParallelMLP",
    "f",
    "g",
    "tensor_parallel_model",
]

Op = Callable[[torch.Tensor], torch.Tensor]


class CopyToTensorRegion(torch.autograd.Function):
    """f: the input is already whole on every rank; its gradient comes back in N parts."""

    @staticmethod
    def forward(ctx, x, where):
        ctx.where = where
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return comm.all_reduce(grad.clone(), ctx.where, "backward"), None


class ReduceFromTensorRegion(torch.autograd.Function):
    """g: each rank holds a partial sum of the output; the gradient after it is whole."""

    @staticmethod
    def forward(ctx, partial, where):
        return comm.all_reduce(partial.clone(), where, "forward")

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def f(where: str) -> Op:
    return lambda x: CopyToTensorRegion.apply(x, where)


def g(where: str) -> Op:
    return lambda x: ReduceFromTensorRegion.apply(x, where)


def _share(size: int, what: str) -> slice:
    n, r = dist.get_world_size(), dist.get_rank()
    if size % n:
        raise ValueError(
            f"{size} {what} cannot be split evenly over {n} ranks; "
            f"choose sizes whose heads and MLP width are multiples of {n}."
        )
    return slice(r * size // n, (r + 1) * size // n)


class ColumnParallelLinear(nn.Module):
    """This rank's rows of W and of the bias: some of the layer's output neurons."""

    def __init__(self, full: nn.Linear, rows: slice):
        super().__init__()
        self.weight = nn.Parameter(full.weight.detach()[rows].clone())
        self.bias = nn.Parameter(full.bias.detach()[rows].clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """This rank's columns of W: a partial sum, made whole by `reduce` (g, or sequence
    parallel's reduce-scatter); the bias, kept whole, is added once, after it."""

    def __init__(self, full: nn.Linear, columns: slice, reduce: Op):
        super().__init__()
        self.weight = nn.Parameter(full.weight.detach()[:, columns].clone())
        self.bias = nn.Parameter(full.bias.detach().clone())
        self.reduce = reduce

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.reduce(F.linear(x, self.weight)) + self.bias


class TensorParallelAttention(Attention):
    """Heads split over the ranks: q, k, v column-parallel (whole heads each), `out`
    row-parallel over the same heads; `enter`/`leave` are f/g or their SP twins."""

    def __init__(self, full: Attention, enter: Op, leave: Op):
        nn.Module.__init__(self)
        self.head_dim = full.head_dim
        heads = _share(full.q.out_features // full.head_dim, "attention heads")
        mine = slice(heads.start * self.head_dim, heads.stop * self.head_dim)
        self.q, self.k, self.v = (ColumnParallelLinear(p, mine) for p in (full.q, full.k, full.v))
        self.out = RowParallelLinear(full.out, mine, leave)
        self.enter = enter

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(self.enter(x))


class TensorParallelMLP(MLP):
    """fc1 column-parallel, GELU on this rank's hidden neurons, fc2 row-parallel."""

    def __init__(self, full: MLP, enter: Op, leave: Op):
        nn.Module.__init__(self)
        mine = _share(full.fc1.out_features, "MLP hidden neurons")
        self.fc1 = ColumnParallelLinear(full.fc1, mine)
        self.fc2 = RowParallelLinear(full.fc2, mine, leave)
        self.enter = enter

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(self.enter(x))


def tensor_parallel_model(model: Transformer, enter=f, leave=g) -> Transformer:
    """A copy of `model` in which every block's attention and MLP hold this rank's share
    of the weights (run inside a launched rank). Parameters keep their names, so a
    one-process model passed through this function again gives the shards to compare with.

    `enter(where)`/`leave(where)` make the operators at each region's ends: f and g here,
    sequence parallel's all-gather and reduce-scatter there."""
    split = copy.deepcopy(model)
    for i, block in enumerate(split.blocks):
        a, m = f"block {i} attention", f"block {i} mlp"
        block.attn = TensorParallelAttention(block.attn, enter(a), leave(a))
        block.mlp = TensorParallelMLP(block.mlp, enter(m), leave(m))
    return split
