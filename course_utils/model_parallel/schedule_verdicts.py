"""Notebook 06's claims about interleaved 1F1B and ZB-H1, as verdicts with stated thresholds.

The timing verdicts take `schedule_bubble.measure_schedules`' rows, which name their clock;
the numbers go on the line before, the verdict line carries none.
"""

from __future__ import annotations

from ..core.checks import Verdict, verdict
from ..core.machine import MachineShare
from ..core.timing_claims import timing_claim

__all__ = [
    "bubble_below",
    "orders_match_pytorch",
    "trains_like_one_process",
    "zb_holds_as_much_as_1f1b",
]
_FAILS = "test_schedule_bubble_verdicts_fail_without_their_effect"


def _row(rows: list[dict], schedule: str) -> dict:
    found = [r for r in rows if r["schedule"] == schedule]
    if not found:
        raise ValueError(f"no row for {schedule!r}; rows hold {[r['schedule'] for r in rows]}.")
    return found[0]


def _clock(rows: list[dict]) -> str:
    if not rows:
        raise ValueError(
            "no rows: measure the schedules first (schedule_bubble.measure_schedules)."
        )
    clocks = {r["clock"] for r in rows}
    if len(clocks) != 1:
        raise ValueError(f"rows timed on different clocks ({sorted(clocks)}) are judged apart.")
    return clocks.pop()


@timing_claim("named by its rows", "measurement", _FAILS)
def bubble_below(
    rows: list[dict],
    schedule: str | tuple[str, ...],
    than: str = "1f1b",
    margin: float = 0.03,
    machine: MachineShare | None = None,
) -> Verdict:
    """Each of `schedule`'s (one name, or several) measured bubbles below `than`'s by more
    than `margin` (a share of the step), all measured at the same K and M on the same clock.
    `margin`: GPipe and 1F1B, whose bubbles are the same on paper, came out up to 0.022
    apart in 06's runs (2026-11-27), and interleaving with one chunk per rank, 1F1B's bubble
    on paper, from 0.011 below to 0.014 above 1F1B's."""
    names = [schedule] if isinstance(schedule, str) else list(schedule)
    mine, b = [_row(rows, n) for n in names], _row(rows, than)
    same = all((a["stages"], a["microbatches"]) == (b["stages"], b["microbatches"]) for a in mine)
    whose = (
        f"{names[0]}'s measured bubble is"
        if len(names) == 1
        else f"{', '.join(names[:-1])}'s and {names[-1]}'s measured bubbles are each"
    )
    return verdict(
        same and all(a["measured"] < b["measured"] - margin for a in mine),
        f"{_clock([*mine, b])} clock: {whose} below {than}'s at the same K and M, by more "
        f"than {margin:.2f} of the step (the noise between equal schedules)",
        machine,
    )


def zb_holds_as_much_as_1f1b(zb: tuple[int, ...], f1b: tuple[int, ...]) -> Verdict:
    """Micro-batches held at peak per rank (F to W for ZB-H1, F to B for 1F1B): ZB-H1's
    most on any rank is 1F1B's most (K, on rank 0), though its later ranks hold more."""
    return verdict(
        max(zb) <= max(f1b),
        "ZB-H1 holds no more micro-batches' activations on any rank than 1F1B does on its first",
    )


def trains_like_one_process(gaps: dict[str, float], tolerance: float = 1e-5) -> Verdict:
    """`gaps`: per run, the largest difference of any weight from one process's after the
    same SGD steps."""
    return verdict(
        bool(gaps) and all(g <= tolerance for g in gaps.values()),
        f"every schedule, in the course's engine and in PyTorch's, trains the weights one "
        f"process trains (within {tolerance:g}, fp32)",
    )


def orders_match_pytorch(unexplained: dict[str, list[str]]) -> Verdict:
    """`unexplained`: per schedule, `torch_pipelining.unexplained_differences`: what differs
    from PyTorch's order once the known differences, written down as changes to the course's
    order, are applied (a known difference that changed, or a new one, is left in)."""
    return verdict(
        bool(unexplained) and all(not lines for lines in unexplained.values()),
        "every schedule compared runs the same ops in the same order as PyTorch's, but for "
        "the known differences named above, each exactly as written down",
    )
