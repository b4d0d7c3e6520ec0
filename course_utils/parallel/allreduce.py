"""All-reduce five ways, built only on point-to-point messages (notebook 05).

Each function sums a tensor over all ranks in place and returns it, as `dist.all_reduce(t)`
does. They differ in who talks to whom, and so in how many rounds they take and how many
bytes each rank sends:

- parameter server: everyone sends to rank 0, which sends the sum back: 2 rounds, but rank
  0's link carries 2(N-1) whole tensors;
- tree: partial sums go up a binary tree and the total comes back down: 2 log2 N rounds;
- butterfly (recursive doubling): every rank swaps its whole tensor with rank XOR 2^k, for
  k = 0, 1, ...: log2 N rounds, each moving the whole tensor;
- ring: N-1 steps of reduce-scatter, then N-1 of all-gather, one chunk per step: each rank
  moves 2(N-1)/N of the tensor, whatever N is;
- halving-doubling (Rabenseifner): the ring's bytes in the butterfly's 2 log2 N rounds.

They call `torch.distributed` directly, so they run on gloo (CPU) and NCCL (GPU) alike, and
whatever counts or times the messages does so from outside, at that boundary.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def exchange(send: torch.Tensor | None, to: int, into: torch.Tensor | None, source: int):
    """Send `send` to rank `to` while `into` is filled from rank `source`; wait for both.

    NCCL needs a send and a receive that two ranks make to each other posted as one group
    (`batch_isend_irecv`), or each waits for the other. Gloo takes them one by one, and
    that way a small exchange takes half the time. An empty tensor is not sent.
    """
    ops = []
    if into is not None and into.numel():
        ops.append(dist.P2POp(dist.irecv, into, source))
    if send is not None and send.numel():
        ops.append(dist.P2POp(dist.isend, send, to))
    if ops and dist.get_backend() == "nccl":
        requests = dist.batch_isend_irecv(ops)
    else:
        requests = [op.op(op.tensor, op.peer) for op in ops]
    for request in requests:
        request.wait()


def parameter_server_allreduce(t: torch.Tensor) -> torch.Tensor:
    """Every worker sends its tensor to rank 0, which adds them up and sends the sum back.

    Two rounds whatever N is, but rank 0 receives and then sends N-1 whole tensors: its link
    carries 2(N-1) times the message, so the time grows linearly with the number of ranks.
    """
    rank, n = dist.get_rank(), dist.get_world_size()
    if rank != 0:
        dist.send(t, 0)
        dist.recv(t, 0)
        return t
    incoming = [torch.empty_like(t) for _ in range(1, n)]
    for request in [dist.irecv(buffer, w) for w, buffer in enumerate(incoming, start=1)]:
        request.wait()
    for buffer in incoming:
        t += buffer
    for request in [dist.isend(t, w) for w in range(1, n)]:
        request.wait()
    return t


def tree_allreduce(t: torch.Tensor) -> torch.Tensor:
    """Reduce up a binary tree rooted at the last rank, then broadcast back down it.

    Node i of the tree (heap order: children 2i+1 and 2i+2) is rank N-1-i, so 7 ranks
    holding 1..7 give the lecture's picture: the sums 13 and 8 after one round, 28 at the
    root after the next, then the same two rounds down. Each rank waits for its children,
    adds their partial sums to its own, sends the result to its parent, and later passes
    the total it gets back on to its children.
    """
    rank, n = dist.get_rank(), dist.get_world_size()
    node = n - 1 - rank
    children = [n - 1 - child for child in (2 * node + 1, 2 * node + 2) if child < n]
    incoming = [torch.empty_like(t) for _ in children]
    for request in [dist.irecv(buffer, c) for buffer, c in zip(incoming, children, strict=True)]:
        request.wait()
    for buffer in incoming:
        t += buffer
    if node > 0:
        parent = n - 1 - (node - 1) // 2
        dist.send(t, parent)  # my subtree's sum goes up ...
        dist.recv(t, parent)  # ... and the total comes down
    for request in [dist.isend(t, c) for c in children]:
        request.wait()
    return t


def butterfly_allreduce(t: torch.Tensor) -> torch.Tensor:
    """Recursive doubling: in round k every rank swaps its whole tensor with rank XOR 2^k.

    After log2 N rounds every rank holds the sum, half the rounds of reduce-then-broadcast.
    When N is not a power of two, the ranks beyond the largest power of two p first hand
    their tensor to rank - p, sit out the exchanges, and get the sum back at the end.
    """
    rank, n = dist.get_rank(), dist.get_world_size()
    p = 1 << (n.bit_length() - 1)
    if rank >= p:
        dist.send(t, rank - p)
        dist.recv(t, rank - p)
        return t
    incoming = torch.empty_like(t)
    if rank + p < n:
        dist.recv(incoming, rank + p)
        t += incoming
    distance = 1
    while distance < p:
        exchange(t, rank ^ distance, incoming, rank ^ distance)
        t += incoming
        distance *= 2
    if rank + p < n:
        dist.send(t, rank + p)
    return t


def ring_reduce_scatter(t: torch.Tensor) -> torch.Tensor:
    """Leave on rank r the sum over all ranks of chunk r of `t` (the other chunks are scratch).

    The tensor is cut into N chunks. In step s every rank sends chunk r-s-1 to its right
    neighbour and adds the chunk r-s-2 that comes from its left, so a chunk collects one
    more rank's share at every hop. N-1 steps, (N-1)/N of the tensor sent per rank.
    """
    rank, n = dist.get_rank(), dist.get_world_size()
    chunks = t.view(-1).tensor_split(n)
    right, left = (rank + 1) % n, (rank - 1) % n
    incoming = torch.empty_like(chunks[0])
    for step in range(n - 1):
        send, add_to = chunks[(rank - step - 1) % n], chunks[(rank - step - 2) % n]
        exchange(send, right, incoming[: add_to.numel()], left)
        add_to += incoming[: add_to.numel()]
    return t


def ring_all_gather(t: torch.Tensor) -> torch.Tensor:
    """Copy every rank's chunk r of `t` into chunk r on every rank: in step s each rank sends
    chunk r-s to its right and stores chunk r-s-1 from its left. (N-1)/N of `t` sent."""
    rank, n = dist.get_rank(), dist.get_world_size()
    chunks = t.view(-1).tensor_split(n)
    right, left = (rank + 1) % n, (rank - 1) % n
    for step in range(n - 1):
        exchange(chunks[(rank - step) % n], right, chunks[(rank - step - 1) % n], left)
    return t


def ring_allreduce(t: torch.Tensor) -> torch.Tensor:
    """Sum `t` over all ranks in place, one of the ways NCCL and gloo sum large messages.

    Every rank talks only to its two neighbours and moves 2(N-1)/N of the tensor whatever N
    is: a reduce-scatter (rank r ends with the sum of chunk r), then an all-gather.
    """
    return ring_all_gather(ring_reduce_scatter(t))


def halving_doubling_allreduce(t: torch.Tensor) -> torch.Tensor:
    """Rabenseifner's all-reduce: a reduce-scatter by recursive halving, then an all-gather
    by recursive doubling, on a power-of-two number of ranks.

    Halving: each round a rank swaps half of the chunks it is still summing with the rank
    N/2, then N/4, ..., 1 away, and adds the half it keeps; after log2 N rounds rank r holds
    the sum of chunk r. Doubling: the same partners in reverse order swap what each has
    finished. Each rank sends 2(N-1)/N of the tensor, as the ring does, in 2 log2 N rounds.
    """
    rank, n = dist.get_rank(), dist.get_world_size()
    if n & (n - 1):
        raise ValueError(
            f"halving-doubling needs a power-of-two number of ranks, not {n}: use the ring "
            "or the butterfly, which take any number."
        )
    flat = t.view(-1)
    edges = [0]  # chunk c is flat[edges[c]:edges[c + 1]], cut as the ring cuts them
    for piece in flat.tensor_split(n):
        edges.append(edges[-1] + piece.numel())

    def chunks(first: int, last: int) -> torch.Tensor:
        return flat[edges[first] : edges[last]]

    incoming = torch.empty_like(chunks(0, n // 2))  # the lower half is the larger
    low, high, distance = 0, n, n // 2  # this rank still sums chunks low..high-1
    while distance:
        lower, upper = (low, low + distance), (low + distance, high)
        keep, give = (upper, lower) if rank & distance else (lower, upper)
        kept = chunks(*keep)
        exchange(chunks(*give), rank ^ distance, incoming[: kept.numel()], rank ^ distance)
        kept += incoming[: kept.numel()]
        (low, high), distance = keep, distance // 2
    distance = 1
    while distance < n:
        theirs = (low - distance, low) if rank & distance else (high, high + distance)
        exchange(chunks(low, high), rank ^ distance, chunks(*theirs), rank ^ distance)
        low, high, distance = min(low, theirs[0]), max(high, theirs[1]), 2 * distance
    return t
