"""The hand-offs of a rank with several pipeline chunks (interleaved 1F1B, zero bubble).

On gloo every receive is posted ahead, so the data lands while the stage still computes,
and tags tell the messages apart. NCCL matches a peer's messages in the order they were
posted and runs them on one stream: a receive posted ahead of a send its peer is waiting
for would never complete (in 1F1B's steady state both neighbours would be sending). There
an op's receive is posted when the op before it sends, in one batch (`network.wire.start`),
as Megatron's send-forward-receive-backward does.
"""

from __future__ import annotations

import torch

from ..network import wire

__all__ = ["Mailbox"]


class Mailbox:
    """The same rule for a rank with several chunks (interleaved 1F1B, zero bubble), where
    `incoming[key]` is (shape, peer, tag) of what op `key` receives: on gloo every receive
    is posted at once and each send goes at once; on NCCL a send waits for the next
    receive, or the end of the step, and goes in one batch with it."""

    def __init__(self, incoming: dict, dev: torch.device):
        self.incoming, self.dev = incoming, dev
        self.ahead = not wire.batches_point_to_point()
        self.inbox: dict = {}
        self.outbox: list = []
        self.sends: list = []
        for key in incoming if self.ahead else ():
            self._post(key)

    def _post(self, key=None) -> None:
        ops = [("send", t, peer, tag) for t, peer, tag in self.outbox]
        if key is not None:
            shape, peer, tag = self.incoming[key]
            ops.append(("recv", torch.empty(shape, device=self.dev), peer, tag))
        handles = wire.start(*ops) if ops else []
        self.sends += [h for op, h in zip(ops, handles, strict=True) if op[0] == "send"]
        if key is not None:
            self.inbox[key] = ops[-1][1], handles[-1]
        self.outbox = []

    def send(self, t: torch.Tensor, peer: int, tag: int) -> None:
        self.outbox.append((t, peer, tag))
        if self.ahead:
            self._post()

    def take(self, key) -> tuple[torch.Tensor, object]:
        """Op `key`'s buffer and the handle to wait on (posted now, with the waiting sends,
        where it was not posted ahead)."""
        if key not in self.inbox:
            self._post(key)
        return self.inbox.pop(key)

    def finish(self) -> None:
        self._post()
        for handle in self.sends:
            handle.wait()
