"""Verdict lines: one `✓ claim` or `✗ claim` per measured claim, stable for nbval to compare.

The measured numbers go on the line before; a verdict's text never contains them.
"""

from __future__ import annotations

PASS = "✓"
FAIL = "✗"
NOT_SOLVED = "not solved yet"  # an exercise left for the learner: expected, not a failure


class Verdict:
    """Whether a claim held; truthy like a bool, and shown only by its printed line."""

    def __init__(self, ok: bool, claim: str):
        self.ok = bool(ok)
        self.claim = claim

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        return f"{PASS if self.ok else FAIL} {self.claim}"

    def _ipython_display_(self) -> None:
        """The line is already printed; a notebook cell ending in a verdict shows nothing more."""


def verdict(ok, claim: str) -> Verdict:
    """Print whether a claim held, and return the outcome (a cell or a test can use it)."""
    result = Verdict(ok, claim)
    print(repr(result))
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
