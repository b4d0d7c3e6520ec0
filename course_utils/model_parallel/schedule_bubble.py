"""The bubble of GPipe, 1F1B, interleaved 1F1B and ZB-H1 with real compute, on a named clock.

Every schedule trains the same model (K·2 equal blocks of real layers, so that interleaving
can cut it into two chunks per rank) on the same batch, with `virtual_pipeline`'s engine.
A step's bubble is held against the schedule played out with that step's own measured op
times, the time each op's rank then spent handing its result on (which the measured step
counts as busy, so the played-out one must too), and the median measured hand-off
(`schedule_play.play_out`), and against its formula:
a formula assumes free hand-offs and equal ops, the played-out schedule does not, so only
the played-out one is a fair bar for a small bubble (at K = 2, M = 16 interleaving leaves
about 1/33 of the step, where one slow op is a good part of it).
"""

from __future__ import annotations

import copy
import statistics
from collections.abc import Sequence

import torch
import torch.distributed as dist

from ..core import progress
from .bubble import HANDOFF_LINK
from .pipeline import import_autograd_extras, mlp, split
from .schedule_check import check_orders
from .schedule_play import handoff_seconds, play_out, posting_seconds
from .schedules import Timeline, bubble_formula
from .virtual_pipeline import RankSteps, step_timeline, train_rank
from .virtual_schedules import (
    BACKWARD,
    FORWARD,
    WEIGHT,
    handoffs_per_step,
    interleaved_bubble_formula,
    plan,
    zb_h1_bubble_formula,
)

__all__ = ["formula", "measure_schedules", "row_from"]


def _median(tl: Timeline, kind: str) -> float:
    times = [e.end - e.start for e in tl.compute() if e.kind == kind]
    return statistics.median(times) if times else 0.0


def formula(schedule: str, stages: int, microbatches: int, chunks: int = 2, f=1.0, b=1.0, w=1.0):
    """The schedule's bubble on paper: (K-1)/(M+K-1), (K-1)/(v·M+K-1), or ZB-H1's with the
    given F, B and W (equal by default, as Qi et al. assume)."""
    name = plan(schedule, chunks).name
    if name == "interleaved":
        return interleaved_bubble_formula(stages, microbatches, chunks)
    if name == "zb-h1":
        return zb_h1_bubble_formula(stages, microbatches, f, b, w)
    return bubble_formula(stages, microbatches)


def row_from(tl: Timeline, schedule: str, chunks: int, clock: str, activation_bytes: int) -> dict:
    """One step's figures: measured and played-out bubble, formula, op and hand-off times,
    hand-offs and their bytes, activations held (micro-batch pieces, and bytes measured)."""
    v = plan(schedule, chunks).chunks
    handoffs = handoff_seconds(tl, v)
    handoff = statistics.median(handoffs) if handoffs else 0.0
    played = play_out(
        schedule, tl.stages, tl.microbatches, chunks=v, per_op=tl.op_durations(),
        handoff=handoff, posting=posting_seconds(tl),
    )  # fmt: skip
    f, b, w = (_median(tl, k) for k in (FORWARD, BACKWARD, WEIGHT))
    messages = handoffs_per_step(tl.stages, tl.microbatches, v)
    return {
        "schedule": plan(schedule, chunks).name,
        "virtual_stages": v,
        "clock": clock,
        "stages": tl.stages,
        "microbatches": tl.microbatches,
        "measured": tl.bubble_fraction(),
        "from_stages_and_link": played.bubble_fraction(),
        "step_over_played_out": tl.makespan() / played.makespan(),
        "predicted": formula(schedule, tl.stages, tl.microbatches, v, f, b, w or b),
        "forward_seconds": f,
        "backward_seconds": b,
        "weight_seconds": w,
        "backward_over_forward": (b + w) / f if f else 0.0,
        "handoff_seconds": handoff,
        "handoffs": messages,
        "handoff_bytes": messages * activation_bytes,
        "peak_held": list(tl.peak_activations),
        "peak_bytes": list(tl.peak_bytes),
        "step_seconds": tl.makespan(),
    }


def _turns(model, schedules, chunks, microbatches, x, y, repeats, link) -> list[RankSteps]:
    """Inside a launch: one timed step of each schedule in turn, `repeats` rounds, each from the
    same weights, so that a busy stretch of the machine falls on every schedule alike."""
    steps = []
    clock = "real" if link is None else "simulated"
    about = (
        f"{', '.join(schedules)} on {dist.get_world_size()} ranks, M={microbatches}, {clock} clock"
    )
    with progress.bar(repeats * len(schedules), about, "step") as bar:  # rank 0's, relayed
        for _ in range(repeats):
            for name in schedules:
                run = train_rank(
                    copy.deepcopy(model), name, chunks, microbatches, x, y, 1, 0.1, link
                )
                run.params = []  # only the timing comes back
                steps.append(run)
                bar.update(1)
    return steps


def measure_schedules(
    schedules: Sequence[str],
    stages: int,
    microbatches: int,
    *,
    width: int,
    micro_batch_size: int,
    chunks: int = 2,
    repeats: int = 2,
    link: str | None = HANDOFF_LINK,
    seed: int = 0,
    timeout: float = 300.0,
) -> list[dict]:
    """One row per schedule (`row_from`), all measured in one launch on K·max(2, v) equal
    blocks of `width` with real compute (`link=None`: the real link on the wall clock, fair
    only with a core per rank). Each row is the least idle of the schedule's `repeats` steps:
    a stage the shared machine slows for a moment only makes the others wait, so noise only
    adds idle time and the least idle step is the schedule's own (as `bubble.measure_bubble`)."""
    from ..ranks.launch import launch

    names = [plan(name, chunks).name for name in schedules]
    model = mlp([width] * (stages * max(2, chunks) + 1), seed=seed)
    for name in names:  # refuse an impossible cut or order here, not on every rank
        v = plan(name, chunks).chunks
        split(model, stages * v)
        check_orders(plan(name, chunks).orders(stages, microbatches), stages, microbatches, v)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(microbatches * micro_batch_size, width, generator=gen)  # cpu: sent to ranks
    y = torch.randint(0, width, (len(x),), generator=gen)  # cpu: sent to ranks
    import_autograd_extras()
    per_rank = launch(
        _turns,
        stages,
        backend="gloo",
        timeout=timeout,
        args=(model, names, chunks, microbatches, x, y, repeats, link),
    )
    clock = "real" if link is None else "simulated"
    rows = []
    for n, name in enumerate(names):
        steps = [
            step_timeline([r[turn * len(names) + n] for r in per_rank], name, microbatches)
            for turn in range(repeats)
        ]
        tl = min(steps, key=Timeline.bubble_fraction)
        rows.append(row_from(tl, name, chunks, clock, micro_batch_size * width * 4))
    return rows
