"""ZeRO stages 1, 2 and 3 by hand on 1, 2 and 4 gloo ranks: bytes per rank against the formula.

Targets: every stage's measured bytes per rank between steps within 5% of the ZeRO
paper's formula (design.md), and its peak during a step (the allocator's count, `peak`)
within 10% of `formulas.peak_bytes`; each row also says whether the stage's parameters
equal DDP's after training.
"""

from __future__ import annotations

NAME = "zero"
HELP = "bytes per rank, bytes sent and step time of hand-written ZeRO-1/2/3 against the formula"
TOLERANCE = 0.05
PEAK_TOLERANCE = 0.10


def add_arguments(parser) -> None:
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--steps", type=int, default=20)


def run(args) -> dict:
    from ..core.profiles import current
    from .runs import compare_stages, stage_row

    sizes = current().memory
    rows = compare_stages(
        sizes.widths, tuple(args.world_sizes), args.steps, sizes.batch_per_rank, sizes.lr
    )
    table = []
    for row in rows:
        if row["rank"] or not row["stage"]:
            continue  # rank 0 speaks for its stage; DDP (stage 0) is the reference
        ddp = stage_row(rows, row["world_size"], 0)
        error = row["measured"] / row["predicted"] - 1
        peak_error = row["peak"] / row["predicted_peak"] - 1
        table.append(
            {
                "stage": row["stage"],
                "world_size": row["world_size"],
                "measured": row["measured"],
                "predicted": round(row["predicted"]),
                "peak": row["peak"],
                "predicted_peak": round(row["predicted_peak"]),
                "bytes_sent": row["bytes_sent"],
                "step_seconds": round(row["step_seconds"], 5),
                "equals_ddp": bool((row["params"] - ddp["params"]).abs().max() <= 1e-6),
                "met_target": abs(error) <= TOLERANCE and abs(peak_error) <= PEAK_TOLERANCE,
            }
        )
    return {
        "benchmark": NAME,
        "parameters": rows[0]["numel"],
        "target": f"bytes per rank between steps within {TOLERANCE:.0%} of the formula, "
        f"the peak during a step within {PEAK_TOLERANCE:.0%} of the peak formula",
        "rows": table,
        "all_met": all(r["met_target"] for r in table),
    }
