"""A pipeline stage's ops timed from outside the engine (`parallel.pipeline`), with hooks.

A forward lasts from the stage's forward pre-hook to its forward hook; a backward from the
hook on the stage's output gradient to the last of its parameters' gradient hooks. So the
engine stays the plain algorithm, and notebook 06 still gets every op's start and end.
To make timelines readable on a 2-core laptop, an op may be padded with sleep to a fixed
slot: then the picture shows the schedule, not the noise of four processes sharing two
cores; an illustration, not a measurement.
"""

from __future__ import annotations

import time

import torch.distributed as dist
from torch import nn

from .activations import HeldActivations
from .schedules import BACKWARD, FORWARD, Event

__all__ = ["StageWatch"]


def _pad_to(start: float, seconds: float) -> None:
    left = start + seconds - time.perf_counter()
    if left > 0:
        time.sleep(left)


class StageWatch:
    """Inside the block, `module`'s ops in `order` are timed on `now` into `events`, each
    padded to its slot (forward, backward) when one is set, and the activations autograd
    saves in a forward are counted as held until that micro-batch's backward (`held`)."""

    def __init__(self, module: nn.Module, order, now, slots: tuple[float, float]):
        self.module, self.now, self.slots = module, now, slots
        self.forwards = iter([i for kind, i in order if kind == FORWARD])
        self.params = list(module.parameters())
        self.held = HeldActivations(module)
        self.events: list[Event] = []
        self._handles: list = []

    def __enter__(self):
        self._handles = [
            self.module.register_forward_pre_hook(self._forward_began),
            self.module.register_forward_hook(self._forward_ended),
        ] + [p.register_post_accumulate_grad_hook(self._gradient_in) for p in self.params]
        self._left = 0
        return self

    def __exit__(self, *exc):
        for handle in self._handles:
            handle.remove()

    def _forward_began(self, module, args):
        self._forward = i = next(self.forwards)
        self._began, self._saving = self.now(), self.held.forward(i, args[0])
        self._outputs = self._saving.__enter__()

    def _forward_ended(self, module, args, out):
        self._outputs.append(out)
        self._saving.__exit__(None, None, None)
        i = self._forward
        out.register_hook(lambda grad: self._backward_began(i))
        self._ended(FORWARD, i, self.slots[0])

    def _backward_began(self, i: int) -> None:
        self._began, self._left, self._backward = self.now(), len(self.params), i
        self.held.backward(i)

    def _gradient_in(self, param) -> None:
        self._left -= 1
        if self._left == 0:
            self._ended(BACKWARD, self._backward, self.slots[1])

    def _ended(self, kind: str, i: int, slot: float) -> None:
        _pad_to(self._began, slot)
        self.events.append(Event(dist.get_rank(), kind, i, self._began, self.now()))
