"""Checkers for notebook 05: write the ring (and the tree) allreduce yourself.

The learner's function takes this rank's tensor, sums it over all ranks in place with
send/recv (or isend/irecv) and returns it. The checker runs it on several world sizes with
integer tensors (so the sum is exact), records every message at the torch.distributed
boundary (plain send/recv, isend/irecv, or P2POp with batch_isend_irecv), and says which classic
mistake it made: a ring that passes the whole tensor round, wrong chunk indices, a
send/recv order that deadlocks, a ring that talks to a rank other than its two neighbours,
a tree that forgets to broadcast, a "tree" that is really a star (a parameter server) or a
chain, or a shortcut through `dist.all_reduce`.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from ..core.checks import NOT_SOLVED, attempt, verdict
from ..core.errors import LaunchError, LaunchTimeout
from ..core.own_answers import OwnAnswerUsed, from_launch, message, own_answer_name, refusing
from ..network.recorder import recording
from ..ranks.bootstrap import device
from ..ranks.launch import launch

RING_SIZES = (4, 3, 5)
TREE_SIZES = (4, 7)  # 7: the lecture's tree
LENGTHS = (22, 8, 2)  # uneven chunks, even ones, and fewer elements than ranks (empty chunks)
TREE_MAX_SENT = 3  # whole tensors a rank of a tree sends: one up, two down at most
_SENDS = ("send", "isend")
_RECVS = ("recv", "irecv")
_NOT_SHORTCUTS = ("barrier", "monitored_barrier")  # any other collective does the work for you


def check_ring(fn, timeout: float = 5.0) -> bool:
    """✓ when `fn` is a real ring on 3, 4 and 5 ranks: right sums, 2(N-1)/N of the tensor each."""
    return _check("ring", fn, RING_SIZES, timeout)


def check_tree(fn, timeout: float = 5.0) -> bool:
    """✓ when `fn` sums through a tree on 4 and 7 ranks: few bytes per rank, logarithmic depth."""
    return _check("tree", fn, TREE_SIZES, timeout)


def _inputs(rank: int, numel: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(97 * rank + numel)
    return torch.randint(-1000, 1000, (numel,), generator=g, dtype=torch.int64)  # cpu: seeded


def _expected(numel: int, world_size: int) -> torch.Tensor:
    return sum(_inputs(r, numel) for r in range(world_size))


def _on_rank(fn) -> list[dict]:
    """Run the learner's function on each length, recording what crosses torch.distributed."""
    dist.barrier()  # every rank fully connected before a stub returns and its rank exits
    runs = []
    for numel in LENGTHS:
        refused = None
        with recording() as log:
            try:
                with refusing():
                    out = attempt(fn, _inputs(dist.get_rank(), numel).to(device()))
            except OwnAnswerUsed as error:
                out, refused = None, str(error)
        solved = not (isinstance(out, str) and out == NOT_SOLVED)
        if solved and not isinstance(out, torch.Tensor):
            out = f"a {type(out).__name__}"
        events = [
            ("send", m.peer, m.nbytes) if m.op in _SENDS else ("recv", m.peer, 0)
            for m in log.messages
            if m.op in _SENDS + _RECVS
        ]
        shortcuts = [m.op for m in log.collectives() if m.op not in _NOT_SHORTCUTS]
        runs.append(
            {
                "numel": numel,
                "out": out,
                "solved": solved,
                "events": events,
                "refused": refused,
                "shortcuts": shortcuts,
            }
        )
    return runs


def _check(kind: str, fn, sizes: tuple[int, ...], timeout: float) -> bool:
    if own_answer_name(fn):
        return verdict(False, message(own_answer_name(fn)))
    for world_size in sizes:
        try:
            per_rank = launch(_on_rank, world_size, args=(fn,), timeout=timeout, backend="gloo")
        except LaunchTimeout:
            return verdict(False, _DEADLOCK.format(kind=kind))
        except LaunchError as exc:
            if from_launch(exc):
                return verdict(False, from_launch(exc))
            how, on = exc.exc_type or "it died", f"on {world_size} ranks"
            if exc.exc_type is None and kind == "ring":  # gloo aborts on a size mismatch
                return verdict(False, f"your ring crashed on rank {exc.rank} ({on}). {_CHUNKS}")
            return verdict(False, f"your {kind} failed on rank {exc.rank}: {how} ({on}, see above)")
        for case in range(len(LENGTHS)):
            problem = _first_problem(kind, [ranks[case] for ranks in per_rank])
            if problem:
                return verdict(False, problem)
    return verdict(True, _PASSED[kind])


def _first_problem(kind: str, runs: list[dict]) -> str | None:
    n, numel = len(runs), runs[0]["numel"]
    where = f"(tensor of {numel} on {n} ranks)"
    if not all(r["solved"] for r in runs):
        return NOT_SOLVED
    refused = [r["refused"] for r in runs if r["refused"]]
    if refused:
        return refused[0]
    if any(isinstance(r["out"], str) for r in runs):
        return f"your {kind} must return the summed tensor, not {runs[0]['out']}"
    used = sorted({name for r in runs for name in r["shortcuts"]})
    if used:
        return (
            f"your {kind} calls dist.{used[0]}: build it from dist.send/recv "
            "(or isend/irecv) only, that is the point of the exercise"
        )
    if kind == "ring" and (stray := _stray_message(runs)):
        return f"{stray} {where}: {_NEIGHBOURS}"
    expected = _expected(numel, n)
    right = [r["out"].shape == expected.shape and torch.equal(r["out"], expected) for r in runs]
    if not any(right):
        return _wrong_everywhere(kind, runs, expected, where)
    if not all(right):
        good = [i for i, ok in enumerate(right) if ok]
        return f"only rank {good[0]} holds the right sum {where}: the others " + (
            "never got the finished chunks back: add the all-gather phase"
            if kind == "ring"
            else "never got it: broadcast the total back down the tree"
        )
    sent = [sum(nbytes for what, _, nbytes in r["events"] if what == "send") for r in runs]
    whole = numel * 8
    if kind == "ring":
        if max(sent) > 2 * (n - 1) / n * whole + 8 * n:
            return (
                f"the sums are right, but a rank sent more than 2(N-1)/N of the tensor {where}: "
                "a ring passes one chunk (1/N of the tensor) per step, not the whole tensor"
            )
        return None
    return _tree_problem(runs, sent, whole, where)


def _stray_message(runs: list[dict]) -> str | None:
    """The first message of a ring to or from a rank other than rank ± 1 (mod N), as sent:
    the sums can still come out right, but such a message crosses links a ring never uses."""
    n = len(runs)
    for kind, verb in (("send", "sent to"), ("recv", "received from")):
        for rank, r in enumerate(runs):
            for what, peer, _ in r["events"]:
                try:
                    peer = int(peer)
                except (TypeError, ValueError):
                    continue  # a receive from any source, still pending
                if what == kind and peer not in ((rank + 1) % n, (rank - 1) % n):
                    return f"your ring talks to a non-neighbour: rank {rank} {verb} rank {peer}"
    return None


def _tree_problem(runs: list[dict], sent: list[int], whole: int, where: str) -> str | None:
    n = len(runs)
    for rank, r in enumerate(runs):
        peers = {peer for what, peer, _ in r["events"] if what == "send"}
        if len(peers) == n - 1 and n >= 4:
            return (
                f"the sums are right, but a star, not a tree {where}: rank {rank} sends to "
                "every rank, that is the parameter server; in a tree each rank sends only "
                "to its parent and its children"
            )
    if max(sent) > TREE_MAX_SENT * whole:
        return (
            f"the sums are right, but a rank sent more than {TREE_MAX_SENT} whole tensors "
            f"{where}: in a tree each rank sends only to its parent (up) and to its "
            "children (down)"
        )
    hops, bound = message_depth([r["events"] for r in runs]), 2 * math.ceil(math.log2(n))
    if hops > bound:
        return (
            f"the sums are right, but a chain, not a tree {where}: the total reaches its "
            f"last rank after {hops} message hops, where a tree needs at most {bound} "
            "(2 log2 N, rounded up): let every parent take two children, so the depth "
            "grows with log N, not with N"
        )
    return None


def message_depth(events_by_rank: list[list[tuple]]) -> int:
    """Sequential message hops on the critical path, by Lamport clocks over the recorded
    messages: a send carries its rank's clock + 1, a receive sets the clock to the larger
    of its own and the sender's. The k-th send p->r is matched with the k-th receive of r
    from p; a receive posted before its send (irecv first) is matched once the send is."""
    n = len(events_by_rank)
    clocks, stamps, matched = [0] * n, {}, {}
    queues, waiting = [list(events) for events in events_by_rank], [[] for _ in range(n)]

    def receive(source, rank) -> bool:
        key = (source, rank)
        k = matched.get(key, 0)
        if k >= len(stamps.get(key, ())):
            return False
        matched[key] = k + 1
        clocks[rank] = max(clocks[rank], stamps[key][k])
        return True

    while True:
        progress = False
        for rank, queue in enumerate(queues):
            while queue:
                what, peer, _ = queue[0]
                if what == "send":
                    stamps.setdefault((rank, peer), []).append(clocks[rank] + 1)
                elif not receive(peer, rank):
                    break
                queue.pop(0)
                progress = True
            still = [source for source in waiting[rank] if not receive(source, rank)]
            progress |= len(still) < len(waiting[rank])
            waiting[rank] = still
        if not progress:
            blocked = [rank for rank, queue in enumerate(queues) if queue]
            if not blocked:
                return max(clocks)
            for rank in blocked:
                waiting[rank].append(queues[rank].pop(0)[1])


def _wrong_everywhere(kind: str, runs: list, expected: torch.Tensor, where: str) -> str:
    out = runs[0]["out"]
    if out.shape != expected.shape:
        return f"your {kind} returned a tensor of shape {tuple(out.shape)}, not the input's shape"
    if kind != "ring":
        return (
            f"no rank holds the right sum {where}: check that each parent adds what its "
            "children send, exactly once"
        )
    return f"no rank holds the right sum on every element {where}. {_CHUNKS}"


_CHUNKS = (
    "Check the chunk indices: in reduce-scatter step s, rank r sends chunk (r - s - 1) % N "
    "and adds the chunk (r - s - 2) % N it receives; in all-gather step s it sends chunk "
    "(r - s) % N and stores the chunk (r - s - 1) % N it receives (a receive buffer of the "
    "wrong size crashes a rank)"
)
_NEIGHBOURS = (
    "in a ring each rank sends only to its right neighbour (rank + 1) % N and receives only "
    "from its left (rank - 1) % N, so every link carries one chunk per step and none waits"
)
_DEADLOCK = (
    "your {kind} deadlocked: every rank was waiting to communicate and none could go on "
    "(stopped by the timeout). If every rank first waits in recv (or in a blocking send), "
    "no message ever moves: post both with dist.isend/dist.irecv and then wait on both, or "
    "let even ranks send first and odd ranks receive first"
)
_PASSED = {
    "ring": "your ring sums correctly on 3, 4 and 5 ranks and sends only 2(N-1)/N of the "
    "tensor per rank",
    "tree": "your tree sums correctly on 4 and 7 ranks, every rank ends with the total, "
    "in about 2 log2 N hops",
}
