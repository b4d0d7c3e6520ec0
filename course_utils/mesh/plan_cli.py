"""`python -m course_utils plan [--json] MODEL CLUSTER`: the planner on the command line."""

from __future__ import annotations

import argparse
import json

from ..network.fabric import PRESETS
from .plan_model import GPU_KINDS, MODEL_PRESETS, cluster, model
from .planner import plan

HELP = "list the DP/FSDP x TP x PP layouts of a model on a cluster, and the fastest that fits"
DESCRIPTION = f"""{HELP}.

MODEL is a preset: {", ".join(MODEL_PRESETS)}.
CLUSTER is NODESxGPUS:KIND, GPUS per node, KIND one of {", ".join(GPU_KINDS)}:
  8x8:h100   8 nodes of 8 H100 (80 GB, NVLink 4 inside, InfiniBand NDR across, 400 TFLOP/s
             bf16 achieved: an assumption)
  1x8:cpu    this machine as 8 course ranks (FLOP rate measured, the profile's simulated link)
Links for --intra/--inter: {", ".join(PRESETS)}, or e.g. '100mbit,2ms'.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("model", help=f"a model preset: {', '.join(MODEL_PRESETS)}")
    parser.add_argument("cluster", help="NODESxGPUS:KIND, e.g. 8x8:h100 or 1x8:cpu")
    parser.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    parser.add_argument(
        "--global-batch", type=int, help="sequences per step (default: the preset's)"
    )
    parser.add_argument("--memory-gb", type=float, help="memory per GPU (default: the kind's)")
    parser.add_argument(
        "--tflops", type=float, help="achieved TFLOP/s per GPU (default: the kind's)"
    )
    parser.add_argument("--intra", help="the link inside a node (default: the kind's)")
    parser.add_argument("--inter", help="the link between nodes (default: the kind's)")
    parser.add_argument("--top", type=int, default=10, help="layouts to print without --json")
    parser.add_argument("--json", action="store_true", help='print {"pick", "layouts", "rejected"}')


def run(args) -> int:
    """Plan and print; a bad preset or cluster raises ValueError, which `__main__` prints."""
    from dataclasses import replace

    chosen = model(args.model)
    if args.global_batch:
        chosen = replace(chosen, global_batch=args.global_batch)
    machines = cluster(args.cluster, args.memory_gb, args.tflops, args.intra, args.inter)
    result = plan(chosen, machines, args.precision)
    if args.json:
        print(json.dumps(result.as_dict()))
        return 0
    print(f"{chosen.name} ({chosen.params:.3g} parameters) on {machines.name}, {args.precision}:")
    print(f"{'layout':<34}{'step (s)':>10}{'GB/rank':>9}  compute tp pp bubble dp (s)")
    for c in result.layouts[: args.top]:
        t = c.time
        parts = " ".join(f"{v:.3g}" for v in (t.compute, t.tp, t.pp, t.bubble, t.dp))
        print(f"{c.name:<34}{t.total:>10.4g}{c.memory.total / 1e9:>9.3g}  {parts}")
    print(f"{len(result.layouts)} layouts fit, {len(result.rejected)} do not", end="")
    print(f"; the pick: {result.pick.name}" if result.pick else "; nothing fits")
    return 0 if result.pick else 1
