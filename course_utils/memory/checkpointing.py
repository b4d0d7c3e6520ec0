"""Activation checkpointing (`torch.utils.checkpoint`): fewer saved bytes, paid in recompute.

A residual MLP block saves its input, its 4x wider hidden layer and the GELU's output
for backward. A checkpointed block saves only its input and runs its forward again
during backward. Checkpointing every k-th block trades a share 1/k of the saved bytes
for about 1/k of a forward pass of extra time; the saved bytes are counted with
`anatomy.SavedBytes`, the step's peak by the allocator (`peak`): backward recomputes a
block's activations before it can use them, so the peak falls by less than the saved
bytes. The time is the median step's CPU time of the thread that runs it, torch on one
thread (what other programs on the machine, or the rank's other threads, do changes it
little).
"""

from __future__ import annotations

import statistics
import time

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..core import progress
from ..core.training import torch_threads
from ..ranks.launch import launch
from .anatomy import SavedBytes
from .peak import peak_bytes_during


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
    """For each k in `everies` (0: no checkpointing): saved bytes, the step's peak, step and
    forward seconds, in a rank of its own (the allocator's count needs the profiler, `peak`).

    The settings take turns within each repeat, so that a busy machine slows all alike.
    """
    args = (count, width, batch, tuple(everies), repeats)
    return launch(_checkpointed_on_rank, 1, backend="gloo", args=args)[0]


def _checkpointed_on_rank(count: int, width: int, batch: int, everies, repeats: int) -> list:
    blocks = residual_blocks(count, width)
    x = torch.randn(batch, width, generator=torch.Generator().manual_seed(1))
    rows = {k: {"every": k, "step": [], "forward": []} for k in everies}
    with torch_threads(1):
        _turns(blocks, x, everies, repeats, rows)
        for k in everies:
            rows[k]["peak"] = _peak_of_a_step(blocks, x, k)
    return [_summary(rows[k], count) for k in everies]


def _peak_of_a_step(blocks: nn.ModuleList, x: torch.Tensor, every: int) -> int:
    """The most bytes one more step held at once beyond the weights (`peak`): what it
    saved, and in backward the recomputed block's activations and the gradients so far."""
    blocks.zero_grad(set_to_none=True)
    _, peak = peak_bytes_during(lambda: _forward(blocks, x, every).pow(2).mean().backward())
    return peak


def _turns(blocks, x, everies, repeats: int, rows: dict) -> None:
    with progress.bar(repeats + 1, "each setting in turn", "round") as bar:
        for _ in range(repeats + 1):
            for k in everies:
                blocks.zero_grad(set_to_none=True)
                start = time.thread_time()
                with SavedBytes(blocks.parameters()) as saved:
                    loss = _forward(blocks, x, k).pow(2).mean()
                middle = time.thread_time()
                loss.backward()
                rows[k]["step"].append(time.thread_time() - start)
                rows[k]["forward"].append(middle - start)
                rows[k]["saved"] = saved.nbytes
                rows[k]["grad"] = torch.cat([p.grad.reshape(-1) for p in blocks.parameters()])
            bar.update(1)


def _summary(row: dict, count: int) -> dict:
    k = row["every"]
    return {
        "every": k,
        "checkpointed": sum(1 for i in range(count) if k and i % k == 0),
        "saved": row["saved"],
        "peak": row["peak"],
        "step_seconds": statistics.median(row["step"][1:]),
        "forward_seconds": statistics.median(row["forward"][1:]),
        "grad": row["grad"],
    }
