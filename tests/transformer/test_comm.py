"""The chapter's count reads what crossed torch.distributed: each collective and send once,
in the chapter's names, with a ring's bytes and the label the model's hooks gave it."""

from __future__ import annotations

import torch
import torch.distributed as dist

from course_utils.parallel.allreduce import exchange
from course_utils.ranks.launch import launch
from course_utils.transformer import comm


def _every_collective():
    rank, n = dist.get_rank(), dist.get_world_size()
    x = torch.arange(8.0).reshape(4, 2) + rank
    with comm.count_communication() as log:
        with comm.labelled("test", "forward"):
            dist.all_reduce(x.clone())
            dist.all_gather_into_tensor(torch.empty(4 * n, 2), x)
            counts = [1] * n
            dist.all_to_all_single(torch.empty(n, 2), x[:n].clone(), counts, counts)
            exchange(x, (rank + 1) % n, torch.empty_like(x), (rank - 1) % n)
        with comm.labelled("test", "backward"):
            dist.reduce_scatter_tensor(torch.empty(4 // n, 2), x)
    return {
        "log": log,
        "bytes": comm.bytes_sent(log),
        "backward": comm.bytes_sent(log, direction="backward"),
    }


def test_every_collective_is_logged_once_with_a_ring_s_bytes():
    n, size = 2, 32  # 8 floats
    for r in launch(_every_collective, n, backend="gloo"):
        ops = [m.op for m in r["log"]]
        assert ops == ["all_reduce", "all_gather", "all_to_all", "send", "reduce_scatter"]
        expected = [2 * (n - 1) * size // n, (n - 1) * size, (n - 1) * 8, size, size // 2]
        assert [m.sent for m in r["log"]] == expected
        assert {m.where for m in r["log"]} == {"test"}
        assert r["bytes"] == sum(expected)
        assert r["backward"] == (n - 1) * size // n


def test_nothing_is_logged_outside_a_counting_block():
    def work():
        t = torch.ones(3)
        dist.all_reduce(t)
        with comm.count_communication() as log:
            pass
        return t, log

    t, log = launch(work, 2, backend="gloo")[0]
    assert torch.equal(t, torch.full((3,), 2.0)) and log == []
