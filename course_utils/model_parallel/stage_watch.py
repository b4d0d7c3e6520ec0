"""A pipeline stage's ops timed from outside the engine (`parallel.pipeline`), with hooks.

A forward lasts from the chunk's forward pre-hook to its forward hook; a backward from the
hook on the chunk's output gradient to the last of its parameters' gradient hooks. A split
backward ends its B at the hook on the chunk input's gradient (give the first stage inputs
that require one), and its W starts when the output's gradient hook fires again, as the
root of W, and ends at the last parameter's. So the engine stays the plain algorithm, and
notebook 06 still gets every op's start and end.
To make timelines readable on a 2-core laptop, an op may be padded with sleep to a fixed
slot: then the picture shows the schedule, not the noise of four processes sharing two
cores; an illustration, not a measurement.
"""

from __future__ import annotations

import time
from functools import partial

import torch.distributed as dist
from torch import nn

from ..parallel.pipeline import BACKWARD, FORWARD, WEIGHT, chunks_and_ops
from .activations import HeldActivations
from .timeline import Event


def _pad_to(start: float, seconds: float) -> None:
    left = start + seconds - time.perf_counter()
    if left > 0:
        time.sleep(left)


class StageWatch:
    """Inside the block, the ops in `order` of `stage` (a module, or a list of chunks) are
    timed on `now` into `events`, each padded to its slot (forward, backward) when one is
    set, and the activations autograd saves in a forward are counted as held until that
    micro-batch's backward ends with them (B, or W when the backward is split: `held`)."""

    def __init__(self, stage, order, now, slots: tuple[float, float] = (0.0, 0.0)):
        self.chunks, ops = chunks_and_ops(stage, order)
        self.split = any(kind == WEIGHT for kind, _, _ in ops)
        self.forwards = [
            iter([i for kind, i, c in ops if kind == FORWARD and c == chunk])
            for chunk in range(len(self.chunks))
        ]
        self.now, self.slots = now, slots
        self.held = HeldActivations(nn.ModuleList(self.chunks))
        self.events: list[Event] = []
        self._handles: list = []
        self._backward_began: set = set()

    def __enter__(self):
        for c, chunk in enumerate(self.chunks):
            first, last = (chunk[0], chunk[-1]) if self.split else (chunk, chunk)
            self._handles += [
                first.register_forward_pre_hook(partial(self._forward_began, c)),
                last.register_forward_hook(partial(self._forward_ended, c)),
            ] + [
                p.register_post_accumulate_grad_hook(self._gradient_in) for p in chunk.parameters()
            ]
        return self

    def __exit__(self, *exc):
        for handle in self._handles:
            handle.remove()

    def _began(self, kind: str, i: int, c: int, left: int = 0) -> None:
        self._op, self._start, self._left = (kind, i, c), self.now(), left

    def _forward_began(self, c: int, module, args):
        i, x = next(self.forwards[c]), args[0]
        self._began(FORWARD, i, c)
        self._saving = self.held.forward((i, c), x)
        self._outputs = self._saving.__enter__()
        if self.split and x.requires_grad:
            x.register_hook(lambda grad: self._ended())

    def _forward_ended(self, c: int, module, args, out):
        self._outputs.append(out)
        self._saving.__exit__(None, None, None)
        i = self._op[1]
        out.register_hook(lambda grad: self._gradient_out(i, c))
        self._ended()

    def _gradient_out(self, i: int, c: int) -> None:
        params = len(list(self.chunks[c].parameters()))
        if (i, c) in self._backward_began:  # the second time: W's root
            self._began(WEIGHT, i, c, params)
            return
        self._backward_began.add((i, c))
        self._began(BACKWARD, i, c, 0 if self.split else params)

    def _gradient_in(self, param) -> None:
        self._left -= 1
        if self._left == 0:
            self._ended()

    def _ended(self) -> None:
        kind, i, c = self._op
        _pad_to(self._start, self.slots[kind != FORWARD])
        if kind != FORWARD and (kind == WEIGHT or not self.split):
            self.held.backward((i, c))
            self._backward_began.discard((i, c))
        self.events.append(Event(dist.get_rank(), kind, i, self._start, self.now(), c))
