"""The timing lessons of notebook 05 as verdicts: each compares measurements with a threshold.

The numbers go on the line before a verdict (`model_ratios`, `growth`, `bus_bandwidth`,
`measured_crossover` compute them); the verdict line itself carries none. Every verdict
here rests on timings over the emulated link (`ranks.link`), where the wire, not the
cores the ranks share, sets the time.
"""

from __future__ import annotations

import math

from ..core.checks import Verdict, verdict

__all__ = [
    "agrees_with_model",
    "bus_bandwidth",
    "busbw_flat",
    "crossover_agrees",
    "grows_like",
    "growth",
    "measured_crossover",
    "model_ratios",
    "reaches_link_bandwidth",
    "ring_bytes_growth",
    "ring_time_within_bytes_growth",
]


def model_ratios(measured: dict, predicted: dict) -> dict:
    """{(world_size, algorithm): [measured / predicted per size]} for every predicted curve."""
    return {
        (n, name): [m / p for m, p in zip(measured[n][name], curve, strict=True)]
        for n, row in predicted.items()
        for name, curve in row.items()
    }


def agrees_with_model(measured: dict, predicted: dict, tolerance: float = 0.25) -> Verdict:
    """Every algorithm, world size and message size within `tolerance` of its prediction."""
    ratios = [r for row in model_ratios(measured, predicted).values() for r in row]
    worst = max(abs(r - 1) for r in ratios)
    return verdict(
        worst <= tolerance,
        f"every algorithm, on every N and message size, takes the alpha-beta model's time "
        f"within {tolerance:.0%}",
    )


def growth(times_by_n: dict) -> float:
    """How many times longer the largest N takes than the smallest."""
    return times_by_n[max(times_by_n)] / times_by_n[min(times_by_n)]


def grows_like(measured_by_n: dict, predicted_by_n: dict, claim: str, tolerance=0.25) -> Verdict:
    """The measured growth from the smallest to the largest N within `tolerance` of the
    model's (rounds for the tree and the butterfly, N for the parameter server)."""
    ratio = growth(measured_by_n) / growth(predicted_by_n)
    return verdict(abs(ratio - 1) <= tolerance, claim)


def bus_bandwidth(nbytes: float, seconds: float, world: int) -> float:
    """nccl-tests' busbw for all_reduce, in bytes/s: algbw = n / t, busbw = algbw 2(N-1)/N.

    The factor makes it comparable across N: it is the rate at which each rank's link
    carries bytes, which for a ring is the link's bandwidth once latency no longer counts.
    """
    return nbytes / seconds * 2 * (world - 1) / world


def busbw_flat(busbw_by_n: dict, tolerance: float = 0.25) -> Verdict:
    """The ring's bus bandwidth at one message size hardly depends on N."""
    spread = max(busbw_by_n.values()) / min(busbw_by_n.values())
    return verdict(
        spread <= 1 + tolerance,
        f"at a fixed message size the ring's bus bandwidth stays flat in N (within "
        f"{tolerance:.0%}): each rank's link carries the same bytes per second however many "
        "ranks share the sum",
    )


def ring_bytes_growth(lo: int, hi: int) -> float:
    """How much more each rank of a ring sends on `hi` ranks than on `lo`: 2(N-1)/N grows
    towards 2, so this is below 2 whatever the N (1.75 from N = 2 to 8)."""
    return ((hi - 1) / hi) / ((lo - 1) / lo)


def ring_time_within_bytes_growth(times_by_n: dict, tolerance: float = 0.25) -> Verdict:
    """The ring's time grows from the fewest to the most ranks by no more than its bytes
    per rank do (within `tolerance`): at a bandwidth-bound size the wire time is those
    bytes, and only the latency term 2(N-1) alpha adds to it."""
    lo, hi = min(times_by_n), max(times_by_n)
    bound = ring_bytes_growth(lo, hi)
    return verdict(
        growth(times_by_n) <= bound * (1 + tolerance),
        f"at a fixed large message the ring's time grows with N no more than its bytes per "
        f"rank, 2(N-1)/N, do (within {tolerance:.0%}), and those stay under twice the message",
    )


def reaches_link_bandwidth(busbw: float, link_bytes_per_second: float, tolerance=0.25):
    """A large message's bus bandwidth within `tolerance` of the link's own bandwidth."""
    return verdict(
        abs(busbw / link_bytes_per_second - 1) <= tolerance,
        f"for the largest message the ring's bus bandwidth is the link's bandwidth (within "
        f"{tolerance:.0%})",
    )


def measured_crossover(nbytes: list, few_rounds: list, few_bytes: list) -> float | None:
    """The message size where `few_bytes` (the ring) starts to beat `few_rounds` (the
    butterfly), interpolated on log scales between the two sizes it falls between; None
    when one of them wins at every size."""
    logs = [math.log(b / r) for r, b in zip(few_rounds, few_bytes, strict=True)]
    for k in range(len(nbytes) - 1):
        if logs[k] > 0 >= logs[k + 1]:
            share = logs[k] / (logs[k] - logs[k + 1])
            lo, hi = math.log(nbytes[k]), math.log(nbytes[k + 1])
            return math.exp(lo + share * (hi - lo))
    return None


def crossover_agrees(measured: float | None, model: float | None, factor: float = 2.0):
    """The measured crossover exists and lies within `factor` of the model's."""
    ok = measured is not None and model is not None and 1 / factor <= measured / model <= factor
    return verdict(
        ok,
        f"the measured times cross where the model says, within a factor of {factor:g}: "
        "fewest rounds win below it, fewest bytes above",
    )
