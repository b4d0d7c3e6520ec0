"""What overlapping DDP's all-reduces with the backward pass saves, on the profile's link.

The forward pass alone, the step's computation alone, the bucket all-reduces alone, the
last bucket's alone and DDP's overlapped step, each the slowest rank's fastest of `--steps`
(`overlap.overlap_saving`). Target: overlap hides at least half of what it could (the
shorter of the backward pass and every bucket's all-reduce but the last:
`verdicts.overlap_saves`, the notebook's verdict), and the overlapped step is no shorter
than the computation, nor than the forward pass plus the communication
(`verdicts.overlap_physically_possible`, less 5% for noise). It is wall time: when other
programs took the ranks' cores, `met` is None and `judged` false.
"""

from __future__ import annotations

from ..network import wire

NAME = "ddp-overlap"
HELP = "seconds of backward, communication and DDP's overlapped step, and what overlap saved"
SHARE = 0.5


def add_arguments(parser) -> None:
    wire.add_argument(parser, default="the profile's overlap_link; cpu: 1gbit,1ms")
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--bucket-cap-mb", type=float, default=1.0)
    parser.add_argument("--steps", type=int, default=8)


def run(args) -> dict:
    from ..core import profiles
    from .overlap import overlap_saving
    from .verdicts import overlap_physically_possible, overlap_saves

    link = wire.resolve(args.link or profiles.current().ddp.overlap_link)
    result = overlap_saving(
        args.world_size, args.layers, args.width, args.batch, args.bucket_cap_mb,
        args.steps, link, profiles.current().backend,
    )  # fmt: skip
    machine = result.pop("machine")
    saves = overlap_saves({**result, "machine": machine}, share=SHARE)
    bounded = overlap_physically_possible(result).ok
    shorter = max(result.get("hideable", 0.0), 1e-12)
    return {
        "benchmark": NAME,
        "link": link.spec,
        "link_label": result.pop("link"),
        "world_size": args.world_size,
        "others_cores": round(machine.others_cores, 2),
        "judged": saves.judged,
        **{k: round(v, 5) if isinstance(v, float) else v for k, v in result.items()},
        "clock": link.clock,
        "saving_over_shorter": round(result["saving"] / shorter, 3),
        "target": f"overlap saves at least {SHARE:.0%} of the shorter of backward and "
        "every bucket's all-reduce but the last; overlapped step >= 0.95 x the longer of "
        "compute and communication",
        "met": (saves.ok and bounded) if saves.judged else None,  # None: the machine was busy
    }
