"""How often to checkpoint: measured time lost against the interval, and Young's formula.

Saving every k updates costs C seconds each time; a failure throws away, on average,
half an interval of work plus the restart. Over a mean time between failures M, the
time lost is about C·M/τ + τ/2 per failure for an interval of τ seconds, which is least at
Young's τ* = √(2·C·M) (Young 1974). Here the time spent saving is measured at every k on
real ranks, not assumed.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import replace

from ..ranks.launch import launch
from .resume import RunConfig, checkpointed_training


def _interval_worker(cfg: RunConfig, intervals: tuple[int, ...], steps: int, root: str) -> dict:
    cfg = replace(cfg, steps=steps, kill_rank=None, resume=False)
    checkpointed_training(replace(cfg, steps=4, every=2, checkpoint_dir=f"{root}/warm-up"))
    runs = {}
    for k in (None, *intervals, None):  # the run without saves twice: before and after
        out = checkpointed_training(replace(cfg, every=k, checkpoint_dir=f"{root}/every-{k}"))
        seconds = min(out["seconds"], runs.get(k, {}).get("seconds", float("inf")))
        runs[k] = {"seconds": seconds, "saving": sum(out["save_seconds"])}
    return runs


def time_intervals(cfg: RunConfig, world_size: int, intervals: tuple[int, ...], steps: int,
                   timeout: float = 60.0) -> dict:  # fmt: skip
    """For each k (None: never), rank 0's seconds for `steps` updates saving every k, and
    the seconds of those spent inside the saves."""
    with tempfile.TemporaryDirectory(prefix="course-young-") as root:
        out = launch(
            _interval_worker, world_size, args=(cfg, intervals, steps, root), timeout=timeout
        )
    return out[0]


def lost_time(runs: dict, steps: int, mtbf_steps: float, restart: float) -> dict:
    """Expected seconds lost per failure for each interval k, from the measured runs.

    Lost = the time spent saving between two failures + half an interval redone + the
    restart. Returns the step time, the mean cost of one save (C), M, Young's interval
    (in updates) and the lost seconds by k.
    """
    step = runs[None]["seconds"] / steps
    mtbf = mtbf_steps * step
    intervals = [k for k in runs if k is not None]
    saves = {k: steps // k for k in intervals}
    cost = sum(runs[k]["saving"] for k in intervals) / sum(saves.values())
    lost = {
        k: runs[k]["saving"] / (steps * step) * mtbf + k * step / 2 + restart for k in intervals
    }
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
