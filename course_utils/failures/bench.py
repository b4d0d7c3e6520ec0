"""Seconds from a rank's SIGKILL to the resumed run's first update, on real gloo ranks."""

from __future__ import annotations

NAME = "failures"
HELP = "seconds from killing a rank to training again from the last checkpoint"
TARGET_SECONDS = 30.0


def add_arguments(parser) -> None:
    parser.add_argument("--world-size", type=int, default=4)


def run(args) -> dict:
    from ..core import profiles
    from .resume import config_from, kill_and_resume

    sizes = profiles.current().failures
    cfg = config_from(sizes)
    run = kill_and_resume(cfg, args.world_size, timeout=sizes.timeout)
    seconds = run.kill_to_resume_seconds
    return {
        "benchmark": NAME,
        "world_size": args.world_size,
        "kill_to_resume_seconds": seconds,
        "updates_redone": run.redone_steps,
        "resumed_bit_for_bit": run.tail_equal(),
        "target_seconds": TARGET_SECONDS,
        "meets_target": 0 < seconds < TARGET_SECONDS,
    }
