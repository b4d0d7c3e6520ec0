"""Notebook 03's checkers accept the reference solutions and explain each usual mistake."""

from __future__ import annotations

import math

import pytest
from reference import load_solution

from course_utils.lr_scaling.exercises import check_curve_distance, check_warmup_lr


@pytest.fixture(scope="module")
def solution():
    return load_solution("03_lr_scaling.py")


def _lines(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


def test_reference_solutions_pass(solution, capsys):
    assert check_warmup_lr(solution.warmup_lr)
    assert check_curve_distance(solution.curve_distance)
    assert all(line.startswith("✓") for line in _lines(capsys))


def unsolved(*args):
    raise NotImplementedError


def test_unsolved_exercises_say_so(capsys):
    assert not check_warmup_lr(unsolved)
    assert not check_curve_distance(lambda *args: None)
    assert _lines(capsys) == ["✗ not solved yet"] * 2


def _ramp(start, target, step, warmup):
    return target if step >= warmup else start + (target - start) * step / warmup


def from_zero(step, base_lr, base_batch, batch_size, warmup_steps):
    return _ramp(0.0, base_lr * batch_size / base_batch, step, warmup_steps)


def square_root(step, base_lr, base_batch, batch_size, warmup_steps):
    return _ramp(base_lr, base_lr * math.sqrt(batch_size / base_batch), step, warmup_steps)


def never_scaled(step, base_lr, base_batch, batch_size, warmup_steps):
    return base_lr


def keeps_rising(step, base_lr, base_batch, batch_size, warmup_steps):
    target = base_lr * batch_size / base_batch
    return base_lr + (target - base_lr) * step / warmup_steps


def test_warmup_mistakes(capsys):
    for mistake in (from_zero, square_root, never_scaled, keeps_rising):
        assert not check_warmup_lr(mistake)
    zero, sqrt, unscaled, rising = _lines(capsys)
    assert "starts at the base lr, not at 0" in zero
    assert "not by the square root" in sqrt
    assert "base_lr * batch_size / base_batch" in unscaled
    assert "stays at the scaled value" in rising


def signed(curve, reference):
    return sum(a - b for a, b in zip(curve, reference, strict=True)) / len(curve)


def summed(curve, reference):
    return sum(abs(a - b) for a, b in zip(curve, reference, strict=True))


def no_cap(curve, reference):
    return sum(abs(a - b) for a, b in zip(curve, reference, strict=True)) / len(curve)


def caps_only_non_finite(curve, reference):
    def clean(x):
        return x if math.isfinite(x) else 10.0

    return sum(abs(clean(a) - clean(b)) for a, b in zip(curve, reference, strict=True)) / len(curve)


def test_curve_distance_mistakes(capsys):
    for mistake in (signed, summed, no_cap, caps_only_non_finite):
        assert not check_curve_distance(mistake)
    sign, total, nan, cap = _lines(capsys)
    assert "absolute gap" in sign
    assert "the mean, not the sum" in total
    assert "must count as 10" in nan
    assert "cap losses at 10" in cap
    assert not check_curve_distance(lambda *a: 1 / 0)  # the learner's error is a ✗, not a crash
    assert "curve_distance raised ZeroDivisionError" in _lines(capsys)[0]


def test_the_course_own_curve_distance_is_refused(capsys):
    from course_utils.lr_scaling import experiments

    assert not check_curve_distance(experiments.curve_distance)
    assert not check_curve_distance(lambda c, r: experiments.curve_distance(c, r))
    assert _lines(capsys) == ["✗ this is the course's own curve_distance: write yours"] * 2
