"""Every timed region that may touch a GPU ends in a synchronize: CUDA kernels and NCCL
collectives return as soon as they are queued, so without it a timing is the enqueue.
Checked on a CPU by counting the calls, not by a GPU."""

from __future__ import annotations

import torch

from course_utils.ddp import overlap, scaling
from course_utils.ranks import bootstrap
from course_utils.ranks.launch import launch


def _counting(module):
    calls = []
    module.synchronize = lambda where=None: calls.append(where)
    return calls


def _timed_regions() -> dict:
    step_calls = _counting(overlap)
    step = lambda: torch.ones(4).sum()  # noqa: E731
    overlap._timed({"one step": step, "another": step}, rounds=3)
    scaling_calls = _counting(scaling)
    scaling._scaling_rank(batch=4, width=8, layers=2, steps=2, link="real")
    return {"overlap": len(step_calls), "scaling": len(scaling_calls)}


def test_overlap_and_scaling_synchronize_after_every_timed_region():
    counts = launch(_timed_regions, 2, backend="gloo")[0]
    assert counts["overlap"] == 2 * 4  # two steps taking turns, a warm-up round and 3 timed
    assert counts["scaling"] == 2 * 3  # compute and communication, a warm-up and 2 steps


def test_synchronize_waits_for_a_gpu_and_not_for_a_cpu(monkeypatch):
    waited = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda where=None: waited.append(where))
    bootstrap.synchronize(torch.device("cpu"))
    assert waited == []
    bootstrap.synchronize(torch.device("cuda", 1))
    assert waited == [torch.device("cuda", 1)]
