"""The claims of notebook 08, each a measured quantity against a stated threshold.

Each function prints one verdict line (no run-to-run numbers in it) and returns it; the
tests feed each one a case where the effect is absent and see it fail.
"""

from __future__ import annotations

from itertools import pairwise

from ..core.checks import Verdict, verdict
from ..core.timing_claims import timing_claim
from .formulas import comm_multiple
from .runs import stage_row
from .zero import stage_name


def _stages(stages: int | tuple[int, ...]) -> list[int]:
    return [stages] if isinstance(stages, int) else list(stages)


def _names(stages: list[int]) -> str:
    names = [stage_name(s) for s in stages]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _of(rows: list[dict], stages: list[int]) -> list[dict]:
    """The rows of `stages`; empty unless every stage has some."""
    mine = [r for r in rows if r["stage"] in stages]
    return mine if {r["stage"] for r in mine} == set(stages) else []


def stage_matches_ddp(rows: list[dict], stages, tolerance: float = 1e-6) -> Verdict:
    """After training, every rank's parameters at each of `stages` equal DDP's at the same N."""
    stages = _stages(stages)
    gaps = [
        (r["params"] - stage_row(rows, r["world_size"], 0)["params"]).abs().max().item()
        for r in _of(rows, stages)
    ]
    return verdict(
        bool(gaps) and max(gaps) <= tolerance,
        f"the parameters of {_names(stages)} equal DDP's to {tolerance:g} on every rank and N",
    )


def bytes_fall_with_ranks(rows: list[dict], stages) -> Verdict:
    """At each of `stages`, bytes per rank strictly fall as N grows (the sharded part
    divides by N)."""
    stages = _stages(stages)
    ok = bool(_of(rows, stages))
    for stage in stages:
        by_n = sorted({r["world_size"]: r["measured"] for r in rows if r["stage"] == stage}.items())
        ok = ok and len(by_n) > 1 and all(b[1] < a[1] for a, b in pairwise(by_n))
    return verdict(ok, f"the bytes per rank of {_names(stages)} fall with every rank added")


def zero2_peak_below_zero1(rows: list[dict]) -> Verdict:
    """ZeRO-2's gain survives the step: each layer's full gradient goes as soon as it is
    reduce-scattered, so on every N > 1 its peak is below ZeRO-1's."""
    worlds = sorted({r["world_size"] for r in rows if r["world_size"] > 1})
    ok = bool(worlds) and all(
        stage_row(rows, n, 2)["peak"] < stage_row(rows, n, 1)["peak"] for n in worlds
    )
    return verdict(
        ok, "at its peak ZeRO-2 holds less than ZeRO-1 on every N > 1, not only between steps"
    )


def zero3_peak_holds_a_gathered_layer(rows: list[dict]) -> Verdict:
    """ZeRO-3 computes with whole layers it gathers: on every N > 1 its step adds, on top
    of what it keeps between steps, at least one largest layer more than DDP's step adds."""
    mine = [r for r in rows if r["stage"] == 3 and r["world_size"] > 1]

    def added(r: dict) -> float:  # what a step holds beyond what is kept between steps
        return r["peak"] - r["measured"]

    ok = bool(mine) and all(
        added(r) - added(stage_row(rows, r["world_size"], 0)) >= 4 * r["largest_layer"]
        for r in mine
    )
    return verdict(
        ok,
        "during a step ZeRO-3 holds at least one whole layer more than DDP beyond what each "
        "keeps between steps: the layer it gathers",
    )


def traffic_follows_formula(rows: list[dict], stages, tolerance: float = 0.05) -> Verdict:
    """Bytes each rank sent per step within `tolerance` of 2(N-1)/N model bytes (DDP,
    ZeRO-1, ZeRO-2) or 3(N-1)/N (ZeRO-3), at each of `stages`."""
    stages = _stages(stages)
    mine = [r for r in _of(rows, stages) if r["world_size"] > 1]
    ok = bool(mine) and all(
        abs(r["bytes_sent"] / (4 * r["numel"]) / comm_multiple(r["stage"], r["world_size"]) - 1)
        <= tolerance
        for r in mine
    )
    sent = {"2(N-1)/N": [s for s in stages if s != 3], "3(N-1)/N": [s for s in stages if s == 3]}
    (k, first), *rest = [(k, _names(group)) for k, group in sent.items() if group]
    claim = f"each rank of {first} sends {k} of the model's bytes per step"
    claim += "".join(f", each of {names} {k}" for k, names in rest)
    return verdict(ok, f"{claim}, within 5%")


def loss_scaling_rescues(under: dict, lost: float = 0.5, kept: float = 0.01) -> Verdict:
    """Without a loss scale fp16 flushes most of the shrunk gradients to zero (more than
    `lost`); with GradScaler fewer than `kept` of them are lost."""
    return verdict(
        under["fp16_lost"] > lost and under["scaled_lost"] < kept,
        "without a loss scale fp16 flushes most gradients to zero; with GradScaler fewer "
        "than 1% are lost",
    )


def fp16_sum_stalls(sums: dict) -> Verdict:
    """Small additions vanish in fp16: a sum of many stops short of half the true one, and
    a weight of 1.0 never moves, while an fp32 master weight reaches the exact value."""
    return verdict(
        sums["fp16_sum"] < 0.5 * sums["exact_sum"]
        and sums["fp16_weight"] == 1.0
        and abs(sums["fp32_weight"] / sums["exact_weight"] - 1) < 1e-3,
        "small additions vanish in fp16 (a long sum stops short of half, a weight never "
        "moves); an fp32 master weight takes them",
    )


def bf16_keeps_accuracy(race: dict, tolerance: float = 0.03) -> Verdict:
    gap = abs(race["bf16"]["accuracy"] - race["fp32"]["accuracy"])
    return verdict(gap <= tolerance, "bf16 autocast reaches fp32's test accuracy within 3 points")


def _none_and_full(rows: list[dict]) -> tuple[dict, dict]:
    """The run without checkpointing, and the one that checkpoints the most blocks."""
    none = next(r for r in rows if not r["checkpointed"])
    return none, max(rows, key=lambda r: r["checkpointed"])


def checkpointing_saves_bytes(rows: list[dict], least: float = 0.5) -> Verdict:
    """Saved bytes fall with every extra checkpointed block and all of them save at least
    half; backward recomputes one block at a time, so the peak of checkpointing every
    block lies above its saved bytes by at least one block's activations (what no
    checkpointing saves, over the blocks)."""
    ordered = sorted(rows, key=lambda r: r["checkpointed"])
    none, full = _none_and_full(rows)
    falls = all(b["saved"] < a["saved"] for a, b in pairwise(ordered))
    block = none["saved"] / max(full["checkpointed"], 1)
    recomputed = full["checkpointed"] > 0 and full["peak"] - full["saved"] >= block
    return verdict(
        falls and full["saved"] <= least * none["saved"] and recomputed,
        "every extra checkpointed block lowers the saved activation bytes (all of them: below "
        "half), and the peak holds one recomputed block above them",
    )


@timing_claim("real", "measurement", "test_recomputing_blocks_thrice_fails_the_time_verdict")
def checkpointing_costs_a_forward(rows: list[dict], most: float = 1.5) -> Verdict:
    """Checkpointing leaves the gradients as they were, and every block costs more time,
    but at most about one extra forward pass (both the median step's CPU time of the thread
    that ran it: other programs on the machine do not lengthen it, as they would a wall time)."""
    none, full = _none_and_full(rows)
    same = all((r["grad"] - none["grad"]).abs().max().item() <= 1e-6 for r in rows)
    extra = full["step_seconds"] - none["step_seconds"]
    return verdict(
        same and 0 < extra <= most * none["forward_seconds"],
        "the gradients are the same with and without checkpointing; real clock (one thread's "
        "CPU time): recomputing every block costs extra time, at most about one forward pass",
    )


def fsdp_stores_a_shard(stored: list[int], numel: int, tolerance: float = 0.05) -> Verdict:
    """FSDP2 keeps about 1/N of the fp32 parameters on each rank."""
    world = len(stored)
    ok = all(abs(s / (4 * numel / world) - 1) <= tolerance for s in stored)
    return verdict(ok, "FSDP2 stores 1/N of the parameters on each rank, within 5%")


def prefetch_seen(events: list) -> Verdict:
    """Some backward all-gather was issued by a later layer's prefetch, before its own turn."""
    early = {layer for kind, layer, *_ in events if kind == "prefetch"}
    gathered = {layer for kind, layer, *_ in events if kind == "all-gather"}
    return verdict(
        bool(early) and early <= gathered,
        "FSDP2 prefetches: some backward all-gathers start while a later layer's backward runs",
    )


def every_run_matches_fp64(gaps: dict, fp32_gap: float, factor: float = 2.0) -> Verdict:
    """Every run's largest parameter difference from one process training in fp64 (`gaps`,
    by run) is at most `factor` times the one-process fp32 run's own (`fp32_gap`: what
    fp32 arithmetic alone drifts by), and never more than 1e-6 where that is smaller."""
    bound = max(1e-6, factor * fp32_gap)
    return verdict(
        bool(gaps) and all(g <= bound for g in gaps.values()),
        f"every run ends within {factor:g}x of one fp32 process's distance from one fp64 "
        "process: the sharding changed nothing but the rounding",
    )


def reshard_after_forward_keeps_layers(settings: dict, numel: int, share: float = 0.9):
    """`reshard_after_forward=False` gathers each layer once per step instead of twice, and
    its forward ends still holding the gathered layers: at least `share` of the whole
    model's fp32 bytes more than the default's forward holds."""
    default, kept = settings["default"], settings["reshard_after_forward=False"]
    held_more = kept["kept_after_forward"] - default["kept_after_forward"]
    return verdict(
        2 * kept["all_gathers"] == default["all_gathers"] > 0 and held_more >= share * 4 * numel,
        "reshard_after_forward=False all-gathers half as often, and its forward ends holding "
        f"the gathered layers (at least {share:.0%} of the model's bytes more than the default)",
    )


def mixed_precision_policy_in_bf16(settings: dict) -> Verdict:
    """Under MixedPrecisionPolicy(param_dtype=bf16) the layers compute with bf16 weights
    while the shards Adam steps stay fp32 (the same bytes stored as the default's)."""
    default, mixed = settings["default"], settings["bf16 MixedPrecisionPolicy"]
    return verdict(
        mixed["computes_in"] == "bfloat16"
        and default["computes_in"] == "float32"
        and mixed["stored"] == default["stored"],
        "MixedPrecisionPolicy computes with bf16 weights while the stored shards stay fp32",
    )
