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

from ..core import progress
from ..core.data import load
from ..network.recorder import recording
from ..ranks.launch import launch
from .anatomy import SavedBytes
from .formulas import model_state_bytes, peak_bytes
from .peak import peak_bytes_during
from .zero import (
    STAGES,
    held_bytes,
    kept_tensors,
    largest_layer,
    mlp,
    rank_share,
    stepped_bytes,
    zero_rank,
)


def batches(steps: int, global_batch: int, dataset: str = "mnist1d"):
    """The first steps x global_batch training samples: (x, y), one global batch per step."""
    x, y = load(dataset).train.tensors
    need = steps * global_batch
    reps = -(-need // len(x))
    x, y = x.repeat(reps, *([1] * (x.dim() - 1)))[:need], y.repeat(reps)[:need]
    return x.reshape(steps, global_batch, -1).float().clone(), y.reshape(
        steps, global_batch
    ).clone()


def train_stages(widths, stages, x: torch.Tensor, y: torch.Tensor, lr: float) -> list[dict]:
    """Train every stage on this rank's slice of each global batch; what each held, sent, took.

    The stages take turns step by step, so that a busy machine slows all of them alike.
    """
    zeros = {stage: zero_rank(mlp(widths), stage, dist.get_world_size(), lr) for stage in stages}
    times = {stage: [] for stage in stages}
    sent = {stage: [] for stage in stages}
    part = rank_share(x.shape[1])
    for step in range(x.shape[0]):
        for stage, zero in zeros.items():
            dist.barrier()
            with recording() as log:  # what crosses torch.distributed, counted there
                start = time.perf_counter()
                zero.step(x[step, part], y[step, part])
                times[stage].append(time.perf_counter() - start)
            sent[stage].append(log.bytes_sent())
    rows = [_row(zero, times[s], sent[s]) for s, zero in zeros.items()]  # before the next step
    for row, zero in zip(rows, zeros.values(), strict=True):
        peak, activations = _peak_step(zero, x[-1, part], y[-1, part])
        row.update(
            peak=peak,
            activations=activations,
            largest_layer=largest_layer(zero),
            predicted_peak=peak_bytes(
                row["numel"], zero.world, zero.stage, largest_layer(zero), activations,
                stepped_bytes(zero),
            ),
        )  # fmt: skip
    return rows


def _peak_step(zero, x: torch.Tensor, y: torch.Tensor) -> tuple[int, int]:
    """One more step, under the allocator's accounting: the most bytes the rank held at
    once (its model state plus the step's worst moment), and the activations it saved.
    It comes after the rows are taken, so the parameters compared with DDP's (and FSDP2's)
    have seen the same steps."""
    dist.barrier()
    held = sum(held_bytes(zero).values())
    with SavedBytes(kept_tensors(zero)[0]) as saved:
        _, extra = peak_bytes_during(lambda: zero.step(x, y))
    return held + extra, saved.nbytes


def _row(zero, times: list, sent: list) -> dict:
    numel, world = sum(u.numel for u in zero.units), zero.world
    return {
        "stage": zero.stage,
        "world_size": world,
        "rank": dist.get_rank(),
        "numel": numel,
        "params": zero.full_parameters(),
        "held": held_bytes(zero),
        "measured": sum(held_bytes(zero).values()),
        "predicted": model_state_bytes(numel, world, zero.stage),
        "bytes_sent": round(statistics.median(sent)),  # the same every step
        "step_seconds": statistics.median(times[1:] or times),  # the first step warms up
    }


def stage_row(rows: list[dict], world: int, stage: int) -> dict:
    """Rank 0's row of `stage` on `world` ranks (a row without a rank speaks for rank 0)."""
    rank_0 = (r for r in rows if r.get("rank", 0) == 0)
    return next(r for r in rank_0 if r["world_size"] == world and r["stage"] == stage)


def compare_stages(
    widths, world_sizes, steps: int, batch_per_rank: int, lr: float, stages=STAGES, timeout=120.0
) -> list[dict]:
    """One row per (world size, stage, rank), DDP (stage 0) first, every stage alike.

    Each world size trains on global batches of N x batch_per_rank, so rank r always sees
    batch_per_rank samples, and stage s is compared with DDP at the same N.
    """
    rows = []
    about = f"DDP and ZeRO-1/2/3, {steps} steps each, widths {list(widths)}"
    with progress.bar(len(world_sizes), about, "launch") as bar:
        for world in world_sizes:
            bar.set_postfix(N=world)
            x, y = batches(steps, world * batch_per_rank)
            per_rank = launch(
                train_stages,
                world,
                backend="gloo",
                args=(tuple(widths), tuple(stages), x, y, lr),
                timeout=timeout,
            )
            for rank_rows in per_rank:
                rows.extend(rank_rows)
            bar.update(1)
    return rows
