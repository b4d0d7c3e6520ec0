"""The pipeline bubble measured: paced by sleep (an illustration), or with real compute.

Paced: every op is padded with sleep to a slot, so a timeline shows the schedule itself
(the sleep replays it; it proves nothing about a real pipeline). Real compute: equal
stages of real layers, forward and backward as long as they really are (a backward does
two matrix products to the forward's one), timed on each rank's link clock (its own CPU
time plus its waits for the hand-offs, `ranks.link`), so 4 stages on 2 cores time as if
each had a core: the scheduler cannot stretch one stage and call it a bubble.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import torch

from ..core.checks import Verdict, verdict
from .pipeline import PipelineRun, mlp, run_pipeline
from .schedules import bubble_formula

__all__ = ["HANDOFF_LINK", "bubble_matches", "measure_bubble", "real_compute_run", "typical_run"]

HANDOFF_LINK = "100gbit,10us"  # the hand-offs between stages: NVLink-class, nearly free


def typical_run(schedule: str = "gpipe", *, repeats: int = 3, **kwargs) -> PipelineRun:
    """The run with the median step time out of `repeats`, so that one hiccup of a shared
    machine (another process holding the core for a moment) cannot decide a verdict."""
    runs = [run_pipeline(schedule, **kwargs) for _ in range(repeats)]
    return sorted(runs, key=lambda r: r.timeline.makespan())[len(runs) // 2]


def real_compute_run(
    schedule: str, stages: int, microbatches: int, *, width: int, micro_batch_size: int,
    stage_cost: Sequence[float] | None = None, link: str = HANDOFF_LINK, seed: int = 0,
) -> PipelineRun:  # fmt: skip
    """One step of `stages` equal blocks of `width` (a block `stage_cost` times wider in
    work: that many blocks) with real compute, timed on the link clock."""
    blocks = [round(c) for c in (stage_cost or [1] * stages)]
    model = mlp([width] * (sum(blocks) + 1), seed=seed)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(microbatches * micro_batch_size, width, generator=gen)
    y = torch.randint(0, width, (len(x),), generator=gen)
    return run_pipeline(
        schedule, stages=stages, microbatches=microbatches, model=_grouped(model, blocks),
        x=x, y=y, link=link,
    )  # fmt: skip


def _grouped(model: torch.nn.Sequential, blocks: list[int]) -> torch.nn.Sequential:
    """Regroup the blocks so that stage s gets `blocks[s]` of them (the pipeline cuts evenly)."""
    children, out, at = list(model.children()), [], 0
    for n in blocks:
        out.append(torch.nn.Sequential(*children[at : at + n]))
        at += n
    return torch.nn.Sequential(*out)


def measure_bubble(
    stages: int,
    microbatches: Sequence[int],
    *,
    slot: float = 0.0,
    repeats: int = 1,
    schedule: str = "gpipe",
    width: int | None = None,
    micro_batch_size: int = 64,
) -> list[dict]:
    """Measured (median over `repeats` steps) and predicted bubble fraction for each M:
    paced by `slot`, or with real compute on blocks of `width` when `width` is given."""
    rows = []
    for m in microbatches:
        if width:
            runs = [
                real_compute_run(
                    schedule, stages, m, width=width, micro_batch_size=micro_batch_size
                )
                for _ in range(repeats)
            ]
        else:
            runs = [
                run_pipeline(schedule, stages=stages, microbatches=m, slot=slot)
                for _ in range(repeats)
            ]
        bubble = statistics.median(r.timeline.bubble_fraction() for r in runs)
        rows.append({"microbatches": m, "measured": bubble, "predicted": bubble_formula(stages, m)})
    return rows


def bubble_matches(rows: list[dict], tolerance: float = 0.15) -> Verdict:
    """Every measured bubble within `tolerance` of (K-1)/(M+K-1)."""
    return verdict(
        all(abs(r["measured"] / r["predicted"] - 1) <= tolerance for r in rows),
        f"with real compute the measured bubble is within {tolerance:.0%} of GPipe's prediction "
        "for every M",
    )
