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

from course_utils.model_parallel.schedules import plan
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


def _batched_as_on_nccl() -> list[list[str]]:
    """Make this rank's batch_isend_irecv return one work per batch, as NCCL's does; the
    kinds of each batch's ops go in the list returned."""
    batches = []

    def batch_isend_irecv(ops):
        batches.append(["send" if op.op is dist.isend else "recv" for op in ops])
        return [_OneWork([op.op(op.tensor, op.peer, tag=op.tag) for op in ops])]

    dist.batch_isend_irecv = batch_isend_irecv
    return batches


def _stage(schedule: str, pipeline: list[int], as_on_nccl: bool) -> dict:
    batches = _batched_as_on_nccl() if as_on_nccl else []
    stage = pipeline.index(dist.get_rank())
    module = _model()[stage]
    x, y = _batch()
    order = plan(schedule, 1).order(stage, len(pipeline), M)
    micro = list(zip(x.chunk(M), y.chunk(M), strict=True))
    sample = (6,) if stage == 0 else (8,)
    hold = plan(schedule, 1).hold_sends
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
    order = plan("1f1b", 1).order(0, 1, M)
    return pipeline_step(module, order, micro, F.cross_entropy, (6,))


def test_one_stage_is_one_process():
    (loss,) = launch(_only_one_stage, 1, backend="gloo")
    assert loss == pytest.approx(_one_process()[0], abs=1e-6)


def _pieces() -> nn.Sequential:
    """Four pieces (2 ranks x 2 chunks), each an nn.Sequential of blocks, unequal depths."""
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Sequential(nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.GELU())),
        nn.Sequential(nn.Sequential(nn.Linear(8, 8), nn.Tanh()), nn.Sequential(nn.Linear(8, 8))),
        nn.Sequential(nn.Sequential(nn.Linear(8, 8), nn.GELU())),
        nn.Sequential(nn.Sequential(nn.Linear(8, 5))),
    )


def _chunked_stage(schedule: str, pipeline: list[int], as_on_nccl: bool, ahead: bool) -> dict:
    from course_utils.model_parallel.schedules import plan

    batches = _batched_as_on_nccl() if as_on_nccl else []
    here, k = pipeline.index(dist.get_rank()), len(pipeline)
    sched = plan(schedule, 2)
    pieces = list(_pieces())
    if sched.chunks == 1:  # two pieces: each rank takes two of the four
        pieces = [nn.Sequential(*pieces[0], *pieces[1]), nn.Sequential(*pieces[2], *pieces[3])]
    chunks = [pieces[c * k + here] for c in range(sched.chunks)]
    x, y = _batch()
    micro = list(zip(x.chunk(M), y.chunk(M), strict=True))
    samples = [(6,) if c * k + here == 0 else (8,) for c in range(sched.chunks)]
    assert any(kind == "W" for kind, _, _ in sched.orders(k, M)[here]) == (schedule == "zb-h1")
    order = sched.orders(k, M)[here]
    with recording() as log:
        loss = pipeline_step(
            chunks, order, micro, F.cross_entropy, samples, pipeline, post_ahead=ahead
        )
    grads = [[p.grad for p in chunk.parameters()] for chunk in chunks]
    sent = sum(m.op == "isend" for m in log.messages)
    return {"here": here, "loss": loss, "grads": grads, "sent": sent, "batches": batches}


@pytest.mark.parametrize(
    ("schedule", "as_on_nccl", "ahead"),
    [
        ("interleaved", False, False),
        ("interleaved", False, True),
        ("zb-h1", False, True),
        ("zb-h1", True, False),
    ],
)
def test_chunks_and_a_split_backward_give_one_process_gradients(schedule, as_on_nccl, ahead):
    pipeline = [1, 0]
    ranks = sorted(
        launch(_chunked_stage, 2, args=(schedule, pipeline, as_on_nccl, ahead), backend="gloo"),
        key=lambda r: r["here"],
    )
    model, (x, y) = _pieces(), _batch()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    chunks = len(ranks[0]["grads"])
    by_piece = [ranks[g % 2]["grads"][g // 2] for g in range(2 * chunks)]
    want = [p.grad for p in model.parameters()]
    got = [g for piece in by_piece for g in piece]
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(got, want, strict=True))
    assert ranks[-1]["loss"] == pytest.approx(loss.item(), abs=1e-6)
    assert ranks[0]["loss"] is None
    cuts = 2 * chunks - 1  # every cut between pieces carries M activations and M gradients
    assert sum(r["sent"] for r in ranks) == 2 * M * cuts
    if as_on_nccl:
        every = [kinds for r in ranks for kinds in r["batches"]]
        assert all(kinds.count("recv") <= 1 for kinds in every)
        assert any(set(kinds) == {"send", "recv"} for kinds in every)


def _refused_as_on_nccl(ahead: bool) -> str:
    dist.get_backend = lambda group=None: "nccl"
    x, y = _batch()
    pieces = list(_pieces())
    chunks = pieces[dist.get_rank() :: 2] if not ahead else pieces[dist.get_rank()]
    samples = [(6,), (8,)] if not ahead else (8,)
    try:
        pipeline_step(chunks, [("F", 0)], [(x, y)], F.cross_entropy, samples, post_ahead=ahead)
    except ValueError as error:
        return str(error)
    return "ran"


@pytest.mark.parametrize("ahead", [False, True])
def test_interleaved_chunks_and_posting_ahead_are_refused_on_nccl_rather_than_hang(ahead):
    """With each receive batched with the sends before it, interleaved 1F1B at K = 2, M = 4
    leaves rank 0 sending F3 with B1's receive while rank 1 sends its F2 with B0's: each
    batch waits for the other's next one (what the stand-in for NCCL hung on)."""
    errors = launch(_refused_as_on_nccl, 2, args=(ahead,), backend="gloo")
    assert all("cannot hand off on NCCL" in e and "gloo" in e for e in errors)
