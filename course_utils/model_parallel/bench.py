"""The pipeline bubble, measured against GPipe's (K-1)/(M+K-1) (target: within 25%)."""

from __future__ import annotations

NAME = "pipeline"
HELP = "measure the pipeline bubble for each number of micro-batches, against the formula"


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def add_arguments(parser) -> None:
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--microbatches", type=_ints, default=[1, 2, 4, 8, 16])
    parser.add_argument("--schedule", choices=["gpipe", "1f1b"], default="gpipe")
    parser.add_argument("--slot", type=float, default=0.04, help="seconds per op (sleep-padded)")
    parser.add_argument("--repeats", type=int, default=3, help="steps per M; median reported")


def run(args) -> dict:
    from .pipeline import measure_bubble

    rows = measure_bubble(
        args.stages,
        args.microbatches,
        slot=args.slot,
        repeats=args.repeats,
        schedule=args.schedule,
    )
    for row in rows:
        row["relative_error"] = round(row["measured"] / row["predicted"] - 1, 4)
        row["measured"] = round(row["measured"], 4)
        row["predicted"] = round(row["predicted"], 4)
    return {
        "benchmark": NAME,
        "schedule": args.schedule,
        "stages": args.stages,
        "slot_seconds": args.slot,
        "repeats": args.repeats,
        "rows": rows,
        "within_25_percent": all(abs(r["relative_error"]) <= 0.25 for r in rows),
    }
