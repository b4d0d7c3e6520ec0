"""Checker for notebook 08: shard the optimizer state yourself (ZeRO-1 for one flat vector).

The learner writes `step(params, grad, state, lr)`, run on every rank: `params` is the
full flat parameter vector (the same on every rank), `grad` this rank's own gradient,
`state` a dict kept between calls for the optimizer's state, and the optimizer is SGD
with momentum `MOMENTUM` on the gradient averaged over ranks. It must return the full
updated vector on every rank while keeping momentum only for its own 1/N shard. The
checker runs it on 3 ranks for sizes that divide evenly and that do not, and names the
classic mistakes: every rank steps every shard, the updated shards are never gathered,
the gradients are averaged twice, uneven shards when the size is not divisible by N.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..core.checks import NOT_SOLVED, attempt, verdict
from ..core.errors import LaunchError
from ..ranks.bootstrap import device
from ..ranks.launch import launch

__all__ = ["MOMENTUM", "check_shard_optimizer"]

MOMENTUM = 0.9
WORLD_SIZE = 3
SIZES = (12, 10)  # divisible by 3, and not
STEPS = 3
LR = 0.1


def _grad(rank: int, step: int, numel: int) -> torch.Tensor:
    seeded = torch.Generator().manual_seed(1000 * rank + 10 * step + numel)
    return torch.randn(numel, generator=seeded)  # cpu: seeded; a rank moves it to its device


def _start(numel: int) -> torch.Tensor:
    return torch.linspace(-1, 1, numel)  # cpu: a rank moves it to its device


def expected(numel: int, world: int = WORLD_SIZE, extra_division: int = 1) -> torch.Tensor:
    """Momentum SGD on the mean gradient, on one process: what every rank must end with."""
    params, momentum = _start(numel), torch.zeros(numel)  # cpu: the serial twin, in the parent
    for step in range(STEPS):
        mean = sum(_grad(r, step, numel) for r in range(world)) / world / extra_division
        momentum = MOMENTUM * momentum + mean
        params = params - LR * momentum
    return params


def _on_rank(fn, numel: int) -> dict:
    result = _steps(fn, numel)
    dist.barrier()  # a stub never communicates: no rank may leave while peers still connect
    return result


def _steps(fn, numel: int) -> dict:
    rank = dist.get_rank()
    params, state = _start(numel).to(device()), {}
    for step in range(STEPS):
        out = attempt(fn, params.clone(), _grad(rank, step, numel).to(device()), state, LR)
        if not isinstance(out, torch.Tensor):
            return {"out": out if out == NOT_SOLVED else f"a {type(out).__name__}"}
        params = out.detach().reshape(-1).clone()
    held = sum(t.numel() for t in state.values() if isinstance(t, torch.Tensor))
    return {"out": params, "held": held}


def check_shard_optimizer(fn, timeout: float = 20.0) -> bool:
    """✓ when `fn` matches momentum SGD on the mean gradient and keeps only its shard's state."""
    if fn is None or not callable(fn):
        return verdict(False, NOT_SOLVED)
    for numel in SIZES:
        try:
            runs = launch(_on_rank, WORLD_SIZE, backend="gloo", args=(fn, numel), timeout=timeout)
        except LaunchError as exc:
            if exc.exc_type == "NotImplementedError":
                return verdict(False, NOT_SOLVED)
            if numel % WORLD_SIZE:
                return verdict(False, _UNEVEN)
            return verdict(
                False, f"your step failed on rank {exc.rank}: {exc.exc_type} (see above)"
            )
        problem = _first_problem(runs, numel)
        if problem:
            return verdict(False, problem)
    return verdict(
        True,
        "your step equals momentum SGD on the mean gradient and keeps only 1/N of the state",
    )


def _first_problem(runs: list[dict], numel: int) -> str | None:
    if any(r["out"] == NOT_SOLVED for r in runs if isinstance(r["out"], str)):
        return NOT_SOLVED
    if any(isinstance(r["out"], str) for r in runs):
        return f"your step must return the updated parameter tensor, not {runs[0]['out']}"
    if any(r["out"].shape != (numel,) for r in runs):
        return f"your step must return all {numel} parameters, on every rank"
    want = expected(numel)
    right = [torch.allclose(r["out"], want, atol=1e-5) for r in runs]
    shard = -(-numel // WORLD_SIZE)
    if all(right):
        if any(r["held"] >= numel for r in runs):
            return (
                "every rank steps every shard: the results are right, but each rank keeps "
                "momentum for all the parameters; keep (and update) only your 1/N shard"
            )
        return None
    if all(
        torch.allclose(r["out"], expected(numel, extra_division=WORLD_SIZE), atol=1e-5)
        for r in runs
    ):
        return (
            "the gradients are averaged twice: reduce-scatter (or all-reduce) with a sum and "
            "divide by N once, or use the average once"
        )
    own = [
        torch.allclose(
            r["out"][k * shard : (k + 1) * shard], want[k * shard : (k + 1) * shard], atol=1e-5
        )
        for k, r in enumerate(runs)
    ]
    if all(own):
        return (
            "the updated shards are never gathered: each rank updated its own shard but kept "
            "the old values of the others; all-gather the shards after the step"
        )
    if numel % WORLD_SIZE:
        return _UNEVEN
    return f"the parameters differ from momentum SGD on the mean gradient ({numel} values, 3 ranks)"


_UNEVEN = (
    "the shards are uneven when the size is not divisible by N: with 10 values on 3 ranks, "
    "pad the vector to a multiple of N (shards of ceil(10/3) = 4), or give the last rank "
    "the remainder, so that no value is left out or counted twice"
)
