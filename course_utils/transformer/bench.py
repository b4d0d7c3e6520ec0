"""`python -m course_utils bench transformer`: bytes per rank of TP, SP, CP, EP, DP and FSDP
on the chapter's transformer, measured from the logged messages, against their formulas.

Target: every row's measured bytes equal its formula exactly (design.md), and every
parallel result equals one process within the profile's tolerance. Each row also gives a
step time with its clock: the training kinds' mean step on the wall clock ("real" when
every rank has a core, else "real, ranks share the cores": not a time to compare), and
for CP and EP, which the chapter runs on one layer, the predicted wire time on 10 GbE.
"""

from __future__ import annotations

NAME = "transformer"
HELP = "bytes per rank of TP, SP, CP, EP, DP and FSDP on notebook 10's transformer vs formulas"
PREDICTED_ON = "10gbe"


def add_arguments(parser) -> None:
    parser.add_argument("--world-sizes", type=int, nargs="+", default=None)


def run(args) -> dict:
    from ..core.profiles import current
    from ..network.fabric import runs_real
    from . import compare, cp_ep_runs, data_parallel, tp_runs

    sizes = current().transformer
    worlds = tuple(args.world_sizes or sizes.world_sizes)
    tp = tp_runs.train_and_compare(sizes, world_sizes=worlds)
    split = data_parallel.train_batch_split(sizes, world_sizes=worlds)
    rows = []
    for n in worlds:
        ring = next(r for r in cp_ep_runs.ring_vs_full(sizes, n) if r.layout == "zigzag")
        moe = cp_ep_runs.moe_vs_one_process(sizes, n)["balanced"]
        diffs = {"TP": tp["tp", n].max_diff, "SP": tp["sp", n].max_diff,
                 "CP": max(ring.out_diff, ring.grad_diff), "EP": max(moe.out_diff, moe.grad_diff),
                 "DP": split["dp", n].max_diff, "FSDP": split["fsdp", n].max_diff}  # fmt: skip
        timed = {"TP": tp["tp", n], "SP": tp["sp", n], "DP": split["dp", n],
                 "FSDP": split["fsdp", n]}  # fmt: skip
        for row in compare.comparison(sizes, n, tp, ring, moe, split):
            name = row.parallelism
            if name in timed:
                seconds = timed[name].step_seconds
                clock = "real" if runs_real(n) else "real, ranks share the cores"
            else:
                seconds, clock = row.seconds(PREDICTED_ON), f"predicted on {PREDICTED_ON}"
            rows.append({
                "parallelism": name, "world_size": n, "per": row.unit,
                "measured_bytes": row.measured, "formula_bytes": row.formula,
                "max_diff": diffs[name], "step_seconds": round(seconds, 6), "clock": clock,
                "met_target": row.measured == row.formula and diffs[name] <= sizes.tolerance,
            })  # fmt: skip
    return {
        "benchmark": NAME,
        "target": "measured bytes per rank equal the formula exactly; every result equals "
        f"one process within {sizes.tolerance:g}",
        "rows": rows,
        "all_met": all(r["met_target"] for r in rows),
    }
