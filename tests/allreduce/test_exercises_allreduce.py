"""Notebook 05's checkers accept the reference ring and tree and explain each classic mistake."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from reference import load_solution, needs_solutions
from wrong_allreduces import chain_to_rank_0, sums_on_rank_0_only

from course_utils.allreduce.exercises import check_ring, check_tree, message_depth

TIMEOUT = 3.0


def _solution():
    return load_solution("05_allreduce.py")


def _line(capsys) -> str:
    return capsys.readouterr().out.strip().splitlines()[-1]


def test_reference_ring_and_tree_pass(capsys):
    assert check_ring(_solution().ring_allreduce, timeout=TIMEOUT)
    assert _line(capsys).startswith("✓ your ring sums correctly on 3, 4 and 5 ranks")
    assert check_tree(_solution().tree_allreduce, timeout=TIMEOUT)
    assert _line(capsys).startswith("✓ your tree sums correctly on 4 and 7 ranks")


def test_message_depth_counts_hops_on_the_critical_path():
    def chain(n):  # up 3 -> 2 -> 1 -> 0, then back down
        up = [[("recv", r + 1, 0)] * (r < n - 1) + [("send", r - 1, 8)] * (r > 0) for r in range(n)]
        return [
            up[r] + [("recv", r - 1, 0)] * (r > 0) + [("send", r + 1, 8)] * (r < n - 1)
            for r in range(n)
        ]

    assert message_depth(chain(4)) == 6
    assert message_depth(chain(7)) == 12
    star = [[("recv", 1, 0), ("recv", 2, 0), ("send", 1, 8), ("send", 2, 8)]]
    star += [[("send", 0, 8), ("recv", 0, 0)] for _ in range(2)]
    assert message_depth(star) == 2
    early = [[("recv", 1, 0), ("send", 1, 8)], [("recv", 0, 0), ("send", 0, 8)]]
    assert message_depth(early) == 1  # both receives posted first (irecv), then both sends


def unsolved(t):
    raise NotImplementedError


def returns_nothing(t):
    pass


def test_unsolved_says_so(capsys):
    for fn in (unsolved, returns_nothing, None):
        assert not check_ring(fn, timeout=TIMEOUT)
        assert _line(capsys) == "✗ not solved yet"
    assert not check_tree(unsolved, timeout=TIMEOUT)
    assert _line(capsys) == "✗ not solved yet"


def whole_tensor_ring(t):
    """Right sums, but each step passes the whole tensor: (N-1) n bytes per rank."""
    rank, n = dist.get_rank(), dist.get_world_size()
    passing, incoming = t.clone(), torch.empty_like(t)
    for _ in range(n - 1):
        for request in [dist.isend(passing, (rank + 1) % n), dist.irecv(incoming, (rank - 1) % n)]:
            request.wait()
        t += incoming
        passing = incoming.clone()
    return t


def test_ring_that_passes_the_whole_tensor_is_caught(capsys):
    assert not check_ring(whole_tensor_ring, timeout=TIMEOUT)
    line = _line(capsys)
    assert "sums are right" in line and "one chunk" in line


def wrong_chunk_ring(t):
    """The reduce-scatter receives into chunk (r - s) instead of (r - s - 1)."""
    rank, n = dist.get_rank(), dist.get_world_size()
    flat = t.view(-1)
    bounds = [(i * flat.numel() // n, (i + 1) * flat.numel() // n) for i in range(n)]
    for step in range(n - 1):
        (s0, s1), (r0, r1) = bounds[(rank - step) % n], bounds[(rank - step) % n]
        incoming = torch.empty(r1 - r0, dtype=flat.dtype)
        for request in [
            dist.isend(flat[s0:s1], (rank + 1) % n),
            dist.irecv(incoming, (rank - 1) % n),
        ]:
            request.wait()
        flat[r0:r1] += incoming
    for step in range(n - 1):
        (s0, s1), (r0, r1) = bounds[(rank + 1 - step) % n], bounds[(rank - step) % n]
        for request in [
            dist.isend(flat[s0:s1], (rank + 1) % n),
            dist.irecv(flat[r0:r1], (rank - 1) % n),
        ]:
            request.wait()
    return t


def test_ring_with_wrong_chunk_indices_is_caught(capsys):
    assert not check_ring(wrong_chunk_ring, timeout=TIMEOUT)
    assert "Check the chunk indices" in _line(capsys)
    assert not check_ring(wrong_gather_ring, timeout=TIMEOUT)
    line = _line(capsys)
    assert "no rank holds the right sum" in line and "Check the chunk indices" in line


def wrong_gather_ring(t):
    """Right reduce-scatter; the all-gather sends chunk (r - s) instead of (r + 1 - s)."""
    rank, n = dist.get_rank(), dist.get_world_size()
    flat = t.view(-1)
    size = flat.numel() // n
    chunk = [slice(i * size, (i + 1) * size) for i in range(n)]
    if flat.numel() % n:  # even chunks only, so the sizes always match
        flat[:] = 0
        return t
    for step in range(n - 1):
        incoming = torch.empty(size, dtype=flat.dtype)
        send, recv = chunk[(rank - step) % n], chunk[(rank - step - 1) % n]
        for request in [
            dist.isend(flat[send], (rank + 1) % n),
            dist.irecv(incoming, (rank - 1) % n),
        ]:
            request.wait()
        flat[recv] += incoming
    for step in range(n - 1):
        send, recv = chunk[(rank - step) % n], chunk[(rank - step) % n]
        for request in [
            dist.isend(flat[send].clone(), (rank + 1) % n),
            dist.irecv(flat[recv], (rank - 1) % n),
        ]:
            request.wait()
    return t


def receive_first_ring(t):
    rank, n = dist.get_rank(), dist.get_world_size()
    incoming = torch.empty_like(t)
    dist.recv(incoming, (rank - 1) % n)
    dist.send(t, (rank + 1) % n)
    return t + incoming


def test_deadlocking_ring_is_stopped_and_explained(capsys):
    assert not check_ring(receive_first_ring, timeout=TIMEOUT)
    line = _line(capsys)
    assert "deadlocked" in line and "isend" in line and "even ranks send first" in line


def built_in_shortcut(t):
    dist.all_reduce(t)
    return t


def test_calling_all_reduce_is_caught(capsys):
    assert not check_ring(built_in_shortcut, timeout=TIMEOUT)
    assert "calls dist.all_reduce" in _line(capsys)


def tree_without_broadcast(t):
    """Reduces to rank 0 correctly but never sends the total back."""
    rank, n = dist.get_rank(), dist.get_world_size()
    distance = 1
    while distance < n:
        if rank % (2 * distance) == distance:
            dist.send(t, rank - distance)
        elif rank % (2 * distance) == 0 and rank + distance < n:
            incoming = torch.empty_like(t)
            dist.recv(incoming, rank + distance)
            t += incoming
        distance *= 2
    return t


def test_tree_that_forgets_the_broadcast_is_caught(capsys):
    assert not check_tree(tree_without_broadcast, timeout=TIMEOUT)
    line = _line(capsys)
    assert "only rank 0 holds the right sum" in line and "broadcast" in line


def star_tree(t):
    """Everyone sends to rank 0, which sends the total back: a parameter server."""
    rank, n = dist.get_rank(), dist.get_world_size()
    t = sums_on_rank_0_only(t)
    if rank:
        dist.recv(t, 0)
        return t
    for peer in range(1, n):
        dist.send(t, peer)
    return t


def chain_tree(t):
    """Partial sums passed down a line of ranks to rank 0, the total passed back up."""
    rank, n = dist.get_rank(), dist.get_world_size()
    t = chain_to_rank_0(t)
    if rank > 0:
        dist.recv(t, rank - 1)
    if rank < n - 1:
        dist.send(t, rank + 1)
    return t


@needs_solutions
def test_the_ring_runs_on_3_and_5_ranks_and_on_empty_chunks(capsys):
    def ring_for_4_only(t):
        return _solution().ring_allreduce(t) if dist.get_world_size() == 4 else t

    assert not check_ring(ring_for_4_only, timeout=TIMEOUT)
    assert "on 3 ranks" in _line(capsys)

    def skips_short_tensors(t):
        return t if t.numel() < dist.get_world_size() else _solution().ring_allreduce(t)

    assert not check_ring(skips_short_tensors, timeout=TIMEOUT)
    assert "(tensor of 2 on 4 ranks)" in _line(capsys)


def raises_on_rank_2(t):
    if dist.get_rank() == 2:
        raise ValueError("boom")
    return t


def test_a_rank_that_raises_is_named(capsys):
    assert not check_ring(raises_on_rank_2, timeout=TIMEOUT)
    assert "failed on rank 2: ValueError" in _line(capsys)


def tree_run_twice(t):
    """The reference tree, and then the whole tree again (on zeros): twice the bytes."""
    t = _solution().tree_allreduce(t)
    return t + _solution().tree_allreduce(torch.zeros_like(t))


def no_communication(t):
    return t


@pytest.mark.parametrize(
    "checker, mistake, phrases",
    [
        (check_tree, star_tree, ["a star", "rank 0 sends to every rank", "parameter server"]),
        (check_tree, chain_tree, ["a chain", "6 message hops, where a tree needs at most 4"]),
        pytest.param(
            check_tree, tree_run_twice, ["sent more than 3 whole tensors"], marks=needs_solutions
        ),
        (check_tree, no_communication, ["no rank holds the right sum", "exactly once"]),
        (check_ring, chain_to_rank_0, ["only rank 0 holds", "add the all-gather phase"]),
    ],
)
def test_each_mistake_is_named(capsys, checker, mistake, phrases):
    assert not checker(mistake, timeout=TIMEOUT)
    line = _line(capsys)
    assert all(phrase in line for phrase in phrases), line


def test_returning_something_else_is_caught(capsys):
    assert not check_ring(lambda t: t.tolist(), timeout=TIMEOUT)
    assert "must return the summed tensor, not a list" in _line(capsys)
    assert not check_ring(lambda t: t.reshape(1, -1), timeout=TIMEOUT)
    assert "returned a tensor of shape (1, 22)" in _line(capsys)


@pytest.mark.parametrize("kind, checker", [("ring", check_ring), ("tree", check_tree)])
def test_the_course_own_algorithm_is_refused(capsys, kind, checker):
    from course_utils.allreduce import ALGORITHMS

    assert not checker(ALGORITHMS[kind], timeout=TIMEOUT)
    assert _line(capsys) == f"✗ this is the course's own {kind}: write yours"


def test_a_ring_that_calls_the_course_ring_is_refused_on_the_ranks(capsys):
    from course_utils.allreduce import ALGORITHMS

    assert not check_ring(lambda t: ALGORITHMS["ring"](t), timeout=TIMEOUT)
    assert _line(capsys) == "✗ this is the course's own ring: write yours"


def test_the_course_ring_is_refused_however_the_learner_reached_it(capsys):
    """The marker is the function's code, so the plain algorithm in parallel/ carries none:
    imported from there, or called inside the learner's own function, it is still refused."""
    from course_utils.parallel.allreduce import ring_allreduce

    assert not check_ring(ring_allreduce, timeout=TIMEOUT)
    assert _line(capsys) == "✗ this is the course's own ring: write yours"
    assert not check_ring(lambda t: ring_allreduce(t) * 1, timeout=TIMEOUT)
    assert _line(capsys) == "✗ this is the course's own ring: write yours"
