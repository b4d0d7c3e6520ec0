"""ZeRO stage 3 (Rajbhandari et al. 2020): a rank keeps only its own chunk of every layer's
weights (notebook 08).

A layer is all-gathered when its forward needs it and dropped right after; backward
gathers it again to compute the input's gradient, reduce-scatters the weights' gradient
and keeps the own chunk of it. So between steps a rank holds 1/N of everything, and
during one a layer at a time in full. Written for a stack of Linear layers with ReLUs
between, as notebook 08's MLP; the units, chunks and steps are `zero`'s.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from .allreduce import ring_all_gather, ring_reduce_scatter
from .zero import DDP, Unit, own_chunk, units_of


class _GatheredLinear(torch.autograd.Function):
    """ZeRO-3's layer: gather the weights, use them, drop them; again in backward."""

    @staticmethod
    def forward(ctx, x, shard, unit):
        weight, bias = unit.views(_gathered(shard, unit))
        ctx.save_for_backward(x, shard)  # the chunk, not the gathered weights
        ctx.unit = unit
        return torch.addmm(bias, x, weight.t())

    @staticmethod
    def backward(ctx, grad_out):
        x, shard = ctx.saved_tensors
        unit = ctx.unit
        weight, _ = unit.views(_gathered(shard, unit))
        grad_x = grad_out.mm(weight)
        grad = unit.zeros()
        grad_weight, grad_bias = unit.views(grad)
        grad_weight.copy_(grad_out.t().mm(x))
        grad_bias.copy_(grad_out.sum(0))
        ring_reduce_scatter(grad)
        return grad_x, own_chunk(grad).div(dist.get_world_size()), None


def _gathered(shard: torch.Tensor, unit: Unit) -> torch.Tensor:
    flat = torch.empty(unit.padded, device=shard.device)
    own_chunk(flat).copy_(shard.detach())
    return ring_all_gather(flat)


class Zero3(DDP):
    """Stage 3: only the own chunk of each layer's weights stays on a rank."""

    stage = 3

    def __init__(self, model: nn.Module, world: int, lr: float, optimizer=torch.optim.Adam):
        layers = [m for m in model if not isinstance(m, nn.ReLU)]
        if not all(isinstance(m, nn.Linear) for m in layers):
            raise ValueError("Zero3 takes Linear layers with ReLUs between (notebook 08's MLP).")
        self.model, self.world = model, world
        self.units = units_of(model, world)
        flats = [u.flatten(u.parameters()) for u in self.units]
        self.shards = [nn.Parameter(own_chunk(flat).clone()) for flat in flats]
        for layer in layers:  # the full weights are gone: only the chunks remain
            layer.weight = layer.bias = nn.Parameter(torch.empty(0))  # cpu: a placeholder
        self.grads, self.owned = [], self.shards
        self.optimizer = optimizer(self.owned, lr=lr)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, (unit, shard) in enumerate(zip(self.units, self.shards, strict=True)):
            x = _GatheredLinear.apply(x, shard, unit)
            if i < len(self.units) - 1:
                x = F.relu(x)
        return x

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        for shard in self.shards:
            shard.grad = None
        return super().step(x, y)

    def after_backward(self) -> None:
        pass

    def full_parameters(self) -> torch.Tensor:
        flats = [_gathered(s, u) for s, u in zip(self.shards, self.units, strict=True)]
        return torch.cat([f[: u.numel] for f, u in zip(flats, self.units, strict=True)])
