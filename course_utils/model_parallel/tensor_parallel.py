"""Notebook 06's tensor parallel: every Linear of an MLP split over the ranks, two ways.

- "every_layer" (the blog's picture): every layer column-parallel, its outputs gathered
  after every layer so that the next layer sees all of them;
- "column_row" (Megatron-LM, Shoeybi et al. 2019): a column-parallel layer feeds its
  slice straight into a row-parallel one, one all-reduce per pair of layers.

The layers and their f, g and gather are `parallel.tensor_parallel`'s. What each layer
sends is counted from outside: each split layer is hooked (`network.labels`) so that the
recorder labels every collective with its layer and direction, and its bytes are those
each rank puts on the wire when the collective runs as a ring (`network.messages`).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from ..network.labels import label_modules
from ..network.recorder import Message, recording
from ..parallel.tensor_parallel import (
    ColumnParallelLinear,
    RowParallelLinear,
    f,
    gather,
    share,
)

STYLES = ("every_layer", "column_row")


class SplitLayer(nn.Module):
    """One Linear of the model on this rank: column-parallel (its input whole, f before it;
    with `gather_output`, every rank's neurons glued after it) or row-parallel (g after it)."""

    def __init__(self, full: nn.Linear, column: bool, gather_output: bool = False):
        super().__init__()
        self.column, self.gather_output = column, gather_output
        if column:
            self.linear = ColumnParallelLinear(full, share(full.out_features, "output neurons"))
        else:
            self.linear = RowParallelLinear(full, share(full.in_features, "inputs"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.column:
            return self.linear(x)
        y = self.linear(f(x) if x.requires_grad else x)
        return gather(y) if self.gather_output else y

    def my_part(self, weight: torch.Tensor, bias: torch.Tensor):
        """This rank's share of a full-size weight and bias (or of their gradients)."""
        if self.column:
            return weight[self.linear.rows], bias[self.linear.rows]
        return weight[:, self.linear.columns], bias


def parallelize(model: nn.Module, style: str = "column_row") -> nn.Sequential:
    """The same network with every Linear split over the ranks (inside a launched rank)."""
    if style not in STYLES:
        raise ValueError(f"unknown style {style!r}; choose one of {', '.join(STYLES)}.")
    flat = [m for m in model.modules() if not isinstance(m, nn.Sequential)]
    linears = [m for m in flat if isinstance(m, nn.Linear)]
    out, n = [], 0
    for m in flat:
        if not isinstance(m, nn.Linear):
            out.append(m)
            continue
        if style == "column_row" and n % 2 == 1:
            out.append(SplitLayer(m, column=False))
        else:
            last = n == len(linears) - 1
            out.append(SplitLayer(m, column=True, gather_output=style == "every_layer" or last))
        n += 1
    return nn.Sequential(*out)


def compare_with_unsplit(widths, batch: int, style: str = "column_row", seed: int = 0) -> dict:
    """Run on every rank: one training step of the split network against the whole one.

    Returns how far the outputs and this rank's gradients (of its weights and of the
    input) are from the unsplit model's,
    how many parameters this rank stores against the whole model, and every transfer.
    """
    from ..ranks.bootstrap import device
    from .pipeline import mlp

    dev = device()
    full = mlp(widths, seed=seed).to(dev)
    split = parallelize(full, style)
    gen = torch.Generator().manual_seed(seed + 1)
    x_full = torch.randn(batch, widths[0], generator=gen).to(dev).requires_grad_()  # cpu: seeded
    x = x_full.detach().clone().requires_grad_()
    target = torch.randint(0, widths[-1], (batch,), generator=gen).to(dev)  # cpu: seeded
    y_full = full(x_full)
    F.cross_entropy(y_full, target).backward()
    layers = [m for m in split if isinstance(m, SplitLayer)]
    label_modules({str(n): layer for n, layer in enumerate(layers)})
    with recording() as log:
        y = split(x)
        F.cross_entropy(y, target).backward()
    pairs = zip(
        layers,
        [m for m in full.modules() if isinstance(m, nn.Linear)],
        strict=True,
    )
    grad_diff = (x.grad - x_full.grad).abs().max().item()
    for mine, whole in pairs:
        w, b = mine.my_part(whole.weight.grad, whole.bias.grad)
        grad_diff = max(grad_diff, (mine.linear.weight.grad - w).abs().max().item())
        grad_diff = max(grad_diff, (mine.linear.bias.grad - b).abs().max().item())
    return {
        "rank": dist.get_rank(),
        "output_max_diff": (y - y_full).abs().max().item(),
        "grad_max_diff": grad_diff,
        "params_stored": sum(p.numel() for p in split.parameters()),
        "params_full": sum(p.numel() for p in full.parameters()),
        "transfers": log.collectives(),
    }


def bytes_per_layer(transfers: list[Message], layers: int) -> dict[str, list[float]]:
    """Bytes each rank sends on the wire, per layer, forward and backward (ring collectives)."""
    table = {"forward": [0.0] * layers, "backward": [0.0] * layers}
    for t in transfers:
        table[t.direction][int(t.where)] += t.nbytes
    return table


def collectives_per_layer(transfers: list[Message], layers: int) -> dict[str, list[int]]:
    """How many collectives each layer waits for, forward and backward."""
    table = {"forward": [0] * layers, "backward": [0] * layers}
    for t in transfers:
        table[t.direction][int(t.where)] += 1
    return table
