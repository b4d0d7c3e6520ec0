"""Checkers for notebook 07: the server's traffic per update; staleness from a server's log.

Each checker tries the learner's function on several cases, prints one verdict line and
returns whether it passed; it never raises at the learner.
"""

from __future__ import annotations

import random

from ..core.checks import NOT_SOLVED, attempt, verdict
from ..core.own_answers import OwnAnswerUsed, message, own_answer, own_answer_name, refusing

BYTES_CASES = ((1, 10, 4), (3, 5000, 4), (4, 1000, 2), (8, 123, 8))  # workers, numel, itemsize


@own_answer("server_bytes")
def expected_server_bytes(workers: int, numel: int, itemsize: int) -> int:
    """Bytes through the server per synchronous update: each worker's gradient in, the new
    parameters out to each (refused to a learner's function that calls it)."""
    return 2 * workers * numel * itemsize


def answer_values() -> dict[str, list]:
    """The byte count's cases and answers (`course.revealed`: none may appear above it)."""
    return {"server_bytes": [(case, expected_server_bytes(*case)) for case in BYTES_CASES]}


def staleness_cases(seed: int = 7) -> list[tuple[list[tuple[str, int]], list[int]]]:
    """Server logs (every worker pulls, pushes and pulls again, interleaved at random),
    each with the staleness the server saw, counted while the log is made: one number per
    push, the updates applied since that worker's last pull."""
    rng = random.Random(seed)
    cases = [([("pull", 1), ("push", 1), ("pull", 1)], [0])]
    for workers, pushes in ((2, 6), (3, 12), (4, 20)):
        events = [("pull", w) for w in range(1, workers + 1)]
        pulled_at, stale = dict.fromkeys(range(1, workers + 1), 0), []
        for version in range(pushes):
            w = rng.randint(1, workers)
            stale.append(version - pulled_at[w])
            pulled_at[w] = version + 1
            events += [("push", w), ("pull", w)]
        cases.append((events, stale))
    return cases


def _call(fn, *args):
    """The learner's answer (or NOT_SOLVED, through `attempt`), or the exception it raised."""
    try:
        with refusing():
            return attempt(fn, *args), None
    except Exception as error:
        return None, error


def check_server_bytes(server_bytes) -> bool:
    """`server_bytes(workers, numel, itemsize)`: bytes through the server per synchronous
    update, for several numbers of workers and sizes (a value typed in for one fails)."""
    if own_answer_name(server_bytes):
        return verdict(False, message(own_answer_name(server_bytes)))
    seen = []
    for workers, numel, itemsize in BYTES_CASES:
        value, exc = _call(server_bytes, workers, numel, itemsize)
        if value is NOT_SOLVED:
            return verdict(False, NOT_SOLVED)
        if isinstance(exc, OwnAnswerUsed):
            return verdict(False, str(exc))
        if exc is not None:
            return verdict(False, f"server_bytes raised {type(exc).__name__}: {exc}")
        want, seen = expected_server_bytes(workers, numel, itemsize), [*seen, value]
        if value != want and len(seen) > 1 and all(v == seen[0] for v in seen):
            return verdict(
                False,
                f"you say {value} for every case: the bytes grow with the workers and the "
                "size of the model, count them from the arguments",
            )
        if value == want / 2:
            return verdict(
                False,
                "that counts one direction only: the server also sends the "
                "new parameters back to every worker",
            )
        if value != want:
            return verdict(
                False,
                f"for {workers} workers and {numel} values of {itemsize} "
                f"bytes you say {value}; count every message in and out of the server",
            )
    return verdict(True, "server_bytes gives the server's traffic per update in every case tried")


def check_staleness(staleness) -> bool:
    """`staleness(events)` must give, per push, the updates applied since that worker pulled."""
    for events, want in staleness_cases():
        value, exc = _call(staleness, list(events))
        if value is NOT_SOLVED:
            return verdict(False, NOT_SOLVED)
        if exc is not None:
            return verdict(False, f"staleness raised {type(exc).__name__}: {exc}")
        try:
            value = [int(v) for v in value]
        except (TypeError, ValueError):
            return verdict(False, f"staleness should return a list of whole numbers, got {value!r}")
        if len(value) != len(want):
            return verdict(
                False,
                f"one number per push: this log has {len(want)} pushes, "
                f"you returned {len(value)} numbers",
            )
        if value == [w + 1 for w in want]:
            return verdict(
                False,
                "off by one: a gradient is not stale because of its own update; "
                "count the updates applied *before* it",
            )
        if value != want:
            return verdict(
                False,
                f"for the log {events[:8]}... you give {value[:6]}..., expected "
                f"{want[:6]}...; remember the version at each worker's *last* pull",
            )
    return verdict(True, "staleness matches the server's count on every log tried")
