"""ZeRO (Rajbhandari et al. 2020): data parallel whose ranks stop keeping copies of it all
(notebook 08), stage by stage, each beside the DDP it slims down.

Every module that holds parameters of its own (a Linear, an Embedding, a LayerNorm) is one
*unit*: its parameters live in one flat buffer, padded to a multiple of the N ranks and cut
into N equal chunks, and rank r owns chunk r. A parameter two modules share (tied weights)
belongs to the first. The optimizer is any `torch.optim` class (Adam by default); it steps
what a rank owns, so its state is as large as that. The collectives are notebook 05's ring
and its two halves (`allreduce`).

- `DDP`: every rank holds everything; each unit's gradient is all-reduced.
- `Zero1`: the optimizer steps the own chunk only: the gradient is reduce-scattered, the
  updated chunk all-gathered back into every rank's parameters.
- `Zero2`: as ZeRO-1, but each unit's whole gradient is freed as soon as backward has
  finished it and it is reduce-scattered: only the own chunk of the gradient stays.
- `Zero3` (`zero3`): only the own chunk of the parameters stays; a layer is all-gathered
  for its forward and again for its backward, and dropped after each.

`step(x, y)` is one training step (cross-entropy) on this rank's part of the batch.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from .allreduce import ring_all_gather, ring_allreduce, ring_reduce_scatter


def padded_numel(numel: int, world: int) -> int:
    """The smallest multiple of `world` that holds `numel` values: N equal chunks."""
    return -(-numel // world) * world


def own_chunk(flat: torch.Tensor) -> torch.Tensor:
    """This rank's chunk of a buffer whose length is a multiple of the world size (a view)."""
    size = flat.numel() // dist.get_world_size()
    return flat[dist.get_rank() * size : (dist.get_rank() + 1) * size]


class Unit:
    """One module's own parameters, and their place in a flat buffer of N equal chunks."""

    def __init__(self, module: nn.Module, names: list[str], world: int):
        self.module, self.names = module, names
        params = [getattr(module, name) for name in names]
        self.shapes = [p.shape for p in params]
        self.sizes = [p.numel() for p in params]
        self.numel = sum(self.sizes)
        self.padded = padded_numel(self.numel, world)
        self.device = params[0].device

    def zeros(self, numel: int | None = None) -> torch.Tensor:
        return torch.zeros(self.padded if numel is None else numel, device=self.device)

    def flatten(self, tensors: list[torch.Tensor]) -> torch.Tensor:
        """`tensors` (the parameters, or their gradients) in one padded flat buffer."""
        flat = self.zeros()
        for view, t in zip(self.views(flat), tensors, strict=True):
            view.copy_(t.detach())  # piece by piece: no second whole-size copy
        return flat

    def views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """The parameters' shapes, as views of `flat`."""
        parts = flat[: self.numel].split(self.sizes)
        return [part.view(shape) for part, shape in zip(parts, self.shapes, strict=True)]

    def parameters(self) -> list[nn.Parameter]:
        return [getattr(self.module, name) for name in self.names]


def units_of(model: nn.Module, world: int) -> list[Unit]:
    seen, units = set(), []
    for module in model.modules():
        names = [n for n, p in module.named_parameters(recurse=False) if p not in seen]
        seen |= {getattr(module, n) for n in names}
        if names:
            units.append(Unit(module, names, world))
    return units


class DDP:
    """Stage 0: each unit's gradient lands in a flat buffer (as DDP's buckets) and is
    all-reduced; every rank keeps all parameters, gradients and optimizer state."""

    stage = 0

    def __init__(self, model: nn.Module, world: int, lr: float, optimizer=torch.optim.Adam):
        self.model, self.world = model, world
        self.units = units_of(model, world)
        self.flats = [u.flatten(u.parameters()) for u in self.units]
        self._parameters_as_views_of(self.flats)
        self.grads = self._gradient_buffers()
        self.owned = self._owned()
        self.optimizer = optimizer(self.owned, lr=lr)

    def _parameters_as_views_of(self, flats: list[torch.Tensor]) -> None:
        """Each parameter becomes a view of its unit's flat buffer (tied uses follow it)."""
        new = {}
        for unit, flat in zip(self.units, flats, strict=True):
            views = unit.views(flat)
            for name, old, view in zip(unit.names, unit.parameters(), views, strict=True):
                new[old] = nn.Parameter(view)
                setattr(unit.module, name, new[old])
        for module in self.model.modules():
            for name, p in module.named_parameters(recurse=False):
                if p in new:
                    setattr(module, name, new[p])

    def _gradient_buffers(self) -> list[torch.Tensor]:
        """Backward adds into persistent flat gradient buffers, as DDP's buckets do."""
        grads = [u.zeros() for u in self.units]
        for unit, grad in zip(self.units, grads, strict=True):
            for p, view in zip(unit.parameters(), unit.views(grad), strict=True):
                p.grad = view
        return grads

    def _owned(self) -> list[torch.Tensor]:
        return list(self.model.parameters())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        """One training step on this rank's part of the batch; the loss it saw."""
        for grad in self.grads:
            grad.zero_()
        loss = F.cross_entropy(self.forward(x), y)
        loss.backward()
        self.after_backward()
        self.optimizer.step()
        self.after_step()
        return float(loss.detach())

    def after_backward(self) -> None:
        for grad in self.grads:
            ring_allreduce(grad).div_(self.world)

    def after_step(self) -> None:
        pass

    def full_parameters(self) -> torch.Tensor:
        """Every parameter, flat and unpadded, unit by unit."""
        return torch.cat([f[: u.numel] for f, u in zip(self.flats, self.units, strict=True)])


class Zero1(DDP):
    """Stage 1: the gradient is reduce-scattered, the optimizer steps the own chunk (its
    state is 1/N), and the updated chunks are all-gathered back into the parameters."""

    stage = 1

    def _owned(self) -> list[torch.Tensor]:
        owned = [nn.Parameter(own_chunk(flat)) for flat in self.flats]  # views: steps write there
        for param, grad in zip(owned, self.grads, strict=True):
            param.grad = own_chunk(grad)
        return owned

    def after_backward(self) -> None:
        for grad in self.grads:
            ring_reduce_scatter(grad)
            own_chunk(grad).div_(self.world)

    def after_step(self) -> None:
        for flat in self.flats:
            ring_all_gather(flat)


class Zero2(Zero1):
    """Stage 2: as soon as backward has finished a unit's gradient it is reduce-scattered
    and the whole of it freed; only the own chunk stays, in a buffer 1/N the size."""

    stage = 2

    def _gradient_buffers(self) -> list[torch.Tensor]:
        for i, unit in enumerate(self.units):
            pending = set()

            def done(param, i=i, pending=pending, unit=unit):
                pending.add(param)
                if len(pending) == len(unit.names):
                    pending.clear()
                    self._scatter(i)

            for p in unit.parameters():
                p.register_post_accumulate_grad_hook(done)
        return [u.zeros(u.padded // self.world) for u in self.units]

    def _owned(self) -> list[torch.Tensor]:
        owned = [nn.Parameter(own_chunk(flat)) for flat in self.flats]
        for param, grad in zip(owned, self.grads, strict=True):
            param.grad = grad
        return owned

    def _scatter(self, i: int) -> None:
        unit = self.units[i]
        params = unit.parameters()
        grad = unit.flatten([p.grad for p in params])
        for p in params:
            p.grad = None  # the whole gradient is gone from here on
        ring_reduce_scatter(grad)
        self.grads[i].copy_(own_chunk(grad).div_(self.world))

    def after_backward(self) -> None:
        pass
