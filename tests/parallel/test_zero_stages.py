"""ZeRO's stages from parallel/ wrap any optimizer over a model a learner might bring (a
tied weight, AdamW) and take the steps one process takes with the whole batch."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from course_utils.parallel.zero import DDP, Zero1, Zero2, units_of
from course_utils.parallel.zero3 import Zero3
from course_utils.ranks.launch import launch

STEPS, BATCH = 3, 8


class _Tied(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.inp, self.mid, self.out = nn.Linear(6, 7), nn.Linear(7, 7), nn.Linear(7, 7)
        self.out.weight = self.mid.weight  # units of 49, 56 and 7 values

    def forward(self, x):
        return self.out(torch.relu(self.mid(torch.relu(self.inp(x)))))


def _batches():
    gen = torch.Generator().manual_seed(1)
    return torch.randn(STEPS, BATCH, 6, generator=gen), torch.randint(0, 7, (STEPS, BATCH),
                                                                      generator=gen)  # fmt: skip


def _one_process(optimizer) -> dict:
    model = _Tied()
    opt = optimizer(model.parameters(), lr=0.01)
    for x, y in zip(*_batches(), strict=True):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return model.state_dict()


def _on_rank(stage, optimizer) -> dict:
    rank, world = dist.get_rank(), dist.get_world_size()
    zero = stage(_Tied(), world, 0.01, optimizer)
    for x, y in zip(*_batches(), strict=True):
        zero.step(x.chunk(world)[rank], y.chunk(world)[rank])
    tied = zero.model.out.weight is zero.model.mid.weight
    return zero.model.state_dict(), tied


@pytest.mark.parametrize("optimizer", [torch.optim.AdamW, torch.optim.SGD])  # SGD: scale too
@pytest.mark.parametrize("stage", [DDP, Zero1, Zero2])
def test_each_stage_on_two_ranks_equals_one_process_with_a_tied_weight(stage, optimizer):
    one = _one_process(optimizer)
    for state, tied in launch(_on_rank, 2, args=(stage, optimizer)):
        assert tied
        for name, value in one.items():
            assert torch.allclose(state[name], value, atol=1e-6), name


def test_a_tied_weight_belongs_to_one_unit():
    units = units_of(_Tied(), world=2)
    assert [u.names for u in units] == [["weight", "bias"], ["weight", "bias"], ["bias"]]
    assert [u.padded for u in units] == [50, 56, 8]  # each padded to N = 2 equal chunks


def test_zero3_says_which_models_it_takes():
    with pytest.raises(ValueError, match="Linear layers with ReLUs between"):
        Zero3(nn.Sequential(nn.Linear(2, 2), nn.LayerNorm(2)), 1, 0.01)
