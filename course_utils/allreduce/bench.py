"""The hand-written allreduce algorithms against `dist.all_reduce` at one message size.

Target (design.md): with one thread per rank, the ring within 1.2x of the built-in at
16 MB on 4 gloo ranks.
"""

from __future__ import annotations

NAME = "allreduce"
HELP = "time the parameter server, tree, butterfly and ring against dist.all_reduce"


def add_arguments(parser) -> None:
    parser.add_argument("--world-size", type=int, default=4)
    parser.add_argument("--size-mb", type=float, default=16.0)
    parser.add_argument("--repeats", type=int, default=30)  # fewer is noisy on 2 cores


def run(args) -> dict:
    from .runs import BUILTIN, time_allreduce

    nbytes = int(args.size_mb * (1 << 20))
    table = time_allreduce(args.world_size, (nbytes,), repeats=args.repeats)
    builtin = table[BUILTIN][0]
    return {
        "benchmark": NAME,
        "world_size": args.world_size,
        "size_mb": args.size_mb,
        "repeats": args.repeats,
        "median_seconds": {name: round(times[0], 5) for name, times in table.items()},
        "ratio_to_builtin": {
            name: round(times[0] / builtin, 3) for name, times in table.items() if name != BUILTIN
        },
        "target_ring_ratio": 1.2,
    }
