"""The course's schedules against PyTorch's own, `torch.distributed.pipelining`.

Two checks. The action lists: PyTorch computes every rank's list of actions when a schedule
is built (`pipeline_order`, stage index s = chunk·K + rank, "I" for the input-gradient
backward that the course calls B); `torch_orders` builds each schedule with stand-ins for
its stages (the four attributes it reads: stage index, stage count, group rank and size), so
no process group is needed to read the lists. The training: the same model, batch and SGD
steps through `PipelineStage` and the schedule on gloo ranks (`train_with_torch`), whose
weights must equal the course's engine and one process. Which PyTorch class is which:
GPipe `ScheduleGPipe`, 1F1B `Schedule1F1B`, interleaved `ScheduleInterleaved1F1B`, and ZB-H1
`ScheduleInterleavedZeroBubble` with one stage per rank (PyTorch's ZB1P, which at v = 1 is
Qi et al.'s ZB-H1: rank r keeps r weight gradients back).

Known upstream problems: pipelining over gloo hung until the fix of pytorch/pytorch#132644
(PR #152938, 2025: `_batch_p2p` kept one of gloo's several works); the torch this course
pins ran all four schedules on 2 gloo ranks. `Schedule1F1B.pipeline_order` (added for the
schedule visualizer, pytorch/pytorch#155935; not what `step` runs) numbers the last rank's
forwards F1..FM instead of F0..FM-1 (its warm-up is empty and the counter moves on before
the first forward; torch 2.14). Both are written down as what PyTorch's list would be if it
differed from the course's only by them (`KNOWN_DIFFERENCES`), so that a third difference, or
one of these changing, is not excused (`unexplained_differences`).
"""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ..core.errors import LaunchError
from ..ranks.bootstrap import device
from ..ranks.launch import launch
from .pipeline import Work, every_schedule_blocks
from .schedules import plan
from .virtual_pipeline import Run, model_params, pieces_of, train_pipeline, train_rank

CLASSES = {
    "gpipe": "ScheduleGPipe",
    "1f1b": "Schedule1F1B",
    "interleaved": "ScheduleInterleaved1F1B",
    "zb-h1": "ScheduleInterleavedZeroBubble",
}
# by the action's name, not its value: the values are ints in torch 2.8, "F" in 2.14;
# PyTorch's BACKWARD_INPUT is the course's split B
_KINDS = {"FORWARD": "F", "FULL_BACKWARD": "B", "BACKWARD_INPUT": "B", "BACKWARD_WEIGHT": "W"}


class _StageStandIn:
    """What a schedule reads from its stages while it computes its action lists."""

    def __init__(self, stage_index: int, num_stages: int, rank: int, ranks: int):
        self.stage_index, self.num_stages = stage_index, num_stages
        self.group_rank, self.group_size = rank, ranks
        self.is_first, self.is_last = stage_index == 0, stage_index == num_stages - 1
        self.submod = None


def _schedule_class(schedule: str):
    from torch.distributed.pipelining import schedules

    return getattr(schedules, CLASSES[plan(schedule).name])


def _multi(schedule: str) -> bool:
    return plan(schedule).name in ("interleaved", "zb-h1")


def torch_orders(schedule: str, stages: int, microbatches: int, chunks: int = 2):
    """PyTorch's compute actions per rank as the course's (kind, micro-batch, chunk) ops;
    idle slots and non-compute actions (gradient reduction) left out."""
    v = plan(schedule, chunks).chunks
    stand_ins = [_StageStandIn(c * stages, stages * v, 0, stages) for c in range(v)]
    built = _schedule_class(schedule)(
        stand_ins if _multi(schedule) else stand_ins[0], n_microbatches=microbatches
    )
    return _as_ops(built.pipeline_order, stages)


def _as_ops(pipeline_order, stages: int):
    return [
        [
            (_KINDS[a.computation_type.name], a.microbatch_index, a.stage_index // stages)
            for a in pipeline_order[r]
            if a is not None and a.computation_type.name in _KINDS
        ]
        for r in range(stages)
    ]


def _oldest_backward_first(orders):
    """GPipe as PyTorch runs it: the same forwards, then the backwards oldest first."""
    out = []
    for order in orders:
        backwards = iter(sorted(op for op in order if op[0] == "B"))
        out.append([next(backwards) if op[0] == "B" else op for op in order])
    return out


def _last_rank_forwards_from_one(orders):
    """Schedule1F1B's list: the last rank's forwards numbered F1..FM."""
    last = [(k, i + 1, c) if k == "F" else (k, i, c) for k, i, c in orders[-1]]
    return [*orders[:-1], last]


# schedule: (what PyTorch's list would be if it differed from the course's only by this, why)
KNOWN_DIFFERENCES = {
    "gpipe": (_oldest_backward_first, "PyTorch runs GPipe's backwards oldest first"),
    "1f1b": (
        _last_rank_forwards_from_one,
        "Schedule1F1B's list (a picture; not what step runs) numbers the last rank's forwards "
        "from 1",
    ),
}


def order_differences(schedule: str, stages: int, microbatches: int, chunks: int = 2):
    """Where the course's order and PyTorch's differ, one line per rank that differs."""
    ours = plan(schedule, chunks).orders(stages, microbatches)
    return _differences(ours, torch_orders(schedule, stages, microbatches, chunks))


def unexplained_differences(schedule: str, stages: int, microbatches: int, chunks: int = 2):
    """The differences `KNOWN_DIFFERENCES` does not explain: the course's order changed only
    by the known difference, against PyTorch's (none: the known difference is all there is)."""
    ours = plan(schedule, chunks).orders(stages, microbatches)
    known = KNOWN_DIFFERENCES.get(plan(schedule, chunks).name)
    expected = known[0](ours) if known else ours
    return _differences(expected, torch_orders(schedule, stages, microbatches, chunks))


def _differences(ours, theirs) -> list[str]:
    lines = []
    for r, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        if a != b:
            at = next((n for n, (p, q) in enumerate(zip(a, b, strict=False)) if p != q), None)
            at = min(len(a), len(b)) if at is None else at
            lines.append(
                f"rank {r}, op {at}: the course runs {a[at : at + 3]}, PyTorch {b[at : at + 3]}"
            )
    return lines


def _torch_rank(model, schedule, chunks, microbatches, x, y, steps, lr):
    from torch.distributed.pipelining import PipelineStage

    rank, k, dev = dist.get_rank(), dist.get_world_size(), device()
    v = plan(schedule, chunks).chunks
    mine = [piece.to(dev) for piece in pieces_of(model, k, v, rank)]
    stages = [PipelineStage(p, c * k + rank, k * v, dev) for c, p in enumerate(mine)]
    built = _schedule_class(schedule)(
        stages if _multi(schedule) else stages[0],
        n_microbatches=microbatches,
        loss_fn=lambda out, target: F.cross_entropy(out, target),
    )
    holds_first, holds_last = rank == 0, rank == (k * v - 1) % k
    losses = []
    for _ in range(steps):
        step_losses: list[torch.Tensor] = []
        args = (x.to(dev),) if holds_first else ()
        kwargs = {"target": y.to(dev), "losses": step_losses} if holds_last else {}
        built.step(*args, **kwargs)
        if holds_last:
            losses.append(sum(loss.item() for loss in step_losses) / microbatches)
        with torch.no_grad():
            for p in (p for piece in mine for p in piece.parameters()):
                p -= lr * p.grad
                p.grad = None
    order = getattr(built, "pipeline_order", None)
    return {
        "params": [[p.detach().cpu() for p in piece.parameters()] for piece in mine],
        "losses": losses,
        "order": _as_ops(order, k) if order else None,
    }


def train_with_torch(
    schedule: str,
    *,
    stages: int,
    microbatches: int,
    work: Work = Work(),
    chunks: int = 2,
    steps: int = 3,
    lr: float = 0.1,
    timeout: float = 60.0,
) -> dict:
    """`steps` SGD steps through `torch.distributed.pipelining` on `stages` gloo ranks.

    Returns {"ran": True, "params" (in the order of model.parameters()), "losses",
    "orders" (the action lists the ranks' schedule held)}, or {"ran": False, "error"} when a
    rank raised or the step hung past `timeout` seconds (the launch stops every rank)."""
    model, x, y = work.resolve(every_schedule_blocks(stages, chunks), microbatches)
    try:
        results = launch(
            _torch_rank,
            stages,
            backend="gloo",
            timeout=timeout,
            args=(model, schedule, chunks, microbatches, x, y, steps, lr),
        )
    except LaunchError as error:
        return {"ran": False, "error": str(error).splitlines()[0]}
    return {**_gathered(results), "orders": results[0]["order"]}


def _gathered(per_rank: list[dict]) -> dict:
    """One run's ranks' results as one: the weights in the order of model.parameters(), the
    losses from the last rank (it holds the last piece)."""
    params = model_params([r["params"] for r in per_rank])
    return {"ran": True, "params": params, "losses": per_rank[-1]["losses"]}


def _both_engines(model, schedules, chunks, microbatches, x, y, steps, lr):
    """Inside a launch: each schedule's training in the course's engine, then in PyTorch's,
    every run from its own copy of the same weights; by run, this rank's params and losses."""
    runs = {}
    for name in schedules:
        run = Run(name, microbatches, chunks, steps, lr, keep=True)
        ours = train_rank(copy.deepcopy(model), x, y, run)
        runs[f"course {name}"] = {"params": ours.params, "losses": ours.losses}
    for name in schedules:
        args = (name, chunks, microbatches, x, y, steps, lr)
        runs[f"torch {name}"] = _torch_rank(copy.deepcopy(model), *args)
    return runs


def train_both_ways(
    schedules,
    *,
    stages: int,
    microbatches: int,
    work: Work = Work(),
    chunks: int = 2,
    steps: int = 3,
    lr: float = 0.1,
    timeout: float = 60.0,
) -> dict[str, dict]:
    """`steps` SGD steps of every schedule, in the course's engine ("course <name>") and in
    `torch.distributed.pipelining` ("torch <name>"), in one launch of `stages` gloo ranks.

    Each value is {"ran": True, "params" (in the order of model.parameters()), "losses"}, or
    {"ran": False, "error"}: when the shared launch fails, each run is made again on its own
    (`train_pipeline`, `train_with_torch`), so one schedule that hangs on gloo is reported
    and the others still count."""
    names = [plan(name, chunks).name for name in schedules]
    model, x, y = work.resolve(every_schedule_blocks(stages, chunks), microbatches)
    try:
        results = launch(
            _both_engines,
            stages,
            backend="gloo",
            timeout=timeout,
            args=(model, names, chunks, microbatches, x, y, steps, lr),
        )
    except LaunchError:
        runs = {}
        for name in names:
            same = dict(stages=stages, microbatches=microbatches, work=Work(model, x, y))
            same.update(chunks=chunks, steps=steps, lr=lr, timeout=timeout)
            ours = train_pipeline(name, **same)
            runs[f"course {name}"] = {"ran": True, "params": ours.params, "losses": ours.losses}
            runs[f"torch {name}"] = train_with_torch(name, **same)
        return runs
    labels = [f"{engine} {name}" for name in names for engine in ("course", "torch")]
    return {label: _gathered([r[label] for r in results]) for label in labels}
