"""The hand-written allreduce algorithms, timed over a link, against their targets.

Over an emulated link (the cpu profile's default, or `--link 100mbit`): a ping-pong fits
alpha and beta, then every algorithm on every N and message size is timed; target
(design.md): each measured within 25% of its alpha-beta prediction. Over the real link
(`--link real`): the ring against `dist.all_reduce` at one size; target: within 1.1x at
16 MB on 4 gloo ranks. The two take turns within each repeat, and the ratio is the
median over the repeats of ring / built-in: on a busy machine both runs of a pair see the
same load, while the fastest of each alone mostly measures which one got lucky.
`--busbw`: nccl-tests' sweep (the profile's sizes, 4 KiB to 64 MiB) of the ring and the
built-in on `--world-size` ranks over the link; target: the ring's busbw at the largest
size within 25% of the emulated link's bandwidth, or on the real link within 1.1x of the
built-in's.
"""

from __future__ import annotations

import statistics

from ..network import wire as links
from .algorithms import ALGORITHMS

NAME = "allreduce"
HELP = "time the parameter server, tree, butterfly and ring against their targets"
TOLERANCE = 0.25
RING_TARGET = 1.1


def add_arguments(parser) -> None:
    links.add_argument(parser)
    parser.add_argument("--world-size", type=int, default=4, help="real link: ranks")
    parser.add_argument("--size-mb", type=float, default=16.0, help="real link: message size")
    parser.add_argument("--repeats", type=int, default=None, help="fastest of this many runs")
    parser.add_argument(
        "--world-sizes", default="2,3,4,5,6,7,8", help="emulated link: the ranks to sweep"
    )
    parser.add_argument(
        "--busbw", action="store_true", help="sweep algbw and busbw of the ring and the built-in"
    )


def run(args) -> dict:
    link = links.resolve(args.link)
    if args.busbw:
        return _bus_bandwidth(link, args)
    if link.emulated:
        return _against_model(link, args)
    return _against_builtin(args)


def _against_model(link, args) -> dict:
    from ..core.profiles import current
    from . import cost_model
    from .runs import BUILTIN, pingpong, time_allreduce

    sizes = current().collectives
    nbytes = sizes.message_bytes
    worlds = [int(n) for n in args.world_sizes.split(",")]
    ping = pingpong(sizes.pingpong_bytes, repeats=sizes.pingpong_repeats, link=link)
    model = cost_model.fit_alpha_beta(list(sizes.pingpong_bytes), ping)
    rows = []
    for world in worlds:
        table = time_allreduce(world, nbytes, repeats=args.repeats or sizes.repeats, link=link)
        for name, times in table.items():
            shape = "ring" if name == BUILTIN else name  # the wrapped built-in pays a ring
            for n, seconds in zip(nbytes, times, strict=True):
                predicted = cost_model.predicted_seconds(shape, world, n, model)
                rows.append(
                    {
                        "algorithm": name,
                        "world_size": world,
                        "bytes": n,
                        "measured": round(seconds, 5),
                        "predicted": round(predicted, 5),
                        "meets_target": abs(seconds / predicted - 1) <= TOLERANCE,
                    }
                )
    return {
        "benchmark": NAME,
        "link": link.spec,
        "link_label": link.label,
        "fitted_alpha_seconds": round(model.alpha, 6),
        "fitted_bandwidth_mbit_s": round(8 / model.beta / 1e6, 2),
        "target": f"every row measured within {TOLERANCE:.0%} of the alpha-beta prediction",
        "met": all(r["meets_target"] for r in rows),
        "rows": rows,
    }


def _against_builtin(args) -> dict:
    """The ring and the built-in take turns alone: with the other algorithms between them
    (timed after, for their ratios) each pair also paid for the others' large buffers."""
    from .runs import BUILTIN, time_allreduce

    nbytes = int(args.size_mb * (1 << 20))
    repeats = args.repeats or 30  # fewer is noisy on 2 cores
    runs = {}
    for names in (("ring", BUILTIN), (*[a for a in ALGORITHMS if a != "ring"], BUILTIN)):
        table = time_allreduce(
            args.world_size, (nbytes,), repeats, names, link="real", every_repeat=True
        )
        paired = {name: times[0] for name, times in table.items()}
        runs.update({(name, names[0]): t for name, t in paired.items()})
    ratios, fastest = {}, {}
    for (name, run), t in runs.items():
        if name != BUILTIN:
            builtin = runs[BUILTIN, run]
            ratios[name] = round(
                statistics.median(a / b for a, b in zip(t, builtin, strict=True)), 3
            )
            fastest[name] = round(min(t) / min(builtin), 3)
    return {
        "benchmark": NAME,
        "link": "real",
        "world_size": args.world_size,
        "size_mb": args.size_mb,
        "repeats": repeats,
        "median_seconds": {  # the built-in's from its turns with the ring
            k[0]: round(statistics.median(t), 5) for k, t in reversed(runs.items())
        },
        "ratio_to_builtin": ratios,
        "fastest_ratio_to_builtin": fastest,
        "target": f"ring within {RING_TARGET}x of dist.all_reduce (median of paired ratios)",
        "met": ratios["ring"] <= RING_TARGET,
    }


def _bus_bandwidth(link, args) -> dict:
    """Median seconds per size; on the real link the ratio is the median of paired ratios,
    as in `_against_builtin`."""
    from ..core.profiles import current
    from .runs import BUILTIN, time_allreduce
    from .verdicts import bus_bandwidth

    sizes, world = current().collectives.busbw_bytes, args.world_size
    table = time_allreduce(
        world, sizes, args.repeats or 5, ("ring", BUILTIN), link=link, every_repeat=True
    )
    rows = []
    for name, per_size in table.items():
        for n, runs in zip(sizes, per_size, strict=True):
            t = statistics.median(runs)
            algbw, busbw = n / t / 1e6, bus_bandwidth(n, t, world) / 1e6
            rows.append(
                {
                    "algorithm": name,
                    "bytes": n,
                    "seconds": round(t, 6),
                    "algbw_mb_s": round(algbw, 2),
                    "busbw_mb_s": round(busbw, 2),
                }
            )
    ring = bus_bandwidth(sizes[-1], statistics.median(table["ring"][-1]), world)
    if link.emulated:
        target = f"the ring's busbw at the largest size within {TOLERANCE:.0%} of the link's"
        met = abs(ring / (link.bits_per_second / 8) - 1) <= TOLERANCE
    else:
        pairs = zip(table["ring"][-1], table[BUILTIN][-1], strict=True)
        ratio = statistics.median(a / b for a, b in pairs)
        target = f"the ring within {RING_TARGET}x of the built-in at the largest size (paired)"
        met = ratio <= RING_TARGET
    return {
        "benchmark": NAME,
        "link": link.spec,
        "world_size": world,
        "rows": rows,
        "target": target,
        "met": met,
    }
