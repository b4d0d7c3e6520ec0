"""Checkers for notebook 07: the server's traffic per update; staleness from a server's log.

Each checker tries the learner's function on several cases, prints one verdict line and
returns whether it passed; it never raises at the learner.
"""

from __future__ import annotations

import random

from ..core.own_answers import answer, first_problem_verdict, own_answer

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


def check_server_bytes(server_bytes) -> bool:
    """`server_bytes(workers, numel, itemsize)`: bytes through the server per synchronous
    update, for several numbers of workers and sizes (a value typed in for one fails)."""
    seen = []

    def problem(workers: int, numel: int, itemsize: int) -> str | None:
        value = answer(server_bytes, workers, numel, itemsize)
        want = expected_server_bytes(workers, numel, itemsize)
        seen.append(value)
        if value != want and len(seen) > 1 and all(v == seen[0] for v in seen):
            return (
                f"you say {value} for every case: the bytes grow with the workers and the "
                "size of the model, count them from the arguments"
            )
        if value == want / 2:
            return (
                "that counts one direction only: the server also sends the new parameters "
                "back to every worker"
            )
        if value != want:
            return (
                f"for {workers} workers and {numel} values of {itemsize} bytes you say "
                f"{value}; count every message in and out of the server"
            )
        return None

    solved = "server_bytes gives the server's traffic per update in every case tried"
    return first_problem_verdict(server_bytes, "server_bytes", problem, BYTES_CASES, solved)


def check_staleness(staleness) -> bool:
    """`staleness(events)` must give, per push, the updates applied since that worker pulled."""

    def problem(events: list, want: list[int]) -> str | None:
        value = answer(staleness, list(events))
        try:
            value = [int(v) for v in value]
        except (TypeError, ValueError):
            return f"staleness should return a list of whole numbers, got {value!r}"
        if len(value) != len(want):
            return (
                f"one number per push: this log has {len(want)} pushes, "
                f"you returned {len(value)} numbers"
            )
        if value == [w + 1 for w in want]:
            return (
                "off by one: a gradient is not stale because of its own update; "
                "count the updates applied *before* it"
            )
        if value != want:
            return (
                f"for the log {events[:8]}... you give {value[:6]}..., expected "
                f"{want[:6]}...; remember the version at each worker's *last* pull"
            )
        return None

    solved = "staleness matches the server's count on every log tried"
    return first_problem_verdict(staleness, "staleness", problem, staleness_cases(), solved)
