"""Activation checkpointing (`torch.utils.checkpoint`): fewer saved bytes, paid in recompute.

A residual MLP block saves its input, its 4x wider hidden layer and the GELU's output
for backward. A checkpointed block saves only its input and runs its forward again
during backward. Checkpointing every k-th block trades a share 1/k of the saved bytes
for about 1/k of a forward pass of extra time; the saved bytes are counted with
`anatomy.SavedBytes`, the time is the median step's CPU time on one thread (what other
programs on the machine do changes it little).
"""

from __future__ import annotations

import statistics
import time

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..core.training import torch_threads
from .anatomy import SavedBytes

__all__ = ["checkpointed_steps", "residual_blocks"]


def residual_blocks(count: int, width: int, seed: int = 0) -> nn.ModuleList:
    torch.manual_seed(seed)
    return nn.ModuleList(
        nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        for _ in range(count)
    )


def _forward(blocks: nn.ModuleList, x: torch.Tensor, every: int) -> torch.Tensor:
    for i, block in enumerate(blocks):
        if every and i % every == 0:
            x = x + checkpoint(block, x, use_reentrant=False)
        else:
            x = x + block(x)
    return x


def checkpointed_steps(count: int, width: int, batch: int, everies, repeats: int) -> list[dict]:
    """For each k in `everies` (0: no checkpointing): saved bytes, step and forward seconds.

    The settings take turns within each repeat, so that a busy machine slows all alike.
    """
    blocks = residual_blocks(count, width)
    x = torch.randn(batch, width, generator=torch.Generator().manual_seed(1))
    rows = {k: {"every": k, "step": [], "forward": []} for k in everies}
    with torch_threads(1):
        _turns(blocks, x, everies, repeats, rows)
    return [_summary(rows[k], count) for k in everies]


def _turns(blocks, x, everies, repeats: int, rows: dict) -> None:
    for _ in range(repeats + 1):
        for k in everies:
            blocks.zero_grad(set_to_none=True)
            start = time.process_time()
            with SavedBytes(blocks.parameters()) as saved:
                loss = _forward(blocks, x, k).pow(2).mean()
            middle = time.process_time()
            loss.backward()
            rows[k]["step"].append(time.process_time() - start)
            rows[k]["forward"].append(middle - start)
            rows[k]["saved"] = saved.nbytes
            rows[k]["grad"] = torch.cat([p.grad.reshape(-1) for p in blocks.parameters()])


def _summary(row: dict, count: int) -> dict:
    k = row["every"]
    return {
        "every": k,
        "checkpointed": sum(1 for i in range(count) if k and i % k == 0),
        "saved": row["saved"],
        "step_seconds": statistics.median(row["step"][1:]),
        "forward_seconds": statistics.median(row["forward"][1:]),
        "grad": row["grad"],
    }
