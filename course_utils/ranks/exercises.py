"""Checker for notebook 00's exercise: the learner's first collective."""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..core.checks import NOT_SOLVED, attempt, verdict
from ..core.errors import LaunchError
from .launch import launch

CLAIM = "largest_square returns the largest (rank + 1)^2 on every rank"


def _as_number(fn):
    """Inside a rank: the learner's answer as a plain number, or NOT_SOLVED for the stub."""
    dist.barrier()  # every rank connected before a stub returns and its rank exits
    value = attempt(fn)
    return value.item() if isinstance(value, torch.Tensor) else value


def check_largest_square(fn, world_size: int = 4, timeout: float = 20) -> bool:
    """Run the learner's function on `world_size` ranks; explain the usual mistakes."""
    try:
        results = launch(_as_number, world_size, args=(fn,), timeout=timeout, backend="gloo")
    except LaunchError as exc:
        return verdict(False, f"{CLAIM}: a rank failed ({exc.exc_type or 'it died'}), see above")
    if NOT_SOLVED in results:
        return verdict(False, NOT_SOLVED)
    if results == [world_size**2] * world_size:
        return verdict(True, CLAIM)
    if results == [(r + 1) ** 2 for r in range(world_size)]:
        return verdict(False, f"{CLAIM}: each rank kept its own value; call dist.all_reduce")
    if results == [sum((r + 1) ** 2 for r in range(world_size))] * world_size:
        return verdict(False, f"{CLAIM}: that is the sum; pass op=dist.ReduceOp.MAX")
    return verdict(False, f"{CLAIM}: the ranks returned {results}")
