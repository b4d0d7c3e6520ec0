"""What one rank did during one allreduce, for the pictures and the byte counts.

The algorithms write each round's messages (and, for small demos, the rank's tensor after
the round) to a `Trace`; without one they write to `QUIET`, which keeps nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

__all__ = ["QUIET", "RoundLog", "Trace"]


@dataclass
class RoundLog:
    """One round on one rank: element ranges sent and received, as (peer, start, stop)."""

    label: str
    sends: list = field(default_factory=list)
    recvs: list = field(default_factory=list)
    value: torch.Tensor | None = None  # the rank's tensor after the round, when kept


@dataclass
class Trace:
    """What one rank did during one allreduce; rounds line up across ranks (idle ones too)."""

    rank: int = 0
    world_size: int = 1
    itemsize: int = 1
    keep_values: bool = False
    rounds: list = field(default_factory=list)

    def next_round(self, label: str) -> None:
        self.rounds.append(RoundLog(label))

    def sent(self, peer: int, start: int, stop: int) -> None:
        self.rounds[-1].sends.append((peer, start, stop))

    def received(self, peer: int, start: int, stop: int) -> None:
        self.rounds[-1].recvs.append((peer, start, stop))

    def done(self, flat: torch.Tensor) -> None:
        if self.keep_values:
            self.rounds[-1].value = flat.detach().clone().cpu()

    @property
    def bytes_sent(self) -> int:
        return self.itemsize * sum(b - a for r in self.rounds for _, a, b in r.sends)

    @property
    def bytes_received(self) -> int:
        return self.itemsize * sum(b - a for r in self.rounds for _, a, b in r.recvs)

    @property
    def messages_sent(self) -> int:
        return sum(len(r.sends) for r in self.rounds)


class _NoTrace:
    """Stands in when nobody asked for a trace, so the hot loops carry no `if` per step."""

    next_round = sent = received = done = staticmethod(lambda *args: None)


QUIET = _NoTrace()
