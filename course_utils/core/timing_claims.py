"""Every timing verdict says which clock its times are on and what it holds them against.

A simulated time checked against the formula the simulator charged for that same
operation restates the model: it cannot fail. So a timing verdict declares its clock and
what it compares with (`timing_claim`), and names the test in which it prints ✗ on a
broken variant: a check that can fail there is not the charge restated, whatever its line
says. tests/course/test_timing_claims.py goes through every declaration, and through every
verdict whose line names a clock, which must have one.
"""

from __future__ import annotations

from dataclasses import dataclass

CLOCKS = {
    "real": "the wall clock, a core per rank (or NCCL on GPUs)",
    "simulated": "the network simulator's clocks (`network`)",
    "named by its rows": "the clock its rows were timed on, named in its line",
}
AGAINST = {
    "measurement": "another measurement on the same clock",
    "schedule": "a model of the message schedule of the code that ran (rounds, bytes, who "
    "waits for whom), which the simulator does not encode",
    "physical bound": "what no correct measurement can beat",
    "threshold": "a stated threshold on a measured ratio",
}
# Never: "the formula the simulator charged". A simulated time compared with it is a
# prediction, printed without a verdict.


@dataclass(frozen=True)
class TimingClaim:
    clock: str
    against: str
    fails_in: str  # the name of the test (under tests/) where it prints ✗ on a broken variant


DECLARED: dict[str, TimingClaim] = {}


def timing_claim(clock: str, against: str, fails_in: str):
    """Declare a timing verdict: its clock, what it compares with, and its failing test."""
    if clock not in CLOCKS:
        raise ValueError(f"unknown clock {clock!r}: one of {sorted(CLOCKS)}")
    if against not in AGAINST:
        raise ValueError(
            f"a timing verdict compares with one of {sorted(AGAINST)}, not {against!r}: a "
            "simulated time against the formula the simulator charged is a prediction"
        )

    def declare(function):
        DECLARED[f"{function.__module__}.{function.__qualname__}"] = TimingClaim(
            clock, against, fails_in
        )
        return function

    return declare
