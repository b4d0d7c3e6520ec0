"""Sharpness measures on quadratics whose Hessian we choose, so the answers are known."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from course_utils.sharp_minima.landscape import (
    epsilon_sharpness,
    loss_along_line,
    top_hessian_eigenvalue,
)


class Point(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.w = nn.Parameter(torch.as_tensor(w, dtype=torch.float64).clone())


def bowl(hessian, center, floor=0.0):
    """f(w) = floor + 1/2 (w - c)^T H (w - c): Hessian H everywhere, minimum at c."""
    h = torch.as_tensor(hessian, dtype=torch.float64)
    c = torch.as_tensor(center, dtype=torch.float64)

    def closure(model):
        d = model.w - c
        return floor + 0.5 * d @ h @ d

    return closure


def rotated(eigenvalues, seed=0):
    q, _ = torch.linalg.qr(
        torch.randn(
            len(eigenvalues),
            len(eigenvalues),
            generator=torch.Generator().manual_seed(seed),
            dtype=torch.float64,
        )
    )
    return q @ torch.diag(torch.tensor(eigenvalues, dtype=torch.float64)) @ q.T


def test_top_eigenvalue_of_a_diagonal_hessian():
    model = Point([0.3, -1.0, 2.0])
    assert top_hessian_eigenvalue(
        model, bowl(torch.diag(torch.tensor([5.0, 2.0, 0.5])), [0, 0, 0])
    ) == pytest.approx(5.0, rel=1e-3)


def test_top_eigenvalue_of_a_rotated_hessian():
    h = rotated([7.0, 3.0, 1.0, 0.1])
    assert top_hessian_eigenvalue(
        Point([0.1, 0.2, 0.3, 0.4]), bowl(h, [0] * 4), iters=200, tol=1e-8
    ) == pytest.approx(7.0, rel=1e-3)


def test_epsilon_sharpness_reaches_the_box_corner():
    """At the minimum c the largest rise in the box |y_i| <= eps(|c_i| + 1) is at a corner."""
    curvature = torch.tensor([4.0, 1.0, 0.25], dtype=torch.float64)
    center = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    eps, floor = 1e-2, 0.5
    model = Point(center)
    measured = epsilon_sharpness(model, bowl(torch.diag(curvature), center, floor), epsilon=eps)
    corner = eps * (center.abs() + 1)
    expected = 100 * float(0.5 * (curvature * corner**2).sum()) / (1 + floor)
    assert measured == pytest.approx(expected, rel=1e-6)
    assert torch.equal(model.w.detach(), center)  # the model is left as it was


def test_sharper_bowl_is_sharper_by_both_measures():
    center = [0.5, 0.5]
    flat, sharp = bowl(torch.eye(2), center), bowl(25 * torch.eye(2), center)
    m = Point(center)
    assert epsilon_sharpness(m, sharp) > 10 * epsilon_sharpness(m, flat)
    assert top_hessian_eigenvalue(m, sharp) > 10 * top_hessian_eigenvalue(m, flat)


def test_loss_along_line_matches_the_parabola():
    a, b = Point([0.0, 0.0]), Point([2.0, 0.0])
    alphas = [-0.5, 0.0, 0.25, 0.5, 1.0, 1.5]
    curves = loss_along_line(a, b, {"train": bowl(torch.eye(2), [1.0, 0.0])}, alphas)
    assert curves["train"] == pytest.approx([0.5 * (2 * t - 1) ** 2 for t in alphas])
    assert torch.equal(a.w.detach(), torch.zeros(2, dtype=torch.float64))


def test_a_network_works_too():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    x, y = torch.randn(32, 4), torch.randint(0, 3, (32,))
    closure = lambda m: nn.functional.cross_entropy(m(x), y)  # noqa: E731
    before = [p.detach().clone() for p in net.parameters()]
    assert epsilon_sharpness(net, closure, steps=5) > 0
    assert top_hessian_eigenvalue(net, closure, iters=10) > 0
    assert all(torch.equal(p, q) for p, q in zip(before, net.parameters(), strict=True))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda m, c: epsilon_sharpness(m, c, epsilon=0), "epsilon must be positive"),
        (lambda m, c: epsilon_sharpness(m, c, steps=0), "steps must be at least 1"),
        (lambda m, c: top_hessian_eigenvalue(m, c, iters=0), "iters must be at least 1"),
        (lambda m, c: loss_along_line(m, Point([1.0]), {"f": c}, [0.5]), "same architecture"),
    ],
)
def test_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call(Point([0.0, 0.0]), bowl(torch.eye(2), [0.0, 0.0]))
