"""Reference solutions for notebook 02's exercises (the tests run the checkers on them)."""

from __future__ import annotations

import torch


def top_eigenvalue(hvp, dim, iters=100):
    v = torch.randn(dim, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    v = v / v.norm()
    for _ in range(iters):
        hv = hvp(v)
        v = hv / hv.norm()
    return float(v @ hvp(v))


def box_sharpness(loss, w, epsilon, samples=100, seed=0):
    radius = epsilon * (w.abs() + 1)
    generator = torch.Generator().manual_seed(seed)
    at_w = float(loss(w))
    worst = at_w
    for _ in range(samples):
        signs = torch.randint(0, 2, w.shape, generator=generator).to(w.dtype) * 2 - 1
        worst = max(worst, float(loss(w + signs * radius)))
    return 100 * (worst - at_w) / (1 + at_w)
