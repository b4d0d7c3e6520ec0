"""How sharp a minimum is, and what the loss looks like between two solutions.

Keskar et al. (2017) found that large-batch training ends in sharp minima that generalize
worse. Two measures make "sharp" a number: their epsilon-sharpness (how much the training
loss can rise inside a small box around the solution) and the largest eigenvalue of the
loss Hessian (the curvature along the steepest direction). The line between a small-batch
and a large-batch solution shows both valleys in one picture.

Every function takes `closure(model) -> loss`, a scalar tensor evaluated on fixed data,
so it works for any model and for the quadratics the tests use; none leaves the model
changed.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import torch
from torch import nn
from torch.nn.utils import parameters_to_vector, vector_to_parameters

Closure = Callable[[nn.Module], torch.Tensor]


def _params(model: nn.Module) -> list[torch.Tensor]:
    return [p for p in model.parameters() if p.requires_grad]


def epsilon_sharpness(
    model: nn.Module, closure: Closure, epsilon: float = 1e-3, steps: int = 20, seed: int = 0
) -> float:
    """Keskar's sharpness in percent: 100 * (max_{y in box} f(x + y) - f(x)) / (1 + f(x)).

    The box allows each weight to move by `epsilon * (|x_i| + 1)`. The maximum is found by
    projected sign-gradient ascent from a random point in the box (Keskar used L-BFGS-B;
    sign steps reach the box's corners, where the maximum of a convex bowl lies).
    """
    if epsilon <= 0:
        raise ValueError(f"epsilon must be positive, got {epsilon}.")
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}.")
    params = _params(model)
    x = parameters_to_vector(params).detach().clone()
    radius = epsilon * (x.abs() + 1)
    generator = torch.Generator().manual_seed(seed)
    y = (torch.rand(x.shape, generator=generator, dtype=x.dtype) * 2 - 1).to(x.device) * radius
    step = 2.5 * radius / steps
    try:
        with torch.no_grad():
            vector_to_parameters(x, params)
            base = float(closure(model))
        best = base
        for _ in range(steps):
            with torch.no_grad():
                vector_to_parameters(x + y, params)
            loss = closure(model)
            best = max(best, loss.item())
            grads = torch.autograd.grad(loss, params, allow_unused=True, materialize_grads=True)
            g = torch.cat([gi.reshape(-1) for gi in grads])  # an unused weight's gradient is 0
            y = torch.clamp(y + step * g.sign(), -radius, radius)
        with torch.no_grad():
            vector_to_parameters(x + y, params)
            best = max(best, float(closure(model)))
    finally:
        with torch.no_grad():
            vector_to_parameters(x, params)
    return 100.0 * (best - base) / (1.0 + base)


def top_hessian_eigenvalue(
    model: nn.Module, closure: Closure, iters: int = 50, tol: float = 1e-4, seed: int = 0
) -> float:
    """The largest-magnitude eigenvalue of the loss Hessian, by power iteration.

    Each iteration is one Hessian-vector product (a second backward pass), so the Hessian
    itself, with its parameters-squared entries, is never formed.
    """
    if iters < 1:
        raise ValueError(f"iters must be at least 1, got {iters}.")
    params = _params(model)
    loss = closure(model)
    grads = torch.autograd.grad(loss, params, create_graph=True)
    generator = torch.Generator().manual_seed(seed)
    v = [torch.randn(p.shape, generator=generator, dtype=p.dtype).to(p.device) for p in params]
    v = _normalized(v)
    eigenvalue = 0.0
    for i in range(iters):
        hv = torch.autograd.grad(grads, params, grad_outputs=v, retain_graph=True)
        new = float(sum((h * vi).sum() for h, vi in zip(hv, v, strict=True)))
        v = _normalized([h.detach() for h in hv])
        if i > 0 and abs(new - eigenvalue) <= tol * max(1.0, abs(new)):
            return new
        eigenvalue = new
    return eigenvalue


def _normalized(vs: list[torch.Tensor]) -> list[torch.Tensor]:
    norm = torch.sqrt(sum((v * v).sum() for v in vs))
    if norm == 0:
        return vs
    return [v / norm for v in vs]


def loss_along_line(
    model_a: nn.Module,
    model_b: nn.Module,
    closures: dict[str, Closure],
    alphas: Sequence[float],
) -> dict[str, list[float]]:
    """Each closure's loss at (1 - a) * A + a * B for every a (a=0 is A, a=1 is B).

    Values of a outside [0, 1] walk past the two solutions, showing how wide each valley is.
    """
    va = parameters_to_vector(_params(model_a)).detach()
    vb = parameters_to_vector(_params(model_b)).detach()
    if va.shape != vb.shape:
        raise ValueError(
            f"the two models have {va.numel()} and {vb.numel()} parameters; "
            "a line between them needs the same architecture."
        )
    probe = copy.deepcopy(model_a)
    probe_params = _params(probe)
    curves: dict[str, list[float]] = {name: [] for name in closures}
    with torch.no_grad():
        for a in alphas:
            vector_to_parameters((1 - a) * va + a * vb, probe_params)
            for name, closure in closures.items():
                curves[name].append(float(closure(probe)))
    return curves
