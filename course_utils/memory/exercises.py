"""Checker for notebook 08: shard the optimizer state yourself (ZeRO-1 for one flat vector).

The learner writes `step(params, grad, state, lr)`, run on every rank: `params` is the
full flat parameter vector (the same on every rank), `grad` this rank's own gradient,
`state` a dict kept between calls for the optimizer's state, and the optimizer is SGD
with momentum `MOMENTUM` on the gradient averaged over ranks. It must return the full
updated vector on every rank while keeping momentum only for its own 1/N shard. The
checker runs it on 3 ranks for sizes that divide evenly and that do not, then on 2 ranks
(so a world size typed in fails), and names the classic mistakes: every rank steps every
shard, the updated shards are never gathered, the gradients are averaged twice, uneven
shards when the size is not divisible by N, and state kept outside `state` (found by
stepping two optimizers in turn on one rank, their `state` copied between steps as a
checkpoint's save and load would).
"""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist

from ..core.checks import NOT_SOLVED, attempt, verdict
from ..core.errors import LaunchError
from ..ranks.bootstrap import device
from ..ranks.launch import launch

MOMENTUM = 0.9
CASES = ((3, 12), (3, 10), (2, 8))  # (ranks, values): divisible by 3, not, and another N
STEPS = 3
LR = 0.1
TWINS = (1, 2)  # the seeds of two optimizers stepped in turn on one rank


def _grad(rank: int, step: int, numel: int, seed: int = 0) -> torch.Tensor:
    seeded = torch.Generator().manual_seed(100_000 * seed + 1000 * rank + 10 * step + numel)
    return torch.randn(numel, generator=seeded)  # cpu: seeded; a rank moves it to its device


def _start(numel: int) -> torch.Tensor:
    return torch.linspace(-1, 1, numel)  # cpu: a rank moves it to its device


def expected(numel: int, world: int = 3, extra_division: int = 1, seed: int = 0) -> torch.Tensor:
    """Momentum SGD on the mean gradient, on one process: what every rank must end with."""
    params, momentum = _start(numel), torch.zeros(numel)  # cpu: the serial twin, in the parent
    for step in range(STEPS):
        mean = sum(_grad(r, step, numel, seed) for r in range(world)) / world / extra_division
        momentum = MOMENTUM * momentum + mean
        params = params - LR * momentum
    return params


def _on_rank(fn, numel: int) -> dict:
    result = _steps(fn, numel)
    if isinstance(result["out"], torch.Tensor):
        result["twins"] = _twins_in_turn(fn, numel)
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


def _twins_in_turn(fn, numel: int) -> list:
    """Two optimizers on this rank, each with its own `state`, stepped in turn and their
    `state` copied after every step: momentum kept anywhere else mixes or gets lost."""
    rank = dist.get_rank()
    twins = {seed: (_start(numel).to(device()), {}) for seed in TWINS}
    for step in range(STEPS):
        for seed, (params, state) in twins.items():
            out = fn(params.clone(), _grad(rank, step, numel, seed).to(device()), state, LR)
            out = out.detach().reshape(-1).clone() if isinstance(out, torch.Tensor) else params
            twins[seed] = (out, copy.deepcopy(state))
    return [params for params, _ in twins.values()]


def check_shard_optimizer(fn, timeout: float = 20.0) -> bool:
    """✓ when `fn` matches momentum SGD on the mean gradient and keeps only its shard's state,
    in the `state` it is given, on 3 ranks and on 2."""
    if fn is None or not callable(fn):
        return verdict(False, NOT_SOLVED)
    passed = []
    for world, numel in CASES:
        try:
            runs = launch(_on_rank, world, backend="gloo", args=(fn, numel), timeout=timeout)
        except LaunchError as exc:
            if exc.exc_type == "NotImplementedError":
                return verdict(False, NOT_SOLVED)
            problem = _typed_in(passed, world)
            if problem is None and numel % world:
                problem = _uneven(numel, world)
            failed = f"your step failed on rank {exc.rank}: {exc.exc_type} (see above)"
            return verdict(False, problem or failed)
        problem = _first_problem(runs, numel)
        if problem:
            typed_in = _typed_in(passed, world) if problem != NOT_SOLVED else None
            return verdict(False, typed_in or problem)
        passed.append(world)
    return verdict(
        True,
        "your step equals momentum SGD on the mean gradient and keeps only 1/N of the state",
    )


def _typed_in(passed: list[int], world: int) -> str | None:
    if not passed or world in passed:
        return None
    return (
        f"right on {passed[-1]} ranks but not on {world}: take N from dist.get_world_size() "
        "and your rank from dist.get_rank(), not numbers typed in"
    )


def _first_problem(runs: list[dict], numel: int) -> str | None:
    world = len(runs)
    if any(r["out"] == NOT_SOLVED for r in runs if isinstance(r["out"], str)):
        return NOT_SOLVED
    if any(isinstance(r["out"], str) for r in runs):
        return f"your step must return the updated parameter tensor, not {runs[0]['out']}"
    if any(r["out"].shape != (numel,) for r in runs):
        return f"your step must return all {numel} parameters, on every rank"
    want = expected(numel, world)
    right = [torch.allclose(r["out"], want, atol=1e-5) for r in runs]
    shard = -(-numel // world)
    if all(right):
        if any(r["held"] >= numel for r in runs):
            return (
                "every rank steps every shard: the results are right, but each rank keeps "
                "momentum for all the parameters; keep (and update) only your 1/N shard"
            )
        twins = [expected(numel, world, seed=seed) for seed in TWINS]
        if not all(_close(r["twins"], twins) for r in runs):
            return _OUTSIDE
        return None
    if all(
        torch.allclose(r["out"], expected(numel, world, extra_division=world), atol=1e-5)
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
    if numel % world:
        return _uneven(numel, world)
    return (
        f"the parameters differ from momentum SGD on the mean gradient ({numel} values, "
        f"{world} ranks)"
    )


def _close(got: list, want: list) -> bool:
    return all(
        a.shape == b.shape and torch.allclose(a, b, atol=1e-5)
        for a, b in zip(got, want, strict=True)
    )


def _uneven(numel: int, world: int) -> str:
    return (
        f"the shards are uneven when the size is not divisible by N: with {numel} values on "
        f"{world} ranks, pad the vector to a multiple of N (shards of ceil({numel}/{world}) = "
        f"{-(-numel // world)}), or give the last rank the remainder, so that no value is left "
        "out or counted twice"
    )


_OUTSIDE = (
    "optimizer state kept outside `state`: two optimizers stepped in turn on one rank, each "
    "with its own `state` (copied between steps, as saving and loading a checkpoint does), "
    "disturbed each other's momentum or lost it; keep the momentum in the `state` dict your "
    "step is given, not in a global, a default argument or an attribute"
)
