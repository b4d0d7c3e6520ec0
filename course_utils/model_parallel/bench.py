"""The pipeline bubble with real compute, against GPipe's (K-1)/(M+K-1) (target: within 15%).

Equal stages of real layers (the profile's `real_width`), a backward about twice a forward,
nothing padded with sleep. Two clocks, named in every row:
- `--link real`: the stages hand off over the real link (gloo) and are timed on the wall
  clock, which is fair only with a core per stage; the measurement is repeated while other
  programs take the stages' cores (`core.machine`), and left unjudged (`meets_target: null`)
  if they keep them. This is the run the design's target speaks of: K = 2 on 2 cores,
  within 15% of the formula for M <= 8.
- an emulated link (the default, `bubble.HANDOFF_LINK`: 100 Gbit/s and 10 us, a fast
  network link, far slower than NVLink): the simulated clock, each stage timed on its CPU
  time plus its waits, so the result does not depend on how many cores the stages share.
  Over the profile's 100 Mbit/s network a hand-off of these activations takes about 3
  forwards, which the formula does not count (`--link 100mbit,5ms` shows that).
Each row's `from_stages_and_link` plays GPipe's order out with every op's measured time and
the median measured hand-off: how much of a gap to the formula unequal stages and slow
hand-offs explain (`meets_link_prediction`: the bubble and the step within 15% of it, for
every M; `--stage-cost 1,2` makes the second stage twice as heavy, where only that holds).
`backward_over_forward` is reported, not judged: a backward does two matrix products to the
forward's one, about 2 (2-core machines have shown 1.4 to 3.4). These figures were once test
assertions; on a machine shared with other work they are benchmarks, not facts about the code.
"""

from __future__ import annotations

from ..core.machine import machine_cores, on_a_quiet_machine
from ..network import wire

NAME = "pipeline"
HELP = "measure the pipeline bubble with real compute for each number of micro-batches"
TOLERANCE = 0.15
# steps per M, the least idle counts. The notebook's 2 keep 06 short; on a 2-core VM the
# least idle of 2 put M = 8 from 8% to 23% over the formula in 4 runs, and of 5 from -3% to
# +2% in 3 runs (2026-11-25): noise only adds idle time, so more steps find the schedule's own.
REPEATS = 5
# judged against the schedule played out with the measured F, B, W and hand-offs only (design
# §5): their bubbles are a few percent of the step, where a relative bar on a formula is noise
PLAYED_OUT_ONLY = ("interleaved", "zb-h1")


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",") if v.strip()]


def add_arguments(parser) -> None:
    wire.add_argument(parser, default="notebook 06's stage-to-stage link, 100 Gbit/s, 10 us")
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--microbatches", type=_ints, default=[1, 2, 4, 8, 16])
    parser.add_argument(
        "--schedule", choices=["gpipe", "1f1b", "interleaved", "zb-h1"], default="gpipe"
    )
    parser.add_argument(
        "--virtual-stages", type=int, default=2, help="chunks per rank (interleaved only)"
    )
    parser.add_argument(
        "--stage-cost", type=_floats, default=None, help="blocks per stage, e.g. 1,2 (all 1)"
    )
    parser.add_argument("--width", type=int, default=None, help="stage width (the profile's)")
    parser.add_argument("--micro-batch-size", type=int, default=None, help="(the profile's)")
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help=f"steps per M, the least idle counts (default {REPEATS})",
    )


def run(args) -> dict:
    from ..core import profiles
    from .bubble import HANDOFF_LINK, measure_bubble, measure_schedules

    sizes = profiles.current().pipeline
    link = wire.resolve(args.link or HANDOFF_LINK, args.stages)
    width = args.width or sizes.real_width
    batch = args.micro_batch_size or sizes.real_micro_batch_size
    repeats = args.repeats or REPEATS
    clock = link.clock

    def measure():
        if args.schedule in ("interleaved", "zb-h1"):  # the engine with chunks and a split B
            return [
                row for m in args.microbatches for row in measure_schedules(
                    [args.schedule], args.stages, m, width=width, micro_batch_size=batch,
                    chunks=args.virtual_stages, repeats=repeats,
                    link=link.spec if link.emulated else None,
                )
            ]  # fmt: skip
        return measure_bubble(
            args.stages, args.microbatches, width=width, micro_batch_size=batch,
            repeats=repeats, schedule=args.schedule, link=link.spec if link.emulated else None,
            stage_cost=args.stage_cost,
        )  # fmt: skip

    if link.emulated:
        rows, machine = measure(), None
    else:  # a wall-clock measurement needs every stage on a core of its own
        rows, machine = on_a_quiet_machine(measure, cores=min(args.stages, machine_cores()))
    judged = machine is None or not machine.busy
    virtual = args.virtual_stages if args.schedule == "interleaved" else 1
    for row in rows:
        row["relative_error"] = round(row["measured"] / row["predicted"] - 1, 4)
        row["meets_link_prediction"] = (
            abs(row["measured"] / row["from_stages_and_link"] - 1) <= TOLERANCE
            and abs(row["step_over_played_out"] - 1) <= TOLERANCE
        )
        row["meets_target"] = row["meets_link_prediction"] and (
            args.schedule in PLAYED_OUT_ONLY
            or row["microbatches"] > sizes.formula_up_to
            or abs(row["relative_error"]) <= TOLERANCE
        )
        row["handoff_over_forward"] = round(row["handoff_seconds"] / row.pop("forward_seconds"), 3)
        row["handoff_seconds"] = round(row["handoff_seconds"], 6)
        for key in ("measured", "predicted", "from_stages_and_link", "step_over_played_out"):
            row[key] = round(row[key], 4)
        row["backward_over_forward"] = round(row["backward_over_forward"], 2)
    met = all(r["meets_target"] for r in rows)
    return {
        "benchmark": NAME,
        "paced": False,
        "clock": clock,
        "compute": "real layers, timed on each rank's "
        + ("link clock (CPU time + simulated waits)" if link.emulated else "wall clock"),
        "stages_over_cores": args.stages > machine_cores(),
        "others_cores": None if machine is None else round(machine.others_cores, 2),
        "judged": judged,
        "schedule": args.schedule,
        "virtual_stages": virtual,
        "stages": args.stages,
        "stage_cost": args.stage_cost or [1] * args.stages,
        "width": width,
        "micro_batch_size": batch,
        "link": link.spec,
        "link_label": link.label,
        "repeats": repeats,
        "rows": rows,
        "target": f"for every M bubble and step within {TOLERANCE:.0%} of the schedule played "
        "out with every op's measured F, B, W and the measured hand-offs (meets_link_prediction)"
        if args.schedule in PLAYED_OUT_ONLY
        else f"measured bubble within {TOLERANCE:.0%} of (K-1)/(M+K-1) for M <= "
        f"{sizes.formula_up_to} (the formula assumes free hand-offs and equal stages), and for "
        f"every M bubble and step within {TOLERANCE:.0%} of the schedule played out with every "
        "op's measured time and the measured hand-offs (meets_link_prediction)",
        "meets_target": met if judged else None,  # None: other programs took the stages' cores
        "meets_link_prediction": all(r["meets_link_prediction"] for r in rows) if judged else None,
        "why": None
        if met
        else "not judged: other programs took the stages' cores"
        if not judged
        else _why(max(r["handoff_over_forward"] for r in rows), link.emulated, args.stages),
    }


def _why(handoff_over_forward: float, emulated: bool, stages: int) -> str:
    """What a missed target comes from, judged from the run's own figures."""
    if handoff_over_forward >= 0.05:
        return (
            f"a hand-off takes up to {handoff_over_forward:.2g} forwards on this link and the "
            "formula counts none; from_stages_and_link plays them out (try --link 100gbit,10us)"
        )
    if not emulated and stages > machine_cores():
        return "timed on the wall clock with more stages than cores: they took turns on the cores"
    return "the stages' op times differ: from_stages_and_link plays the schedule out with them"
