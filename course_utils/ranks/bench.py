"""How long it takes to start N ranks and get a value back (target: under 3 s for 4 ranks)."""

from __future__ import annotations

import statistics
import time

NAME = "launch"
HELP = "start N ranks of a no-op and get their results back, repeated"


def add_arguments(parser) -> None:
    parser.add_argument("--world-size", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--start-method", choices=["fork", "spawn"], default=None)


def _rank_and_one() -> int:
    import torch.distributed as dist

    return dist.get_rank() + 1


def run(args) -> dict:
    from .launch import launch

    seconds = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        values = launch(
            _rank_and_one, args.world_size, backend=args.backend, start_method=args.start_method
        )
        seconds.append(time.perf_counter() - start)
        if values != list(range(1, args.world_size + 1)):
            raise RuntimeError(f"launch returned {values}, expected 1..{args.world_size}")
    return {
        "benchmark": NAME,
        "world_size": args.world_size,
        "backend": args.backend,
        "start_method": args.start_method or "default",
        "repeats": args.repeats,
        "seconds_median": round(statistics.median(seconds), 4),
        "seconds_min": round(min(seconds), 4),
        "seconds_max": round(max(seconds), 4),
        "target_seconds": 3.0,
    }
