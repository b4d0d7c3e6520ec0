"""The wire's all-reduce on a group, under a purely virtual clock: a ring starts when its
last member enters, so a rank that enters early is held back to that moment, and only the
members of its own group can hold it back."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from course_utils.network import wire
from course_utils.ranks.launch import launch

LINK = "1gbit,1ms"
BURN = 0.2  # seconds of CPU the late rank spends before it enters


def _burn(seconds: float) -> None:
    start = time.thread_time()
    x = torch.ones(64)
    while time.thread_time() - start < seconds:
        x = x * 1.0000001


def _late_member(spec: str) -> dict:
    """Groups {0, 1} and {2, 3}; rank 1 computes BURN seconds before their all-reduce."""
    pairs = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    mine = pairs[dist.get_rank() // 2]
    t = torch.full((1000,), float(dist.get_rank()))
    with wire.active(spec, virtual=True):
        dist.barrier()
        start = wire.restart()
        if dist.get_rank() == 1:
            _burn(BURN)
        entered = wire.now() - start
        wire.all_reduce(t, group=mine)
        done = wire.now() - start
    return {"entered": entered, "done": done, "sum": t[0].item()}


def test_an_early_member_waits_for_the_last_one_and_other_groups_do_not():
    ranks = launch(_late_member, 4, args=(LINK,), backend="gloo")
    ring = wire.ring_allreduce_seconds(wire.parse(LINK), 4000, 2)
    late = ranks[1]["entered"]
    assert late >= BURN * 0.99
    assert [r["sum"] for r in ranks] == [1.0, 1.0, 5.0, 5.0]
    for member in ranks[:2]:  # rank 0 entered at about 0, rank 1 after its BURN
        assert member["done"] >= late + ring - 1e-9
    for other in ranks[2:]:  # nobody in {2, 3} computed: a ring's time, far below the BURN
        assert ring - 1e-9 <= other["done"] < BURN / 2
