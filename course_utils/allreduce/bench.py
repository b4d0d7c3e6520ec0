"""The hand-written allreduce algorithms on both clocks, each against its own target.

Simulated (the profile's simulated link, or `--link 100mbit`, `--link 10gbe`): every algorithm
on every N and message size; target (design.md): each hand-written algorithm within 25% of
the alpha-beta model of its *schedule* on the link's own alpha and beta (the simulator
charges messages, not algorithms, so a wrong schedule would miss it). The built-in is
charged as a ring by the simulator: its rows are a prediction, never checked. Real
(`--link real`): the ring against `dist.all_reduce` at one size on N ranks with a core
each (default 2); target: within 1.5x at 16 MB. The two take turns within each repeat,
and the ratio is the median over the repeats of ring / built-in: on a busy machine both
runs of a pair see the same load. It is judged only when other programs left the ranks
their cores. With no `--link`, both run, and their rows carry their clock: the simulated
sweep to N = 8 and the real runs at N <= the cores, never joined into one curve.
`--busbw`: nccl-tests' sweep (the profile's sizes, 4 KiB to 64 MiB) of the ring and the
built-in on `--world-size` ranks over the link; on the real link the ring within 1.5x of
the built-in's time at the largest size.
"""

from __future__ import annotations

import statistics

from ..core.profiles import simulated_link
from ..network import wire
from .algorithms import ALGORITHMS
from .verdicts import RING_TARGET

NAME = "allreduce"
HELP = "time the parameter server, tree, butterfly and ring against their targets"
TOLERANCE = 0.25


def add_arguments(parser) -> None:
    wire.add_argument(
        parser, default="both: the simulated sweep and the real runs with a core per rank"
    )
    parser.add_argument("--world-size", type=int, default=2, help="real link: ranks (a core each)")
    parser.add_argument("--size-mb", type=float, default=16.0, help="real link: message size")
    parser.add_argument("--repeats", type=int, default=None, help="fastest of this many runs")
    parser.add_argument(
        "--world-sizes", default="2,3,4,5,6,7,8", help="simulated link: the ranks to sweep"
    )
    parser.add_argument(
        "--busbw", action="store_true", help="sweep algbw and busbw of the ring and the built-in"
    )


def run(args) -> dict:
    if args.busbw:
        return _bus_bandwidth(wire.resolve(args.link, args.world_size), args)
    if args.link is not None:
        link = wire.resolve(args.link, max(_worlds(args)))
        return _against_schedule(link, args) if link.emulated else _against_builtin(args)
    simulated = _against_schedule(wire.parse(simulated_link()), args)
    real = _against_builtin(args)
    met = [simulated["met"], real["met"]]
    return {
        "benchmark": NAME,
        "clocks": "simulated rows: the network simulator; real rows: the wall clock, a core "
        "per rank (never joined into one curve)",
        "simulated": {k: v for k, v in simulated.items() if k != "rows"},
        "real": {k: v for k, v in real.items() if k != "rows"},
        "rows": simulated["rows"] + real["rows"],
        "target": f"simulated: {simulated['target']}; real: {real['target']}",
        "met": False if False in met else None if None in met else True,
    }


def _against_schedule(link, args) -> dict:
    from ..core.profiles import current
    from . import cost_model
    from .runs import BUILTIN, time_allreduce

    sizes = current().collectives
    nbytes = sizes.message_bytes
    worlds = _worlds(args)
    on_link = cost_model.AlphaBeta(alpha=link.alpha, beta=link.beta)
    rows = []
    for world in worlds:
        table = time_allreduce(world, nbytes, repeats=args.repeats or sizes.repeats, link=link)
        for name, times in table.items():
            shape = "ring" if name == BUILTIN else name
            for n, seconds in zip(nbytes, times, strict=True):
                predicted = cost_model.predicted_seconds(shape, world, n, on_link)
                checked = name != BUILTIN  # the built-in is charged as a ring: a prediction
                rows.append(
                    {
                        "algorithm": name,
                        "world_size": world,
                        "bytes": n,
                        "clock": "simulated",
                        "seconds": round(seconds, 5),
                        "predicted": round(predicted, 5),
                        "meets_target": abs(seconds / predicted - 1) <= TOLERANCE
                        if checked
                        else None,
                    }
                )
    return {
        "benchmark": NAME,
        "clock": "simulated",
        "link": link.spec,
        "link_label": link.label,
        "target": f"every hand-written algorithm within {TOLERANCE:.0%} of the alpha-beta "
        "model of its schedule, on the link's own alpha and beta (the built-in is charged as "
        "a ring: not checked)",
        "met": all(r["meets_target"] for r in rows if r["meets_target"] is not None),
        "rows": rows,
    }


def _worlds(args) -> list[int]:
    return [int(n) for n in args.world_sizes.split(",")]


def _against_builtin(args) -> dict:
    """The ring and the built-in take turns alone: with the other algorithms between them
    (timed after, for their ratios) each pair also paid for the others' large buffers."""
    from ..core.machine import machine_cores, on_a_quiet_machine
    from .runs import BUILTIN, time_allreduce

    nbytes, world = int(args.size_mb * (1 << 20)), args.world_size
    repeats = args.repeats or 30  # fewer is noisy on 2 cores

    def measure() -> dict:
        runs = {}
        for names in (("ring", BUILTIN), (*[a for a in ALGORITHMS if a != "ring"], BUILTIN)):
            table = time_allreduce(world, (nbytes,), repeats, names, link="real", every_repeat=True)
            runs.update({(name, names[0]): times[0] for name, times in table.items()})
        return runs

    runs, share = on_a_quiet_machine(measure, cores=world)
    ratios, fastest = {}, {}
    for (name, run), t in runs.items():
        if name != BUILTIN:
            builtin = runs[BUILTIN, run]
            ratios[name] = round(
                statistics.median(a / b for a, b in zip(t, builtin, strict=True)), 3
            )
            fastest[name] = round(min(t) / min(builtin), 3)
    medians = {k[0]: round(statistics.median(t), 5) for k, t in reversed(runs.items())}
    judged = not share.busy and world <= machine_cores()
    return {
        "benchmark": NAME,
        "clock": "real",
        "link": "real",
        "world_size": world,
        "size_mb": args.size_mb,
        "repeats": repeats,
        "others_cores": round(share.others_cores, 2),
        "judged": judged,
        "median_seconds": medians,  # the built-in's from its turns with the ring
        "ratio_to_builtin": ratios,
        "fastest_ratio_to_builtin": fastest,
        "rows": [
            {
                "algorithm": name,
                "world_size": world,
                "bytes": nbytes,
                "clock": "real",
                "seconds": seconds,
            }
            for name, seconds in medians.items()
        ],  # fmt: skip
        "target": f"ring within {RING_TARGET}x of dist.all_reduce (median of paired ratios), "
        "a core per rank",
        "met": ratios["ring"] <= RING_TARGET if judged else None,  # None: cores were taken
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
    if link.emulated:  # the plateau is the link's bandwidth by construction: a prediction
        target = "none on a simulated link (its plateau is the link's bandwidth by construction)"
        met = None
    else:
        pairs = zip(table["ring"][-1], table[BUILTIN][-1], strict=True)
        ratio = statistics.median(a / b for a, b in pairs)
        target = f"the ring within {RING_TARGET}x of the built-in at the largest size (paired)"
        met = ratio <= RING_TARGET
    return {
        "benchmark": NAME,
        "clock": link.clock,
        "link": link.spec,
        "world_size": world,
        "rows": rows,
        "target": target,
        "met": met,
    }
