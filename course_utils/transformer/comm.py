"""Every message the transformer's parallel layers send, logged as it is sent (notebook 10).

Tensor, sequence, context and expert parallelism differ in what they put on the wire.
The chapter's layers never call `torch.distributed` themselves: they call the functions
here, which run the collective and append a `Message` to the log of the innermost
`count_communication()` block. So the bytes per block that the notebook compares with
its formulas are those the code really moved, and a layer that forgets a collective (or
sends one twice) shows in the log.

`Message.sent` is what this rank puts on the wire when the collective runs as a ring
(Thakur et al. 2005): an all-gather or a reduce-scatter of an n-byte tensor sends
(N-1)/N n, an all-reduce twice that; an all-to-all sends exactly the rows that leave the
rank; a point-to-point send its own bytes.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ..network import wire

__all__ = [
    "Message",
    "all_gather",
    "all_reduce",
    "all_to_all",
    "bytes_sent",
    "count_communication",
    "exchange",
    "reduce_scatter",
]


@dataclass(frozen=True)
class Message:
    op: str  # "all_reduce", "all_gather", "reduce_scatter", "all_to_all" or "send"
    where: str  # which layer sent it, e.g. "block 0 mlp"
    direction: str  # "forward" or "backward"
    bytes: int  # the full tensor: all-reduced, gathered (the result) or scattered (the input)
    ranks: int  # the ranks that take part
    sent: int  # bytes this rank put on the wire


_logs: list[list[Message]] = []


@contextlib.contextmanager
def count_communication():
    """Collect a `Message` for every exchange the chapter's layers make inside the block."""
    log: list[Message] = []
    _logs.append(log)
    try:
        yield log
    finally:
        _logs.remove(log)


def bytes_sent(log: list[Message], **match) -> int:
    """Bytes this rank sent, over the messages whose fields equal `match` (all if none)."""
    return sum(m.sent for m in log if all(getattr(m, k) == v for k, v in match.items()))


def _record(op: str, where: str, direction: str, nbytes: int, sent: int) -> None:
    if _logs:
        ranks = dist.get_world_size()
        _logs[-1].append(Message(op, where, direction, int(nbytes), ranks, int(sent)))


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def all_reduce(t: torch.Tensor, where: str, direction: str) -> torch.Tensor:
    """Sum `t` over the ranks (in place, contiguous)."""
    t = t.contiguous()
    dist.all_reduce(t)
    n = dist.get_world_size()
    _record("all_reduce", where, direction, _nbytes(t), 2 * (n - 1) * _nbytes(t) // n)
    return t


def all_gather(t: torch.Tensor, dim: int, where: str, direction: str) -> torch.Tensor:
    """Every rank's `t`, concatenated along `dim` in rank order."""
    n = dist.get_world_size()
    t = t.contiguous()
    parts = [torch.empty_like(t) for _ in range(n)]
    dist.all_gather(parts, t)
    out = torch.cat(parts, dim=dim)
    _record("all_gather", where, direction, _nbytes(out), (n - 1) * _nbytes(t))
    return out


def reduce_scatter(t: torch.Tensor, dim: int, where: str, direction: str) -> torch.Tensor:
    """The sum over the ranks of `t`, of which this rank keeps its 1/N slice along `dim`.

    gloo has no reduce-scatter: there the sum is all-reduced and sliced, which moves twice
    the bytes; the log records what a ring reduce-scatter sends, as NCCL does."""
    n, rank = dist.get_world_size(), dist.get_rank()
    if t.shape[dim] % n:
        raise ValueError(
            f"reduce_scatter: size {t.shape[dim]} along dim {dim} is not divisible by {n} ranks"
        )
    t = t.contiguous()
    parts = [p.contiguous() for p in t.chunk(n, dim=dim)]
    if dist.get_backend() == "nccl":
        out = torch.empty_like(parts[rank])
        dist.reduce_scatter(out, parts)
    else:
        total = t.clone()
        dist.all_reduce(total)
        out = total.chunk(n, dim=dim)[rank].contiguous()
    _record("reduce_scatter", where, direction, _nbytes(t), (n - 1) * _nbytes(t) // n)
    return out


def all_to_all(
    t: torch.Tensor, send_counts: list[int], recv_counts: list[int], where: str, direction: str
) -> torch.Tensor:
    """Rows of `t` (split along dim 0 by `send_counts`, one piece per rank) sent to each
    rank; the rows received, `recv_counts[r]` from rank r, in rank order."""
    t = t.contiguous()
    out = t.new_empty((sum(recv_counts), *t.shape[1:]))
    dist.all_to_all_single(out, t, output_split_sizes=recv_counts, input_split_sizes=send_counts)
    row = _nbytes(t[:1]) if t.shape[0] else 0
    leaving = sum(c for r, c in enumerate(send_counts) if r != dist.get_rank())
    _record("all_to_all", where, direction, _nbytes(t), leaving * row)
    return out


def exchange(
    send: torch.Tensor, to: int, receive: torch.Tensor, source: int, where: str, direction: str
) -> torch.Tensor:
    """Send `send` to rank `to` while receiving `receive` from rank `source` (a ring's step).

    Both are posted together through the network's `post`, which batches them on NCCL (as
    it requires) and charges the simulated link when one is active."""
    wire.post(("send", send.contiguous(), to), ("recv", receive, source))
    _record("send", where, direction, _nbytes(send), _nbytes(send))
    return receive
