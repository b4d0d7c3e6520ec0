"""What the chapters that read a sweep's results ask first: did every trial finish?"""

from __future__ import annotations


def finished_trials(result) -> list:
    """The trials of a `SweepResult`, or a RuntimeError naming how many failed and the first
    error: a mean over the trials that happened to succeed would look like a result."""
    failed = [t for t in result.trials if not t.ok]
    if failed:
        raise RuntimeError(f"{len(failed)} trial(s) failed, first: {failed[0].error}")
    return list(result.trials)
