"""Tensor parallel: each layer's neurons split over a process group (notebooks 06, 10, 11).

A linear layer computes y = x W^T + b. A *column-parallel* layer holds some rows of W (some
output neurons) and computes their outputs from the whole input. A *row-parallel* layer
holds the matching columns of W (some inputs) and computes a partial sum from its slice of
the input; the group's partial sums add up to the layer's output. Megatron-LM (Shoeybi et
al. 2019) puts a row-parallel layer right after a column-parallel one, so the slice never
has to be gathered, and brackets the pair with two conjugate operators:

- f at the entry: identity forward; backward, all-reduce, because each rank's input
  gradient covers only its own neurons;
- g at the exit: all-reduce forward (the partial sums); identity backward, because the
  gradient after it is the same on every rank.

One all-reduce forward and one backward per pair of layers. The blog's older picture
splits every layer column-wise and gathers its outputs (`gather`) so the next layer sees
all of them: a collective after every layer.

`group` is the process group the layer is split over: the whole world (None) in notebooks
06 and 10, one dimension of a device mesh in 11.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


class CopyToTensorRegion(torch.autograd.Function):
    """f: the input is already whole on every rank; its gradient comes back in parts."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class ReduceFromTensorRegion(torch.autograd.Function):
    """g: each rank holds a partial sum of the output; the gradient after it is whole."""

    @staticmethod
    def forward(ctx, partial, group):
        total = partial.contiguous().clone()
        dist.all_reduce(total, group=group)
        return total

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class GatherFromTensorRegion(torch.autograd.Function):
    """Every rank's neurons glued together along the last dimension; backward, keep the
    gradient of my own (the layers after it run the same on every rank, so it is whole)."""

    @staticmethod
    def forward(ctx, mine, group):
        ctx.width, ctx.rank = mine.shape[-1], dist.get_rank(group)
        parts = [torch.empty_like(mine) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, mine.contiguous(), group=group)
        return torch.cat(parts, dim=-1)

    @staticmethod
    def backward(ctx, grad):
        start = ctx.rank * ctx.width
        return grad[..., start : start + ctx.width], None


def f(x: torch.Tensor, group=None) -> torch.Tensor:
    """Megatron's names: f is `CopyToTensorRegion`, g `ReduceFromTensorRegion`."""
    return CopyToTensorRegion.apply(x, group)


def g(x: torch.Tensor, group=None) -> torch.Tensor:
    return ReduceFromTensorRegion.apply(x, group)


def gather(x: torch.Tensor, group=None) -> torch.Tensor:
    return GatherFromTensorRegion.apply(x, group)


def share(size: int, what: str, place: tuple[int, int] | None = None) -> slice:
    """The even share of `size` things (neurons, heads) of rank r of n, `place` = (r, n):
    this rank of the world by default."""
    r, n = place or (dist.get_rank(), dist.get_world_size())
    if size % n:
        raise ValueError(
            f"{size} {what} cannot be split evenly over {n} ranks; "
            f"choose a size that is a multiple of {n}."
        )
    return slice(r * size // n, (r + 1) * size // n)


class ColumnParallelLinear(nn.Module):
    """This rank's `rows` of W and of the bias: some of the layer's output neurons."""

    def __init__(self, full: nn.Linear, rows: slice):
        super().__init__()
        self.rows = rows
        self.weight = nn.Parameter(full.weight.detach()[rows].clone())
        self.bias = nn.Parameter(full.bias.detach()[rows].clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """This rank's `columns` of W: a partial sum, made whole by `reduce` (g on the group by
    default; sequence parallel's reduce-scatter in notebook 10). The bias, kept whole on
    every rank, is added once, after it."""

    def __init__(self, full: nn.Linear, columns: slice, reduce=g):
        super().__init__()
        self.columns, self.reduce = columns, reduce
        self.weight = nn.Parameter(full.weight.detach()[:, columns].clone())
        self.bias = nn.Parameter(full.bias.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.reduce(F.linear(x, self.weight)) + self.bias
