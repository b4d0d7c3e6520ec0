"""The ZeRO experiments of notebook 08 on real gloo ranks: every stage, the same batches.

`compare_stages` starts N ranks once and trains DDP and ZeRO-1, 2 and 3 one after the
other from the same weights on the same batches; it hands back plain rows (final
parameters, bytes held, bytes sent, step times) for the verdicts, charts and the bench.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist

from ..core.data import load
from ..ranks.launch import launch
from .formulas import model_state_bytes
from .zero import STAGES, ZeroRank, mlp

__all__ = ["batches", "compare_stages", "train_stage"]


def batches(steps: int, global_batch: int, dataset: str = "mnist1d"):
    """The first steps x global_batch training samples: (x, y), one global batch per step."""
    x, y = load(dataset).train.tensors
    need = steps * global_batch
    reps = -(-need // len(x))
    x, y = x.repeat(reps, *([1] * (x.dim() - 1)))[:need], y.repeat(reps)[:need]
    return x.reshape(steps, global_batch, -1).float().clone(), y.reshape(
        steps, global_batch
    ).clone()


def train_stage(widths, stage: int, x: torch.Tensor, y: torch.Tensor, lr: float) -> dict:
    """Train on this rank's slice of each global batch; what the stage held, sent and took."""
    rank, world = dist.get_rank(), dist.get_world_size()
    zero = ZeroRank(mlp(widths), stage, world, lr)
    per_rank = x.shape[1] // world
    times, sent = [], []
    for step in range(x.shape[0]):
        part = slice(rank * per_rank, (rank + 1) * per_rank)
        before = zero.trace.bytes_sent
        dist.barrier()
        start = time.perf_counter()
        zero.step(x[step, part], y[step, part])
        times.append(time.perf_counter() - start)
        sent.append(zero.trace.bytes_sent - before)
        zero.trace.rounds.clear()
    numel = zero.parameter_count()
    return {
        "stage": stage,
        "world_size": world,
        "rank": rank,
        "numel": numel,
        "params": zero.full_parameters(),
        "held": zero.held_bytes(),
        "measured": sum(zero.held_bytes().values()),
        "predicted": model_state_bytes(numel, world, stage),
        "bytes_sent": statistics.median(sent),
        "step_seconds": statistics.median(times[1:] or times),
    }


def _stages_on_rank(widths, stages, x, y, lr) -> list[dict]:
    return [train_stage(widths, stage, x, y, lr) for stage in stages]


def compare_stages(
    widths, world_sizes, steps: int, batch_per_rank: int, lr: float, stages=STAGES, timeout=120.0
) -> list[dict]:
    """One row per (world size, stage, rank), DDP (stage 0) first, every stage alike.

    Each world size trains on global batches of N x batch_per_rank, so rank r always sees
    batch_per_rank samples, and stage s is compared with DDP at the same N.
    """
    rows = []
    for world in world_sizes:
        x, y = batches(steps, world * batch_per_rank)
        per_rank = launch(
            _stages_on_rank,
            world,
            backend="gloo",
            args=(tuple(widths), tuple(stages), x, y, lr),
            timeout=timeout,
        )
        for rank_rows in per_rank:
            rows.extend(rank_rows)
    return rows
