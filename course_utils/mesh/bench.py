"""`python -m course_utils bench mesh`: the planner checked against runs of its layouts.

Seven layouts of one transformer on 8 gloo ranks, each run with `mesh3d` on the
simulated clock and predicted by the planner (`plan_check`). Targets (design.md): the
pick within 10% of the fastest measured; Spearman's rho of predicted vs measured time at
least 0.8; every predicted peak within 10% of the measured one; the layouts spanning at
least 1.5x. A target missed is printed as missed.
"""

from __future__ import annotations

NAME = "mesh"
HELP = "the mesh planner's predicted times and memory vs 8-rank runs of its layouts"


def add_arguments(parser) -> None:
    parser.add_argument("--link", default=None, help="the simulated link (default: 10gbe)")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per layout")


def run(args) -> dict:
    import time

    from .plan_check import LINK, check_planner

    started = time.perf_counter()
    check = check_planner(link=args.link or LINK, steps=args.steps)
    return {
        "benchmark": NAME,
        **check.as_dict(),
        "bench_seconds": round(time.perf_counter() - started, 1),
    }


def text(result: dict) -> str:
    """The result as a table, each target with its number and ✓ or ✗."""
    lines = [
        f"the planner vs {len(result['layouts'])} layouts on {result['ranks']} ranks, "
        f"{result['clock']} clock over {result['link']} (times per step, slowest rank; peak "
        "bytes, fullest rank)",
        f"{'layout':<18}{'measured s':>11}{'predicted s':>12}{'measured MB':>12}"
        f"{'predicted MB':>13}",
    ]
    for r in result["layouts"]:
        mark = "  <- the planner's pick" if r["layout"] == result["pick"] else ""
        lines.append(
            f"{r['layout']:<18}{r['measured_seconds']:>11.4f}{r['predicted_seconds']:>12.4f}"
            f"{r['measured_peak_bytes'] / 1e6:>12.1f}{r['predicted_peak_bytes'] / 1e6:>13.1f}"
            f"{mark}"
        )
    for t in result["targets"]:
        tick = "✓" if t["met"] else "✗"
        lines.append(f"{tick} {t['target']}: {t['value']:.3g} (threshold {t['threshold']:g})")
    lines.append(f"all targets met: {result['all_met']} ({result['bench_seconds']} s)")
    return "\n".join(lines)
