"""Allreduce five ways, built only on torch.distributed point-to-point operations.

Each algorithm sums a tensor over all ranks in place and returns it, like
`dist.all_reduce(t)`; they differ in who talks to whom. The parameter server funnels
everything through rank 0; the tree reduces up a binary tree and broadcasts back down;
the butterfly (recursive doubling) has every rank swap with a partner log2 N times; the
ring passes one chunk per step to the right neighbour; halving-doubling (Rabenseifner's,
power-of-two N only) swaps halves, then quarters, ... with the butterfly's partners, and
moves the ring's bytes in the butterfly's rounds, twice over. Because they use only send/recv
(isend/irecv), they run unchanged on gloo (CPU) and NCCL (GPU). They send through
`network.wire`, so inside `link.active(...)` every message pays an emulated wire time.

Pass a `Trace` to see what an algorithm did on this rank: its rounds, what it sent to and
received from whom, and (for small demos) its tensor after every round.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..core.own_answers import own_answer
from ..network.wire import post
from .flat import begin, chunk_bounds, finish, scratch
from .trace import Trace

__all__ = [
    "ALGORITHMS", "POWER_OF_TWO", "Trace", "butterfly_allreduce", "chunk_bounds",
    "halving_doubling_allreduce", "implementation", "known", "parameter_server_allreduce",
    "ring_allreduce", "tree_allreduce",
]  # fmt: skip


def parameter_server_allreduce(t: torch.Tensor, trace: Trace | None = None) -> torch.Tensor:
    """Every worker sends to rank 0, which sums and sends the total back.

    Two rounds whatever N is, but rank 0 receives and sends N-1 whole tensors: its link
    carries 2(N-1) times the message, so the time grows linearly with the number of ranks.
    """
    flat, rank, world, log = begin(t, trace)
    if world == 1 or flat.numel() == 0:
        return t
    n = flat.numel()
    log.next_round("gather: every worker sends its tensor to the server (rank 0)")
    if rank == 0:
        incoming = scratch(n, flat)
        for worker in range(1, world):
            dist.recv(incoming, worker)
            flat.add_(incoming)
            log.received(worker, 0, n)
    else:
        dist.send(flat, 0)
        log.sent(0, 0, n)
    log.done(flat)
    log.next_round("broadcast: the server sends the sum to every worker")
    if rank == 0:
        post(*[("send", flat, worker) for worker in range(1, world)])
        for worker in range(1, world):
            log.sent(worker, 0, n)
    else:
        dist.recv(flat, 0)
        log.received(0, 0, n)
    log.done(flat)
    return finish(t, flat)


@own_answer("tree")
def tree_allreduce(t: torch.Tensor, trace: Trace | None = None) -> torch.Tensor:
    """Reduce up a binary tree rooted at the last rank, then broadcast back down it.

    Node i of the tree (heap order: children 2i+1 and 2i+2) is rank N-1-i, so 7 ranks
    holding 1..7 give the lecture's picture: sums 13 and 8 after one round, 28 at the
    root after the next, then the same two rounds down. 2*floor(log2 N) rounds in all.
    """
    flat, rank, world, log = begin(t, trace)
    if world == 1 or flat.numel() == 0:
        return t
    n = flat.numel()
    node = world - 1 - rank
    depth, levels = (node + 1).bit_length() - 1, world.bit_length() - 1
    children = [c for c in (2 * node + 1, 2 * node + 2) if c < world]
    child_ranks = [world - 1 - c for c in children]
    parent_rank = world - 1 - (node - 1) // 2 if node else None
    incoming = [scratch(n, flat, slot) for slot in range(len(children))]
    for level in range(levels, 0, -1):  # the deepest level sends first
        log.next_round(f"reduce: depth {level} sends its partial sum up")
        if depth == level:
            dist.send(flat, parent_rank)
            log.sent(parent_rank, 0, n)
        elif depth == level - 1 and children:
            post(*[("recv", buf, src) for buf, src in zip(incoming, child_ranks, strict=True)])
            for buf, src in zip(incoming, child_ranks, strict=True):
                flat.add_(buf)
                log.received(src, 0, n)
        log.done(flat)
    for level in range(1, levels + 1):
        log.next_round(f"broadcast: depth {level - 1} sends the total down")
        if depth == level - 1 and children:
            post(*[("send", flat, dst) for dst in child_ranks])
            for dst in child_ranks:
                log.sent(dst, 0, n)
        elif depth == level:
            dist.recv(flat, parent_rank)
            log.received(parent_rank, 0, n)
        log.done(flat)
    return finish(t, flat)


def butterfly_allreduce(t: torch.Tensor, trace: Trace | None = None) -> torch.Tensor:
    """Recursive doubling: in round k every rank swaps its whole tensor with rank XOR 2^k.

    After log2 N rounds every rank holds the sum (half the rounds of reduce-then-broadcast).
    When N is not a power of two, the ranks beyond the largest power of two p first hand
    their tensor to rank - p, sit out the exchanges, and get the result back at the end.
    """
    flat, rank, world, log = begin(t, trace)
    if world == 1 or flat.numel() == 0:
        return t
    n = flat.numel()
    p = 1 << (world.bit_length() - 1)
    extra = world - p
    incoming = scratch(n, flat) if rank < p else None
    if extra:
        log.next_round(f"fold in: ranks {p}..{world - 1} hand their tensor to rank - {p}")
        if rank >= p:
            dist.send(flat, rank - p)
            log.sent(rank - p, 0, n)
        elif rank < extra:
            dist.recv(incoming, rank + p)
            flat.add_(incoming)
            log.received(rank + p, 0, n)
        log.done(flat)
    distance = 1
    while distance < p:
        log.next_round(f"exchange with the rank {distance} away (rank XOR {distance})")
        if rank < p:
            partner = rank ^ distance
            post(("send", flat, partner), ("recv", incoming, partner))
            flat.add_(incoming)
            log.sent(partner, 0, n)
            log.received(partner, 0, n)
        log.done(flat)
        distance *= 2
    if extra:
        log.next_round(f"hand back: ranks 0..{extra - 1} send the sum to rank + {p}")
        if rank >= p:
            dist.recv(flat, rank - p)
            log.received(rank - p, 0, n)
        elif rank < extra:
            dist.send(flat, rank + p)
            log.sent(rank + p, 0, n)
        log.done(flat)
    return finish(t, flat)


@own_answer("ring")
def ring_allreduce(t: torch.Tensor, trace: Trace | None = None) -> torch.Tensor:
    """Sum `t` over all ranks in place, one of the ways NCCL and gloo sum large messages.

    The tensor is cut into N chunks. Every rank sends one chunk to its right neighbour and
    receives one from its left: N-1 steps of reduce-scatter (add what arrives), after which
    rank r holds the full sum of chunk r+1, then N-1 steps of all-gather (copy what
    arrives). Each rank moves 2(N-1)/N of the tensor whatever N is.
    """
    flat, rank, world, log = begin(t, trace)
    if world == 1 or flat.numel() == 0:
        return t
    bounds = chunk_bounds(flat.numel(), world)
    right, left = (rank + 1) % world, (rank - 1) % world
    incoming = scratch(max(b - a for a, b in bounds), flat)
    held = [{}]  # a step's requests, freed once the next step is done (see ring_step)
    for step in range(world - 1):
        log.next_round(f"reduce-scatter step {step + 1}: send right, add what comes from the left")
        send, recv = bounds[(rank - step) % world], bounds[(rank - step - 1) % world]
        held[0] = ring_step(flat, send, recv, right, left, incoming, log, add=True)
    for step in range(world - 1):
        log.next_round(f"all-gather step {step + 1}: pass the finished chunks round")
        send, recv = bounds[(rank + 1 - step) % world], bounds[(rank - step) % world]
        held[0] = ring_step(flat, send, recv, right, left, incoming, log, add=False)
    return finish(t, flat)


def ring_step(flat, send, recv, right, left, incoming, log, add: bool) -> dict:
    """One step: a chunk goes right while one comes from the left, into `incoming` and
    then added in place (reduce-scatter) or straight into place (all-gather).

    The add starts once its chunk is here, while the outgoing one may still be on its way
    (NCCL needs the two grouped: `post`). The caller holds the returned requests until its
    next step is done: freeing a gloo request the moment it finishes costs time. On 2
    cores (gloo, 4 ranks, 16 MB) each of the two made the ring about 10% faster.
    """
    (s0, s1), (r0, r1) = send, recv
    ops = []  # the receive first: gloo then takes the data as it comes
    if r1 > r0:
        ops.append(("recv", incoming[: r1 - r0] if add else flat[r0:r1], left))
        log.received(left, r0, r1)
    if s1 > s0:
        ops.append(("send", flat[s0:s1], right))
        log.sent(right, s0, s1)
    requests = {}
    if dist.get_backend() == "nccl":
        post(*ops)
    else:
        requests = {
            kind: (dist.irecv if kind == "recv" else dist.isend)(t, p) for kind, t, p in ops
        }
    if "recv" in requests:
        requests["recv"].wait()
    if add and r1 > r0:
        flat[r0:r1].add_(incoming[: r1 - r0])
    if "send" in requests:
        requests["send"].wait()
    log.done(flat)
    return requests


def halving_doubling_allreduce(t: torch.Tensor, trace: Trace | None = None) -> torch.Tensor:
    """Rabenseifner's allreduce: a reduce-scatter by recursive halving, then an all-gather
    by recursive doubling, on a power-of-two number of ranks.

    Halving: in each round a rank swaps half of the chunks it is still summing with the rank
    N/2, then N/4, ..., 1 away, and adds the half it keeps; after log2 N rounds rank r holds
    the full sum of chunk r. Doubling: the same partners in reverse order swap what each has
    finished. Each rank sends 2(N-1)/N of the tensor, as the ring does, in 2 log2 N rounds
    instead of the ring's 2(N-1).
    """
    flat, rank, world, log = begin(t, trace)
    if world & (world - 1):
        raise ValueError(
            f"halving-doubling needs a power-of-two number of ranks, not {world}: use the ring "
            "or the butterfly, which take any number."
        )
    if world == 1 or flat.numel() == 0:
        return t
    bounds = chunk_bounds(flat.numel(), world)

    def span(chunks: tuple[int, int]) -> tuple[int, int]:
        """Chunks first..last-1 as a range of elements."""
        return bounds[chunks[0]][0], bounds[chunks[1] - 1][1]

    incoming = scratch(flat.numel() - flat.numel() // 2, flat)  # the larger half
    held, distance = (0, world), world // 2
    while distance:
        lower, upper = (held[0], held[0] + distance), (held[0] + distance, held[1])
        keep, give = (upper, lower) if rank & distance else (lower, upper)
        log.next_round(f"halving: swap half with the rank {distance} away, add the kept half")
        (k0, k1), (g0, g1) = span(keep), span(give)
        _swap(flat[g0:g1], (g0, g1), incoming[: k1 - k0], (k0, k1), rank ^ distance, log)
        flat[k0:k1].add_(incoming[: k1 - k0])
        log.done(flat)
        held, distance = keep, distance // 2
    distance = 1
    while distance < world:
        theirs = (held[0] - distance, held[0]) if rank & distance else (held[1], held[1] + distance)
        log.next_round(f"doubling: swap the finished chunks with the rank {distance} away")
        (m0, m1), (t0, t1) = span(held), span(theirs)
        _swap(flat[m0:m1], (m0, m1), flat[t0:t1], (t0, t1), rank ^ distance, log)
        log.done(flat)
        held, distance = (min(held[0], theirs[0]), max(held[1], theirs[1])), 2 * distance
    return finish(t, flat)


def _swap(out: torch.Tensor, sent: tuple, into: torch.Tensor, arriving: tuple, partner, log):
    """Send `out` (elements `sent`) to `partner` while its message lands in `into` (elements
    `arriving`); an empty range, when there are fewer elements than ranks, is not sent."""
    ops = [("send", out, partner)] if out.numel() else []
    ops += [("recv", into, partner)] if into.numel() else []
    if ops:
        post(*ops)
    if out.numel():
        log.sent(partner, *sent)
    if into.numel():
        log.received(partner, *arriving)


ALGORITHMS = {  # any number of ranks: every sweep of notebook 05 runs these
    "parameter_server": parameter_server_allreduce,
    "tree": tree_allreduce,
    "butterfly": butterfly_allreduce,
    "ring": ring_allreduce,
}
POWER_OF_TWO = {"halving_doubling": halving_doubling_allreduce}  # 2, 4, 8, ... ranks only


def known(algorithm: str) -> str:
    """`algorithm` itself if ALGORITHMS or POWER_OF_TWO has it; else a ValueError naming them."""
    if algorithm not in ALGORITHMS and algorithm not in POWER_OF_TWO:
        names = ", ".join([*ALGORITHMS, *POWER_OF_TWO])
        raise ValueError(f"unknown algorithm {algorithm!r}; choose one of {names}.")
    return algorithm


def implementation(algorithm: str):
    """The function behind a name, looked up when called (a test may swap one in)."""
    return {**ALGORITHMS, **POWER_OF_TWO}[known(algorithm)]
