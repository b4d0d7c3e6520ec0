"""What a recording holds: one `Message` per call at the `torch.distributed` boundary.

A collective is counted as the bytes each rank sends in the algorithm gloo and NCCL run
for it at these sizes, the ring: nccl-tests' PERFORMANCE.md gives the factors (all-reduce
2(N-1)/N of the tensor; reduce-scatter, all-gather, gather and scatter (N-1)/N of the
whole; broadcast and reduce 1). An all-to-all sends the pieces bound for other ranks,
whatever their sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from . import labels

POINT_TO_POINT = ("send", "recv", "isend", "irecv")
# name: (its tensor arguments, the share of their bytes each rank sends on a ring of N)
COLLECTIVES = {
    "all_reduce": (("tensor",), lambda n: 2 * (n - 1) / n),
    "all_reduce_coalesced": (("tensors",), lambda n: 2 * (n - 1) / n),
    "reduce_scatter": (("input_list",), lambda n: (n - 1) / n),
    "reduce_scatter_tensor": (("input",), lambda n: (n - 1) / n),
    "reduce_scatter_single": (("input",), lambda n: (n - 1) / n),
    "all_gather": (("tensor_list",), lambda n: (n - 1) / n),
    "all_gather_into_tensor": (("output_tensor",), lambda n: (n - 1) / n),
    "all_gather_single": (("output_tensor",), lambda n: (n - 1) / n),
    "all_gather_coalesced": (("output_tensor_lists",), lambda n: (n - 1) / n),
    "all_to_all": (("input_tensor_list",), lambda n: (n - 1) / n),
    "all_to_all_single": (("input",), lambda n: (n - 1) / n),
    "gather": (("gather_list", "tensor"), lambda n: (n - 1) / n),
    "gather_into_tensor": (("output_tensor",), lambda n: (n - 1) / n),
    "gather_single": (("output_tensor",), lambda n: (n - 1) / n),
    "scatter": (("scatter_list", "tensor"), lambda n: (n - 1) / n),
    "broadcast": (("tensor",), lambda n: 1.0),
    "reduce": (("tensor",), lambda n: 1.0),
    "barrier": ((), lambda n: 0.0),
    "monitored_barrier": ((), lambda n: 0.0),
}
# These pickle objects into tensors and pass them through the functions above, which count them.
THROUGH_OTHERS = ("batch_isend_irecv", "send_object_list", "recv_object_list")
THROUGH_OTHERS += ("all_gather_object", "gather_object", "scatter_object_list")
THROUGH_OTHERS += ("broadcast_object_list",)


@dataclass
class Message:
    """One call at the boundary on one rank: a point-to-point message or a collective."""

    op: str
    rank: int
    nbytes: int  # a message's bytes; a collective's bytes this rank sends on a ring
    peer: int | None = None  # the other rank (global), for point-to-point
    group: tuple[int, ...] | None = None  # the ranks of a collective's group
    before: torch.Tensor | None = None  # the watched tensor as the call began (`recording`)
    span: tuple[int, int] | None = None  # the watched tensor's elements this message carried
    where: str | None = None  # the part of the model that sent it (`labels`)
    direction: str | None = None  # "forward" or "backward" (`labels`)
    began: float | None = None  # when the call (an arrival: the wait) began, on the rank's
    ended: float | None = None  # clock (`recorder`), and when it returned

    def __post_init__(self):
        if self.where is None:
            self.where, self.direction = labels.current()


@dataclass
class Log:
    """Every call at the boundary, in the order this process made them, and each wait that
    completed an `irecv` (op "arrived"): when a receive was done, not only posted."""

    messages: list[Message] = field(default_factory=list)
    watch: torch.Tensor | None = None

    def bytes_sent(self, rank: int | None = None) -> int:
        """Bytes sent by point-to-point messages and collectives (of `rank`, or all)."""
        return sum(
            m.nbytes
            for m in self.messages
            if m.op not in ("recv", "irecv", "arrived") and (rank is None or m.rank == rank)
        )

    def bytes_received(self, rank: int | None = None) -> int:
        """Bytes of the point-to-point messages received (by `rank`, or all)."""
        return sum(
            m.nbytes
            for m in self.messages
            if m.op in ("recv", "irecv") and (rank is None or m.rank == rank)
        )

    def collectives(self) -> list[Message]:
        return [m for m in self.messages if m.op not in (*POINT_TO_POINT, "arrived")]


def nbytes(x) -> int:
    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, (list, tuple)):
        return sum(nbytes(item) for item in x)
    return 0


def leaving(name: str, bound: dict, group) -> int | None:
    """An all-to-all's bytes that leave this rank (the pieces may differ in size); None
    where the pieces are even and the ring share says it."""
    me = dist.get_rank(group)
    if name == "all_to_all":
        pieces = bound["input_tensor_list"]
        return nbytes(pieces) - nbytes(pieces[me])
    splits = bound.get("input_split_sizes")
    if not splits:
        return None
    row = nbytes(bound["input"]) // max(sum(splits), 1)
    return (sum(splits) - splits[me]) * row
