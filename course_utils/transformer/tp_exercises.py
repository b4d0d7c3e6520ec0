"""Checker for notebook 10's exercise: write Megatron's f and g operators.

The learner writes two `torch.autograd.Function`s whose `apply(x)` takes one tensor: f
(identity forward, all-reduce backward) and g (all-reduce forward, identity backward).
The checker probes each on its own with different values on every rank, at N = 2 and
N = 4 (so an answer that works only for one N fails), names the classic mistakes, then
runs the course's tensor-parallel MLP with them against the unsplit MLP. It prints one
verdict line and never raises at the learner.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..core.checks import NOT_SOLVED, attempt, verdict
from ..parallel.tensor_parallel import CopyToTensorRegion, ReduceFromTensorRegion
from ..ranks.bootstrap import device
from ..ranks.launch import launch
from .model import MLP
from .tensor_parallel import TensorParallelMLP

WORLD_SIZES = (2, 4)
WANT = {"f": ("unchanged", "summed"), "g": ("summed", "unchanged")}


def answer_phrases() -> dict[str, list]:
    """What would give an answer away as text (`course.revealed`): which of f and g
    all-reduces in which direction."""
    return {
        "f_and_g": [
            "one is the identity",
            "identity where the other all-reduces",
            "identity forward",
            "identity in the forward",
            "all-reduce backward",
            "all-reduces in the backward",
        ]
    }


def _what(t, mine: torch.Tensor, total: torch.Tensor) -> str:
    if not isinstance(t, torch.Tensor) or t.shape != mine.shape:
        return "something else"
    if torch.allclose(t, mine):
        return "unchanged"
    return "summed" if torch.allclose(t, total) else "something else"


def _probe(op) -> tuple[str, str] | str:
    """What `op` does to a rank-dependent input forward and to a rank-dependent gradient."""
    n, r = dist.get_world_size(), dist.get_rank()
    base = torch.arange(1.0, 7.0, device=device()).reshape(2, 3)
    x = (base + 10 * r).requires_grad_()
    grad = base * (r + 1)
    y = attempt(op.apply, x)
    if y is NOT_SOLVED:
        return NOT_SOLVED
    forward = _what(y, base + 10 * r, n * base + 10 * n * (n - 1) // 2)  # x may be summed in place
    y.backward(grad)
    return forward, _what(x.grad, base * (r + 1), base * n * (n + 1) // 2)


def _mlp_gap(f_op, g_op) -> float:
    """Largest difference between the split MLP (with the learner's f and g) and the whole
    one: output, input gradient and this rank's weight gradients."""
    dev = device()
    gen = torch.Generator().manual_seed(0)  # cpu: the same weights and data on every rank
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        whole = MLP(8, 16).to(dev)
    x = torch.randn(2, 4, 8, generator=gen).to(dev)  # cpu: seeded, then moved
    n, r = dist.get_world_size(), dist.get_rank()
    split = TensorParallelMLP(whole, f_op.apply, g_op.apply, (r, n))
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    y1, y2 = whole(x1), split(x2)
    y1.square().sum().backward()
    y2.square().sum().backward()
    rows = slice(r * 16 // n, (r + 1) * 16 // n)
    pairs = [(y1, y2), (x1.grad, x2.grad), (whole.fc1.weight.grad[rows], split.fc1.weight.grad),
             (whole.fc2.weight.grad[:, rows], split.fc2.weight.grad)]  # fmt: skip
    return max((a - b).abs().max().item() for a, b in pairs)


def _rank(f_op, g_op) -> dict:
    try:
        found = {"f": _probe(f_op), "g": _probe(g_op)}
        if NOT_SOLVED in found.values():
            return {"solved": False}
        gap = _mlp_gap(f_op, g_op) if found == WANT else None
    except Exception as error:
        return {"error": f"{type(error).__name__}: {error}"}
    return {"solved": True, "found": found, "gap": gap}


def _problem(found: dict, n: int) -> str | None:
    f, g = found["f"], found["g"]
    if f == WANT["g"] and g == WANT["f"]:
        return (
            "f and g swapped: f is where a split region starts (input passed on unchanged, "
            "gradients summed in the backward), g where it ends (partial outputs summed "
            "forward, gradient passed on unchanged)"
        )
    if f[0] != "unchanged":
        return f"at N={n}, f's forward should return its input unchanged; it was {f[0]}"
    if f[1] != "summed":
        return (
            f"at N={n}, f's backward should all-reduce the gradient (each rank's covers only "
            f"its own neurons); it was {f[1]}"
        )
    if g[0] != "summed":
        return f"at N={n}, g's forward should all-reduce the ranks' partial outputs; it was {g[0]}"
    if g[1] != "unchanged":
        return (
            f"at N={n}, g's backward should pass the gradient on unchanged (it is already whole "
            f"on every rank; summing it makes it N times too large); it was {g[1]}"
        )
    return None


def check_f_and_g(f_op, g_op, world_sizes=WORLD_SIZES) -> bool:
    """`f_op`, `g_op`: the learner's autograd.Function classes (`apply(x)`, one tensor)."""
    if f_op is None or g_op is None:
        return verdict(False, NOT_SOLVED)
    ours = (CopyToTensorRegion, ReduceFromTensorRegion)
    if any(isinstance(op, type) and issubclass(op, ours) for op in (f_op, g_op)):
        return verdict(False, "these are the course's own f and g; write your own")
    for n in world_sizes:
        out = launch(_rank, n, backend="gloo", args=(f_op, g_op))
        bad = next((r for r in out if "error" in r), None)
        if bad:
            return verdict(False, f"at N={n} your f or g raised {bad['error']}")
        if not all(r["solved"] for r in out):
            return verdict(False, NOT_SOLVED)
        problem = next((p for r in out if (p := _problem(r["found"], n))), None)
        if problem:
            return verdict(False, problem)
        gap = max(r["gap"] for r in out)
        if not gap < 1e-5:
            return verdict(
                False, f"at N={n} the split MLP with your f and g differs from the whole one"
            )
    return verdict(True, "your f and g make the split MLP equal the whole one at N = 2 and 4")
