"""What every rank did during one all-reduce, round by round, read from its messages.

The algorithms log nothing. Each rank runs one inside `recorder.recording(watch=t)`, which
keeps every message that crossed `torch.distributed` and the tensor as each call began;
`traces` lines the ranks' messages up into rounds and gives each rank its tensor after
every round, for the step-through pictures and the byte counts.

A message's round is one more than the rounds its sender and its receiver had finished
when they posted it (a rank has finished a round once a message of that round reached
it, or its blocking send of it was taken). So a ring's step s is round s + 1 on every
rank, and a rank that sits a round out (a tree's leaf, a butterfly's extra rank) is idle
in it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import torch

from ..network.recorder import Message

SENDS, RECEIVES = ("send", "isend"), ("recv", "irecv")


@dataclass
class RoundLog:
    """One round on one rank: (peer, first, last element) of each message sent."""

    label: str
    sends: list = field(default_factory=list)
    value: torch.Tensor | None = None  # the rank's tensor after the round


@dataclass
class Trace:
    """What one rank did during one all-reduce; rounds line up across ranks (idle ones too)."""

    rounds: list = field(default_factory=list)
    bytes_sent: int = 0
    bytes_received: int = 0
    messages_sent: int = 0


def message_rounds(logs: list[list[Message]]) -> list[list[int]]:
    """The round of every event in every rank's log (0 for one that is not a message).

    The k-th message a rank sends to a peer is the k-th that peer receives from it (tags
    and batching aside, as gloo and NCCL match them)."""
    done = [0] * len(logs)  # the rounds each rank has finished
    sent_at, received_at = defaultdict(list), defaultdict(list)  # pair: done when posted
    completed = defaultdict(int)  # pair: receives finished
    refs = [[None] * len(log) for log in logs]  # each event's (pair, k)

    def round_of(pair, k):
        return 1 + max(sent_at[pair][k], received_at[pair][k])

    def step(rank: int, i: int) -> bool:
        """Post event i (once), then finish it if it can be: False while it must wait."""
        m = logs[rank][i]
        if m.op not in SENDS + RECEIVES + ("arrived",):
            return True
        sending = m.op in SENDS
        pair = (rank, m.peer) if sending else (m.peer, rank)
        if refs[rank][i] is None:  # post it
            mine = sent_at if sending else received_at
            k = completed[pair] if m.op == "arrived" else len(mine[pair])
            if m.op != "arrived":
                mine[pair].append(done[rank])
            refs[rank][i] = (pair, k)
        k = refs[rank][i][1]
        if m.op in ("isend", "irecv"):
            return True  # posted; its wait, if any, is an event of its own
        other = received_at if sending else sent_at
        if len(other[pair]) <= k:
            return False  # a blocking call waits for its peer's half
        if not sending:
            completed[pair] += 1
        done[rank] = max(done[rank], round_of(pair, k))
        return True

    place = [0] * len(logs)
    while any(p < len(log) for p, log in zip(place, logs, strict=True)):
        moved = False
        for rank, log in enumerate(logs):
            while place[rank] < len(log) and step(rank, place[rank]):
                place[rank], moved = place[rank] + 1, True
        if not moved:
            raise ValueError("these logs never finish: a receive waits for a message never sent")
    return [
        [0 if ref is None or ref[1] >= len(received_at[ref[0]]) else round_of(*ref) for ref in row]
        for row in refs
    ]


def traces(logs: list[list[Message]], finals: list[torch.Tensor], label) -> list[Trace]:
    """Each rank's trace from its log (kept with `watch`) and its tensor at the end;
    `label(round)` names each round."""
    rounds = message_rounds(logs)
    count = max((r for ranks in rounds for r in ranks), default=0)
    result = []
    for log, numbers, final in zip(logs, rounds, finals, strict=True):
        trace = Trace([RoundLog("start")] + [RoundLog(label(k)) for k in range(1, count + 1)])
        for m, k in zip(log, numbers, strict=True):
            if m.op in SENDS:
                trace.rounds[k].sends.append((m.peer, *(m.span or (0, 0))))
                trace.bytes_sent += m.nbytes
                trace.messages_sent += 1
            elif m.op in RECEIVES:
                trace.bytes_received += m.nbytes
        for k, round_log in enumerate(trace.rounds):  # as the rank's first later call saw it
            later = next((m for m, j in zip(log, numbers, strict=True) if j > k), None)
            seen = final if later is None else later.before  # None: not watched
            round_log.value = None if seen is None else seen.view(-1)
        result.append(trace)
    return result


def round_label(algorithm: str, world: int, logs) -> callable:
    """What `algorithm` does in each round on `world` ranks (`logs`: the run's, for how many
    rounds it took), for the pictures' titles."""
    rounds = max((r for row in message_rounds(list(logs)) for r in row), default=0)
    half, p = rounds // 2, 1 << (world.bit_length() - 1)
    extra = int(world > p)

    def label(k: int) -> str:
        if algorithm == "parameter_server":
            if k == 1:
                return "gather: every worker sends its tensor to the server (rank 0)"
            return "broadcast: the server sends the sum to every worker"
        if algorithm == "tree":
            if k <= half:
                return "reduce: the partial sums go up the tree"
            return "broadcast: the total goes down the tree"
        if algorithm == "ring":
            if k < world:
                return f"reduce-scatter step {k}: send right, add what comes from the left"
            return f"all-gather step {k - world + 1}: pass the finished chunks round"
        if algorithm == "halving_doubling":
            if k <= half:
                return f"halving: swap half with the rank {world >> k} away, add the kept half"
            return f"doubling: swap the finished chunks with the rank {1 << (k - half - 1)} away"
        if extra and k == 1:
            return f"fold in: ranks {p}..{world - 1} hand their tensor to rank - {p}"
        if extra and k == rounds:
            return f"hand back: ranks 0..{world - p - 1} send the sum to rank + {p}"
        distance = 1 << (k - 1 - extra)
        return f"exchange with the rank {distance} away (rank XOR {distance})"

    return label
