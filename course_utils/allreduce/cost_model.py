"""The alpha-beta cost model of the five allreduce algorithms (Thakur et al. 2005).

Sending n bytes from one rank to another costs alpha + n * beta: alpha is the latency of
one message, beta the time per byte (1 / bandwidth). A rank has one link, so messages it
sends one after another add up. From that, and the schedule of each algorithm in
`collectives`, follow how many rounds each takes, how many bytes each rank moves, and how
long it should take. The ring's 2(N-1)/N * n bytes per rank is the least any allreduce
can move (Patarasuk & Yuan 2009), so its bandwidth term is the floor every algorithm pays;
halving-doubling (Rabenseifner's, Thakur et al. 2005) moves the same bytes in 2 log2 N
rounds, on a power-of-two number of ranks.
"""

from __future__ import annotations

from ..network.fit import AlphaBeta, fit_alpha_beta
from .algorithms import chunk_bounds, known

__all__ = [
    "AlphaBeta",
    "bandwidth_floor_bytes",
    "bytes_per_rank",
    "crossover_bytes",
    "fit_alpha_beta",
    "predicted_seconds",
    "rounds",
]


def _levels(world: int) -> int:
    return world.bit_length() - 1


def _power_of_two(algorithm: str, world: int) -> None:
    """Halving-doubling has no schedule for other N: say so rather than price a fiction."""
    if algorithm == "halving_doubling" and world & (world - 1):
        raise ValueError(f"halving_doubling runs on a power-of-two number of ranks, not {world}.")


def rounds(algorithm: str, world: int) -> int:
    """Rounds of communication: every rank finishes round k before round k+1 starts."""
    _power_of_two(known(algorithm), world)
    if world == 1:
        return 0
    p = 1 << _levels(world)
    return {
        "parameter_server": 2,
        "tree": 2 * _levels(world),
        "butterfly": _levels(world) + (2 if world != p else 0),
        "ring": 2 * (world - 1),
        "halving_doubling": 2 * _levels(world),
    }[algorithm]


def bytes_per_rank(algorithm: str, world: int, numel: int, itemsize: int) -> list[tuple[int, int]]:
    """(bytes sent, bytes received) by each rank, in rank order, for a tensor of `numel`."""
    _power_of_two(known(algorithm), world)
    if world == 1 or numel == 0:
        return [(0, 0)] * world
    whole = numel * itemsize
    if algorithm == "halving_doubling":
        return [(b, b) for b in _halving_doubling_bytes(world, numel, itemsize)]
    if algorithm == "parameter_server":
        return [((world - 1) * whole,) * 2] + [(whole, whole)] * (world - 1)
    if algorithm in ("tree", "butterfly"):  # each link a whole message in and one out
        if algorithm == "tree":  # rank r is node N-1-r: its children, and a parent unless root
            nodes = [world - 1 - rank for rank in range(world)]
            links = [sum(c < world for c in (2 * i + 1, 2 * i + 2)) + (i > 0) for i in nodes]
        else:  # a rank beyond the largest power of two p pairs with one below it
            p = 1 << _levels(world)
            links = [1 if r >= p else _levels(world) + (r < world - p) for r in range(world)]
        return [(k * whole, k * whole) for k in links]
    sizes = [(b - a) * itemsize for a, b in chunk_bounds(numel, world)]
    return [
        (
            2 * whole - sizes[r] - sizes[(r + 1) % world],  # never sent: r, then r + 1
            2 * whole - sizes[(r - 1) % world] - sizes[r],  # never received: r - 1, then r
        )
        for r in range(world)
    ]


def _halving_doubling_bytes(world: int, numel: int, itemsize: int) -> list[int]:
    """Per rank, sent (= received): at distance d the halving sends the half of its 2d-chunk
    block it gives away and receives the half it keeps, and the doubling sends and receives
    the same two halves the other way. So each rank sends every aligned block of 2, 4, ...,
    N chunks that holds its own chunk once: 2(N-1)/N of the tensor for even chunks."""
    sizes = [(b - a) * itemsize for a, b in chunk_bounds(numel, world)]
    blocks = [2 << j for j in range(_levels(world))]
    return [sum(sum(sizes[r // w * w : r // w * w + w]) for w in blocks) for r in range(world)]


def bandwidth_floor_bytes(world: int, nbytes: int) -> float:
    """The least any allreduce can send per rank: each rank's data must leave it and the
    sum must arrive, which costs 2(N-1)/N of the message (what the ring and halving-doubling
    send)."""
    return 2 * (world - 1) / world * nbytes


def predicted_seconds(algorithm: str, world: int, nbytes: float, model: AlphaBeta) -> float:
    """Time on the busiest rank's link, in the alpha-beta model."""
    if world == 1:
        return 0.0
    whole = model.message_seconds(nbytes)
    levels = _levels(world)
    p = 1 << levels
    _power_of_two(known(algorithm), world)
    if algorithm == "halving_doubling":  # swaps of n/2, n/4, ..., n/N, then back up
        return 2 * sum(model.message_seconds(nbytes / (2 << j)) for j in range(levels))
    if algorithm == "parameter_server":  # rank 0 takes N-1 messages in, then N-1 out
        return 2 * (world - 1) * whole
    if algorithm == "tree":
        return _tree_seconds(world, whole)
    if algorithm == "butterfly":
        return (levels + (2 if world != p else 0)) * whole
    return 2 * (world - 1) * model.message_seconds(nbytes / world)


def _tree_seconds(world: int, whole: float) -> float:
    """The tree's critical path, node by node (heap order: children 2i+1 and 2i+2).

    Going up, a node's sum is complete when its incoming link has carried its children's
    messages, one after the other, each sent as soon as that child's own sum was complete;
    going down, a node sends to its children one after the other. A full tree of depth L
    takes 2L messages up and 2L down; a lone child on the last level costs less.
    """
    complete = [0.0] * world
    for node in reversed(range(world)):
        ready = sorted(complete[c] for c in (2 * node + 1, 2 * node + 2) if c < world)
        link_free = 0.0
        for moment in ready:
            link_free = max(link_free, moment) + whole
        complete[node] = link_free
    holds = [complete[0]] + [0.0] * (world - 1)
    for node in range(world):
        sent = holds[node]
        for child in (2 * node + 1, 2 * node + 2):
            if child < world:
                sent += whole
                holds[child] = sent
    return max(holds)


def crossover_bytes(
    fast_start: str, fast_finish: str, world: int, model: AlphaBeta
) -> float | None:
    """Message size where `fast_finish` (e.g. the ring) starts to beat `fast_start`
    (e.g. the butterfly); None if it never does in 1 B .. 16 GB."""
    lo, hi = 1.0, float(1 << 34)

    def finish_wins(n: float) -> bool:
        return predicted_seconds(fast_finish, world, n, model) < predicted_seconds(
            fast_start, world, n, model
        )

    if finish_wins(lo):
        return lo
    if not finish_wins(hi):
        return None
    for _ in range(80):
        mid = (lo * hi) ** 0.5
        lo, hi = (lo, mid) if finish_wins(mid) else (mid, hi)
    return hi
