"""Tensor (intra-layer) model parallelism: the neurons of every layer split across the ranks.

Each rank keeps 1/N of each weight matrix. A column-parallel layer holds some of the
layer's output neurons (rows of W); a row-parallel layer holds some of its inputs
(columns of W) and must add up the ranks' partial sums. Two ways to stack them:

- "every_layer" (the blog's picture): every layer column-parallel, its outputs gathered
  after every layer so that the next layer sees all of them;
- "column_row" (Megatron-LM, Shoeybi et al. 2019): a column-parallel layer feeds its
  slice straight into a row-parallel one, one all-reduce per pair of layers.

Every collective is logged with its layer, direction, size and group, so what must be
communicated per layer is measured, not asserted: in collectives, and in the bytes each
rank puts on the wire when the collective runs as a ring (`Transfer.wire_bytes`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

STYLES = ("every_layer", "column_row")


@dataclass(frozen=True)
class Transfer:
    layer: int
    direction: str  # "forward" or "backward"
    op: str  # "all_gather" or "all_reduce"
    bytes: int  # size of the full tensor the collective produces on each rank
    ranks: int = 1  # how many ranks share the collective

    @property
    def wire_bytes(self) -> float:
        """Bytes each rank sends when the collective runs as a ring (Thakur et al. 2005):
        an all-gather of an n-byte result sends (N-1)/N n; an all-reduce of n bytes is a
        reduce-scatter then an all-gather, 2(N-1)/N n."""
        return _RING_SHARE[self.op] * (self.ranks - 1) / self.ranks * self.bytes


_RING_SHARE = {"all_gather": 1, "all_reduce": 2}


_log: list[Transfer] | None = None


@contextlib.contextmanager
def count_communication():
    """Collect a `Transfer` for every collective the split layers run inside the block."""
    global _log
    saved, _log = _log, []
    try:
        yield _log
    finally:
        _log = saved


def _record(layer: int, direction: str, op: str, t: torch.Tensor) -> None:
    if _log is not None:
        nbytes = t.numel() * t.element_size()
        _log.append(Transfer(layer, direction, op, nbytes, dist.get_world_size()))


def _all_reduce(t: torch.Tensor, layer: int, direction: str) -> torch.Tensor:
    t = t.contiguous()
    dist.all_reduce(t)
    _record(layer, direction, "all_reduce", t)
    return t


class _GatherOutputs(torch.autograd.Function):
    """Forward: glue every rank's neurons together. Backward: keep the gradient of my part.

    Whatever consumes the glued output runs the same on every rank (a loss, or the next
    layer, whose input gradient is summed over the ranks in `_CopyToRanks`), so the
    gradient arriving here is already whole.
    """

    @staticmethod
    def forward(ctx, local, layer):
        ctx.layer, ctx.width = layer, local.shape[-1]
        parts = [torch.empty_like(local) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, local.contiguous())
        full = torch.cat(parts, dim=-1)
        _record(layer, "forward", "all_gather", full)
        return full

    @staticmethod
    def backward(ctx, grad):
        lo = dist.get_rank() * ctx.width
        return grad[..., lo : lo + ctx.width], None


class _CopyToRanks(torch.autograd.Function):
    """Forward: the input is already on every rank. Backward: each rank's gradient is partial."""

    @staticmethod
    def forward(ctx, x, layer):
        ctx.layer = layer
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return _all_reduce(grad.clone(), ctx.layer, "backward"), None


class _SumPartials(torch.autograd.Function):
    """Forward: add up the ranks' partial outputs. Backward: every rank gets the whole gradient."""

    @staticmethod
    def forward(ctx, partial, layer):
        return _all_reduce(partial.clone(), layer, "forward")

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def _bounds(size: int, what: str) -> tuple[int, int]:
    n, r = dist.get_world_size(), dist.get_rank()
    if size % n:
        raise ValueError(
            f"a layer with {size} {what} cannot be split evenly over {n} ranks; "
            f"use a width that is a multiple of {n}."
        )
    return r * size // n, (r + 1) * size // n


class ColumnParallelLinear(nn.Module):
    """Holds out_features/N of the layer's neurons: its rows of W and of the bias."""

    def __init__(self, full: nn.Linear, layer: int, gather_output: bool):
        super().__init__()
        self.lo, self.hi = _bounds(full.out_features, "output neurons")
        self.layer, self.gather_output = layer, gather_output
        self.weight = nn.Parameter(full.weight.detach()[self.lo : self.hi].clone())
        self.bias = nn.Parameter(full.bias.detach()[self.lo : self.hi].clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.requires_grad:
            x = _CopyToRanks.apply(x, self.layer)
        y = F.linear(x, self.weight, self.bias)
        return _GatherOutputs.apply(y, self.layer) if self.gather_output else y

    def my_part(self, weight: torch.Tensor, bias: torch.Tensor):
        """This rank's share of a full-size weight and bias (or of their gradients)."""
        return weight[self.lo : self.hi], bias[self.lo : self.hi]


class RowParallelLinear(nn.Module):
    """Holds in_features/N of the layer's inputs (columns of W); the bias stays whole."""

    def __init__(self, full: nn.Linear, layer: int):
        super().__init__()
        self.lo, self.hi = _bounds(full.in_features, "inputs")
        self.layer = layer
        self.weight = nn.Parameter(full.weight.detach()[:, self.lo : self.hi].clone())
        self.bias = nn.Parameter(full.bias.detach().clone())

    def forward(self, x_part: torch.Tensor) -> torch.Tensor:
        return _SumPartials.apply(F.linear(x_part, self.weight), self.layer) + self.bias

    def my_part(self, weight: torch.Tensor, bias: torch.Tensor):
        return weight[:, self.lo : self.hi], bias


def parallelize(model: nn.Module, style: str = "column_row") -> nn.Sequential:
    """The same network with every Linear split over the ranks (inside a launched rank)."""
    if style not in STYLES:
        raise ValueError(f"unknown style {style!r}; choose one of {', '.join(STYLES)}.")
    flat = [m for m in model.modules() if not isinstance(m, nn.Sequential)]
    linears = [m for m in flat if isinstance(m, nn.Linear)]
    out, n = [], 0
    for m in flat:
        if not isinstance(m, nn.Linear):
            out.append(m)
            continue
        last = n == len(linears) - 1
        if style == "column_row" and n % 2 == 1:
            out.append(RowParallelLinear(m, n))
        else:
            gather = style == "every_layer" or last
            out.append(ColumnParallelLinear(m, n, gather_output=gather))
        n += 1
    return nn.Sequential(*out)


def compare_with_unsplit(widths, batch: int, style: str = "column_row", seed: int = 0) -> dict:
    """Run on every rank: one training step of the split network against the whole one.

    Returns how far the outputs and this rank's gradients (of its weights and of the
    input) are from the unsplit model's,
    how many parameters this rank stores against the whole model, and every transfer.
    """
    from ..ranks.bootstrap import device
    from .pipeline import mlp

    dev = device()
    full = mlp(widths, seed=seed).to(dev)
    split = parallelize(full, style)
    gen = torch.Generator().manual_seed(seed + 1)
    x_full = torch.randn(batch, widths[0], generator=gen).to(dev).requires_grad_()  # cpu: seeded
    x = x_full.detach().clone().requires_grad_()
    target = torch.randint(0, widths[-1], (batch,), generator=gen).to(dev)  # cpu: seeded
    y_full = full(x_full)
    F.cross_entropy(y_full, target).backward()
    with count_communication() as transfers:
        y = split(x)
        F.cross_entropy(y, target).backward()
    pairs = zip(
        [m for m in split if isinstance(m, (ColumnParallelLinear, RowParallelLinear))],
        [m for m in full.modules() if isinstance(m, nn.Linear)],
        strict=True,
    )
    grad_diff = (x.grad - x_full.grad).abs().max().item()
    for mine, whole in pairs:
        w, b = mine.my_part(whole.weight.grad, whole.bias.grad)
        grad_diff = max(grad_diff, (mine.weight.grad - w).abs().max().item())
        grad_diff = max(grad_diff, (mine.bias.grad - b).abs().max().item())
    return {
        "rank": dist.get_rank(),
        "output_max_diff": (y - y_full).abs().max().item(),
        "grad_max_diff": grad_diff,
        "params_stored": sum(p.numel() for p in split.parameters()),
        "params_full": sum(p.numel() for p in full.parameters()),
        "transfers": list(transfers),
    }


def bytes_per_layer(transfers: list[Transfer], layers: int) -> dict[str, list[float]]:
    """Bytes each rank sends on the wire, per layer, forward and backward (ring collectives)."""
    table = {"forward": [0.0] * layers, "backward": [0.0] * layers}
    for t in transfers:
        table[t.direction][t.layer] += t.wire_bytes
    return table


def collectives_per_layer(transfers: list[Transfer], layers: int) -> dict[str, list[int]]:
    """How many collectives each layer waits for, forward and backward."""
    table = {"forward": [0] * layers, "backward": [0] * layers}
    for t in transfers:
        table[t.direction][t.layer] += 1
    return table
