"""Pipeline runs paced by sleep (an illustration), or with real compute (a measurement).

Paced (`typical_run` with a slot): every op is padded with sleep to a slot, so a timeline
shows the schedule itself; the sleep replays it and proves nothing about a real pipeline,
so no timing verdict rests on it. Real compute (`real_compute_run`, `measure_bubble` for
GPipe over M, `measure_schedules` for every schedule at one M): equal stages of real
layers, forward and backward as long as they really are (a backward does two matrix
products to the forward's one), on one of two clocks. Simulated: each rank's
link clock (its own CPU time plus its waits for the hand-offs over an emulated link,
`network.wire`), so 4 stages on 2 cores time as if each had a core. Real: the wall clock over
the real link, with no more stages than cores (`on_the_real_clock`), judged only when other
programs left the stages their cores. A step's bubble is held against its schedule played
out with that step's own op times, the time each op's rank then spent handing its result on,
and the median hand-off (`row_from`): a formula assumes free hand-offs and equal ops, the
play-out does not, so only the play-out is a fair bar for a small bubble (at K = 2, M = 16
interleaving leaves about 1/33 of the step, where one slow op is a good part of it).
"""

from __future__ import annotations

import copy
import statistics
from collections.abc import Callable, Sequence
from itertools import accumulate, pairwise
from typing import TypeVar

import torch
import torch.distributed as dist

from ..core import progress
from ..core.machine import MachineShare, machine_cores, on_a_quiet_machine
from .pipeline import Work, every_schedule_blocks, import_autograd_extras, mlp
from .schedule_check import check_orders
from .schedule_play import Costs, handoff_seconds, play_out, posting_seconds
from .schedules import (
    BACKWARD,
    FORWARD,
    WEIGHT,
    bubble_formula,
    handoffs_per_step,
    interleaved_bubble_formula,
    plan,
    zb_h1_bubble_formula,
)
from .timeline import Timeline
from .virtual_pipeline import PipelineRun, RankSteps, Run, run_pipeline, step_timeline, train_rank

T = TypeVar("T")
# the hand-offs between stages: a fast network link, 100 Gbit/s (100 GbE's rate; NVLink 4
# carries 36 times that) and 10 us, small beside a stage's compute here
HANDOFF_LINK = "100gbit,10us"


def typical_run(schedule: str = "gpipe", *, repeats: int = 3, **kwargs) -> PipelineRun:
    """The run with the median step time out of `repeats`, so that one hiccup of a shared
    machine (another process holding the core for a moment) does not decide the picture."""
    runs = []
    with progress.bar(repeats, f"{schedule} steps", "step") as bar:
        for _ in range(repeats):
            runs.append(run_pipeline(schedule, **kwargs))
            bar.update(1)
    return sorted(runs, key=lambda r: r.timeline.makespan())[len(runs) // 2]


def real_compute_run(
    schedule: str, stages: int, microbatches: int, *, width: int, micro_batch_size: int,
    stage_cost: Sequence[float] | None = None, link: str | None = HANDOFF_LINK,
    keep_grads: bool = False,
) -> PipelineRun:  # fmt: skip
    """One step of `stages` equal blocks of `width` (a stage `stage_cost` times heavier gets
    that many blocks) with real compute, timed on the link clock (`link=None`: the real
    link, timed on the wall clock, fair only with a core per stage). Its timeline's slot is
    the median forward of one micro-batch on one stage, so it can be read in forwards.
    The gradients come back only with `keep_grads` (a stage of width 4096 has 64 MiB)."""
    blocks = [round(c) for c in (stage_cost or [1] * stages)]
    model = _grouped(mlp([width] * (sum(blocks) + 1)), blocks)
    work = Work(model, micro_batch_size=micro_batch_size)  # a random batch of width classes
    run = run_pipeline(
        schedule, stages=stages, microbatches=microbatches, work=work, link=link,
        keep_grads=keep_grads,
    )  # fmt: skip
    run.timeline.slot = run.timeline.median_op(FORWARD)
    return run


def least_disturbed_steps(
    schedules: Sequence[str], stages: int, microbatches: int, *, repeats: int, **kwargs
) -> dict[str, Timeline]:
    """Each schedule's real-compute step (`real_compute_run`) that was shortest for its work
    (`Timeline.step_over_work`) out of `repeats`, the schedules taking turns so that a busy
    stretch of the machine falls on both. A moment another program takes a stage's core
    only makes the others wait, so the least disturbed step is the schedule's own; one run
    each let 1F1B against GPipe come out over 10% apart beside a CPU hog (`make stress`),
    though both take the same time for the same work."""
    steps: dict[str, list[Timeline]] = {name: [] for name in schedules}
    with progress.bar(repeats * len(schedules), f"{' and '.join(schedules)} steps", "step") as bar:
        for _ in range(repeats):
            for name in schedules:
                run = real_compute_run(name, stages, microbatches, **kwargs)
                steps[name].append(run.timeline)
                bar.update(1)
    return {name: min(timelines, key=Timeline.step_over_work) for name, timelines in steps.items()}


def _grouped(model: torch.nn.Sequential, blocks: list[int]) -> torch.nn.Sequential:
    """Regroup the blocks so that stage s gets `blocks[s]` of them (the pipeline cuts evenly)."""
    children, cuts = list(model.children()), [0, *accumulate(blocks)]
    return torch.nn.Sequential(*(torch.nn.Sequential(*children[a:b]) for a, b in pairwise(cuts)))


def on_the_real_clock(measure: Callable[[int], T], stages: int) -> tuple[T, MachineShare]:
    """`measure(k)` on the wall clock, with k stages: one per core this process may use, at
    most `stages`, at least 2 (a pipeline of one stage has no bubble); and what other
    programs took of the machine meanwhile: measured again, a few times at most, while they
    took the stages' cores (`core.machine`), since then the wall clock shows the machine,
    not the schedule."""
    k = max(2, min(stages, machine_cores()))
    return on_a_quiet_machine(lambda: measure(k), k)


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
    `width`, hand-offs over `link` (`None`: the real link, on the wall clock). The measured
    one is the least idle of `repeats` steps: a stage that the shared machine slows for a
    moment makes the others wait, so noise only ever adds idle time (the least disturbed
    step is the schedule's, as `timeit` keeps the fastest run).

    Each row is `row_from`'s. Beside GPipe's formula, it holds the bubble the schedule gives
    when played out with every op's own measured time, the time its stage then spent handing
    the result on, and the median measured hand-off (`from_stages_and_link`: unequal stages
    and slow hand-offs make it larger, a pipeline that waits where its schedule does not is
    measured above it), the measured step over that schedule's (`step_over_played_out`), the
    stages' backward time over their forward time (`backward_over_forward`: two matrix
    products to one, about 2), the median forward of one micro-batch on one stage
    (`forward_seconds`), the median hand-off (`handoff_seconds`), K (`stages`) and the clock
    the stages were timed on (`clock`: real on the wall clock, fair only with a core per
    stage; simulated on the link clock).
    `stage_cost` makes stages unequal, as in `real_compute_run`.
    """
    clock = "real" if link is None else "simulated"
    sizes = dict(width=width, micro_batch_size=micro_batch_size, stage_cost=stage_cost)
    rows = []
    with progress.bar(len(microbatches) * repeats, f"{schedule}, {clock} clock", "step") as bar:
        for m in microbatches:
            bar.set_postfix(M=m)
            runs = []
            for _ in range(repeats):
                runs.append(real_compute_run(schedule, stages, m, link=link, **sizes))
                bar.update(1)
            tl = min((r.timeline for r in runs), key=Timeline.bubble_fraction)
            rows.append(row_from(tl, schedule, 1, clock, micro_batch_size * width * 4))
    return rows


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
        schedule,
        tl.stages,
        tl.microbatches,
        chunks=v,
        costs=Costs(handoff=handoff),
        per_op=tl.op_durations(),
        posting=posting_seconds(tl),
    )
    f, b, w = (tl.median_op(k) for k in (FORWARD, BACKWARD, WEIGHT))
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
) -> list[dict]:
    """One row per schedule (`row_from`), all measured in one launch on K·max(2, v) equal
    blocks of `width` with real compute (`link=None`: the real link on the wall clock, fair
    only with a core per rank). Each row is the least idle of the schedule's `repeats` steps:
    a stage the shared machine slows for a moment only makes the others wait, so noise only
    adds idle time and the least idle step is the schedule's own (as `measure_bubble`)."""
    from ..ranks.launch import launch

    names = [plan(name, chunks).name for name in schedules]
    blocks = every_schedule_blocks(stages, chunks)
    work = Work(mlp([width] * (blocks + 1)), micro_batch_size=micro_batch_size)
    model, x, y = work.resolve(blocks, microbatches)  # a random batch of width classes
    # K·max(2, v) blocks always cut into K·v pieces; an impossible order is refused here,
    # not on every rank
    for name in names:
        sched = plan(name, chunks)
        check_orders(sched.orders(stages, microbatches), stages, microbatches, sched.chunks)
    import_autograd_extras()
    per_rank = launch(
        _turns,
        stages,
        backend="gloo",
        timeout=300.0,
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
