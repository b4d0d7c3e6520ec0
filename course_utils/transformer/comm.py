"""What notebook 10's parallel layers send, read at the `torch.distributed` boundary.

The layers call `torch.distributed` themselves (`parallel.tensor_parallel`,
`parallel.sequence_parallel`, ring attention, the experts' all-to-all). Inside
`count_communication()` the recorder (`network.recorder`) writes down every call, and hooks
on the model's parts (`label_parts`, `network.labels`) say which block's attention or MLP
made it, forward or backward. So the bytes per block that the notebook compares with its
formulas are those that crossed the boundary, and a layer that forgets a collective (or
sends one twice) shows in the log.

`Message.sent` is what this rank puts on the wire when the collective runs as a ring
(`network.messages`): an all-gather or a reduce-scatter of an n-byte tensor sends (N-1)/N
n, an all-reduce twice that; an all-to-all the rows that leave the rank; a send its bytes.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch.distributed as dist
from torch import nn

from ..network import labels, recorder

labelled = labels.labelled
# torch's function: the chapter's name for what it does (receives are the sender's bytes)
_OPS = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "all_gather_into_tensor": "all_gather",
    "all_gather_single": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_single": "reduce_scatter",
    "all_to_all": "all_to_all",
    "all_to_all_single": "all_to_all",
    "send": "send",
    "isend": "send",
}


@dataclass(frozen=True)
class Message:
    op: str  # "all_reduce", "all_gather", "reduce_scatter", "all_to_all" or "send"
    where: str  # which part sent it, e.g. "block 0 mlp" ("" if no label was open)
    direction: str  # "forward" or "backward"
    ranks: int  # the ranks that take part
    sent: int  # bytes this rank put on the wire


@contextlib.contextmanager
def count_communication():
    """A list, filled as the block closes with a `Message` for every collective and send
    this rank made in it (receives are counted by their senders)."""
    found: list[Message] = []
    with recorder.recording() as log:
        yield found
    for m in log.messages:
        if m.op in _OPS:
            ranks = len(m.group) if m.group else dist.get_world_size()
            found.append(Message(_OPS[m.op], m.where or "", m.direction or "", ranks, m.nbytes))


def bytes_sent(log: list[Message], **match) -> int:
    """Bytes this rank sent, over the messages whose fields equal `match` (all if none)."""
    return sum(m.sent for m in log if all(getattr(m, k) == v for k, v in match.items()))


def label_parts(model: nn.Module) -> list:
    """Name what each part of the transformer sends: "block i attention", "block i mlp",
    and the sequence's cut after the embedding and join before the head (sequence
    parallel). The hooks' handles."""
    parts = {"embedding": model.split_sequence, "head": model.join_sequence}
    for i, block in enumerate(model.blocks):
        parts |= {f"block {i} attention": block.attn, f"block {i} mlp": block.mlp}
    return labels.label_modules(parts)
