"""The chapter's logged collectives return what torch.distributed's do, and log what a ring
(or an all-to-all, or a send) really puts on the wire."""

from __future__ import annotations

import torch
import torch.distributed as dist

from course_utils.ranks.launch import launch
from course_utils.transformer import comm


def _every_collective():
    rank, n = dist.get_rank(), dist.get_world_size()
    x = torch.arange(8.0).reshape(4, 2) + rank
    with comm.count_communication() as log:
        summed = comm.all_reduce(x.clone(), "test", "forward")
        gathered = comm.all_gather(x, 0, "test", "forward")
        scattered = comm.reduce_scatter(x, 0, "test", "backward")
        counts = [1] * n
        moved = comm.all_to_all(x[:n].clone(), counts, counts, "test", "forward")
        ring = comm.exchange(
            x, (rank + 1) % n, torch.empty_like(x), (rank - 1) % n, "test", "forward"
        )
    return {
        "summed": summed,
        "gathered": gathered,
        "scattered": scattered,
        "moved": moved,
        "ring": ring,
        "log": log,
        "bytes": comm.bytes_sent(log),
        "backward": comm.bytes_sent(log, direction="backward"),
    }


def test_collectives_equal_the_builtins_and_log_ring_bytes():
    n = 2
    out = launch(_every_collective, n, backend="gloo")
    xs = [torch.arange(8.0).reshape(4, 2) + r for r in range(n)]
    total = sum(xs)
    for rank, r in enumerate(out):
        assert torch.equal(r["summed"], total)
        assert torch.equal(r["gathered"], torch.cat(xs))
        assert torch.equal(r["scattered"], total.chunk(n)[rank])
        assert torch.equal(r["moved"], torch.stack([xs[s][rank] for s in range(n)]))
        assert torch.equal(r["ring"], xs[(rank - 1) % n])
        ops = [m.op for m in r["log"]]
        assert ops == ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send"]
        size = 32  # 8 floats
        expected = [2 * (n - 1) * size // n, (n - 1) * size, (n - 1) * size // n, (n - 1) * 8, size]
        assert [m.sent for m in r["log"]] == expected
        assert r["bytes"] == sum(expected)
        assert r["backward"] == (n - 1) * size // n


def test_nothing_is_logged_outside_a_counting_block():
    def work():
        t = comm.all_reduce(torch.ones(3), "x", "forward")
        with comm.count_communication() as log:
            pass
        return t, log

    t, log = launch(work, 2, backend="gloo")[0]
    assert torch.equal(t, torch.full((3,), 2.0)) and log == []
