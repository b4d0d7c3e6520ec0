"""Verdict lines: one `✓ claim` or `✗ claim` per measured claim, stable for nbval to compare.

The measured numbers go on the line before; a verdict's text never contains them.
"""

from __future__ import annotations

PASS = "✓"
FAIL = "✗"


def verdict(ok, claim: str) -> bool:
    """Print whether a claim held, and return it (so a cell or a test can use the outcome)."""
    ok = bool(ok)
    print(f"{PASS if ok else FAIL} {claim}")
    return ok
