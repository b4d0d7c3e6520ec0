"""How often to checkpoint: the time failures really cost at each interval, against Young.

Saving every k updates costs C seconds each time; a failure throws away the work since
the last completed save, plus the restart. Over a mean time between failures M, Young
(1974) approximates the loss per failure as C·M/τ + τ/2 for an interval of τ seconds, least
at τ* = √(2·C·M). That formula is the prediction. What it is checked against is measured
without it: real ranks train saving every k updates (the wall clock, a core per rank), and
failures at random moments (exponential gaps of mean M) are replayed on the measured
updates with each k's measured saves (`replay_failures`, `with_saves`): each failure
throws the run back to its last completed save.
The seconds that costs, beyond a run that never saves nor fails, per failure, is the loss.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import replace

import numpy as np

from ..core.backends import GLOO
from ..ranks.launch import launch
from .resume import RunConfig, checkpointed_training

REPLAYED_JOBS = 400  # jobs replayed per interval; each meets about steps * cycles / M failures
JOB_CYCLES = 20  # a replayed job is the measured run this many times over


def _interval_worker(cfg: RunConfig, intervals: tuple[int, ...], steps: int, root: str) -> dict:
    cfg = replace(cfg, steps=steps, kill_rank=None, resume=False)
    checkpointed_training(replace(cfg, steps=4, every=2, checkpoint_dir=f"{root}/warm-up"))
    runs = {}
    for k in (None, *intervals, None):  # the run without saves twice: before and after
        out = checkpointed_training(replace(cfg, every=k, checkpoint_dir=f"{root}/every-{k}"))
        if out["seconds"] < runs.get(k, {}).get("seconds", float("inf")):
            runs[k] = {
                "seconds": out["seconds"],
                "saving": sum(out["save_seconds"]),
                "saves": out["save_seconds"],
                "update_ends": out["update_ends"],
            }
    return runs


def time_intervals(cfg: RunConfig, world_size: int, intervals: tuple[int, ...], steps: int,
                   timeout: float = 60.0) -> dict:  # fmt: skip
    """For each k (None: never), rank 0's seconds for `steps` updates saving every k, the
    seconds of those spent inside the saves, and when each update (with its save) ended."""
    with tempfile.TemporaryDirectory(prefix="course-young-") as root:
        args = (cfg, intervals, steps, root)
        return launch(_interval_worker, world_size, args=args, timeout=timeout, backend=GLOO)[0]


def replay_failures(update_ends: list[float], every: int, mtbf: float, restart: float,
                    baseline: float, jobs: int = REPLAYED_JOBS, cycles: int = JOB_CYCLES,
                    seed: int = 0) -> float:  # fmt: skip
    """Seconds lost per failure when failures strike a run at random moments.

    `update_ends`: when each update of a run that saves every `every` updates ended (its
    save included), measured. A job is that run `cycles` times over; failures come at
    exponential gaps of mean `mtbf` seconds of running, and each sends the job back to the
    end of its last completed save, after `restart` seconds. Lost = the job's time beyond
    `baseline` (one run never saving, never failing, `cycles` times over), per failure that
    such a job meets on average (its length / `mtbf`). Dividing by the failures the replay
    met instead would reward a long interval: the more a job redoes, the more failures it
    meets, each of which found less work to throw away.
    """
    if every < 1 or mtbf <= 0 or not update_ends:
        raise ValueError("replay_failures needs a measured run, every >= 1 and mtbf > 0.")
    one = np.diff(np.asarray([0.0, *update_ends]))
    ends = np.concatenate([[0.0], np.cumsum(np.tile(one, cycles))])  # ends[i]: i updates done
    total = len(ends) - 1
    rng = np.random.default_rng(seed)
    spent = 0.0
    for _ in range(jobs):
        done = 0
        while True:
            gap = rng.exponential(mtbf)
            reached = int(np.searchsorted(ends, ends[done] + gap, side="right")) - 1
            if reached >= total:
                spent += ends[total] - ends[done]
                break
            spent += gap + restart
            done = max(done, reached // every * every)
    return (spent / jobs - cycles * baseline) / (cycles * baseline / mtbf)


def with_saves(update_ends: list[float], every: int, saves: list[float]) -> list[float]:
    """The run that never saved, with measured saves put in after every `every`-th update.

    Runs of the same updates differ in speed from one to the next by more than a few saves
    cost (the machine's clock, its caches), and a replay multiplies that: so every interval
    is replayed on the same measured updates, each with its own measured saves.
    """
    one = np.diff(np.asarray([0.0, *update_ends]))
    at = np.arange(every - 1, len(one), every)[: len(saves)]
    one[at] += np.asarray(saves[: len(at)])
    return list(np.cumsum(one))


def lost_time(runs: dict, steps: int, mtbf_steps: float, restart: float, seed: int = 0) -> dict:
    """Seconds lost per failure for each interval k, replayed on the measured runs, and
    Young's interval from the measured cost of one save (C) and M.

    Returns the step time, C, M (`mtbf_steps` updates of the run without saves), Young's
    interval (in updates) and the lost seconds by k.
    """
    plain = runs[None]["update_ends"]
    baseline = plain[-1]
    step = baseline / steps
    mtbf = mtbf_steps * step
    intervals = [k for k in runs if k is not None]
    saves = {k: steps // k for k in intervals}
    cost = sum(runs[k]["saving"] for k in intervals) / sum(saves.values())
    lost = {
        k: float(
            replay_failures(
                with_saves(plain, k, runs[k]["saves"]), k, mtbf, restart, baseline, seed=seed
            )
        )  # fmt: skip
        for k in intervals
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
