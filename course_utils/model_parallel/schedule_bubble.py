"""The bubble of GPipe, 1F1B, interleaved 1F1B and ZB-H1 with real compute, on a named clock.

Every schedule trains the same model (K·2 equal blocks of real layers, so that interleaving
can cut it into two chunks per rank) on the same batch, with `virtual_pipeline`'s engine.
A step's bubble is held against the schedule played out with that step's own measured op
times, the time each op's rank then spent handing its result on (which the measured step
counts as busy, so the played-out one must too), and the median measured hand-off
(`bubble.row_from`, as for GPipe alone), and against its formula:
a formula assumes free hand-offs and equal ops, the played-out schedule does not, so only
the played-out one is a fair bar for a small bubble (at K = 2, M = 16 interleaving leaves
about 1/33 of the step, where one slow op is a good part of it).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
import torch.distributed as dist

from ..core import progress
from .bubble import HANDOFF_LINK, row_from
from .pipeline import import_autograd_extras, mlp, split
from .schedule_check import check_orders
from .schedules import Timeline
from .virtual_pipeline import RankSteps, Run, step_timeline, train_rank
from .virtual_schedules import plan

__all__ = ["measure_schedules"]


def _turns(model, x, y, runs: list[Run], repeats: int) -> list[RankSteps]:
    """Inside a launch: one timed step of each run in turn, `repeats` rounds, each from the
    same weights, so that a busy stretch of the machine falls on every schedule alike."""
    steps = []
    clock = "real" if runs[0].link is None else "simulated"
    names = ", ".join(run.schedule for run in runs)
    about = f"{names} on {dist.get_world_size()} ranks, M={runs[0].microbatches}, {clock} clock"
    with progress.bar(repeats * len(runs), about, "step") as bar:  # rank 0's, relayed
        for _ in range(repeats):
            for run in runs:
                steps.append(train_rank(copy.deepcopy(model), x, y, run))
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
    """One row per schedule (`bubble.row_from`), all measured in one launch on K·max(2, v) equal
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
        args=(model, x, y, [Run(name, microbatches, chunks, link=link) for name in names], repeats),
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
