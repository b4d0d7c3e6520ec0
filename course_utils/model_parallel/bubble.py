"""Pipeline runs paced by sleep (an illustration), or with real compute (a measurement).

Paced (`typical_run` with a slot): every op is padded with sleep to a slot, so a timeline
shows the schedule itself; the sleep replays it and proves nothing about a real pipeline,
so no timing verdict rests on it. Real compute (`real_compute_run`, `measure_bubble`): equal
stages of real layers, forward and backward as long as they really are (a backward does
two matrix products to the forward's one), timed on each rank's link clock (its own CPU
time plus its waits for the hand-offs, `ranks.link`), so 4 stages on 2 cores time as if
each had a core: the scheduler cannot stretch one stage and call it a bubble.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import torch

from ..ranks import link as links
from .pipeline import PipelineRun, mlp, run_pipeline
from .schedules import BACKWARD, FORWARD, Timeline, bubble_formula, simulate

__all__ = [
    "HANDOFF_LINK", "least_disturbed_steps", "measure_bubble", "real_compute_run", "typical_run",
]  # fmt: skip

HANDOFF_LINK = "100gbit,10us"  # the hand-offs between stages: NVLink-class, nearly free


def typical_run(schedule: str = "gpipe", *, repeats: int = 3, **kwargs) -> PipelineRun:
    """The run with the median step time out of `repeats`, so that one hiccup of a shared
    machine (another process holding the core for a moment) does not decide the picture."""
    runs = [run_pipeline(schedule, **kwargs) for _ in range(repeats)]
    return sorted(runs, key=lambda r: r.timeline.makespan())[len(runs) // 2]


def real_compute_run(
    schedule: str, stages: int, microbatches: int, *, width: int, micro_batch_size: int,
    stage_cost: Sequence[float] | None = None, link: str | None = HANDOFF_LINK, seed: int = 0,
    keep_grads: bool = False,
) -> PipelineRun:  # fmt: skip
    """One step of `stages` equal blocks of `width` (a stage `stage_cost` times heavier gets
    that many blocks) with real compute, timed on the link clock (`link=None`: the real
    link, timed on the wall clock, fair only with a core per stage). Its timeline's slot is
    the median forward of one micro-batch on one stage, so it can be read in forwards.
    The gradients come back only with `keep_grads` (a stage of width 4096 has 64 MiB)."""
    blocks = [round(c) for c in (stage_cost or [1] * stages)]
    model = mlp([width] * (sum(blocks) + 1), seed=seed)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(microbatches * micro_batch_size, width, generator=gen)
    y = torch.randint(0, width, (len(x),), generator=gen)
    run = run_pipeline(
        schedule, stages=stages, microbatches=microbatches, model=_grouped(model, blocks),
        x=x, y=y, link=link, keep_grads=keep_grads,
    )  # fmt: skip
    forwards = [e.end - e.start for e in run.timeline.compute() if e.kind == FORWARD]
    run.timeline.slot = statistics.median(forwards)
    return run


def least_disturbed_steps(
    schedules: Sequence[str], stages: int, microbatches: int, *, repeats: int, **kwargs
) -> dict[str, Timeline]:
    """Each schedule's real-compute step (`real_compute_run`) with the fewest forwards out
    of `repeats`, the schedules taking turns so that a busy stretch of the machine falls on
    both. A moment another program takes a stage's core only lengthens a step, so the
    least disturbed one is the schedule's own; one run each let 1F1B against GPipe come out
    over 10% apart beside a CPU hog (`make stress`), though both take the same forwards."""
    steps: dict[str, list[Timeline]] = {name: [] for name in schedules}
    for _ in range(repeats):
        for name in schedules:
            run = real_compute_run(name, stages, microbatches, **kwargs)
            steps[name].append(run.timeline)
    return {
        name: min(timelines, key=lambda tl: tl.in_slots(tl.makespan()))
        for name, timelines in steps.items()
    }


def _grouped(model: torch.nn.Sequential, blocks: list[int]) -> torch.nn.Sequential:
    """Regroup the blocks so that stage s gets `blocks[s]` of them (the pipeline cuts evenly)."""
    children, out, at = list(model.children()), [], 0
    for n in blocks:
        out.append(torch.nn.Sequential(*children[at : at + n]))
        at += n
    return torch.nn.Sequential(*out)


def measure_bubble(
    stages: int,
    microbatches: Sequence[int],
    *,
    width: int,
    micro_batch_size: int = 64,
    repeats: int = 1,
    schedule: str = "gpipe",
    link: str | None = HANDOFF_LINK,
    stage_cost: Sequence[float] | None = None,
) -> list[dict]:
    """Measured and predicted bubble fraction for each M, with real compute on blocks of
    `width`, hand-offs over `link`. The measured one is the least idle of `repeats` steps:
    a stage that the shared machine slows for a moment makes the others wait, so noise only
    ever adds idle time (the least disturbed step is the schedule's, as `timeit` keeps the
    fastest run).

    Beside GPipe's formula, each row holds the bubble the schedule gives with the stages'
    own measured op times and the link's time per hand-off (`from_stages_and_link`: unequal
    stages and slow hand-offs make it larger), the measured step over that schedule's
    (`step_over_played_out`), the stages' backward time over their forward time
    (`backward_over_forward`: two matrix products to one, about 2) and the median forward
    of one micro-batch on one stage (`forward_seconds`). `stage_cost` makes stages
    unequal, as in `real_compute_run`.
    """
    handoff = links.parse(link).wire_seconds(micro_batch_size * width * 4)  # float32
    rows = []
    for m in microbatches:
        runs = [
            real_compute_run(
                schedule,
                stages,
                m,
                width=width,
                micro_batch_size=micro_batch_size,
                link=link,
                stage_cost=stage_cost,
            )  # fmt: skip
            for _ in range(repeats)
        ]
        tl = min((r.timeline for r in runs), key=Timeline.bubble_fraction)
        played = simulate(schedule, stages, m, durations=tl.op_seconds(), handoff=handoff)
        busy = {
            k: sum(e.end - e.start for e in tl.compute() if e.kind == k)
            for k in (FORWARD, BACKWARD)
        }
        rows.append(
            {
                "microbatches": m,
                "measured": tl.bubble_fraction(),
                "predicted": bubble_formula(stages, m),
                "from_stages_and_link": played.bubble_fraction(),
                "step_over_played_out": tl.makespan() / played.makespan(),
                "backward_over_forward": busy[BACKWARD] / busy[FORWARD],
                "forward_seconds": tl.slot,
            }
        )
    return rows
