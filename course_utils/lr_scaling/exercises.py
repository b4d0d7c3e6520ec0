"""Checkers for notebook 03: Goyal's warmup schedule, and a distance between loss curves."""

from __future__ import annotations

import math

from ..core.checks import NOT_SOLVED, attempt, verdict
from ..core.own_answers import answer, first_problem_verdict
from .experiments import LinearWarmup, curve_distance, scaled_lr

WARMUP_CLAIM = (
    "warmup_lr starts at the base lr and rises linearly to the scaled lr, then stays there"
)
DISTANCE_CLAIM = "distance is the mean absolute gap per epoch, a diverged epoch counted as 10"

# (base_lr, base_batch, batch_size, warmup_steps)
_WARMUP_CASES = [(0.1, 256, 8192, 100), (0.01, 8, 512, 50), (0.05, 32, 32, 10), (0.2, 8, 64, 7)]


def _expected_lr(step, base_lr, base_batch, batch_size, warmup_steps) -> float:
    """What the checker compares with, from the schedule the course trains with."""
    start = base_batch / batch_size
    factor = LinearWarmup(warmup_steps, start)(step)
    return scaled_lr(base_lr, base_batch, batch_size) * factor


def _steps(warmup: int) -> list[int]:
    return [0, 1, warmup // 2, warmup - 1, warmup, warmup + 1, 3 * warmup]


def answer_values() -> dict[str, list]:
    """The checkers' cases and answers (`course.revealed`); a distance's case is two curves,
    not numbers a text would state beside it."""
    return {
        "warmup_lr": [
            ((step, *case), _expected_lr(step, *case))
            for case in _WARMUP_CASES
            for step in _steps(case[-1])
        ],
        "curve_distance": [((), curve_distance(*case)) for case in _DISTANCE_CASES],
    }


def answer_phrases() -> dict[str, list]:
    """What would give an answer away as text (`course.revealed`): the distance's definition
    as the exercise states it."""
    return {
        "curve_distance": [
            "mean over epochs of the absolute gap",
            "absolute gap between two per-epoch losses",
            "not finite, or above 10, as 10",
        ]
    }


def check_warmup_lr(fn) -> bool:
    """fn(step, base_lr, base_batch, batch_size, warmup_steps) -> the lr of that update."""
    for base_lr, base_batch, batch, warmup in _WARMUP_CASES:
        for step in _steps(warmup):
            got = attempt(fn, step, base_lr, base_batch, batch, warmup)
            if got is NOT_SOLVED:
                return verdict(False, NOT_SOLVED)
            want = _expected_lr(step, base_lr, base_batch, batch, warmup)
            if math.isclose(float(got), want, rel_tol=1e-6):
                continue
            hint = _diagnose_warmup(fn, step, base_lr, base_batch, batch, warmup)
            return verdict(False, f"{WARMUP_CLAIM}: {hint}")
    return verdict(True, WARMUP_CLAIM)


def _diagnose_warmup(fn, step, base_lr, base_batch, batch, warmup) -> str:
    k = batch / base_batch
    late = float(fn(3 * warmup, base_lr, base_batch, batch, warmup))
    first = float(fn(0, base_lr, base_batch, batch, warmup))
    if k > 1 and math.isclose(late, base_lr * math.sqrt(k), rel_tol=1e-6):
        return "scale linearly (x batch / base_batch), not by the square root"
    if k > 1 and math.isclose(late, base_lr, rel_tol=1e-6):
        return "after warmup the lr is base_lr * batch_size / base_batch"
    if not math.isclose(late, base_lr * k, rel_tol=1e-6):
        return "after warmup_steps the lr stays at the scaled value"
    if k > 1 and first == 0:
        return "Goyal's warmup starts at the base lr, not at 0"
    return (
        f"at update {step} of {warmup} expected "
        f"{_expected_lr(step, base_lr, base_batch, batch, warmup):.6g}"
    )


_DISTANCE_CASES = [
    ([2.0, 1.0, 0.5], [2.0, 1.0, 0.5]),
    ([2.0, 1.5, 1.0, 0.8], [1.8, 1.2, 1.1, 0.4]),
    ([1.0, 2.0], [2.0, 1.0]),  # signed gaps cancel; absolute ones do not
    ([2.3, float("nan"), float("nan")], [2.0, 1.5, 1.0]),
    ([2.3, float("inf"), 40.0], [2.0, 1.5, 1.0]),
]


def check_curve_distance(fn) -> bool:
    """fn(curve, reference) -> mean |curve - reference|, non-finite or >10 losses taken as 10."""
    return first_problem_verdict(
        fn,
        "curve_distance",
        lambda *case: _distance_problem(fn, *case),
        _DISTANCE_CASES,
        DISTANCE_CLAIM,
    )


def _distance_problem(fn, curve, reference) -> str | None:
    got = float(answer(fn, list(curve), list(reference)))
    if math.isclose(got, curve_distance(curve, reference), rel_tol=1e-9, abs_tol=1e-12):
        return None
    return f"{DISTANCE_CLAIM}: {_diagnose_distance(got, curve, reference)}"


def _diagnose_distance(got, curve, reference) -> str:
    if not math.isfinite(got):
        return "a NaN or inf loss (a diverged run) must count as 10, or the mean is NaN"
    gaps = [a - b for a, b in zip(curve, reference, strict=True)]
    if all(math.isfinite(g) for g in gaps):
        if math.isclose(got, sum(gaps) / len(gaps), abs_tol=1e-12):
            return "take the absolute gap, or gaps of opposite sign cancel"
        if math.isclose(got, sum(abs(g) for g in gaps), rel_tol=1e-9):
            return "divide by the number of epochs: the mean, not the sum"
    else:
        return "cap losses at 10 (a large finite loss too), then take the mean absolute gap"
    return f"expected {curve_distance(curve, reference):.4g}, got {got:.4g}"
