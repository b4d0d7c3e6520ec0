"""Checkers for notebook 04: gradient averaging by hand, and counting updates per epoch."""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..core.checks import NOT_SOLVED, attempt, verdict
from ..core.errors import LaunchError
from ..core.own_answers import (
    OwnAnswerUsed,
    Refusing,
    from_launch,
    message,
    own_answer_name,
    refusing,
)
from ..ranks.launch import launch
from .equivalence import Setup, equivalence, steps_per_epoch

AVERAGE_CLAIM = "your average_gradients makes 2 ranks equal one process with the doubled batch"


def check_average_gradients(average, world_size: int = 2, steps: int = 6) -> bool:
    """Train with the learner's averaging on `world_size` ranks; compare with the serial twin."""
    if own_answer_name(average):
        return bool(verdict(False, message(own_answer_name(average))))
    setup, average = Setup(per_rank_batch=8, steps=steps, hidden=16, lr=0.1), Refusing(average)
    try:
        tried = launch(_try_average, world_size, args=(average,), timeout=60, backend="gloo")
        if NOT_SOLVED in tried:
            return bool(verdict(False, NOT_SOLVED))
        result = equivalence(world_size, "by_hand", setup, average=average, timeout=60)
    except LaunchError as exc:
        if from_launch(exc):
            return bool(verdict(False, from_launch(exc)))
        return bool(verdict(False, f"{AVERAGE_CLAIM}: a rank failed ({exc.exc_type}), see above"))
    if result.max_abs_diff <= 1e-5:
        return bool(verdict(True, AVERAGE_CLAIM))
    if not result.ranks_identical:
        hint = "the replicas drifted apart: every rank must all_reduce every gradient"
    else:
        hint = "the replicas agree but took too large steps: divide the summed gradients by N"
    print(f"largest weight difference from the one-process run: {result.max_abs_diff:.2e}")
    return bool(verdict(False, f"{AVERAGE_CLAIM}: {hint}"))


def _try_average(average) -> str:
    """Inside a rank: call the learner's averaging once on a small model, through `attempt`.

    The averaging works in place and rightly returns None, so only the stub's
    NotImplementedError comes back as NOT_SOLVED.
    """
    dist.barrier()  # every rank connected before a stub returns and its rank exits
    model = torch.nn.Linear(3, 1)
    for p in model.parameters():
        p.grad = torch.full_like(p, float(dist.get_rank()))
    return attempt(_averaged, average, model)


def _averaged(average, model) -> str:
    average(model)
    return "averaged"


STEPS_CLAIM = "updates_per_epoch counts the updates of one epoch of DDP"
_CASES = [(8000, 4, 8), (8000, 2, 32), (6400, 4, 128), (50000, 8, 64), (1000, 3, 7)]


def check_updates_per_epoch(fn) -> bool:
    """`fn(samples, world_size, per_rank_batch)` against DistributedSampler's count."""
    if own_answer_name(fn):
        return bool(verdict(False, message(own_answer_name(fn))))
    expected = [steps_per_epoch(*case) for case in _CASES]
    try:
        with refusing():
            answers = [attempt(fn, *case) for case in _CASES]
    except OwnAnswerUsed as refused:
        return bool(verdict(False, str(refused)))
    if any(a is NOT_SOLVED for a in answers):
        return bool(verdict(False, NOT_SOLVED))
    wrong = [(c, a) for c, a, e in zip(_CASES, answers, expected, strict=True) if a != e]
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
