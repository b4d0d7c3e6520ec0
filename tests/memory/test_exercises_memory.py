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


def _zero1(params, grad, lr, world, momentum_of):
    """The reference ZeRO-1 step, with N and the place the momentum is kept given."""
    rank, numel = dist.get_rank(), params.numel()
    shard = -(-numel // world)
    padded = torch.zeros(shard * world)
    padded[:numel] = grad
    mine = torch.empty(shard)
    dist.reduce_scatter_tensor(mine, padded)
    momentum = momentum_of(shard)
    momentum.mul_(MOMENTUM).add_(mine / world)
    padded[:numel] = params
    gathered = torch.empty(shard * world)
    dist.all_gather_into_tensor(gathered, padded[rank * shard : (rank + 1) * shard] - lr * momentum)
    return gathered[:numel]


_KEPT = {}


def momentum_in_a_global(params, grad, state, lr):
    world = dist.get_world_size()
    return _zero1(params, grad, lr, world, lambda n: _KEPT.setdefault("m", torch.zeros(n)))


class MomentumOnTheStep:
    """The momentum kept as an attribute of the step (one per size), `state` left empty."""

    def __init__(self):
        self.momentum = {}

    def __call__(self, params, grad, state, lr):
        key, world = params.numel(), dist.get_world_size()
        return _zero1(
            params, grad, lr, world, lambda n: self.momentum.setdefault(key, torch.zeros(n))
        )


def test_the_reference_step_with_its_state_in_state_passes(capsys):
    def in_state(params, grad, state, lr):
        world = dist.get_world_size()
        return _zero1(params, grad, lr, world, lambda n: state.setdefault("m", torch.zeros(n)))

    assert check_shard_optimizer(in_state)


@pytest.mark.parametrize("learner", [momentum_in_a_global, MomentumOnTheStep()])
def test_state_kept_outside_state_is_named(capsys, learner):
    assert not check_shard_optimizer(learner)
    line = _line(capsys)
    assert line.startswith("✗ optimizer state kept outside `state`: two optimizers"), line


def three_ranks_typed_in(params, grad, state, lr):
    """N = 3 written in: right on 3 ranks, a crash on 2."""
    return _zero1(params, grad, lr, 3, lambda n: state.setdefault("m", torch.zeros(n)))


def test_a_world_size_typed_in_fails_on_2_ranks(capsys):
    assert not check_shard_optimizer(three_ranks_typed_in)
    assert _line(capsys) == (
        "✗ right on 3 ranks but not on 2: take N from dist.get_world_size() and your rank "
        "from dist.get_rank(), not numbers typed in"
    )
