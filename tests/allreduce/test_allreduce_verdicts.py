"""Each timing verdict of notebook 05 passes on its effect and fails (✗) where it is absent."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from course_utils.allreduce import algorithms, cost_model, time_allreduce, verdicts
from course_utils.core.machine import MachineShare
from course_utils.network import wire


def _farthest_from_model(measured: dict, predicted: dict) -> float:
    """How far the simulated time of any algorithm and size lands from its alpha-beta
    schedule (the notebook prints these ratios as a table, not a verdict)."""
    return max(
        abs(r - 1) for row in verdicts.model_ratios(measured, predicted).values() for r in row
    )


def _whole_tensor_ring(t, trace=None):
    """A broken ring: 2(N-1) steps as the real one, but each sends the whole tensor."""
    flat, world, rank = t.view(-1), dist.get_world_size(), dist.get_rank()
    incoming = torch.empty_like(flat)
    for _ in range(2 * (world - 1)):
        works = [dist.irecv(incoming, (rank - 1) % world), dist.isend(flat, (rank + 1) % world)]
        for work in works:
            work.wait()
    dist.all_reduce(t)  # plain gloo, not charged: only the messages above pay the wire
    return t


@pytest.mark.parametrize("broken", [False, True])
def test_the_simulator_plays_out_the_rings_schedule_not_a_whole_tensor_rings(monkeypatch, broken):
    """The simulated ring takes what its 2(N-1) messages of n/N bytes cost in the alpha-beta
    model (within 25%); a ring that sends n bytes per step instead lands far off."""
    if broken:
        monkeypatch.setitem(algorithms.ALGORITHMS, "ring", _whole_tensor_ring)
    link, nbytes = wire.parse("100mbit,1ms"), (1 << 16,)
    measured = {4: time_allreduce(4, nbytes, repeats=1, algorithms=("ring",), link=link)}
    on_link = cost_model.AlphaBeta(alpha=link.alpha, beta=link.beta)
    predicted = {4: {"ring": [cost_model.predicted_seconds("ring", 4, nbytes[0], on_link)]}}
    assert (_farthest_from_model(measured, predicted) <= 0.25) is not broken


def test_halving_doubling_plays_out_its_model_on_the_simulated_link():
    """Its 2 log2 N swaps of halves, quarters, ... take what its schedule gives in the
    alpha-beta model, beside the ring's 2(N-1) steps of the same bytes. On the profile's
    latency (5 ms), as in the notebook: at 1 ms a round's own CPU time (0.2-0.3 ms with 4
    ranks on 2 cores, which the simulated clock counts as compute) was a quarter of it."""
    link, nbytes = wire.parse("100mbit,5ms"), (1 << 12, 1 << 18)
    names = ("halving_doubling", "ring")
    measured = {4: time_allreduce(4, nbytes, repeats=1, algorithms=names, link=link)}
    on_link = cost_model.AlphaBeta(alpha=link.alpha, beta=link.beta)
    predicted = {
        4: {a: [cost_model.predicted_seconds(a, 4, n, on_link) for n in nbytes] for a in names}
    }
    assert _farthest_from_model(measured, predicted) <= 0.25


def test_the_simulator_is_trusted_only_when_it_gives_the_real_times():
    close = {"ring": [1.1, 0.9, 1.05], "tree": [1.2, 0.8, 0.95], "butterfly": [1.5, 1.0, 1.0]}
    verdict = verdicts.simulator_matches_real(close)
    assert verdict.ok and verdict.claim.startswith("real clock:")
    slow_link = {name: [50.0, 80.0, 90.0] for name in close}  # the profile's 100 Mbit/s link
    assert not verdicts.simulator_matches_real(slow_link).ok
    full_duplex = {name: [0.55, 0.6, 0.6] for name in close}  # exchanges charged one way
    assert not verdicts.simulator_matches_real(full_duplex).ok
    hog = MachineShare(cores=2, seconds=1.0, others_cores=1.0, machine_cores=2)
    assert not verdicts.simulator_matches_real(close, machine=hog).judged


def test_growth_verdict_fails_for_a_flat_parameter_server():
    """One line for the three algorithms: it passes when each grows as its model does and
    fails when any one of them does not (a parameter server whose rank 0 did not take the
    messages in turn, a tree that grew with N instead of its rounds)."""
    predicted = {"parameter_server": {2: 2.0, 8: 14.0}, "tree": {2: 2.0, 8: 8.0}}
    measured = {"parameter_server": {2: 1.0, 8: 6.5}, "tree": {2: 1.0, 8: 4.2}}
    verdict = verdicts.grow_like_their_models(measured, predicted)
    assert verdict.ok and verdict.claim.startswith("simulated clock:")
    flat_server = {**measured, "parameter_server": {2: 1.0, 8: 1.2}}
    assert not verdicts.grow_like_their_models(flat_server, predicted).ok
    tree_like_n = {**measured, "tree": {2: 1.0, 8: 7.0}}
    assert not verdicts.grow_like_their_models(tree_like_n, predicted).ok


def _simulated(names: tuple, world_sizes: tuple, nbytes: tuple) -> tuple[dict, dict]:
    """The notebook's path on its profile link: {N: {algorithm: [seconds per size]}} on the
    simulated clock, and the alpha-beta model of each algorithm's schedule beside it."""
    link = wire.parse("100mbit,5ms")
    on_link = cost_model.AlphaBeta(alpha=link.alpha, beta=link.beta)
    measured = {
        n: time_allreduce(n, nbytes, repeats=1, algorithms=names, link=link) for n in world_sizes
    }
    predicted = {
        n: {a: [cost_model.predicted_seconds(a, n, b, on_link) for b in nbytes] for a in names}
        for n in world_sizes
    }
    return measured, predicted


@pytest.mark.parametrize("broken", [False, True])
def test_a_tree_that_sends_straight_to_its_root_does_not_grow_like_its_model(monkeypatch, broken):
    """Run as the notebook runs it: the tree grows from 2 to 8 ranks with its rounds, as its
    model says; a "tree" whose ranks all send straight to the root (the parameter server's
    schedule) grows with N instead, and the one line for all the algorithms prints ✗."""
    if broken:
        monkeypatch.setitem(
            algorithms.ALGORITHMS, "tree", algorithms.ALGORITHMS["parameter_server"]
        )
    measured, predicted = _simulated(("tree", "butterfly"), (2, 8), (1 << 18,))
    by_n = {
        side: {a: {n: table[n][a][-1] for n in (2, 8)} for a in ("tree", "butterfly")}
        for side, table in (("measured", measured), ("predicted", predicted))
    }
    assert verdicts.grow_like_their_models(by_n["measured"], by_n["predicted"]).ok is not broken


@pytest.mark.parametrize("broken", [False, True])
def test_a_ring_that_sends_its_whole_tensor_never_crosses_the_butterfly(monkeypatch, broken):
    """On 8 ranks over the profile's sizes the butterfly wins the smallest message and the
    ring the largest, crossing near the model's size; a ring that sends its whole tensor at
    every step never catches up, and the verdict prints ✗."""
    if broken:
        monkeypatch.setitem(algorithms.ALGORITHMS, "ring", _whole_tensor_ring)
    sizes = (1 << 10, 1 << 14, 1 << 18, 1 << 21)
    measured, _ = _simulated(("butterfly", "ring"), (8,), sizes)
    link = wire.parse("100mbit,5ms")
    model = cost_model.crossover_bytes(
        "butterfly", "ring", 8, cost_model.AlphaBeta(alpha=link.alpha, beta=link.beta)
    )
    m = measured[8]
    assert verdicts.crossover_agrees(list(sizes), m["butterfly"], m["ring"], model).ok is not broken


def test_busbw_flat_fails_for_a_tree_like_curve():
    """A ring whose time grows as its bytes per rank passes; the times of a tree (with its
    rounds) or of a parameter server (with N), read as a ring's, fail: a flat busbw is what
    bounds the ring's growth by its bytes, which stay under 2x."""
    assert verdicts.ring_bytes_growth(2, 8) == pytest.approx(1.75)
    assert all(verdicts.ring_bytes_growth(2, n) < 2 for n in (3, 8, 64, 1024))
    ring = {n: verdicts.bus_bandwidth(1e6, 0.09 * 2 * (n - 1) / n, n) for n in (2, 4, 8)}
    assert verdicts.busbw_flat(ring).ok
    measured_ring = {2: 0.178, 4: 0.28, 8: 0.364}  # the notebook's run, latency included
    assert verdicts.busbw_flat(
        {n: verdicts.bus_bandwidth(1e6, t, n) for n, t in measured_ring.items()}
    ).ok
    for curve in ({2: 1.0, 4: 2.0, 8: 4.0}, {2: 1.0, 4: 3.0, 8: 7.0}):  # tree, server
        assert not verdicts.busbw_flat(
            {n: verdicts.bus_bandwidth(1e6, t, n) for n, t in curve.items()}
        ).ok


def test_busbw_flat_fails_for_a_ring_sending_all_to_one_rank(monkeypatch):
    """05's busbw from the simulated times, as the notebook takes them, where "ring" runs
    the parameter server's schedule: rank 0 takes N - 1 whole tensors in turn, so the time
    grows with N and the busbw falls."""
    monkeypatch.setitem(algorithms.ALGORITHMS, "ring", algorithms.ALGORITHMS["parameter_server"])
    size = 1 << 18
    measured, _ = _simulated(("ring",), (2, 8), (size,))
    busbw = {n: verdicts.bus_bandwidth(size, measured[n]["ring"][-1], n) for n in (2, 8)}
    assert not verdicts.busbw_flat(busbw).ok


def test_bus_bandwidth_is_nccl_tests_definition():
    assert verdicts.bus_bandwidth(1000, 1.0, 4) == pytest.approx(1500)


def test_crossover_is_found_in_measurements_or_not_at_all():
    sizes = [1e3, 1e4, 1e5, 1e6]
    butterfly, ring = [1, 2, 10, 100], [4, 5, 10, 50]
    assert verdicts.measured_crossover(sizes, butterfly, ring) == pytest.approx(1e5)
    verdict = verdicts.crossover_agrees(sizes, butterfly, ring, 1.5e5)
    assert verdict.ok and verdict.claim.startswith("simulated clock:")
    assert not verdicts.crossover_agrees(sizes, butterfly, ring, 1e6).ok  # far from the model
    always_ring = [9, 9, 90, 900]  # a butterfly that never wins: no crossover at all
    assert verdicts.measured_crossover(sizes, always_ring, ring) is None
    assert not verdicts.crossover_agrees(sizes, always_ring, ring, 1.5e5).ok
    ring_wins_small_too = [0.5, 5, 10, 50]  # crosses back: the ends decide it
    assert not verdicts.crossover_agrees(sizes, butterfly, ring_wins_small_too, 1.5e5).ok
    assert not verdicts.crossover_agrees(sizes, butterfly, ring, None).ok


def test_link_regimes_fail_on_a_link_without_them():
    """The alpha-beta shape passes; a link with no fixed price, or one where every message
    costs the same, fails; one size slowed twofold (the noise of a busy machine) does not
    flip it."""
    nbytes = [1 << 10, 1 << 14, 1 << 18, 1 << 21, 1 << 24]
    alpha_beta = [80e-6 + n / 3e9 for n in nbytes]
    assert verdicts.latency_then_bandwidth_bound(nbytes, alpha_beta).ok
    slowed = [s * (2 if n == 1 << 21 else 1) for n, s in zip(nbytes, alpha_beta, strict=True)]
    assert verdicts.latency_then_bandwidth_bound(nbytes, slowed).ok
    no_latency = [n / 3e9 for n in nbytes]
    assert not verdicts.latency_then_bandwidth_bound(nbytes, no_latency).ok
    latency_only = [80e-6 for _ in nbytes]
    flat = verdicts.latency_then_bandwidth_bound(nbytes, latency_only)
    assert not flat.ok and flat.claim.startswith("real clock:")
    assert verdicts.size_exponent(nbytes, no_latency, 0, -1) == pytest.approx(1)
    busy = MachineShare(cores=2, seconds=1.0, others_cores=1.5, machine_cores=2)
    assert not verdicts.latency_then_bandwidth_bound(nbytes, alpha_beta, machine=busy).judged


def test_the_ring_keeps_up_unless_it_is_much_slower():
    """A ring as fast as gloo's, or 1.8x (page faults), passes at 16 MiB; one that sends
    the whole tensor every step (twice the bytes on 2 ranks, so at least twice the time)
    fails; other sizes do not decide it."""
    sizes = [1 << 20, 16 << 20, 64 << 20]
    builtin = [1e-3, 15e-3, 60e-3]
    assert verdicts.ring_keeps_up(sizes, [2e-3, 27e-3, 150e-3], builtin).ok
    whole_tensor = verdicts.ring_keeps_up(sizes, [2e-3, 30e-3, 120e-3], builtin)
    assert not whole_tensor.ok and whole_tensor.claim.startswith("real clock:")
