"""Checkers for notebook 04: gradient averaging by hand, and counting updates per epoch."""

from __future__ import annotations

from ..core.checks import NOT_SOLVED, verdict
from ..core.errors import LaunchError
from .equivalence import Setup, equivalence, steps_per_epoch

AVERAGE_CLAIM = "your average_gradients makes 2 ranks equal one process with the doubled batch"


def check_average_gradients(average, world_size: int = 2, steps: int = 6) -> bool:
    """Train with the learner's averaging on `world_size` ranks; compare with the serial twin."""
    setup = Setup(per_rank_batch=8, steps=steps, hidden=16, lr=0.1)
    try:
        result = equivalence(world_size, "by_hand", setup, average=average, timeout=60)
    except LaunchError as exc:
        if exc.exc_type == "NotImplementedError":
            return bool(verdict(False, NOT_SOLVED))
        return bool(verdict(False, f"{AVERAGE_CLAIM}: a rank failed ({exc.exc_type}), see above"))
    if result.max_abs_diff <= 1e-5:
        return bool(verdict(True, AVERAGE_CLAIM))
    if not result.ranks_identical:
        hint = "the replicas drifted apart: every rank must all_reduce every gradient"
    else:
        hint = "the replicas agree but took too large steps: divide the summed gradients by N"
    print(f"largest weight difference from the one-process run: {result.max_abs_diff:.2e}")
    return bool(verdict(False, f"{AVERAGE_CLAIM}: {hint}"))


STEPS_CLAIM = "updates_per_epoch counts the updates of one epoch of DDP"
_CASES = [(8000, 4, 8), (8000, 2, 32), (6400, 4, 128), (50000, 8, 64), (1000, 3, 7)]


def check_updates_per_epoch(fn) -> bool:
    """`fn(samples, world_size, per_rank_batch)` against DistributedSampler's count."""
    try:
        answers = [fn(*case) for case in _CASES]
    except NotImplementedError:
        return bool(verdict(False, NOT_SOLVED))
    if all(a is None for a in answers):
        return bool(verdict(False, NOT_SOLVED))
    wrong = [(c, a) for c, a in zip(_CASES, answers, strict=True) if a != steps_per_epoch(*c)]
    if not wrong:
        return bool(verdict(True, STEPS_CLAIM))
    (samples, n, b), answer = wrong[0]
    if answer == samples // b:
        hint = "each rank sees only 1/N of the samples, so there are N times fewer updates"
    elif answer == samples // (n * b) + 1 or answer == -(-samples // (n * b)):
        hint = "with drop_last, a last incomplete batch is not an update"
    else:
        hint = f"for {samples} samples, {n} ranks, batch {b} per rank the answer is not {answer}"
    return bool(verdict(False, f"{STEPS_CLAIM}: {hint}"))
