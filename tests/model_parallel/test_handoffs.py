"""A rank with several chunks (interleaved 1F1B, zero bubble): on NCCL it posts each receive
together with the sends of the op before it, in one batch_isend_irecv; on gloo it posts
receives ahead, one at a time. The NCCL path is run on gloo here, with the batching function
standing in for NCCL's and counting its batches. (The one-chunk engine, `parallel.pipeline`,
batches on both: tests/parallel/test_pipeline.py.)"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from course_utils.network import wire
from course_utils.ranks.launch import launch

STAGES, MICROBATCHES = 3, 4


def _batch():
    gen = torch.Generator().manual_seed(0)
    return torch.randn(MICROBATCHES * 4, 40, generator=gen), torch.randint(
        0, 10, (16,), generator=gen
    )


def _chunked_on_gloo() -> int:
    from course_utils.model_parallel import virtual_pipeline
    from course_utils.model_parallel.pipeline import mlp

    calls = []
    dist.batch_isend_irecv = lambda ops: calls.append(ops)
    x, y = _batch()
    model = mlp([40] + [16] * (2 * 2 - 1) + [10], seed=0)
    virtual_pipeline.train_rank(model, "interleaved", 2, MICROBATCHES, x, y, 1, 0.1)
    return len(calls)


def test_chunks_on_gloo_never_batch():
    assert launch(_chunked_on_gloo, 2, backend="gloo") == [0, 0]


def _chunked_as_on_nccl(model, schedule, x, y) -> dict:
    from course_utils.model_parallel import virtual_pipeline

    batches = []
    plain = {dist.isend: dist.isend, dist.irecv: dist.irecv}

    def batch_isend_irecv(ops):
        batches.append(["send" if op.op is dist.isend else "recv" for op in ops])
        return [plain[op.op](op.tensor, op.peer) for op in ops]

    wire.batches_point_to_point = lambda: True
    dist.batch_isend_irecv = batch_isend_irecv
    virtual_pipeline.import_autograd_extras()
    steps = virtual_pipeline.train_rank(model, schedule, 2, MICROBATCHES, x, y, 2, 0.1)
    return {"params": steps.params, "batches": batches}


@pytest.mark.parametrize("schedule", ["interleaved", "zb-h1"])
def test_chunked_schedules_batch_their_hand_offs_and_train_like_one_process(schedule):
    from course_utils.model_parallel import virtual_pipeline
    from course_utils.model_parallel.pipeline import mlp

    model = mlp([40] + [16] * (2 * 2 - 1) + [10], seed=0)
    x, y = _batch()
    ranks = launch(_chunked_as_on_nccl, 2, args=(model, schedule, x, y), backend="gloo")
    got = virtual_pipeline.model_params([r["params"] for r in ranks])
    _, want = virtual_pipeline.serial_training(model, x, y, 2, 0.1)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(got, want, strict=True))
    every = [kinds for r in ranks for kinds in r["batches"]]
    assert every and all(kinds.count("recv") <= 1 for kinds in every)
    assert any(set(kinds) == {"send", "recv"} for kinds in every)  # a send went with a receive
