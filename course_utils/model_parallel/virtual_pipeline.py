"""Every schedule of notebook 06, naive to zero bubble, run for real on the course's engine.

Rank r holds the model's pieces r, r + K, ... (one per chunk) and runs its ops in the order
a `schedules.Plan` gives, with `parallel.pipeline`, the engine every schedule of
notebook 06 and 11's mesh run on. This module watches it from outside: hooks time every op
(`stage_watch`), the recorder's stamps on each receive give the waits. `run_pipeline` is one
step whose gradients must equal the unsplit model's (`pipeline.serial_step`); in
`train_pipeline` every rank takes an SGD step after each step, and the weights must equal
one process training the unsplit model on the same batches (`serial_training`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from ..network import wire
from ..network.recorder import recording
from ..parallel.pipeline import backward_input, backward_weight, pipeline_step, run_blocks
from ..ranks.bootstrap import device
from .pipeline import Work, every_schedule_blocks, import_autograd_extras, serial_step, split
from .schedule_check import check_orders
from .schedules import one_chunk, plan
from .stage_watch import StageWatch
from .timeline import WAIT, Event, Timeline


def pieces_of(model: nn.Sequential, stages: int, chunks: int, rank: int) -> list[nn.Sequential]:
    """Rank `rank`'s chunks: pieces rank, rank + K, ... of the model cut into K·v pieces."""
    parts = split(model, stages * chunks)
    return [parts[c * stages + rank] for c in range(chunks)]


@dataclass(frozen=True)
class Pacing:
    """For a picture, each op padded with sleep to a slot: a forward to `slot` seconds times
    `stage_cost[s]` on stage s, a backward to that times `backward_ratio` (an illustration,
    not a measurement; `slot` 0: no padding)."""

    slot: float = 0.0
    stage_cost: tuple[float, ...] | None = None
    backward_ratio: float = 1.0

    def __post_init__(self):
        if not self.slot and (self.stage_cost is not None or self.backward_ratio != 1.0):
            raise ValueError(
                "stage_cost and backward_ratio scale the slot each op is padded to, and without "
                "a slot nothing is padded: give one too (Pacing(slot=0.05, ...)), or leave them "
                "out to time each op as long as its compute really is."
            )


@dataclass(frozen=True)
class Run:
    """What one launch runs on every rank: `schedule` over `microbatches` (`chunks`: v, for
    "interleaved"), `steps` SGD steps of learning rate `lr` (0: none), hand-offs over `link`
    (None: the real one, on the wall clock; else each rank's link clock), ops paced for a
    picture by `pacing`. `post_ahead`: receives posted as soon as their shape is known (gloo).
    `keep`: the weights after the last step, and its gradients, come back."""

    schedule: str
    microbatches: int
    chunks: int = 2
    steps: int = 1
    lr: float = 0.1
    link: str | None = None
    pacing: Pacing = Pacing()
    post_ahead: bool = True
    keep: bool = False


@dataclass
class RankSteps:
    rank: int
    steps: list[list[Event]]  # each step's events, in seconds from the step's start
    losses: list[float]  # per step, on the rank holding the last piece (else empty)
    peak_held: int
    peak_bytes: int
    params: list[list[torch.Tensor]]  # per chunk, after the last step (`Run.keep`)
    grads: list[torch.Tensor]  # the last step's, before its update (`Run.keep`)
    sent: list[int]  # the first step's messages: the rank each went to


def _warm_up(pieces, shapes) -> None:
    """The first backward costs seconds in a fresh process: pay it before any clock starts."""
    for piece, shape in zip(pieces, shapes, strict=True):
        x = torch.zeros(shape, device=next(piece.parameters()).device, requires_grad=True)
        outs = run_blocks(piece, x)
        grads = backward_input(x, outs, outs[-1], torch.ones_like(outs[-1]))[1]
        backward_weight(piece, outs, grads)
        piece.zero_grad(set_to_none=True)


def train_rank(model, x, y, run: Run) -> RankSteps:
    """This rank's share of `run`, inside a launch (rank r holds pieces r, r + K, ...)."""
    with wire.active(run.link or "real", virtual=run.link is not None):
        now = wire.now if run.link else time.perf_counter
        return _train_rank(model, x, y, run, now)


def _train_rank(model, x, y, run: Run, now) -> RankSteps:
    rank, k, dev = dist.get_rank(), dist.get_world_size(), device()
    sched, micro = plan(run.schedule, run.chunks), run.microbatches
    v = sched.chunks
    order = check_orders(sched.orders(k, micro), k, micro, v)[rank]
    pieces = [p.to(dev) for p in pieces_of(model, k, v, rank)]
    xs, ys = x.to(dev).chunk(micro), y.to(dev).chunk(micro)
    shapes, h = [], xs[0]
    with torch.no_grad():
        for g, part in enumerate(split(model, k * v)):
            if g % k == rank:
                shapes.append(h.shape)
            h = part.to(dev)(h)
    _warm_up(pieces, shapes)
    pace = run.pacing
    cost = pace.slot * (pace.stage_cost or [1.0] * k)[rank]
    result = RankSteps(rank, [], [], 0, 0, [], [], [])
    for _ in range(run.steps):
        # every piece alike: the first one computes its input's gradient too, which nothing
        # needs, so that its backward costs what the others' do (equal stages, as in the
        # formula); on fresh tensors each step (the watch hooks each input's gradient)
        batches = [(a.detach().requires_grad_(), b) for a, b in zip(xs, ys, strict=True)]
        watch = StageWatch(pieces, order, now, (cost, cost * pace.backward_ratio))
        dist.barrier()
        t0 = wire.restart()  # one moment for every rank: their events share one time axis
        with recording() as log, watch:
            loss = pipeline_step(
                pieces,
                order,
                batches,
                F.cross_entropy,
                [s[1:] for s in shapes],
                hold_sends=sched.hold_sends,
                post_ahead=run.post_ahead,
            )
        waits = [Event(rank, WAIT, -1, m.began, m.ended) for m in log.messages if m.op == "arrived"]
        events = [replace(e, start=e.start - t0, end=e.end - t0) for e in watch.events + waits]
        result.steps.append(sorted(events, key=lambda e: e.start))
        if not result.sent:
            result.sent = [m.peer for m in log.messages if m.op == "isend"]
        params = [p for piece in pieces for p in piece.parameters()]
        if run.keep:
            result.grads = [p.grad.detach().cpu() for p in params]
        with torch.no_grad():
            for p in params:
                p -= run.lr * p.grad
                p.grad = None
        if rank == (k * v - 1) % k:
            result.losses.append(loss)
        result.peak_held = max(result.peak_held, watch.held.peak_count)
        result.peak_bytes = max(result.peak_bytes, watch.held.peak_bytes)
    if run.keep:
        result.params = [[p.detach().cpu() for p in piece.parameters()] for piece in pieces]
    return result


@dataclass
class Training:
    chunks: int
    timelines: list[Timeline]  # one per step
    losses: list[float]  # per step, before its update
    params: list[torch.Tensor]  # after the last step, in the order of model.parameters()
    sent: list[tuple[int, int]]  # the first step's messages, every rank's: (from, to)


def train_pipeline(
    schedule: str = "1f1b",
    *,
    stages: int,
    microbatches: int,
    chunks: int = 2,
    steps: int = 3,
    lr: float = 0.1,
    work: Work = Work(),
    timeout: float = 60.0,
) -> Training:
    """`steps` training steps of `work` (its default model: K·max(2, v) blocks) on `stages`
    gloo ranks in `schedule`'s order (`chunks`: v, for "interleaved"). Each step's timeline
    is on the wall clock, over the real link (fair only with a core per rank)."""
    from ..ranks.launch import launch

    sched = plan(schedule, chunks)
    model, x, y = work.resolve(every_schedule_blocks(stages, chunks), microbatches)
    split(model, stages * sched.chunks)  # refuse an impossible cut here, not on every rank
    check_orders(sched.orders(stages, microbatches), stages, microbatches, sched.chunks)
    import_autograd_extras()
    run = Run(sched.name, microbatches, sched.chunks, steps, lr, keep=True)
    results = launch(train_rank, stages, backend="gloo", timeout=timeout, args=(model, x, y, run))
    timelines = [step_timeline(results, sched.name, microbatches, n) for n in range(steps)]
    sent = [(r.rank, to) for r in results for to in r.sent]
    # the last piece, K·v - 1, is always on the last rank
    return Training(
        sched.chunks,
        timelines,
        results[-1].losses,
        model_params([r.params for r in results]),
        sent,
    )


@dataclass
class PipelineRun:
    timeline: Timeline
    loss: float
    grads: list[torch.Tensor]  # in the order of model.parameters()


def run_pipeline(
    schedule: str = "gpipe",
    *,
    stages: int,
    microbatches: int,
    work: Work = Work(),
    pacing: Pacing = Pacing(),
    link: str | None = None,
    keep_grads: bool = True,
) -> PipelineRun:
    """One training step of `work` (its default model: one block per stage) on `stages` gloo
    ranks, in the order `schedule` (naive, GPipe or 1F1B) gives. The gradients come back
    unless `keep_grads` is False, and must equal those of the unsplit model on the same batch
    (`pipeline.serial_step`). Gloo on any machine: a picture's timeline is paced by its slots
    (`Pacing`), so CPU ranks show the schedule with or without one GPU per stage.
    """
    from ..ranks.launch import launch

    sched = one_chunk(schedule)
    model, x, y = work.resolve(stages, microbatches)
    if pacing.stage_cost is not None and len(pacing.stage_cost) != stages:
        raise ValueError(f"stage_cost has {len(pacing.stage_cost)} entries for {stages} stages.")
    split(model, stages)  # refuse an impossible cut here, not on every rank
    import_autograd_extras()
    run = Run(
        sched.name,
        microbatches,
        1,
        lr=0.0,
        link=link,
        pacing=pacing,
        post_ahead=False,
        keep=keep_grads,
    )
    results = launch(train_rank, stages, backend="gloo", timeout=60.0, args=(model, x, y, run))
    timeline = step_timeline(results, sched.name, microbatches)
    timeline.slot = pacing.slot or 1.0
    return PipelineRun(timeline, results[-1].losses[0], [g for r in results for g in r.grads])


def step_timeline(results: list[RankSteps], schedule: str, microbatches: int, step: int = 0):
    """Step `step` of every rank's `RankSteps` as one `Timeline`, in seconds from its start."""
    events = sorted((e for r in results for e in r.steps[step]), key=lambda e: (e.stage, e.start))
    return Timeline(
        schedule,
        len(results),
        microbatches,
        events,
        slot=1.0,
        peak_activations=tuple(r.peak_held for r in results),
        peak_bytes=tuple(r.peak_bytes for r in results),
    )


def model_params(per_rank: list) -> list[torch.Tensor]:
    """The ranks' weights (each rank's `params`: a list per chunk) in the order of the unsplit
    model's parameters: piece g is chunk g // K of rank g % K."""
    k = len(per_rank)
    pieces = k * len(per_rank[0])
    return [p for g in range(pieces) for p in per_rank[g % k][g // k]]


def serial_training(model: nn.Sequential, x, y, steps: int, lr: float = 0.1):
    """The twin: the unsplit model's losses and weights after `steps` SGD steps on `x, y`."""
    import copy

    model, losses = copy.deepcopy(model), []
    for _ in range(steps):
        loss, grads = serial_step(model, x, y)
        losses.append(loss)
        with torch.no_grad():
            for p, g in zip(model.parameters(), grads, strict=True):
                p -= lr * g
    return losses, [p.detach().clone() for p in model.parameters()]
