"""Pipeline model parallelism for real: a sequential model cut into K stages on K ranks.

Each rank keeps one stage and runs it with the course's engine (`parallel.pipeline`), in
the order its schedule (`schedules`) gives. This module watches from outside: hooks on the
stage time every op (`stage_watch`), and the recorder's stamps on each receive give the
waits (`network.recorder`), so a training step comes back as a `Timeline`, together with
the gradients, which must equal those of the unsplit model on the same batch. Each stage
also counts the activation bytes it holds for its backwards (`activations`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from ..network import wire
from ..network.recorder import recording
from ..parallel.pipeline import pipeline_step
from ..ranks.bootstrap import device
from .schedules import WAIT, Event, Timeline, check_order
from .stage_watch import StageWatch
from .virtual_schedules import one_chunk


def mlp(widths: Sequence[int], seed: int = 0) -> nn.Sequential:
    """Blocks of Linear (+ ReLU but the last): the unit a model is cut at between stages."""
    torch.manual_seed(seed)
    pairs = list(pairwise(widths))
    blocks = []
    for n, (a, b) in enumerate(pairs):
        layers = [nn.Linear(a, b)] + ([nn.ReLU()] if n < len(pairs) - 1 else [])
        blocks.append(nn.Sequential(*layers))
    return nn.Sequential(*blocks)


def default_model(stages: int, in_features: int = 40, classes: int = 10, hidden: int = 32):
    """One block per stage, shaped for MNIST-1D (40 inputs, 10 classes)."""
    return mlp([in_features] + [hidden] * (stages - 1) + [classes])


def split(model: nn.Sequential, stages: int) -> list[nn.Sequential]:
    """Cut `model` into `stages` consecutive groups of its blocks, as even as possible."""
    blocks = list(model.children())
    if not 1 <= stages <= len(blocks):
        raise ValueError(
            f"cannot cut a model of {len(blocks)} blocks into {stages} stages; "
            f"use between 1 and {len(blocks)} stages, or a deeper model."
        )
    cuts = [round(s * len(blocks) / stages) for s in range(stages + 1)]
    return [nn.Sequential(*blocks[a:b]) for a, b in pairwise(cuts)]


@dataclass
class StageResult:
    stage: int
    events: list[Event]
    peak_held: int  # most micro-batches whose activations this stage kept at once
    peak_bytes: int  # most bytes of activations it kept at once (`activations`)
    loss: float | None  # the batch loss, on the last stage
    grads: list[torch.Tensor]  # of this stage's parameters


def import_autograd_extras() -> None:
    """Backward from a given gradient lazily imports sympy (seconds on a busy laptop); do it
    once in the parent, so that every forked rank starts with it already imported."""
    x = torch.zeros(1, requires_grad=True)  # cpu: in the parent, before any rank
    y = x * 2
    y.backward(torch.ones_like(y))


def _warm_up(module: nn.Module, in_shape, dev) -> torch.Size:
    """The first backward from a given gradient costs seconds in a fresh process (lazy set-up
    inside autograd); pay it before the clock starts, not in the first timed op."""
    out = module(torch.zeros(in_shape, device=dev, requires_grad=True))
    out.backward(torch.ones_like(out))
    module.zero_grad(set_to_none=True)
    return out.shape


def run_stage(
    model: nn.Sequential,
    schedule: str,
    microbatches: int,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    slot: float = 0.0,
    stage_cost: Sequence[float] | None = None,
    backward_ratio: float = 1.0,
    link: str | None = None,
    keep_grads: bool = True,
) -> StageResult:
    """This rank's share of one training step: its stage, in the schedule's order, run by
    `parallel.pipeline` and watched from outside (`stage_watch`).

    Runs inside a launched rank (rank r = stage r). With a `link`, hand-offs cross it and
    every time is the rank's link clock: its own CPU time plus waits (`network.wire.now`),
    as if each stage had a core of its own. Without `keep_grads` the gradients stay on the
    rank (a timing run need not ship them back).
    """
    with wire.active(link or "real", virtual=link is not None):
        now = wire.now if link else time.perf_counter
        result = _run_stage(
            model, schedule, microbatches, x, y, slot, stage_cost, backward_ratio, now
        )
    result.grads = result.grads if keep_grads else []
    return result


def _run_stage(model, schedule, microbatches, x, y, slot, stage_cost, backward_ratio, now):
    rank, stages = dist.get_rank(), dist.get_world_size()
    sched = one_chunk(schedule)
    dev = device()
    parts = split(model, stages)
    module = parts[rank].to(dev)
    # every stage alike: the first one computes its input's gradient too, which nothing
    # needs, so that its backward costs what the others' do (equal stages, as in the formula)
    xs = [part.detach().requires_grad_() for part in x.to(dev).chunk(microbatches)]
    ys = y.to(dev).chunk(microbatches)
    with torch.no_grad():
        h = xs[0]
        for part in parts[:rank]:
            h = part.to(dev)(h)
    order = check_order(sched.order(rank, stages, microbatches), microbatches, rank)
    _warm_up(module, h.shape, dev)
    cost = (stage_cost or [1.0] * stages)[rank]
    watch = StageWatch(module, order, now, (slot * cost, slot * cost * backward_ratio))
    dist.barrier()
    t0 = wire.restart()  # one moment for every stage: their events share one time axis
    with recording() as log, watch:
        loss = pipeline_step(
            module, order, list(zip(xs, ys, strict=True)), F.cross_entropy, h.shape[1:],
            hold_sends=sched.hold_sends,
        )  # fmt: skip
    waits = [Event(rank, WAIT, -1, m.began, m.ended) for m in log.messages if m.op == "arrived"]
    events = [replace(e, start=e.start - t0, end=e.end - t0) for e in watch.events + waits]
    grads = [p.grad.detach().cpu() for p in module.parameters()]
    peak = watch.held.peak_count, watch.held.peak_bytes
    return StageResult(rank, sorted(events, key=lambda e: e.start), *peak, loss, grads)


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
    micro_batch_size: int = 8,
    hidden: int = 32,
    slot: float = 0.0,
    stage_cost: Sequence[float] | None = None,
    backward_ratio: float = 1.0,
    model: nn.Sequential | None = None,
    x: torch.Tensor | None = None,
    y: torch.Tensor | None = None,
    seed: int = 0,
    backend: str = "gloo",
    timeout: float = 60.0,
    link: str | None = None,
    keep_grads: bool = True,
) -> PipelineRun:
    """One training step of `model` (default: one block of width `hidden` per stage) on
    `stages` ranks, in the order `schedule` gives; `x, y` default to a random batch.

    The backend defaults to gloo: the timelines are paced by the slots, so CPU ranks show
    the schedule on any machine, with or without one GPU per stage.
    """
    from ..ranks.launch import launch

    one_chunk(schedule)
    model = model if model is not None else default_model(stages, hidden=hidden)
    x, y = batch_for(model, microbatches, micro_batch_size, seed, x, y)
    if stage_cost is not None and len(stage_cost) != stages:
        raise ValueError(f"stage_cost has {len(stage_cost)} entries for {stages} stages.")
    split(model, stages)  # refuse an impossible cut here, not on every rank
    import_autograd_extras()
    results = launch(
        run_stage,
        stages,
        backend=backend,
        timeout=timeout,
        args=(model, schedule, microbatches, x, y),
        kwargs={
            "slot": slot,
            "stage_cost": stage_cost,
            "backward_ratio": backward_ratio,
            "link": link,
            "keep_grads": keep_grads,
        },
    )
    events = sorted((e for r in results for e in r.events), key=lambda e: (e.stage, e.start))
    timeline = Timeline(
        one_chunk(schedule).name,
        stages,
        microbatches,
        events,
        slot=slot or 1.0,
        peak_activations=tuple(r.peak_held for r in results),
        peak_bytes=tuple(r.peak_bytes for r in results),
    )
    return PipelineRun(timeline, results[-1].loss, [g for r in results for g in r.grads])


def batch_for(model, microbatches: int, micro_batch_size: int, seed: int, x=None, y=None):
    """`x, y`, or a random batch of `microbatches` x `micro_batch_size` samples for `model`'s
    inputs and classes; refused unless it cuts into equal micro-batches."""
    if x is None:
        gen = torch.Generator().manual_seed(seed)
        first = next(model.parameters()).shape[1]
        x = torch.randn(microbatches * micro_batch_size, first, generator=gen)  # cpu: sent to ranks
        classes = list(model.parameters())[-1].shape[0]
        y = torch.randint(0, classes, (len(x),), generator=gen)  # cpu: sent to ranks
    if len(x) % microbatches:
        raise ValueError(
            f"a batch of {len(x)} samples does not cut into {microbatches} equal micro-batches; "
            f"use a batch size that is a multiple of {microbatches}."
        )
    return x, y


def serial_step(model: nn.Sequential, x: torch.Tensor, y: torch.Tensor):
    """The unsplit model's loss and gradients on the whole batch: the pipeline's twin."""
    model.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    grads = [p.grad.detach().clone() for p in model.parameters()]
    model.zero_grad()
    return loss.item(), grads
