"""Verdict lines: one `✓ claim` or `✗ claim` per measured claim, stable for nbval to compare.

The measured numbers go on the line before; a verdict's text never contains them. A verdict
on the real clock is given the machine's share during its measurement (`core.machine`): if
other programs took the cores it needed, it prints `NOT_JUDGED` instead of ✓ or ✗, since a
contended measurement says nothing about the course's code either way.
"""

from __future__ import annotations

import os

from .machine import MachineShare, busiest, machine_cores, on_a_quiet_machine, watch

__all__ = [
    "FAIL", "NOT_JUDGED", "NOT_SOLVED", "PASS", "MachineShare", "Verdict", "attempt", "busiest",
    "machine_cores", "on_a_quiet_machine", "verdict", "watch",
]  # fmt: skip

PASS = "✓"
FAIL = "✗"
NOT_SOLVED = "not solved yet"  # an exercise left for the learner: expected, not a failure
NOT_JUDGED = "? not judged, the machine was busy:"  # nbval's sanitizer reads it as ✓
LOG_VARIABLE = "COURSE_VERDICT_LOG"  # a file every verdict line is added to (`make stress`)


class Verdict:
    """Whether a claim held; truthy like a bool, and shown only by its printed line."""

    def __init__(self, ok: bool, claim: str, judged: bool = True):
        self.ok = bool(ok) and judged
        self.claim = claim
        self.judged = judged

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        if not self.judged:
            return f"{NOT_JUDGED} {self.claim}"
        return f"{PASS if self.ok else FAIL} {self.claim}"

    def _ipython_display_(self) -> None:
        """The line is already printed; a notebook cell ending in a verdict shows nothing more."""


def verdict(ok, claim: str, machine: MachineShare | None = None) -> Verdict:
    """Print whether a claim held, and return the outcome (a cell or a test can use it).

    `machine`: for a claim on the real clock, what other programs took of the machine while
    it was measured; when they took the cores it needed, the claim is not judged.
    """
    result = Verdict(ok, claim, judged=machine is None or not machine.busy)
    print(repr(result))
    if os.environ.get(LOG_VARIABLE):
        with open(os.environ[LOG_VARIABLE], "a", encoding="utf-8") as log:
            log.write(f"{result!r}\n")
    return result


def attempt(fn, *args):
    """The learner's result, or NOT_SOLVED while the function is still the stub.

    A stub raises NotImplementedError or returns None, and a function not written at all
    is None; each means "not solved yet", which a checker prints as an expected ✗ rather
    than as an error. Inside a rank, return the marker to the parent and compare it there.
    """
    if fn is None:
        return NOT_SOLVED
    try:
        value = fn(*args)
    except NotImplementedError:
        return NOT_SOLVED
    return NOT_SOLVED if value is None else value
