"""Inter-model parallelism: the profile's batch-size sweep with -j 1 and with -j 2.

Each batch size runs for two seeds by default, as notebook 01 does: with one seed the
batch-8 trial alone takes two thirds of the work, and no schedule on two lanes could beat
1.5x; with two, the two slowest trials run side by side and 2x is within reach.
Target: -j 2 at least 1.8 times faster than -j 1 on 2 cores.
"""

from __future__ import annotations

NAME = "sweep"
HELP = "wall time of the profile's batch-size sweep, one trial at a time and two at a time"
TARGET_RATIO = 1.8


def add_arguments(parser) -> None:
    parser.add_argument("--epochs", type=int, default=None, help="default: the profile's")
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="default: 1 2")
    parser.add_argument("--seeds", type=int, default=2, help="trials per batch size")


def run(args) -> dict:
    from ..core import profiles
    from . import sweep
    from .search_speed import ideal_speedup
    from .sweep_config import grid_config

    sizes = profiles.current().sgd
    parameters = {"batch_size": sizes.batch_sizes, "seed": range(args.seeds)}
    if args.epochs:
        parameters["epochs"] = [args.epochs]
    config = grid_config(parameters, "val_loss", "minimize")
    seconds, trial_seconds = {}, {}
    for jobs in args.jobs:
        result = sweep.run(config, jobs=jobs)
        if result.failed:
            raise RuntimeError(f"trial {result.failed[0].index} failed: {result.failed[0].error}")
        seconds[jobs] = result.seconds
        trial_seconds[jobs] = [round(t.seconds, 3) for t in result.trials]
    first, last = args.jobs[0], args.jobs[-1]
    ratio = seconds[first] / seconds[last]
    return {
        "benchmark": NAME,
        "profile": profiles.current().name,
        "trials": len(trial_seconds[first]),
        "batch_sizes": list(sizes.batch_sizes),
        **{f"seconds_j{j}": round(s, 3) for j, s in seconds.items()},
        **{f"trial_seconds_j{j}": t for j, t in trial_seconds.items()},
        f"ratio_j{first}_over_j{last}": round(ratio, 3),
        "ideal_ratio": round(
            ideal_speedup(trial_seconds[first], last, cores=last)
            / ideal_speedup(trial_seconds[first], first, cores=first),
            3,
        ),
        "target_ratio": TARGET_RATIO,
        "meets_target": ratio >= TARGET_RATIO,
    }
