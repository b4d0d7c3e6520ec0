"""N ranks with per-rank batch b against one process with batch N*b: weights after S steps."""

from __future__ import annotations

NAME = "ddp-equivalence"
HELP = "max |weight difference| between DDP on N ranks and one process with the N-times batch"


def add_arguments(parser) -> None:
    parser.add_argument("--world-size", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--per-rank-batch", type=int, default=8)
    parser.add_argument("--mode", choices=["ddp", "by_hand"], default="ddp")


def run(args) -> dict:
    from .equivalence import Setup, equivalence

    setup = Setup(per_rank_batch=args.per_rank_batch, steps=args.steps)
    result = equivalence(args.world_size, args.mode, setup)
    return {
        "benchmark": NAME,
        "world_size": args.world_size,
        "per_rank_batch": args.per_rank_batch,
        "steps": args.steps,
        "mode": args.mode,
        "max_abs_diff": result.max_abs_diff,
        "ranks_identical": result.ranks_identical,
        "target_max_abs_diff": 1e-5,
    }
