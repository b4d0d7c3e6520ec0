"""00's verdicts on the first collectives, fed what `launch` returns from notebook 00's rank
functions (they pass) and from the slips a learner makes: reduce instead of all_reduce, no
broadcast at all, gather instead of all_gather (each prints ✗)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from course_utils.ranks import collective_verdicts as verdicts
from course_utils.ranks.launch import launch

N = 4


def _sum_ranks(reduce_to_rank_0: bool = False) -> float:
    t = torch.tensor([float(dist.get_rank())])  # cpu: gloo
    if reduce_to_rank_0:
        dist.reduce(t, dst=0)
    else:
        dist.all_reduce(t)
    return t.item()


def _broadcast_from_0(forget: bool = False) -> torch.Tensor:
    t = torch.randn(3) if dist.get_rank() == 0 else torch.zeros(3)  # cpu: gloo
    if not forget:
        dist.broadcast(t, src=0)
    return t


def _gather_all(to_rank_0_only: bool = False) -> torch.Tensor:
    mine = torch.full((2,), float(dist.get_rank()))  # cpu: gloo
    everyone = [torch.zeros(2) for _ in range(dist.get_world_size())]  # cpu: gloo
    if to_rank_0_only:
        dist.gather(mine, everyone if dist.get_rank() == 0 else None, dst=0)
    else:
        dist.all_gather(everyone, mine)
    return torch.stack(everyone)


def test_all_reduce_leaves_the_sum_everywhere_and_reduce_does_not(capsys):
    assert verdicts.all_reduce_left_the_sum(launch(_sum_ranks, N, backend="gloo"))
    wrong = launch(_sum_ranks, N, backend="gloo", kwargs={"reduce_to_rank_0": True})
    assert not verdicts.all_reduce_left_the_sum(wrong)
    assert "✗ after all_reduce every rank holds the sum" in capsys.readouterr().out


def test_broadcast_leaves_one_tensor_and_forgetting_it_does_not(capsys):
    assert verdicts.broadcast_left_one_tensor(launch(_broadcast_from_0, N, backend="gloo"))
    wrong = launch(_broadcast_from_0, N, backend="gloo", kwargs={"forget": True})
    assert not verdicts.broadcast_left_one_tensor(wrong)
    assert "✗ after broadcast every rank holds rank 0's tensor" in capsys.readouterr().out


def test_all_gather_leaves_every_row_and_gather_to_rank_0_does_not(capsys):
    assert verdicts.all_gather_left_every_row(launch(_gather_all, N, backend="gloo"))
    wrong = launch(_gather_all, N, backend="gloo", kwargs={"to_rank_0_only": True})
    assert torch.equal(wrong[0], _rows()) and not torch.equal(wrong[1], _rows())
    assert not verdicts.all_gather_left_every_row(wrong)
    assert "✗ after all_gather every rank holds every rank's row" in capsys.readouterr().out


def _rows() -> torch.Tensor:
    return torch.arange(N, dtype=torch.float32).repeat_interleave(2).view(N, 2)  # cpu
