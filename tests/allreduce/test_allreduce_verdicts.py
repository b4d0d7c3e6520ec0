"""Each timing verdict of notebook 05 passes on its effect and fails (✗) where it is absent."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from course_utils.allreduce import algorithms, cost_model, time_allreduce, verdicts
from course_utils.core.machine import MachineShare
from course_utils.network import wire as links


def test_model_agreement_fails_when_one_point_is_off():
    predicted = {2: {"ring": [1.0, 2.0]}, 8: {"ring": [1.5, 3.0]}}
    good = {2: {"ring": [1.1, 2.1]}, 8: {"ring": [1.6, 2.9]}}
    assert verdicts.agrees_with_model(good, predicted).ok
    scheduled = {2: {"ring": [1.1, 2.1]}, 8: {"ring": [4.0, 2.9]}}  # cores, not the link
    assert not verdicts.agrees_with_model(scheduled, predicted).ok
    # the built-in is charged as a ring: it is never checked, however far off it lands
    charged = {n: {**row, "builtin": [9.0, 9.0]} for n, row in good.items()}
    with_builtin = {n: {**row, "builtin": row["ring"]} for n, row in predicted.items()}
    verdict = verdicts.agrees_with_model(charged, with_builtin)
    assert verdict.ok and verdict.claim.startswith("simulated clock:")


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
def test_a_ring_that_sends_its_whole_tensor_misses_its_schedule(monkeypatch, broken):
    """On the simulated clock the verdict checks the code's schedule, not the simulator:
    the real ring passes, a ring that sends n bytes per step instead of n/N fails."""
    if broken:
        monkeypatch.setitem(algorithms.ALGORITHMS, "ring", _whole_tensor_ring)
    link, nbytes = links.parse("100mbit,1ms"), (1 << 16,)
    measured = {4: time_allreduce(4, nbytes, repeats=1, algorithms=("ring",), link=link)}
    on_link = cost_model.AlphaBeta(alpha=link.alpha, beta=link.beta)
    predicted = {4: {"ring": [cost_model.predicted_seconds("ring", 4, nbytes[0], on_link)]}}
    assert verdicts.agrees_with_model(measured, predicted).ok is not broken


def test_halving_doubling_plays_out_its_model_on_the_simulated_link():
    """Its 2 log2 N swaps of halves, quarters, ... take what its schedule gives in the
    alpha-beta model, beside the ring's 2(N-1) steps of the same bytes. On the profile's
    latency (5 ms), as in the notebook: at 1 ms a round's own CPU time (0.2-0.3 ms with 4
    ranks on 2 cores, which the simulated clock counts as compute) was a quarter of it."""
    link, nbytes = links.parse("100mbit,5ms"), (1 << 12, 1 << 18)
    names = ("halving_doubling", "ring")
    measured = {4: time_allreduce(4, nbytes, repeats=1, algorithms=names, link=link)}
    on_link = cost_model.AlphaBeta(alpha=link.alpha, beta=link.beta)
    predicted = {
        4: {a: [cost_model.predicted_seconds(a, 4, n, on_link) for n in nbytes] for a in names}
    }
    assert verdicts.agrees_with_model(measured, predicted).ok


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
    predicted = {2: 2.0, 8: 14.0}
    assert verdicts.grows_like({2: 1.0, 8: 6.5}, predicted, "grows with N").ok
    assert not verdicts.grows_like({2: 1.0, 8: 1.2}, predicted, "grows with N").ok


def test_busbw_flat_fails_for_a_tree_like_curve():
    ring = {n: verdicts.bus_bandwidth(1e6, 0.09 * 2 * (n - 1) / n, n) for n in (2, 4, 8)}
    assert verdicts.busbw_flat(ring).ok
    tree = {n: verdicts.bus_bandwidth(1e6, 0.09 * n, n) for n in (2, 4, 8)}
    assert not verdicts.busbw_flat(tree).ok


def test_ring_time_bound_fails_for_tree_and_parameter_server_curves():
    assert verdicts.ring_bytes_growth(2, 8) == pytest.approx(1.75)
    assert all(verdicts.ring_bytes_growth(2, n) < 2 for n in (3, 8, 64, 1024))
    assert verdicts.ring_time_within_bytes_growth({2: 0.178, 4: 0.28, 8: 0.364}).ok
    assert not verdicts.ring_time_within_bytes_growth({2: 1.0, 4: 2.0, 8: 4.0}).ok  # tree
    assert not verdicts.ring_time_within_bytes_growth({2: 1.0, 4: 3.0, 8: 7.0}).ok  # server


def test_bus_bandwidth_is_nccl_tests_definition():
    assert verdicts.bus_bandwidth(1000, 1.0, 4) == pytest.approx(1500)


def test_crossover_is_found_in_measurements_or_not_at_all():
    sizes = [1e3, 1e4, 1e5, 1e6]
    butterfly, ring = [1, 2, 10, 100], [4, 5, 10, 50]
    found = verdicts.measured_crossover(sizes, butterfly, ring)
    assert found == pytest.approx(1e5)
    assert verdicts.crossover_agrees(found, 1.5e5).ok
    assert not verdicts.crossover_agrees(found, 1e6).ok
    always_ring = verdicts.measured_crossover(sizes, [9, 9, 90, 900], ring)
    assert always_ring is None
    assert not verdicts.crossover_agrees(always_ring, 1.5e5).ok


def test_link_regimes_fail_on_a_link_without_them():
    """The alpha-beta shape passes both; a link with no fixed price fails the latency
    verdict, one where every message costs the same fails the bandwidth verdict, and one
    size slowed twofold (the noise of a busy machine) does not flip either."""
    nbytes = [1 << 10, 1 << 14, 1 << 18, 1 << 21, 1 << 24]
    alpha_beta = [80e-6 + n / 3e9 for n in nbytes]
    assert verdicts.latency_bound(nbytes, alpha_beta).ok
    assert verdicts.bandwidth_bound(nbytes, alpha_beta).ok
    slowed = [s * (2 if n == 1 << 21 else 1) for n, s in zip(nbytes, alpha_beta, strict=True)]
    assert verdicts.bandwidth_bound(nbytes, slowed).ok
    no_latency = [n / 3e9 for n in nbytes]
    assert not verdicts.latency_bound(nbytes, no_latency).ok
    latency_only = [80e-6 for _ in nbytes]
    flat = verdicts.bandwidth_bound(nbytes, latency_only)
    assert not flat.ok and flat.claim.startswith("real clock:")
    assert verdicts.size_exponent(nbytes, no_latency, 0, -1) == pytest.approx(1)
    busy = MachineShare(cores=2, seconds=1.0, others_cores=1.5, machine_cores=2)
    assert not verdicts.latency_bound(nbytes, alpha_beta, machine=busy).judged


def test_the_ring_keeps_up_unless_it_is_much_slower():
    """A ring as fast as gloo's, or 1.8x (page faults), passes at 16 MiB; one that sends
    the whole tensor every step (twice the bytes on 2 ranks, so at least twice the time)
    fails; other sizes do not decide it."""
    sizes = [1 << 20, 16 << 20, 64 << 20]
    builtin = [1e-3, 15e-3, 60e-3]
    assert verdicts.ring_keeps_up(sizes, [2e-3, 27e-3, 150e-3], builtin).ok
    whole_tensor = verdicts.ring_keeps_up(sizes, [2e-3, 30e-3, 120e-3], builtin)
    assert not whole_tensor.ok and whole_tensor.claim.startswith("real clock:")
