"""Allreduces with one mistake each, shared by the tests of notebook 05's checkers."""

from __future__ import annotations

import torch
import torch.distributed as dist


def sums_on_rank_0_only(t):
    """Every rank sends its tensor to rank 0, which adds them up and keeps the total."""
    rank, n = dist.get_rank(), dist.get_world_size()
    if rank:
        dist.send(t, 0)
        return t
    for peer in range(1, n):
        incoming = torch.empty_like(t)
        dist.recv(incoming, peer)
        t += incoming
    return t


def chain_to_rank_0(t):
    """Partial sums passed down the line of ranks, neighbour to neighbour, to rank 0 alone."""
    rank, n = dist.get_rank(), dist.get_world_size()
    if rank < n - 1:
        incoming = torch.empty_like(t)
        dist.recv(incoming, rank + 1)
        t += incoming
    if rank > 0:
        dist.send(t, rank - 1)
    return t


def stride_two_ring(t):
    """A ring of equal (padded) chunks whose neighbours are rank + 2 and rank - 2."""
    rank, n = dist.get_rank(), dist.get_world_size()
    size = -(-t.numel() // n)
    padded = torch.zeros(size * n, dtype=t.dtype)
    padded[: t.numel()] = t.view(-1)
    chunk = padded.view(n, size)
    right, left = (rank + 2) % n, (rank - 2) % n
    for step in range(n - 1):
        incoming = torch.empty(size, dtype=t.dtype)
        send = chunk[(rank - step) % n].clone()
        for request in [dist.isend(send, right), dist.irecv(incoming, left)]:
            request.wait()
        chunk[(rank - step - 1) % n] += incoming
    for step in range(n - 1):
        send, into = chunk[(rank + 1 - step) % n].clone(), chunk[(rank - step) % n]
        for request in [dist.isend(send, right), dist.irecv(into, left)]:
            request.wait()
    t.view(-1)[:] = padded[: t.numel()]
    return t


def whole_tensor_ring(t):
    """The right sum, but each rank's whole tensor passed on around the ring: N - 1 rounds
    of the entire message where the ring sends chunks."""
    rank, n = dist.get_rank(), dist.get_world_size()
    passing = t.clone()
    for _ in range(n - 1):
        incoming = torch.empty_like(t)
        for request in [dist.isend(passing, (rank + 1) % n), dist.irecv(incoming, (rank - 1) % n)]:
            request.wait()
        t += incoming
        passing = incoming
    return t
