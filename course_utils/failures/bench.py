"""Seconds from a rank's SIGKILL to the resumed run's first update, on real gloo ranks:
relaunched by the course's launcher, and restarted by torchrun's elastic agents."""

from __future__ import annotations

NAME = "failures"
HELP = "seconds from killing a rank to training again from the last checkpoint"
TARGET_SECONDS = 30.0


def add_arguments(parser) -> None:
    parser.add_argument("--world-size", type=int, default=4)
    parser.add_argument(
        "--no-elastic", action="store_true", help="skip the torchrun restart (about 25 s)"
    )


def run(args) -> dict:
    from ..core import profiles
    from .elastic import elastic_restart
    from .resume import config_from, kill_and_resume

    sizes = profiles.current().failures
    cfg = config_from(sizes)
    run = kill_and_resume(cfg, args.world_size, timeout=sizes.timeout)
    seconds = run.kill_to_resume_seconds
    out = {
        "benchmark": NAME,
        "world_size": args.world_size,
        "kill_to_resume_seconds": seconds,
        "updates_redone": run.redone_steps,
        "resumed_bit_for_bit": run.tail_equal(),
        "target_seconds": TARGET_SECONDS,
        "meets_target": 0 < seconds < TARGET_SECONDS,
    }
    if not args.no_elastic:
        job = config_from(
            sizes, steps=sizes.elastic_steps, kill_rank=sizes.elastic_kill_rank,
            kill_at=sizes.elastic_kill_at,
        )  # fmt: skip
        elastic = elastic_restart(job, sizes.nodes, sizes.max_restarts, timeout=sizes.timeout)
        restart = elastic["kill_to_resume_seconds"]
        out["torchrun_kill_to_resume_seconds"] = restart
        out["meets_target"] = out["meets_target"] and 0 < restart < TARGET_SECONDS
    return out
