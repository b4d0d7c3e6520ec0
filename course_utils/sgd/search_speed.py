"""How much sooner a parallel search can finish: the ideal its trials' times allow.

With `jobs` trials at a time on `cores` cores, at most min(jobs, cores) make progress at
once, and no schedule ends before its longest trial. So the search cannot beat
sum / max(sum / lanes, longest) over the same trials run one after another; a measured
speedup is judged against that, not against 1.
"""

from __future__ import annotations

from ..core.checks import verdict
from ..core.machine import MachineShare, machine_cores
from ..core.timing_claims import timing_claim


def ideal_speedup(trial_seconds: list[float], jobs: int, cores: int | None = None) -> float:
    """The best speedup over running the trials one after another that any schedule allows."""
    lanes = max(1, min(jobs, cores or machine_cores()))
    total = sum(trial_seconds)
    return total / max(total / lanes, max(trial_seconds)) if total > 0 else 1.0


@timing_claim("real", "threshold", "test_near_ideal_fails_for_trials_run_one_by_one")
def near_ideal(
    speedup: float, ideal: float, share: float = 0.75, machine: MachineShare | None = None
):
    """The measured speedup reaches `share` of the ideal speedup (and beats running one by one);
    not judged when other programs took the cores the searches ran on (`machine`)."""
    return verdict(
        speedup > 1 and speedup >= share * ideal,
        f"real clock: the parallel search's speedup is at least {share:.0%} of the ideal its "
        "trials' times allow",
        machine,
    )
