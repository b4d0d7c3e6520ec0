"""Checker for notebook 00's exercise: the learner's first collective."""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..core.checks import NOT_SOLVED, attempt, verdict
from ..core.errors import LaunchError
from .launch import launch

CLAIM = "largest_square returns the largest (rank + 1)^2 on every rank"
WORLD_SIZES = (3, 4)


def largest(world_size: int) -> int:
    """What every rank must return: the largest (rank + 1)^2 over the ranks."""
    return max((rank + 1) ** 2 for rank in range(world_size))


def answer_values() -> dict[str, list]:
    """The checker's cases and answers (`course.revealed`: none may appear above it)."""
    return {"largest_square": [((n,), largest(n)) for n in WORLD_SIZES]}


def _as_number(fn):
    """Inside a rank: the learner's answer as a plain number, or NOT_SOLVED for the stub."""
    dist.barrier()  # every rank connected before a stub returns and its rank exits
    value = attempt(fn)
    return value.item() if isinstance(value, torch.Tensor) else value


def check_largest_square(fn, world_sizes=WORLD_SIZES, timeout: float = 20) -> bool:
    """Run the learner's function on each number of ranks in turn (an answer typed in for
    one of them fails at the other); explain the usual mistakes."""
    sizes = (world_sizes,) if isinstance(world_sizes, int) else tuple(world_sizes)
    for world_size in sizes:
        problem = _problem(fn, world_size, timeout)
        if problem:
            return verdict(False, problem)
    return verdict(True, CLAIM)


def _problem(fn, world_size: int, timeout: float) -> str | None:
    try:
        results = launch(_as_number, world_size, args=(fn,), timeout=timeout, backend="gloo")
    except LaunchError as exc:
        return f"{CLAIM}: a rank failed ({exc.exc_type or 'it died'}), see above"
    if NOT_SOLVED in results:
        return NOT_SOLVED
    if results == [largest(world_size)] * world_size:
        return None
    where = f" (on {world_size} ranks)"
    if results == [(r + 1) ** 2 for r in range(world_size)]:
        return f"{CLAIM}: each rank kept its own value; call dist.all_reduce{where}"
    if results == [sum((r + 1) ** 2 for r in range(world_size))] * world_size:
        return f"{CLAIM}: that is the sum; pass op=dist.ReduceOp.MAX{where}"
    return f"{CLAIM}: the ranks returned {results}{where}"
