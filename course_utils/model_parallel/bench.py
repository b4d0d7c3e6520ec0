"""The pipeline bubble, measured against GPipe's (K-1)/(M+K-1) (target: within 15%).

By default with real compute: equal stages of real layers, backward about twice the
forward, timed on each rank's link clock (its CPU time plus hand-off waits), so the
result does not depend on how many cores the stages share. `--paced` replays the
schedule with sleep-padded slots instead (an illustration, not a measurement).
"""

from __future__ import annotations

NAME = "pipeline"
HELP = "measure the pipeline bubble for each number of micro-batches, against the formula"
TOLERANCE = 0.15


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def add_arguments(parser) -> None:
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--microbatches", type=_ints, default=[1, 2, 4, 8, 16])
    parser.add_argument("--schedule", choices=["gpipe", "1f1b"], default="gpipe")
    parser.add_argument("--paced", action="store_true", help="sleep-padded slots instead")
    parser.add_argument("--slot", type=float, default=0.04, help="--paced: seconds per op")
    parser.add_argument("--width", type=int, default=None, help="stage width (the profile's)")
    parser.add_argument("--micro-batch-size", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=1, help="steps per M; median reported")


def run(args) -> dict:
    from ..core import profiles
    from .bubble import HANDOFF_LINK, measure_bubble

    width = args.width or profiles.current().pipeline.real_width
    rows = measure_bubble(
        args.stages,
        args.microbatches,
        slot=args.slot if args.paced else 0.0,
        repeats=args.repeats,
        schedule=args.schedule,
        width=None if args.paced else width,
        micro_batch_size=args.micro_batch_size,
    )
    for row in rows:
        row["relative_error"] = round(row["measured"] / row["predicted"] - 1, 4)
        row["measured"] = round(row["measured"], 4)
        row["predicted"] = round(row["predicted"], 4)
    return {
        "benchmark": NAME,
        "paced": args.paced,
        "schedule": args.schedule,
        "stages": args.stages,
        **({"slot_seconds": args.slot} if args.paced else {"width": width}),
        "handoff_link": None if args.paced else HANDOFF_LINK,
        "repeats": args.repeats,
        "rows": rows,
        "target": f"measured bubble within {TOLERANCE:.0%} of (K-1)/(M+K-1) for every M",
        "met": all(abs(r["relative_error"]) <= TOLERANCE for r in rows),
    }
