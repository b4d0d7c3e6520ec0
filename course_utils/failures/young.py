"""How often to checkpoint: measured time lost against the interval, and Young's formula.

Saving every k updates costs C seconds each time; a failure throws away, on average,
half an interval of work plus the restart. Over a mean time between failures M, the
time lost is about C·M/τ + τ/2 per failure for an interval of τ seconds, which is least at
Young's τ* = √(2·C·M) (Young 1974). Here the saving cost is measured at every k on real
ranks, not assumed.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import replace

from ..ranks.launch import launch
from .resume import RunConfig, checkpointed_training


def _interval_worker(cfg: RunConfig, intervals: tuple[int, ...], steps: int, root: str) -> dict:
    seconds = {}
    for k in (None, *intervals):
        run = replace(cfg, steps=steps, every=k, checkpoint_dir=f"{root}/every-{k}", kill_rank=None)
        seconds[k] = checkpointed_training(run)["seconds"]
    return seconds


def time_intervals(cfg: RunConfig, world_size: int, intervals: tuple[int, ...], steps: int,
                   timeout: float = 60.0) -> dict:  # fmt: skip
    """Seconds for `steps` updates when saving every k (None: never), as rank 0 measured."""
    with tempfile.TemporaryDirectory(prefix="course-young-") as root:
        out = launch(
            _interval_worker, world_size, args=(cfg, intervals, steps, root), timeout=timeout
        )
    return out[0]


def lost_time(seconds: dict, steps: int, mtbf_steps: float, restart: float) -> dict:
    """Expected seconds lost per failure for each interval k, from the measured run times.

    Lost = the saving overhead paid between two failures + half an interval redone +
    the restart. Returns the step time, the fitted cost of one save, M, Young's interval
    (in updates) and the lost seconds by k.
    """
    step = seconds[None] / steps
    mtbf = mtbf_steps * step
    intervals = [k for k in seconds if k is not None]
    overhead = {k: max(seconds[k] - seconds[None], 0.0) for k in intervals}
    saves = {k: steps // k for k in intervals}
    cost = sum(overhead[k] * saves[k] for k in intervals) / sum(n * n for n in saves.values())
    lost = {k: overhead[k] / seconds[None] * mtbf + k * step / 2 + restart for k in intervals}
    return {
        "step_seconds": step,
        "save_seconds": cost,
        "mtbf_seconds": mtbf,
        "young_steps": young_interval(cost, mtbf) / step,
        "lost": lost,
    }


def young_interval(save_seconds: float, mtbf_seconds: float) -> float:
    """Young's optimal seconds between checkpoints, √(2·C·M)."""
    return math.sqrt(2 * save_seconds * mtbf_seconds)
