"""The model a pipeline cuts: a sequential MLP in blocks, cut into K consecutive stages.

`virtual_pipeline` runs it on K ranks with the course's engine (`parallel.pipeline`);
`serial_step` is its twin, the unsplit model's loss and gradients on the same batch.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def import_autograd_extras() -> None:
    """Backward from a given gradient lazily imports sympy (seconds on a busy laptop); do it
    once in the parent, so that every forked rank starts with it already imported."""
    x = torch.zeros(1, requires_grad=True)  # cpu: in the parent, before any rank
    y = x * 2
    y.backward(torch.ones_like(y))


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
