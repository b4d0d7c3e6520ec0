"""The model a pipeline cuts: a sequential MLP in blocks, cut into K consecutive stages.

`virtual_pipeline` runs it on K ranks with the course's engine (`parallel.pipeline`);
`serial_step` is its twin, the unsplit model's loss and gradients on the same batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import torch
import torch.nn.functional as F
from torch import nn


def mlp(widths: Sequence[int], seed: int = 0) -> nn.Sequential:
    """Blocks of Linear (+ ReLU but the last): the unit a model is cut at between stages."""
    torch.manual_seed(seed)
    pairs = list(pairwise(widths))
    blocks = []
    for n, (a, b) in enumerate(pairs):
        layers = [nn.Linear(a, b)] + ([nn.ReLU()] if n < len(pairs) - 1 else [])
        blocks.append(nn.Sequential(*layers))
    return nn.Sequential(*blocks)


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


def import_autograd_extras() -> None:
    """Backward from a given gradient lazily imports sympy (seconds on a busy laptop); do it
    once in the parent, so that every forked rank starts with it already imported."""
    x = torch.zeros(1, requires_grad=True)  # cpu: in the parent, before any rank
    y = x * 2
    y.backward(torch.ones_like(y))


def every_schedule_blocks(stages: int, chunks: int) -> int:
    """K·max(2, v) blocks: enough for interleaving to cut v chunks per rank (two at least),
    so that every schedule trains the same model."""
    return stages * max(2, chunks)


@dataclass(frozen=True)
class Work:
    """What a pipeline trains, as one value for every run that takes it: `model` (default:
    an MLP of blocks of width `hidden`, shaped for MNIST-1D's 40 inputs and 10 classes, from
    `seed`) on the batch `x, y` (default: random, `micro_batch_size` samples a micro-batch)."""

    model: nn.Sequential | None = None
    x: torch.Tensor | None = None
    y: torch.Tensor | None = None
    micro_batch_size: int = 8
    hidden: int = 32
    seed: int = 0

    def resolve(self, blocks: int, microbatches: int):
        """The model (the default one has `blocks` blocks) and the batch, refused unless it
        cuts into `microbatches` equal micro-batches."""
        model = self.model
        if model is None:
            model = mlp([40] + [self.hidden] * (blocks - 1) + [10], seed=self.seed)
        x, y = self.x, self.y
        if (x is None) != (y is None):
            raise ValueError(
                "give Work both x and y (inputs and labels), or neither for a random batch."
            )
        if x is None:
            gen = torch.Generator().manual_seed(self.seed)
            first = next(model.parameters()).shape[1]
            n = microbatches * self.micro_batch_size
            x = torch.randn(n, first, generator=gen)  # cpu: sent to ranks
            classes = list(model.parameters())[-1].shape[0]
            y = torch.randint(0, classes, (n,), generator=gen)  # cpu: sent to ranks
        if len(x) % microbatches:
            raise ValueError(
                f"a batch of {len(x)} samples does not cut into {microbatches} equal "
                f"micro-batches; use a batch size that is a multiple of {microbatches}."
            )
        return model, x, y


def serial_step(model: nn.Sequential, x: torch.Tensor, y: torch.Tensor):
    """The unsplit model's loss and gradients on the whole batch: the pipeline's twin."""
    model.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    grads = [p.grad.detach().clone() for p in model.parameters()]
    model.zero_grad()
    return loss.item(), grads
