"""Notebook 08's claims about FSDP2 and the runs it must agree with, each a measured
quantity against a stated threshold, each failing in a test where its effect is absent."""

from __future__ import annotations

from ..core.checks import Verdict, verdict


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
