"""Notebook 04's timing lessons as verdicts, each failing where its effect is absent.

They take `cost.StepTimes` (or anything with `seconds_per_1000_samples`,
`effective_batch` and `name`); the numbers go on the line before, the verdict carries none.
"""

from __future__ import annotations

from ..core.checks import Verdict, verdict

__all__ = [
    "equal_effective_batch",
    "no_sync_saves_no_syncs",
    "overlap_saves",
    "saving",
    "slower_than",
]


def saving(baseline, fix) -> float:
    """Seconds per 1000 samples that `fix` saves against `baseline` (negative: it costs)."""
    return baseline.seconds_per_1000_samples - fix.seconds_per_1000_samples


def equal_effective_batch(times: list) -> Verdict:
    """Every variant updates on the same number of samples: a fair race."""
    batches = {t.effective_batch for t in times}
    return verdict(
        len(batches) == 1, "every variant is timed at the same effective batch (ranks x batch)"
    )


def slower_than(slow, fast, claim: str) -> Verdict:
    """`slow` takes longer per 1000 samples than `fast`."""
    return verdict(slow.seconds_per_1000_samples > fast.seconds_per_1000_samples, claim)


def no_sync_saves_no_syncs(naive, accumulated, tolerance: float = 0.15) -> Verdict:
    """At an equal effective batch, accumulating micro-batches under no_sync syncs as often
    per sample as naive DDP, so on a link-bound step it takes about as long."""
    ratio = accumulated.seconds_per_1000_samples / naive.seconds_per_1000_samples
    return verdict(
        accumulated.syncs == naive.syncs and abs(ratio - 1) <= tolerance,
        f"at an equal effective batch no_sync makes as many syncs as naive DDP and takes its "
        f"time (within {tolerance:.0%}): it saves memory, not communication",
    )


def overlap_saves(result: dict, share: float = 0.5) -> Verdict:
    """Overlapping hides at least `share` of what it could: the smaller of the backward pass
    and the communication (`result` from `overlap.overlap_saving`)."""
    could = min(result["compute"], result["communication"])
    return verdict(
        result["saving"] >= share * could,
        f"overlapping the all-reduces with the backward pass saves at least {share:.0%} of the "
        "shorter of the two, against backward first and then all the communication",
    )
