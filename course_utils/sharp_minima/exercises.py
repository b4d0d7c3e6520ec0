"""Checkers for notebook 02: the top Hessian eigenvalue by power iteration, Keskar's sharpness.

Both are checked on quadratics f(w) = floor + 1/2 (w - c)^T H (w - c), whose Hessian is H
everywhere, so every answer is known exactly.
"""

from __future__ import annotations

import math

import torch

from ..core.own_answers import answer, first_problem_verdict

EIGEN_CLAIM = "top_eigenvalue finds the largest-magnitude eigenvalue from products H @ v alone"
SHARPNESS_CLAIM = "box_sharpness is Keskar's largest relative rise in the box, in percent"


def _symmetric(eigenvalues, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    n = len(eigenvalues)
    q, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))
    return q @ torch.diag(torch.tensor(eigenvalues, dtype=torch.float64)) @ q.T


_EIGEN_CASES = [
    ([5.0, 2.0, 1.0, 0.5], 0),
    ([30.0, 3.0, 1.0, 0.1, 0.01, 0.0], 1),
    ([2.0, -0.5, 0.3], 2),
    ([-9.0, 4.0, 1.0], 3),  # the largest in magnitude is negative: the sign must survive
]


def check_top_eigenvalue(fn) -> bool:
    """fn(hvp, dim, iters) -> the eigenvalue of largest magnitude of the symmetric H behind
    `hvp(v) = H @ v`, with its sign."""

    def problem(eigenvalues: list[float], seed: int) -> str | None:
        h, calls = _symmetric(eigenvalues, seed), []

        def hvp(v):
            calls.append(1)
            return h @ torch.as_tensor(v, dtype=torch.float64)

        got = answer(fn, hvp, len(eigenvalues), 300)
        want = max(eigenvalues, key=abs)
        if isinstance(got, torch.Tensor) and got.numel() > 1:
            return f"{EIGEN_CLAIM}: return the eigenvalue (a number), not a vector"
        got = float(got)
        if not calls:
            return f"{EIGEN_CLAIM}: use hvp(v); the checker counts the products"
        if not math.isfinite(got):
            return f"{EIGEN_CLAIM}: normalise v after every product, or it overflows"
        if math.isclose(got, want, rel_tol=1e-3):
            return None
        if math.isclose(got, abs(want), rel_tol=1e-3):
            return f"{EIGEN_CLAIM}: return the Rayleigh quotient v.Hv, which keeps the sign"
        if math.isclose(got, min(eigenvalues, key=abs), rel_tol=1e-3, abs_tol=1e-6):
            return f"{EIGEN_CLAIM}: that is the smallest; iterate v <- Hv / |Hv|"
        return f"{EIGEN_CLAIM}: expected {want:g}, got {got:g} for these H"

    return first_problem_verdict(fn, "top_eigenvalue", problem, _EIGEN_CASES, EIGEN_CLAIM)


def _expected_sharpness(curvature, center, floor, w, epsilon, scaled_box=True) -> float:
    """Keskar's sharpness of a diagonal quadratic, exactly: the worst corner of the box.

    `scaled_box=False` gives the common mistake of a box of plain width epsilon.
    """
    h = torch.as_tensor(curvature, dtype=torch.float64)
    c = torch.as_tensor(center, dtype=torch.float64)
    w = torch.as_tensor(w, dtype=torch.float64)
    radius = epsilon * (w.abs() + 1) if scaled_box else torch.full_like(w, epsilon)
    at_w = floor + 0.5 * (h * (w - c) ** 2).sum()
    worst = floor + 0.5 * (h * ((w - c).abs() + radius) ** 2).sum()
    return float(100 * (worst - at_w) / (1 + at_w))


_SHARP_CASES = [  # (curvature, center, floor, w, epsilon): 3 weights, 8 corners
    ([4.0, 1.0, 0.25], [1.0, -2.0, 0.5], 0.5, [1.0, -2.0, 0.5], 1e-2),
    ([9.0, 0.5, 2.0], [3.0, 0.0, -1.0], 0.0, [3.0, 0.0, -1.0], 5e-2),
    ([1.0, 16.0, 4.0], [0.0, 5.0, -4.0], 1.0, [0.2, 4.9, -4.3], 1e-2),
]


def _quadratic(curvature, center, floor):
    h = torch.as_tensor(curvature, dtype=torch.float64)
    c = torch.as_tensor(center, dtype=torch.float64)
    return lambda w: floor + 0.5 * (h * (torch.as_tensor(w, dtype=torch.float64) - c) ** 2).sum()


def answer_values() -> dict[str, list]:
    """The checkers' answers (`course.revealed`); their cases are matrices and quadratics,
    not numbers a text would state beside them."""
    return {
        "top_eigenvalue": [((), max(eigenvalues, key=abs)) for eigenvalues, _ in _EIGEN_CASES],
        "box_sharpness": [((), _expected_sharpness(*case)) for case in _SHARP_CASES],
    }


def check_box_sharpness(fn) -> bool:
    """fn(loss, w, epsilon, samples, seed) -> percent; compared with the exact worst corner."""

    def problem(*case) -> str | None:
        curvature, center, floor, w, epsilon = case
        w0 = torch.tensor(w, dtype=torch.float64)
        got = float(answer(fn, _quadratic(curvature, center, floor), w0, epsilon, 200, 0))
        if math.isclose(got, _expected_sharpness(*case), rel_tol=1e-6):
            return None
        return f"{SHARPNESS_CLAIM}: {_diagnose(got, case)}"

    return first_problem_verdict(fn, "box_sharpness", problem, _SHARP_CASES, SHARPNESS_CLAIM)


def _diagnose(got: float, case) -> str:
    curvature, center, floor, w, epsilon = case
    want = _expected_sharpness(*case)
    at_w = float(_quadratic(curvature, center, floor)(torch.tensor(w, dtype=torch.float64)))
    if math.isclose(got, want / 100, rel_tol=1e-6):
        return "report percent: multiply by 100"
    if math.isclose(got, want * (1 + at_w), rel_tol=1e-6):
        return "divide the rise by 1 + f(w), as Keskar does, so that it is relative"
    if math.isclose(got, _expected_sharpness(*case, scaled_box=False), rel_tol=1e-6):
        return "each weight may move by epsilon * (|w_i| + 1), not by epsilon"
    if 0 <= got < want:
        return "below the largest rise: try the box's corners, y_i = +-epsilon * (|w_i| + 1)"
    return f"expected {want:.4g}%, got {got:.4g}"
