"""The pipeline engine from parallel/ leaves the gradients and loss of one process on the whole
batch, under every schedule, on a model a learner might bring (a LayerNorm, a GELU, stages of
unequal depth), over a pipeline whose stages are not ranks 0, 1, 2 in order, and with the
batches NCCL needs (each receive together with the sends before it, one work per batch)."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from course_utils.model_parallel.schedules import get_schedule
from course_utils.network.recorder import recording
from course_utils.parallel.pipeline import pipeline_step
from course_utils.ranks.launch import launch

M, ROWS = 4, 3  # micro-batches, samples in each


def _model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.GELU()),
        nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8)),
        nn.Sequential(nn.Linear(8, 5)),
    )


def _batch():
    gen = torch.Generator().manual_seed(1)
    return torch.randn(M * ROWS, 6, generator=gen), torch.randint(0, 5, (M * ROWS,), generator=gen)


class _OneWork:
    """What NCCL's batch_isend_irecv returns: one work for the whole batch."""

    def __init__(self, works):
        self.works = works

    def wait(self):
        return all(work.wait() for work in self.works)


def _stage(schedule: str, pipeline: list[int], as_on_nccl: bool) -> dict:
    batches = []
    if as_on_nccl:

        def batch_isend_irecv(ops):
            batches.append(["send" if op.op is dist.isend else "recv" for op in ops])
            return [_OneWork([op.op(op.tensor, op.peer, tag=op.tag) for op in ops])]

        dist.batch_isend_irecv = batch_isend_irecv
    stage = pipeline.index(dist.get_rank())
    module = _model()[stage]
    x, y = _batch()
    order = get_schedule(schedule).order(stage, len(pipeline), M)
    micro = list(zip(x.chunk(M), y.chunk(M), strict=True))
    sample = (6,) if stage == 0 else (8,)
    hold = get_schedule(schedule).whole_batch_sends
    with recording() as log:
        loss = pipeline_step(module, order, micro, F.cross_entropy, sample, pipeline, hold)
    grads = [p.grad for p in module.parameters()]
    sent = sum(m.op == "isend" for m in log.messages)
    return {"stage": stage, "loss": loss, "grads": grads, "sent": sent, "batches": batches}


def _one_process():
    model, (x, y) = _model(), _batch()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    return loss.item(), [p.grad for p in model.parameters()]


@pytest.mark.parametrize("schedule", ["naive", "gpipe", "1f1b"])
@pytest.mark.parametrize("as_on_nccl", [False, True])
def test_every_schedule_gives_one_process_gradients(schedule, as_on_nccl):
    pipeline = [2, 0, 1]  # stage s on rank pipeline[s]
    ranks = launch(_stage, 3, args=(schedule, pipeline, as_on_nccl), backend="gloo")
    stages = sorted(ranks, key=lambda r: r["stage"])
    loss, want = _one_process()
    got = [g for stage in stages for g in stage["grads"]]
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(got, want, strict=True))
    assert stages[-1]["loss"] == pytest.approx(loss, abs=1e-6)
    assert [s["loss"] is None for s in stages] == [True, True, False]
    assert [s["sent"] for s in stages] == [M, 2 * M, M]  # activations on, gradients back
    if as_on_nccl:
        middle = stages[1]["batches"]
        assert all(kinds.count("recv") <= 1 for kinds in middle)
        if schedule == "1f1b":  # steady state: a send goes in one batch with a receive
            assert any(set(kinds) == {"send", "recv"} for kinds in middle)


def _only_one_stage() -> float | None:
    module = _model()
    x, y = _batch()
    micro = list(zip(x.chunk(M), y.chunk(M), strict=True))
    order = get_schedule("1f1b").order(0, 1, M)
    return pipeline_step(module, order, micro, F.cross_entropy, (6,))


def test_one_stage_is_one_process():
    (loss,) = launch(_only_one_stage, 1, backend="gloo")
    assert loss == pytest.approx(_one_process()[0], abs=1e-6)
