"""The bytes a pipeline stage keeps for its backwards, counted from what autograd saves.

A stage's forward leaves tensors behind for its backward (a Linear's input, a ReLU's
output, the loss's softmax): autograd's saved-tensor hooks see each one as it is saved.
Their bytes, plus the stage's input and output, are the activation memory a schedule
makes a stage hold until that micro-batch's backward; the weights are not counted,
since every schedule holds them all the time.
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn


def _key(t: torch.Tensor) -> tuple[int, int]:
    """The same bytes saved twice (a ReLU's output that is also the next Linear's input)
    count once."""
    return t.data_ptr(), t.nbytes


class HeldActivations:
    """Bytes of activations held per micro-batch on one stage, and the most held at once."""

    def __init__(self, module: nn.Module):
        self._weights = {p.untyped_storage().data_ptr() for p in module.parameters()}
        self._held: dict[int, int] = {}
        self.peak_bytes = 0
        self.peak_count = 0  # most micro-batches held at once

    @contextlib.contextmanager
    def forward(self, microbatch: int, *kept: torch.Tensor):
        """Count every tensor autograd saves inside the block, and `kept` (the input and,
        as the block's `list`, its outputs), as held by `microbatch` until its backward."""
        saved: dict[tuple[int, int], int] = {}
        outputs: list[torch.Tensor] = []

        def pack(t: torch.Tensor) -> torch.Tensor:
            if t.untyped_storage().data_ptr() not in self._weights:
                saved[_key(t)] = t.nbytes
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            yield outputs
        for t in (*kept, *outputs):
            saved[_key(t)] = t.nbytes
        self._held[microbatch] = sum(saved.values())
        self.peak_bytes = max(self.peak_bytes, sum(self._held.values()))
        self.peak_count = max(self.peak_count, len(self._held))

    def backward(self, microbatch: int) -> None:
        """The micro-batch's backward ran: its activations are freed."""
        self._held.pop(microbatch)
