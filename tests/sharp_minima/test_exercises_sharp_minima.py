"""Notebook 02's checkers accept the reference solutions and explain each usual mistake."""

from __future__ import annotations

import pytest
import torch
from reference import load_solution

from course_utils.sharp_minima.exercises import check_box_sharpness, check_top_eigenvalue


@pytest.fixture(scope="module")
def solution():
    return load_solution("02_sharp_minima.py")


def _lines(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


def test_reference_solutions_pass(solution, capsys):
    assert check_top_eigenvalue(solution.top_eigenvalue)
    assert check_box_sharpness(solution.box_sharpness)
    assert all(line.startswith("✓") for line in _lines(capsys))


def unsolved(*args):
    raise NotImplementedError


def test_unsolved_exercises_say_so(capsys):
    assert not check_top_eigenvalue(unsolved)
    assert not check_box_sharpness(lambda *args: None)
    assert _lines(capsys) == ["✗ not solved yet"] * 2


def _power(hvp, dim, iters, normalise=True):
    v = torch.ones(dim, dtype=torch.float64) / dim**0.5
    for _ in range(iters):
        hv = hvp(v)
        v = hv / hv.norm() if normalise else hv
    return v


def norm_not_rayleigh(hvp, dim, iters=100):
    return float(hvp(_power(hvp, dim, iters)).norm())


def never_normalised(hvp, dim, iters=100):
    v = _power(hvp, dim, iters, normalise=False)
    return float(v @ hvp(v) / (v @ v))


def returns_vector(hvp, dim, iters=100):
    return _power(hvp, dim, iters)


def ignores_hvp(hvp, dim, iters=100):
    return 5.0


def test_top_eigenvalue_mistakes(capsys):
    for mistake in (norm_not_rayleigh, never_normalised, returns_vector, ignores_hvp):
        assert not check_top_eigenvalue(mistake)
    rayleigh, overflow, vector, no_hvp = _lines(capsys)
    assert "keeps the sign" in rayleigh
    assert "normalise v" in overflow
    assert "not a vector" in vector
    assert "use hvp(v)" in no_hvp


def _corners(loss, w, radius, samples, seed):
    g = torch.Generator().manual_seed(seed)
    worst = float(loss(w))
    for _ in range(samples):
        signs = torch.randint(0, 2, w.shape, generator=g).to(w.dtype) * 2 - 1
        worst = max(worst, float(loss(w + signs * radius)))
    return worst


def not_percent(loss, w, epsilon, samples=100, seed=0):
    at_w = float(loss(w))
    return (_corners(loss, w, epsilon * (w.abs() + 1), samples, seed) - at_w) / (1 + at_w)


def not_relative(loss, w, epsilon, samples=100, seed=0):
    return 100 * (_corners(loss, w, epsilon * (w.abs() + 1), samples, seed) - float(loss(w)))


def plain_box(loss, w, epsilon, samples=100, seed=0):
    at_w = float(loss(w))
    return 100 * (_corners(loss, w, torch.full_like(w, epsilon), samples, seed) - at_w) / (1 + at_w)


def inside_the_box(loss, w, epsilon, samples=100, seed=0):
    g = torch.Generator().manual_seed(seed)
    radius = epsilon * (w.abs() + 1)
    at_w = float(loss(w))
    worst = max(
        float(loss(w + (torch.rand(w.shape, generator=g) * 2 - 1) * radius)) for _ in range(samples)
    )
    return 100 * (max(worst, at_w) - at_w) / (1 + at_w)


def test_box_sharpness_mistakes(capsys):
    for mistake in (not_percent, not_relative, plain_box, inside_the_box):
        assert not check_box_sharpness(mistake)
    percent, relative, box, corners = _lines(capsys)
    assert "multiply by 100" in percent
    assert "1 + f(w)" in relative
    assert "(|w_i| + 1), not by epsilon" in box
    assert "box's corners" in corners


def smallest_eigenvalue(hvp, dim, iters=100):
    h = torch.stack([hvp(e) for e in torch.eye(dim, dtype=torch.float64)])
    return float(min(torch.linalg.eigvalsh(h), key=abs))


def test_the_smallest_eigenvalue_is_caught(capsys):
    assert not check_top_eigenvalue(smallest_eigenvalue)
    assert "that is the smallest" in _lines(capsys)[-1]


def test_an_answer_that_raises_or_is_not_a_number_gets_a_line_not_a_traceback(capsys):
    assert not check_top_eigenvalue(lambda hvp, dim, iters: hvp(torch.ones(dim + 1)))
    assert not check_box_sharpness(lambda loss, w, epsilon, samples, seed: "12%")
    raised, unreadable = _lines(capsys)
    assert raised.startswith("✗ top_eigenvalue raised RuntimeError")
    assert "the checker could not read what box_sharpness returned (ValueError" in unreadable
