"""Notebook 10's logged collectives, on one dimension of a device mesh (notebook 11).

On a mesh every collective runs inside one group: the tensor-parallel all-reduces among
the ranks of one stage's TP pair, the gradient all-reduce among the data-parallel
replicas, the pipeline hand-offs between a rank and its neighbour along `pp`. So each
`MeshMessage` names its mesh dimension, and the bytes per step over each dimension are
read from what the code really sent. `sent` counts as `transformer.comm` does: a ring
all-reduce of n bytes over N ranks sends 2(N-1)/N n; a send, its own bytes.

Megatron's f and g are here too, on a group: the same operators as notebook 10's
`tensor_parallel`, whose collectives take the whole world.

Every exchange goes through `network.wire`: plain gloo on the real link, and inside
`wire.active(link)` each one pays the simulated link (the planner's check, `plan_check`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ..network import wire

__all__ = [
    "MeshMessage",
    "all_reduce",
    "bytes_by_dim",
    "count_mesh_communication",
    "enter_region",
    "leave_region",
    "recv",
    "send",
]


@dataclass(frozen=True)
class MeshMessage:
    dim: str  # the mesh dimension it travelled over: "dp", "pp" or "tp"
    op: str  # "all_reduce" or "send"
    where: str  # e.g. "block 1 mlp", "gradients", "micro-batch 0"
    direction: str  # "forward" or "backward"
    bytes: int  # the whole tensor
    ranks: int  # ranks in the group
    sent: int  # bytes this rank put on the wire


_logs: list[list[MeshMessage]] = []


@contextlib.contextmanager
def count_mesh_communication():
    """Collect a `MeshMessage` for every exchange made inside the block."""
    log: list[MeshMessage] = []
    _logs.append(log)
    try:
        yield log
    finally:
        _logs.remove(log)


def bytes_by_dim(log: list[MeshMessage], dims) -> dict[str, int]:
    """Bytes this rank sent over each dimension (0 for one it never used)."""
    return {d: sum(m.sent for m in log if m.dim == d) for d in dims}


def _record(dim, op, where, direction, nbytes, ranks, sent) -> None:
    if _logs:
        _logs[-1].append(MeshMessage(dim, op, where, direction, nbytes, ranks, sent))


def all_reduce(t: torch.Tensor, group, dim: str, where: str, direction: str) -> torch.Tensor:
    """Sum `t` over the ranks of `group` (contiguous; in place when it already was), over
    the active link (`network.wire`: plain gloo on the real one)."""
    t = t.contiguous()
    wire.all_reduce(t, group=group)
    n, nbytes = dist.get_world_size(group), t.numel() * t.element_size()
    _record(dim, "all_reduce", where, direction, nbytes, n, 2 * (n - 1) * nbytes // n)
    return t


def send(t: torch.Tensor, to: int, tag: int, dim: str, where: str, direction: str):
    """Start sending `t` to global rank `to` over the active link; the handle to wait on
    before `t` is reused."""
    t = t.contiguous()
    nbytes = t.numel() * t.element_size()
    _record(dim, "send", where, direction, nbytes, 2, nbytes)
    return wire.start(("send", t, to, tag))[0], t


def recv(t: torch.Tensor, frm: int, tag: int) -> torch.Tensor:
    """Receive into `t` from global rank `frm` over the active link; returns `t`."""
    wire.start(("recv", t, frm, tag))[0].wait()
    return t


class _Enter(torch.autograd.Function):
    """f: identity forward; the input gradient, partial on each rank, all-reduced backward."""

    @staticmethod
    def forward(ctx, x, group, where):
        ctx.group, ctx.where = group, where
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return all_reduce(grad.clone(), ctx.group, "tp", ctx.where, "backward"), None, None


class _Leave(torch.autograd.Function):
    """g: the partial outputs all-reduced forward; the gradient, already whole, passed on."""

    @staticmethod
    def forward(ctx, partial, group, where):
        return all_reduce(partial.clone(), group, "tp", where, "forward")

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None


def enter_region(group):
    """f on `group`, in `tensor_parallel`'s form: where -> (tensor -> tensor)."""
    return lambda where: lambda x: _Enter.apply(x, group, where)


def leave_region(group):
    """g on `group`, in `tensor_parallel`'s form: where -> (tensor -> tensor)."""
    return lambda where: lambda x: _Leave.apply(x, group, where)
