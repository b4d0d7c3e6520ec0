"""How a DDP step's time changes with the number of ranks: predicted, measured, and where
data parallelism starts to pay.

A synchronous step costs its compute on the rank's share of the batch plus a ring
all-reduce of the whole gradient, which does not shrink with more ranks. `fit_compute`
takes the measured compute per step at several per-rank batches; `predicted_step` adds
the link's ring cost (alpha-beta), so the lecture's layouts (1024 nodes x batch 1 against
16 x 64) can be priced from numbers measured here. `strong_scaling` measures 1, 2, 4, 8
ranks at one global batch: compute as each rank's CPU time, the ranks taking turns (ranks
sharing a core, or a core's two hyperthreads, would slow each other down) and
communication as the wall time of the all-reduce on the emulated link, whose wait is a
sleep.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from ..core import progress
from ..core.checks import Verdict, verdict
from ..core.timing_claims import timing_claim
from ..network import wire
from ..ranks.bootstrap import device, synchronize
from ..ranks.launch import launch
from .overlap import stacked_mlp
from .verdicts import link_clock


def gradient_bytes(width: int, layers: int = 3) -> int:
    """Bytes of the gradient every rank all-reduces each step (float32) in `strong_scaling`."""
    return 4 * sum(p.numel() for p in stacked_mlp(layers, width).parameters())


def fit_compute(batches: list[int], seconds: list[float]) -> tuple[float, float]:
    """Least-squares (fixed seconds per step, seconds per sample) through measured computes."""
    mean_b, mean_s = statistics.fmean(batches), statistics.fmean(seconds)
    spread = sum((b - mean_b) ** 2 for b in batches)
    slope = sum((b - mean_b) * (s - mean_s) for b, s in zip(batches, seconds, strict=True))
    per_sample = max(slope / spread, 0.0) if spread else mean_s / mean_b
    return max(mean_s - per_sample * mean_b, 0.0), per_sample


def predicted_step(compute: tuple[float, float], batch: int, world: int, link, nbytes: int):
    """(compute, communication) seconds of one step of `world` ranks x `batch` over `link`."""
    fixed, per_sample = compute
    return fixed + per_sample * batch, wire.ring_allreduce_seconds(link, nbytes, world)


@dataclass
class ScalingPoint:
    """One global batch on `world_size` ranks: seconds per step of the slowest rank."""

    world_size: int
    global_batch: int
    compute: float  # CPU time of forward and backward on the rank's share
    communication: float  # wall time of the gradient's all-reduce over the link

    @property
    def step(self) -> float:
        """The step on a cluster, where each rank has its own cores and nothing overlaps."""
        return self.compute + self.communication


def strong_scaling(
    world_sizes: tuple[int, ...], global_batch: int, width: int = 128, layers: int = 3,
    steps: int = 3, link=None, backend: str = "gloo",
) -> list[ScalingPoint]:  # fmt: skip
    """One global batch split over each number of ranks, timed over `link` (None: the
    profile's): the slowest rank's least disturbed compute (CPU time) and median all-reduce."""
    link = wire.resolve(link, max(world_sizes), backend)  # one curve, one clock
    points = []
    with progress.bar(len(world_sizes), f"global batch {global_batch}", "launch") as bar:
        for n in world_sizes:  # each launch too short for rank 0's own bar to show
            args = (global_batch // n, width, layers, steps, link)
            per_rank = launch(_scaling_rank, n, args=args, backend=backend)
            compute = max(c for c, _ in per_rank)  # the all-reduce waits for the last backward
            comm = max(m for _, m in per_rank)  # and the step for the last rank out of it
            points.append(ScalingPoint(n, global_batch, compute, comm))
            bar.update(1)
    return points


def _scaling_rank(batch: int, width: int, layers: int, steps: int, link) -> tuple[float, float]:
    """CPU ranks time their compute in CPU time; a GPU rank has its own device: wall time."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    where = device()
    model = stacked_mlp(layers, width).to(where)
    x = torch.randn(batch, width, device=where)
    y = torch.randint(0, 10, (batch,), device=where)
    clock = time.process_time if where.type == "cpu" else time.perf_counter
    compute, comm = [], []
    with wire.active(link):
        for _ in range(steps + 1):  # the first allocates memory: untimed
            model.zero_grad()
            for turn in range(dist.get_world_size()):  # one rank at a time, as if on its
                if turn == dist.get_rank():  # own machine (see the module's docstring)
                    start = clock()
                    nn.functional.cross_entropy(model(x), y).backward()
                    synchronize(where)
                    compute.append(clock() - start)
                dist.barrier()
            if dist.get_world_size() == 1:  # nothing to send: no scheduler noise counted as link
                comm.append(0.0)
                continue
            flat = torch.cat([p.grad.flatten() for p in model.parameters()])
            dist.barrier()
            start, link_time = wire.restart(), wire.timer()
            wire.all_reduce(flat)
            synchronize(where)
            comm.append(link_time() - start)
    return min(compute[1:]), statistics.median(comm[1:])


def speedup(points: list[ScalingPoint]) -> dict[int, float]:
    """One rank's step time over each rank count's (1 rank must be among the points)."""
    one = next(p.step for p in points if p.world_size == 1)
    return {p.world_size: one / p.step for p in points}


def crossover(runs: dict[int, list[ScalingPoint]]) -> tuple[float | None, float | None]:
    """(least one-rank compute at which 2 ranks won, most at which they lost), per step."""
    won, lost = [], []
    for points in runs.values():
        by_n = {p.world_size: p for p in points}
        (won if by_n[2].step < by_n[1].step else lost).append(by_n[1].compute)
    return (min(won) if won else None), (max(lost) if lost else None)


@timing_claim(
    "named by its rows", "measurement", "test_crossover_verdict_needs_wins_above_and_losses_below"
)
def two_ranks_win_above(runs: dict[int, list[ScalingPoint]], link) -> Verdict:
    """There is a compute per step above which 2 ranks beat one process and below which
    they lose: at least one run of each kind, and every win has more compute than every loss.
    `link`: what the all-reduces ran over (the compute is each rank's CPU time)."""
    least_won, most_lost = crossover(runs)
    return verdict(
        least_won is not None and most_lost is not None and least_won > most_lost,
        f"{link_clock(link)}: 2 ranks beat one process exactly in the runs with the most "
        "compute per step: a crossover lies between the largest losing and the smallest "
        "winning compute",
    )


def layouts(points: list[ScalingPoint], link, nbytes: int, lecture: tuple = ()):
    """From one global batch's `strong_scaling` points: measured and predicted seconds per
    step of each multi-rank layout, and the (compute, all-reduce) prediction of each lecture
    layout given as (ranks, per-rank batch). The compute model is fitted on every point."""
    batches = [p.global_batch // p.world_size for p in points]
    fit = fit_compute(batches, [p.compute for p in points])
    measured, predicted = {}, {}
    for p, b in zip(points, batches, strict=True):
        if p.world_size > 1:
            name = f"{p.world_size} x {b}"
            measured[name] = p.step
            predicted[name] = sum(predicted_step(fit, b, p.world_size, link, nbytes))
    priced = {f"{n} x {b}": predicted_step(fit, b, n, link, nbytes) for n, b in lecture}
    return measured, predicted, priced
