"""Notebook 08's checker accepts the reference solution and names each classic mistake."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from reference import load_solution, needs_solutions

from course_utils.memory.exercises import MOMENTUM, check_shard_optimizer


def _solution():
    return load_solution("08_memory.py").shard_optimizer_step


def _line(capsys) -> str:
    return capsys.readouterr().out.strip().splitlines()[-1]


def test_reference_solution_passes(capsys):
    assert check_shard_optimizer(_solution())
    assert _line(capsys).startswith("✓ your step equals momentum SGD")


def unsolved(params, grad, state, lr):
    raise NotImplementedError


def returns_nothing(params, grad, state, lr):
    pass


@pytest.mark.parametrize("learner", [unsolved, returns_nothing, None])
def test_unsolved_says_so(capsys, learner):
    assert not check_shard_optimizer(learner)
    assert _line(capsys) == "✗ not solved yet"


def every_rank_steps_every_shard(params, grad, state, lr):
    mean = grad.clone()
    dist.all_reduce(mean)
    momentum = state.setdefault("momentum", torch.zeros_like(params))
    momentum.mul_(MOMENTUM).add_(mean / dist.get_world_size())
    return params - lr * momentum


def averaged_twice(params, grad, state, lr):
    return load_solution("08_memory.py").shard_optimizer_step(
        params, grad / dist.get_world_size(), state, lr
    )


def never_gathered(params, grad, state, lr):
    rank, world = dist.get_rank(), dist.get_world_size()
    numel = params.numel()
    shard = -(-numel // world)
    padded = torch.zeros(shard * world)
    padded[:numel] = grad
    mine = torch.empty(shard)
    dist.reduce_scatter_tensor(mine, padded)
    momentum = state.setdefault("momentum", torch.zeros(shard))
    momentum.mul_(MOMENTUM).add_(mine / world)
    out = params.clone()
    stop = min(numel, (rank + 1) * shard)
    out[rank * shard : stop] -= lr * momentum[: stop - rank * shard]
    return out


def floor_division_shards(params, grad, state, lr):
    rank, world = dist.get_rank(), dist.get_world_size()
    shard = params.numel() // world
    mine = torch.empty(shard)
    dist.reduce_scatter_tensor(mine, grad[: shard * world].contiguous())
    momentum = state.setdefault("momentum", torch.zeros(shard))
    momentum.mul_(MOMENTUM).add_(mine / world)
    gathered = torch.empty(shard * world)
    dist.all_gather_into_tensor(gathered, params[rank * shard : (rank + 1) * shard] - lr * momentum)
    out = params.clone()
    out[: shard * world] = gathered
    return out


@pytest.mark.parametrize(
    "learner, named",
    [
        (every_rank_steps_every_shard, "every rank steps every shard"),
        pytest.param(averaged_twice, "averaged twice", marks=needs_solutions),
        (never_gathered, "never gathered"),
        (floor_division_shards, "uneven"),
    ],
)
def test_each_classic_mistake_is_named(capsys, learner, named):
    assert not check_shard_optimizer(learner)
    line = _line(capsys)
    assert line.startswith("✗") and named in line
