"""The hand-written allreduce algorithms, timed over a link, against their targets.

Over an emulated link (the cpu profile's default, or `--link 100mbit`): a ping-pong fits
alpha and beta, then every algorithm on every N and message size is timed; target
(design.md): each measured within 25% of its alpha-beta prediction. Over the real link
(`--link real`): the ring against `dist.all_reduce` at one size; target: within 1.1x at
16 MB on 4 gloo ranks.
"""

from __future__ import annotations

from ..ranks import link as links

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


def run(args) -> dict:
    link = links.resolve(args.link)
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
    from .runs import BUILTIN, time_allreduce

    nbytes = int(args.size_mb * (1 << 20))
    repeats = args.repeats or 30  # fewer is noisy on 2 cores
    table = time_allreduce(args.world_size, (nbytes,), repeats=repeats, link="real")
    builtin = table[BUILTIN][0]
    ratios = {name: round(t[0] / builtin, 3) for name, t in table.items() if name != BUILTIN}
    return {
        "benchmark": NAME,
        "link": "real",
        "world_size": args.world_size,
        "size_mb": args.size_mb,
        "repeats": repeats,
        "seconds": {name: round(times[0], 5) for name, times in table.items()},
        "ratio_to_builtin": ratios,
        "target": f"ring within {RING_TARGET}x of dist.all_reduce",
        "met": ratios["ring"] <= RING_TARGET,
    }
