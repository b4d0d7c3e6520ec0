"""The pipeline engine for virtual stages and a split backward, training for several steps.

A sibling of `pipeline`: rank r holds the model's pieces r, r + K, ... (one per chunk), runs
its ops in the order a `virtual_schedules.Plan` gives, and hands activations and gradients on
with point-to-point sends. A split backward is done with autograd in two calls: B asks
`torch.autograd.grad` for the gradient of the chunk's input and of each block's output only
(the path the previous stage waits for), W later asks each block for its weights' gradient
from the block's output gradient kept by B, so no product is computed twice. After each step
every rank takes one SGD step, and the weights must equal one process training the unsplit
model on the same batches (`serial_training`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from ..network import wire
from ..ranks.bootstrap import device
from .activations import HeldActivations
from .handoffs import Mailbox
from .pipeline import batch_for, import_autograd_extras, mlp, serial_step, split
from .schedule_check import check_orders
from .schedule_play import ChunkEvent, source
from .schedules import WAIT, Timeline
from .virtual_schedules import BACKWARD, FORWARD, WEIGHT, plan


def pieces_of(model: nn.Sequential, stages: int, chunks: int, rank: int) -> list[nn.Sequential]:
    """Rank `rank`'s chunks: pieces rank, rank + K, ... of the model cut into K·v pieces."""
    parts = split(model, stages * chunks)
    return [parts[c * stages + rank] for c in range(chunks)]


def _forward(piece, inp, target, microbatches):
    """Each block's output (kept for B and W) and what the backward starts from: the loss
    on the last piece of the model (a share 1/M of the batch's), else the last output."""
    outs, h = [], inp
    for block in piece:
        h = block(h)
        outs.append(h)
    return outs, (F.cross_entropy(h, target) / microbatches if target is not None else h)


def backward_input(inp, outs, root, grad):
    """B: the gradient of the piece's input, and of each block's output (for W), nothing else."""
    last = grad is None
    wrt = [inp, *outs[:-1], *([outs[-1]] if last else [])]
    grads = torch.autograd.grad(root, wrt, grad, retain_graph=True)
    return grads[0], [*grads[1:], *([] if last else [grad])]


def backward_weight(piece, outs, out_grads) -> None:
    """W: each block's weight gradients from its output's gradient, added to `.grad`."""
    for block, out, g in zip(piece, outs, out_grads, strict=True):
        params = list(block.parameters())
        for p, d in zip(params, torch.autograd.grad(out, params, g), strict=True):
            p.grad = d if p.grad is None else p.grad + d


@dataclass
class RankSteps:
    rank: int
    steps: list[list[ChunkEvent]]  # each step's events, in seconds from the step's start
    losses: list[float]  # per step, on the rank holding the last piece (else empty)
    peak_held: int
    peak_bytes: int
    params: list[list[torch.Tensor]]  # per chunk, after the last step
    sent: list[tuple[str, int, int]]  # the first step's messages: (kind, i, sending stage)


def _tag(kind: str, i: int, g: int, microbatches: int) -> int:
    return 2 * (g * microbatches + i) + (kind == BACKWARD)


def train_rank(model, schedule, chunks, microbatches, x, y, steps, lr, link=None) -> RankSteps:
    """This rank's share of `steps` training steps (SGD, learning rate `lr`), inside a launch."""
    with wire.active(link or "real", virtual=link is not None):
        return _train_rank(
            model,
            schedule,
            chunks,
            microbatches,
            x,
            y,
            steps,
            lr,
            wire.now if link else time.perf_counter,
        )


def _train_rank(model, schedule, chunks, microbatches, x, y, steps, lr, now) -> RankSteps:
    rank, k, dev = dist.get_rank(), dist.get_world_size(), device()
    sched = plan(schedule, chunks)
    v, last = sched.chunks, k * sched.chunks - 1
    order = check_orders(sched.orders(k, microbatches), k, microbatches, v)[rank]
    split_backward = any(kind == WEIGHT for kind, _, _ in order)
    parts = [p.to(dev) for p in split(model, k * v)]
    pieces = [parts[c * k + rank] for c in range(v)]
    xs, ys = x.to(dev).chunk(microbatches), y.to(dev).chunk(microbatches)
    shapes, h = [], xs[0]
    with torch.no_grad():
        for part in parts:
            shapes.append(h.shape)
            h = part(h)
    shapes.append(h.shape)  # shapes[g]: piece g's input; shapes[g + 1]: its output
    for c, piece in enumerate(pieces):  # the first backward costs seconds in a fresh process
        inp = torch.zeros(shapes[c * k + rank], device=dev, requires_grad=True)
        outs, root = _forward(piece, inp, None, 1)
        backward_weight(piece, outs, backward_input(inp, outs, root, torch.ones_like(root))[1])
        piece.zero_grad(set_to_none=True)
    held = HeldActivations(nn.ModuleList(pieces))
    result = RankSteps(rank, [], [], 0, 0, [], [])
    incoming_of = {}  # (kind, i, c): (buffer shape, peer, tag) of what that op receives
    for kind, i, c in order:
        src = source(rank, kind, c, k, v)
        if kind != WEIGHT and src is not None:
            g = src[1] * k + src[0]
            shape = shapes[g + 1] if kind == FORWARD else shapes[g]
            incoming_of[kind, i, c] = shape, src[0], _tag(kind, i, g, microbatches)
    for step in range(steps):
        box = Mailbox(incoming_of, dev)
        stash, kept, events, loss = {}, {}, [], 0.0
        dist.barrier()
        t0 = wire.restart()

        def receive(key, box=box, events=events, t0=t0):
            buf, handle = box.take(key)
            began = now()
            handle.wait()
            events.append(ChunkEvent(rank, WAIT, -1, began - t0, now() - t0))
            return buf

        for kind, i, c in order:
            g = c * k + rank
            incoming = receive((kind, i, c)) if (kind, i, c) in incoming_of else None
            start = now()
            if kind == FORWARD:
                inp = (xs[i] if g == 0 else incoming).requires_grad_()
                with held.forward((i, c), inp) as outputs:
                    outs, root = _forward(
                        pieces[c], inp, ys[i] if g == last else None, microbatches
                    )
                    outputs.append(root)
                if g == last:
                    loss += root.item()
                stash[i, c] = inp, outs, root
                out = None if g == last else root.detach()
            elif kind == BACKWARD:
                inp, outs, root = stash.pop((i, c))
                if split_backward:
                    out, grads = backward_input(inp, outs, root, incoming)
                    kept[i, c] = outs, grads
                else:
                    torch.autograd.backward(root, incoming)
                    out = inp.grad
                    held.backward((i, c))
                out = out if g > 0 else None
            else:
                backward_weight(pieces[c], *kept.pop((i, c)))
                held.backward((i, c))
                out = None
            events.append(ChunkEvent(rank, kind, i, start - t0, now() - t0, chunk=c))
            if out is not None:
                to = g + 1 if kind == FORWARD else g - 1
                box.send(out, to % k, _tag(kind, i, g, microbatches))
                if step == 0:
                    result.sent.append((kind, i, g))
        box.finish()
        with torch.no_grad():
            for p in (p for piece in pieces for p in piece.parameters()):
                p -= lr * p.grad
                p.grad = None
        result.steps.append(events)
        if rank == last % k:
            result.losses.append(loss)
    result.peak_held, result.peak_bytes = held.peak_count, held.peak_bytes
    result.params = [[p.detach().cpu() for p in piece.parameters()] for piece in pieces]
    return result


@dataclass
class Training:
    schedule: str
    chunks: int
    timelines: list[Timeline]  # one per step
    losses: list[float]  # per step, before its update
    params: list[torch.Tensor]  # after the last step, in the order of model.parameters()
    sent: list[tuple[str, int, int]]  # the first step's messages, every rank's


def train_pipeline(
    schedule: str = "1f1b",
    *,
    stages: int,
    microbatches: int,
    chunks: int = 2,
    steps: int = 3,
    lr: float = 0.1,
    model: nn.Sequential | None = None,
    x: torch.Tensor | None = None,
    y: torch.Tensor | None = None,
    micro_batch_size: int = 8,
    hidden: int = 32,
    seed: int = 0,
    link: str | None = None,
    timeout: float = 60.0,
) -> Training:
    """`steps` training steps of `model` (default: K·v blocks of width `hidden`, MNIST-1D's
    40 inputs and 10 classes) on `stages` gloo ranks in `schedule`'s order (`chunks`: v, for
    "interleaved"), on a batch `x, y` (default random). Each step's timeline is on the wall
    clock (`link=None`: fair only with a core per rank) or the ranks' link clocks."""
    from ..ranks.launch import launch

    sched = plan(schedule, chunks)
    if model is None:
        model = mlp([40] + [hidden] * (stages * max(2, chunks) - 1) + [10], seed=seed)
    x, y = batch_for(model, microbatches, micro_batch_size, seed, x, y)
    split(model, stages * sched.chunks)  # refuse an impossible cut here, not on every rank
    check_orders(sched.orders(stages, microbatches), stages, microbatches, sched.chunks)
    import_autograd_extras()
    results = launch(
        train_rank,
        stages,
        backend="gloo",
        timeout=timeout,
        args=(model, sched.name, sched.chunks, microbatches, x, y, steps, lr, link),
    )
    timelines = [step_timeline(results, sched.name, microbatches, n) for n in range(steps)]
    sent = [m for r in results for m in r.sent]
    # the last piece, K·v - 1, is always on the last rank
    return Training(
        sched.name,
        sched.chunks,
        timelines,
        results[-1].losses,
        model_params([r.params for r in results]),
        sent,
    )


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
