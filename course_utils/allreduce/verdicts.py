"""The timing lessons of notebook 05 as verdicts: each compares measurements with a threshold.

The numbers go on the line before a verdict (`model_ratios`, `growth`, `bus_bandwidth`,
`measured_crossover` compute them); the verdict line itself carries none. Each says its
clock. On the *simulated* clock (`network`) a time is never checked against the formula
the simulator charged for it (the built-in all-reduce, charged as a ring); what is checked
is how the hand-written algorithms' schedules scale and compare, and each verdict fails on
a broken variant (tests/allreduce/test_allreduce_verdicts.py). That each algorithm plays
out its own alpha-beta schedule is the simulator against its model: `model_ratios` shows
it as a table, and a unit test holds it. On the *real* clock the ranks each have a core.
"""

from __future__ import annotations

import math
import statistics

from ..core.checks import Verdict, verdict
from ..core.machine import MachineShare
from ..core.timing_claims import timing_claim


def model_ratios(measured: dict, predicted: dict) -> dict:
    """{(world_size, algorithm): [measured / predicted per size]} for every predicted curve."""
    return {
        (n, name): [m / p for m, p in zip(measured[n][name], curve, strict=True)]
        for n, row in predicted.items()
        for name, curve in row.items()
    }


@timing_claim(
    "real",
    "measurement",
    "test_the_simulator_is_trusted_only_when_it_gives_the_real_times",
)
def simulator_matches_real(
    ratios: dict, tolerance: float = 0.25, machine: MachineShare | None = None
) -> Verdict:
    """The simulator set to the link fitted here gives the real link's times: the median
    of simulated / real over every algorithm and size within `tolerance` of 1 (one row may
    be off by the noise of a single fastest run; `bench simulator` holds every row to 30%).
    `ratios`: each row already the median over several fits (`simulator_check.ratios`).
    Real clock: not judged when other programs took the ranks' cores."""
    values = [r for row in ratios.values() for r in row]
    median = statistics.median(values) if values else math.nan
    return verdict(
        abs(median - 1) <= tolerance,
        f"real clock: the simulator set to this machine's fitted link gives the real link's "
        f"times (the median of simulated over real within {tolerance:.0%} of 1)",
        machine,
    )


SQUARE_ROOT = 0.5  # between a flat time (0, latency) and a proportional one (1, bytes)


def size_exponent(nbytes: list, seconds: list, lo: int, hi: int) -> float:
    """How the time grows with the size from message `lo` to message `hi`, as a power: 0
    when the size does not matter (latency), 1 when the time is in proportion to it
    (bandwidth). Judged on a span of sizes rather than on two neighbours, so that one size
    the machine happened to slow does not decide it."""
    return math.log(seconds[hi] / seconds[lo]) / math.log(nbytes[hi] / nbytes[lo])


@timing_claim("real", "threshold", "test_link_regimes_fail_on_a_link_without_them")
def latency_then_bandwidth_bound(
    nbytes: list, seconds: list, machine: MachineShare | None = None
) -> Verdict:
    """Both ends of the alpha-beta line. From the smallest message to the next the time
    grows more slowly than the square root of the size (the fixed price of a message
    dominates); from the second-largest to the largest, faster (the bytes set the price).
    Not from the middle one: on loopback a message's fixed price is a peer waking up, 0.1
    to 0.7 ms from run to run here, as long as 256 KiB take to copy."""
    small, large = size_exponent(nbytes, seconds, 0, 1), size_exponent(nbytes, seconds, -2, -1)
    return verdict(
        small < SQUARE_ROOT < large,
        f"real clock: small messages cost about the same whatever their size, large ones more "
        f"the larger they are (the time grows more slowly than size^{SQUARE_ROOT:g} at the "
        "small end, faster at the large end)",
        machine,
    )


RING_BYTES = 16 << 20  # bench allreduce's message
RING_TARGET = 1.5  # bench allreduce's performance target for the plain ring against gloo's
# own (design.md): it allocates a fresh receive buffer every call, where gloo reuses its own
RING_BOUND = 2.0  # the lesson's bar: a ring that sent the whole tensor at every step would
# move twice the bytes of gloo's ring, so take at least twice its time; the plain ring
# measured 1.2-1.8x here, its page faults included


@timing_claim("real", "threshold", "test_the_ring_keeps_up_unless_it_is_much_slower")
def ring_keeps_up(
    nbytes: list, ring: list, builtin: list, machine: MachineShare | None = None
) -> Verdict:
    """At 16 MiB our plain ring takes less than RING_BOUND times what `dist.all_reduce`
    does: it moves the built-in ring's bytes, not twice them. (How close it comes is
    `bench allreduce`'s to say, against RING_TARGET.)"""
    k = nbytes.index(RING_BYTES)
    return verdict(
        ring[k] < RING_BOUND * builtin[k],
        f"real clock: at 16 MiB our plain ring takes less than {RING_BOUND:g}x the time of the "
        "built-in dist.all_reduce: it does not move twice the bytes",
        machine,
    )


def growth(times_by_n: dict) -> float:
    """How many times longer the largest N takes than the smallest."""
    return times_by_n[max(times_by_n)] / times_by_n[min(times_by_n)]


@timing_claim(
    "simulated",
    "schedule",
    "test_a_tree_that_sends_straight_to_its_root_does_not_grow_like_its_model",
)
def grow_like_their_models(measured: dict, predicted: dict, tolerance=0.25) -> Verdict:
    """Each algorithm's growth from the smallest to the largest N within `tolerance` of its
    model's (N for the parameter server, rounds for the tree and the butterfly); one line
    that fails if any algorithm is off. `measured`, `predicted`: {algorithm: {N: seconds}}."""
    off = [a for a in measured if abs(growth(measured[a]) / growth(predicted[a]) - 1) > tolerance]
    *others, last = [f"the {a.replace('_', ' ')}'s" for a in measured]
    names = f"{', '.join(others)} and {last}" if others else last
    return verdict(
        not off,
        f"simulated clock: from the fewest ranks to the most, {names} times grow as the "
        f"alpha-beta models of their schedules say (within {tolerance:.0%})",
    )


def bus_bandwidth(nbytes: float, seconds: float, world: int) -> float:
    """nccl-tests' busbw for all_reduce, in bytes/s: algbw = n / t, busbw = algbw 2(N-1)/N.

    The factor makes it comparable across N: it is the rate at which each rank's link
    carries bytes, which for a ring is the link's bandwidth once latency no longer counts.
    """
    return nbytes / seconds * 2 * (world - 1) / world


@timing_claim("simulated", "schedule", "test_busbw_flat_fails_for_a_ring_sending_all_to_one_rank")
def busbw_flat(busbw_by_n: dict, tolerance: float = 0.25) -> Verdict:
    """The ring's bus bandwidth at one message size hardly depends on N: the lecture's "cost
    independent of N". busbw divides out 2(N-1)/N, so a flat busbw also bounds the ring's
    time, which may grow from the fewest ranks to the most only as its bytes per rank do
    (`ring_bytes_growth`, under 2), times 1 + `tolerance`."""
    spread = max(busbw_by_n.values()) / min(busbw_by_n.values())
    return verdict(
        spread <= 1 + tolerance,
        f"simulated clock: at a fixed message size the ring's bus bandwidth stays flat in N "
        f"(within {tolerance:.0%}): its time grows as its bytes per rank, 2(N-1)/N, do, to "
        "within that, and those stay under twice the message",
    )


def ring_bytes_growth(lo: int, hi: int) -> float:
    """How much more each rank of a ring sends on `hi` ranks than on `lo`: 2(N-1)/N grows
    towards 2, so this is below 2 whatever the N (1.75 from N = 2 to 8)."""
    return ((hi - 1) / hi) / ((lo - 1) / lo)


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


CROSSOVER_FACTOR = 2.0  # the model leaves out each round's compute: a factor, not a percent


@timing_claim(
    "simulated",
    "schedule",
    "test_a_ring_that_sends_its_whole_tensor_never_crosses_the_butterfly",
)
def crossover_agrees(nbytes: list, few_rounds: list, few_bytes: list, model: float | None):
    """`few_rounds` (the butterfly) wins the smallest message, `few_bytes` (the ring) the
    largest, and the size where they cross lies within CROSSOVER_FACTOR of the model's."""
    found = measured_crossover(nbytes, few_rounds, few_bytes)
    ends = few_rounds[0] < few_bytes[0] and few_bytes[-1] < few_rounds[-1]
    ratio = found / model if found is not None and model else None
    return verdict(
        ends and ratio is not None and 1 / CROSSOVER_FACTOR <= ratio <= CROSSOVER_FACTOR,
        "simulated clock: the butterfly (fewest rounds) wins the smallest message, the ring "
        f"(fewest bytes) the largest, and their times cross where the model says (within a "
        f"factor of {CROSSOVER_FACTOR:g})",
    )
