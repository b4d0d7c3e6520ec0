"""A parameter server on point-to-point messages: synchronous, or asynchronous (Downpour).

Ranks 0..S-1 are servers, each owning one slice (a `Shard`) of the flattened parameters;
the other ranks are workers (`work`). A worker computes a gradient with the parameters
it last pulled, pushes each slice to its server, and waits for the new slice back. A
synchronous server waits for a gradient from every worker, averages them and applies one
update; an asynchronous one (Dean et al. 2012's Downpour) applies each gradient the
moment it arrives, so a gradient may be *stale*: computed on parameters that other
workers' updates have changed since. Its staleness is the number of those updates.

Every message starts with a two-number header, [kind, version]: a worker says whether it
sends a gradient or goodbye, and on which version of the slice it computed; a server
says whether it sends new parameters or stop, and their version.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

GRADIENT, BYE = 0.0, 1.0  # what a worker's message carries
PARAMS, STOP = 0.0, 1.0  # what a server's reply carries
HEADER = 2  # [kind, version] in front of every message


def work(next_gradient, params: torch.Tensor, shards: list[tuple[int, int]]) -> int:
    """One worker, until every server has said stop: `next_gradient(params)` gives the
    flattened gradient at `params`; `shards[s]` is the slice server `s` (rank s) owns.
    Returns how many gradients it pushed."""
    versions = [0] * len(shards)
    serving = set(range(len(shards)))
    pushed = 0
    while serving:
        grad = next_gradient(params)
        for s in sorted(serving):  # push: every slice to its server
            a, b = shards[s]
            header = torch.tensor([GRADIENT, versions[s]], device=grad.device)
            dist.send(torch.cat([header, grad[a:b]]), s)
        for s in sorted(serving):  # pull: the new slice back, or stop
            a, b = shards[s]
            reply = torch.empty(HEADER + b - a, device=params.device)
            dist.recv(reply, s)
            if reply[0] == STOP:
                serving.discard(s)
            else:
                versions[s] = int(reply[1])
                params[a:b] = reply[HEADER:]
        pushed += 1
    for s, (a, b) in enumerate(shards):  # goodbye: nothing more will come from this worker
        goodbye = torch.zeros(HEADER + b - a, device=params.device)
        goodbye[0] = BYE
        dist.send(goodbye, s)
    return pushed


class Shard:
    """One server's slice of the parameters, and how many updates it has applied."""

    def __init__(self, params: torch.Tensor, bounds: tuple[int, int], lr: float):
        a, b = bounds
        self.params = params[a:b].clone()
        self.lr = lr
        self.version = 0

    @property
    def message_size(self) -> int:
        return HEADER + self.params.numel()

    def apply_one(self, message: torch.Tensor) -> int:
        """Downpour: one worker's gradient, applied as it is; returns its staleness."""
        staleness = self.version - int(message[1])
        self.params.add_(message[HEADER:], alpha=-self.lr)
        self.version += 1
        return staleness

    def apply_mean(self, messages: list[torch.Tensor]) -> None:
        """Synchronous: one update with the mean of every worker's gradient."""
        total = torch.zeros_like(self.params)
        for message in messages:
            total += message[HEADER:]
        self.params.add_(total / len(messages), alpha=-self.lr)
        self.version += 1

    def reply(self, rank: int, kind: float) -> None:
        header = torch.tensor([kind, float(self.version)], device=self.params.device)
        dist.send(torch.cat([header, self.params]), rank)


def serve(shard: Shard, workers: list[int], updates: int, synchronous: bool, receive=None):
    """A server: apply `updates` updates to `shard` from the gradients of `workers` (their
    ranks), then tell each worker to stop and wait for its goodbye. Yields each update's
    (staleness, the ranks whose gradients it used) as it is applied.

    `receive()` gives the next (rank, message) from whichever worker sent first; by
    default `dist.recv` without a source."""
    done: set[int] = set()

    def receive_from_any():
        message = shard.params.new_empty(shard.message_size)
        return dist.recv(message), message

    receive = receive or receive_from_any

    def next_gradient():
        """The next gradient still wanted, or None once every worker has said goodbye."""
        while len(done) < len(workers):
            rank, message = receive()
            if message[0] == BYE:
                done.add(rank)
            elif shard.version >= updates:  # a gradient after the last update: stop
                shard.reply(rank, STOP)
            else:
                return rank, message
        return None

    while shard.version < updates:
        if synchronous:  # one gradient from every worker: each waits for its reply
            arrived = [next_gradient() for _ in workers]
            if None in arrived:
                break
            shard.apply_mean([message for _, message in arrived])
            for rank in workers:
                shard.reply(rank, STOP if shard.version >= updates else PARAMS)
            yield 0, sorted(rank for rank, _ in arrived)
        else:
            arrived = next_gradient()
            if arrived is None:
                break
            rank, message = arrived
            staleness = shard.apply_one(message)
            shard.reply(rank, STOP if shard.version >= updates else PARAMS)
            yield staleness, [rank]
    next_gradient()  # until every goodbye: a late gradient is answered with stop
