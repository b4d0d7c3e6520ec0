"""ZeRO stages 1, 2 and 3 written by hand, beside the DDP they slim down (notebook 08).

Every Linear layer of the model is one *unit*: its weight and bias live in one flat
buffer, padded to a multiple of the N ranks and cut into N equal chunks; rank r owns
chunk r. Adam (`torch.optim.Adam`) updates what a rank owns, so its moments are as large
as that. The collectives are 05's ring and its two halves (`parallel.allreduce`); the bytes
they send are counted where they cross torch.distributed (`memory.runs`). It runs on the
CPU (gloo), where notebook 08 measures each rank's bytes with the CPU allocator: `# cpu`.

- stage 0, DDP: every rank holds everything; the gradient is all-reduced.
- stage 1: Adam's moments only for the own chunk; the gradient is reduce-scattered, the
  updated chunk all-gathered back into every rank's parameters.
- stage 2: as stage 1, but each unit's full gradient is freed as soon as backward has
  finished it and it is reduce-scattered: only the own chunk of the gradient stays.
- stage 3: only the own chunk of the parameters stays; a unit is all-gathered for its
  forward and again for its backward, and freed after each.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from ..allreduce.algorithms import chunk_bounds
from ..parallel.allreduce import ring_all_gather, ring_allreduce, ring_reduce_scatter

__all__ = ["STAGES", "ZeroRank", "mlp", "own_chunk", "padded_numel", "storage_bytes"]

STAGES = (0, 1, 2, 3)


def mlp(widths: tuple[int, ...], seed: int = 0) -> nn.Sequential:
    """Linear layers of the given widths with ReLUs between, the same weights for a seed."""
    torch.manual_seed(seed)
    layers = []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        layers += [nn.Linear(a, b)] + ([nn.ReLU()] if i < len(widths) - 2 else [])
    return nn.Sequential(*layers)


def own_chunk(flat: torch.Tensor) -> torch.Tensor:
    """This rank's chunk of a buffer whose length is a multiple of the world size (a view)."""
    start, stop = chunk_bounds(flat.numel(), dist.get_world_size())[dist.get_rank()]
    return flat[start:stop]


def padded_numel(numel: int, world: int) -> int:
    """The smallest multiple of `world` that holds `numel` values: N equal chunks."""
    return -(-numel // world) * world


class _Unit:
    """One Linear layer's place in its flat buffer."""

    def __init__(self, layer: nn.Linear, world: int):
        self.weight_shape = tuple(layer.weight.shape)
        self.w = layer.weight.numel()
        self.numel = self.w + layer.bias.numel()
        self.padded = padded_numel(self.numel, world)
        self.world = world

    def flatten(self, layer: nn.Linear) -> torch.Tensor:
        flat = torch.zeros(self.padded)  # cpu
        flat[: self.w].copy_(layer.weight.detach().reshape(-1))
        flat[self.w : self.numel].copy_(layer.bias.detach())
        return flat

    def split(self, flat: torch.Tensor):
        return flat[: self.w].view(self.weight_shape), flat[self.w : self.numel]


class _GatheredLinear(torch.autograd.Function):
    """ZeRO-3's layer: gather the weights, use them, drop them; again in backward."""

    @staticmethod
    def forward(ctx, x, shard, unit, zero):
        weight, bias = unit.split(zero.gather(shard, unit))
        ctx.save_for_backward(x, shard)  # the chunk, not the gathered weights
        ctx.unit, ctx.zero = unit, zero
        return torch.addmm(bias, x, weight.t())

    @staticmethod
    def backward(ctx, grad_out):
        x, shard = ctx.saved_tensors
        unit, zero = ctx.unit, ctx.zero
        weight, _ = unit.split(zero.gather(shard, unit))
        grad_x = grad_out.mm(weight)
        grad = torch.zeros(unit.padded)  # cpu
        grad[: unit.w].view(unit.weight_shape).copy_(grad_out.t().mm(x))
        grad[unit.w : unit.numel].copy_(grad_out.sum(0))
        ring_reduce_scatter(grad)
        return grad_x, own_chunk(grad).div(unit.world), None, None


class ZeroRank:
    """One rank's half of data-parallel training with Adam at a ZeRO `stage` (0 = DDP)."""

    def __init__(self, model: nn.Sequential, stage: int, world: int, lr: float):
        if stage not in STAGES:
            raise ValueError(f"stage must be one of {STAGES}, got {stage!r}.")
        self.model, self.stage, self.world = model, stage, world
        self.layers = [m for m in model if isinstance(m, nn.Linear)]
        self.units = [_Unit(layer, world) for layer in self.layers]
        flats = [u.flatten(layer) for u, layer in zip(self.units, self.layers, strict=True)]
        self.grads = []
        if stage == 3:
            self.flats = []
            self.shards = [nn.Parameter(own_chunk(f).clone()) for f in flats]
            for layer in self.layers:  # the full weights are gone: only the chunks remain
                layer.weight = layer.bias = nn.Parameter(torch.empty(0))  # cpu
            owned = self.shards
        else:
            self.flats = flats
            for unit, layer, flat in zip(self.units, self.layers, flats, strict=True):
                weight, bias = unit.split(flat)  # the layer's parameters become views
                layer.weight, layer.bias = nn.Parameter(weight), nn.Parameter(bias)
            owned = [nn.Parameter(own_chunk(f)) for f in flats] if stage else model.parameters()
            if stage < 2:
                self._grads_as_views_of_flat_buffers()
            else:
                self._reduce_scatter_each_unit_when_its_gradient_is_done()
            if stage:
                for param, grad in zip(owned, self._owned_grads(), strict=True):
                    param.grad = grad
        self.owned = list(owned)
        self.optimizer = torch.optim.Adam(self.owned, lr=lr)

    def _grads_as_views_of_flat_buffers(self) -> None:
        """Backward adds into persistent flat gradient buffers, as DDP's buckets do."""
        for unit, layer in zip(self.units, self.layers, strict=True):
            grad = torch.zeros(unit.padded)  # cpu
            layer.weight.grad, layer.bias.grad = unit.split(grad)
            self.grads.append(grad)

    def _owned_grads(self) -> list[torch.Tensor]:
        return self.grads if self.stage == 2 else [own_chunk(g) for g in self.grads]

    def _reduce_scatter_each_unit_when_its_gradient_is_done(self) -> None:
        self.grads = [torch.zeros(u.padded // self.world) for u in self.units]  # cpu
        for i, layer in enumerate(self.layers):
            pending = set()

            def done(param, i=i, layer=layer, pending=pending):
                pending.add(id(param))
                if len(pending) == 2:
                    pending.clear()
                    self._scatter_unit(i, layer)

            layer.weight.register_post_accumulate_grad_hook(done)
            layer.bias.register_post_accumulate_grad_hook(done)

    def _scatter_unit(self, i: int, layer: nn.Linear) -> None:
        unit = self.units[i]
        grad = torch.zeros(unit.padded)  # cpu
        grad[: unit.w].copy_(layer.weight.grad.reshape(-1))
        grad[unit.w : unit.numel].copy_(layer.bias.grad)
        layer.weight.grad = layer.bias.grad = None  # the full gradient is gone from here on
        ring_reduce_scatter(grad)
        self.grads[i].copy_(own_chunk(grad).div_(self.world))

    def gather(self, shard: torch.Tensor, unit: _Unit) -> torch.Tensor:
        flat = torch.empty(unit.padded)  # cpu
        own_chunk(flat).copy_(shard.detach())
        return ring_all_gather(flat)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stage < 3:
            return self.model(x)
        for i, (unit, shard) in enumerate(zip(self.units, self.shards, strict=True)):
            x = _GatheredLinear.apply(x, shard, unit, self)
            if i < len(self.units) - 1:
                x = F.relu(x)
        return x

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        """One training step on this rank's part of the batch; the loss it saw."""
        for grad in self.grads:
            grad.zero_()
        if self.stage == 3:
            for shard in self.shards:
                shard.grad = None
        loss = F.cross_entropy(self.forward(x), y)
        loss.backward()
        if self.stage == 0:
            for grad in self.grads:
                ring_allreduce(grad).div_(self.world)
        elif self.stage == 1:
            for grad in self.grads:
                ring_reduce_scatter(grad)
                own_chunk(grad).div_(self.world)
        self.optimizer.step()
        if self.stage in (1, 2):
            for flat in self.flats:
                ring_all_gather(flat)
        return float(loss.detach())

    def full_parameters(self) -> torch.Tensor:
        """Every parameter, flat and unpadded, in layer order (ZeRO-3 gathers them first)."""
        if self.stage == 3:
            flats = [self.gather(s, u) for s, u in zip(self.shards, self.units, strict=True)]
        else:
            flats = self.flats
        return torch.cat([f[: u.numel] for f, u in zip(flats, self.units, strict=True)])

    def held_bytes(self) -> dict:
        """Bytes this rank keeps between steps: parameters, gradients, Adam's two moments."""
        params = self.shards if self.stage == 3 else self.flats
        if self.stage == 3:
            grads = [s.grad for s in self.shards if s.grad is not None]
        else:
            grads = self.grads
        moments = [
            t for state in self.optimizer.state.values() for k, t in state.items() if k != "step"
        ]
        return {
            "params": storage_bytes(params),
            "grads": storage_bytes(grads),
            "optimizer": storage_bytes(moments),
        }

    def parameter_count(self) -> int:
        return sum(u.numel for u in self.units)

    def largest_layer(self) -> int:
        """The largest layer's weights and bias, padded: what ZeRO-3 gathers at once, and
        what one layer's full gradient holds."""
        return max(u.padded for u in self.units)

    def stepped_bytes(self) -> list[int]:
        """The bytes of each tensor Adam steps, in its order (`formulas.adam_temporaries`)."""
        return [p.numel() * p.element_size() for p in self.owned]

    def held_tensors(self) -> list[torch.Tensor]:
        """The parameters' storages: autograd saving them for backward adds no bytes."""
        return list(self.shards if self.stage == 3 else self.flats)


def storage_bytes(tensors) -> int:
    """Bytes of the distinct storages behind `tensors` (views of one buffer count once)."""
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    return sum(storages.values())
