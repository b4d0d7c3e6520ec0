"""Notebook 08's ZeRO ranks: the stages of `parallel.zero`, and what each keeps.

The stages themselves (DDP, ZeRO-1, 2 and 3) are `parallel.zero`'s, written once; here
they are built for a stage number and measured from outside: the bytes a rank keeps
between steps, the tensors its optimizer steps, its largest layer. Notebook 08 runs them
on the CPU (gloo), where it measures each rank's bytes with the CPU allocator.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from ..parallel.zero import DDP, Zero1, Zero2
from ..parallel.zero3 import Zero3

STAGES = (0, 1, 2, 3)
_BY_STAGE = dict(zip(STAGES, (DDP, Zero1, Zero2, Zero3), strict=True))


def stage_name(stage: int) -> str:
    """How the notebook's charts and verdicts name a stage: DDP for 0, else ZeRO-s."""
    return "DDP" if stage == 0 else f"ZeRO-{stage}"


def mlp(widths: tuple[int, ...], seed: int = 0) -> nn.Sequential:
    """Linear layers of the given widths with ReLUs between, the same weights for a seed."""
    torch.manual_seed(seed)
    layers = []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        layers += [nn.Linear(a, b)] + ([nn.ReLU()] if i < len(widths) - 2 else [])
    return nn.Sequential(*layers)


def rank_share(global_batch: int) -> slice:
    """This rank's samples of a global batch: an equal share, in rank order."""
    per_rank = global_batch // dist.get_world_size()
    return slice(dist.get_rank() * per_rank, (dist.get_rank() + 1) * per_rank)


def zero_rank(model: nn.Module, stage: int, world: int, lr: float) -> DDP:
    """This rank's half of data-parallel training with Adam at a ZeRO `stage` (0 = DDP)."""
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES}, got {stage!r}.")
    return _BY_STAGE[stage](model, world, lr)


def kept_tensors(zero: DDP) -> tuple[list, list]:
    """The parameters this rank's model and optimizer reference, and their gradients: read
    from outside the stage, so a gradient it forgot to free is counted too."""
    params = [*zero.model.parameters(), *zero.owned]
    return params, [p.grad for p in params if p.grad is not None]


def held_bytes(zero: DDP) -> dict:
    """Bytes this rank keeps between steps: parameters, gradients, the optimizer's state."""
    params, grads = kept_tensors(zero)
    state = [t for s in zero.optimizer.state.values() for k, t in s.items() if k != "step"]
    return {
        "params": storage_bytes(params),
        "grads": storage_bytes(grads),
        "optimizer": storage_bytes(state),
    }


def largest_layer(zero: DDP) -> int:
    """The largest layer's parameters, padded: what ZeRO-3 gathers at once, and what one
    layer's full gradient holds."""
    return max(u.padded for u in zero.units)


def stepped_bytes(zero: DDP) -> list[int]:
    """The bytes of each tensor the optimizer steps, in its order (`formulas.adam_temporaries`)."""
    return [p.numel() * p.element_size() for p in zero.owned]


def storage_bytes(tensors) -> int:
    """Bytes of the distinct storages behind `tensors` (views of one buffer count once)."""
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    return sum(storages.values())
