"""Each timing verdict of notebook 05 passes on its effect and fails (✗) where it is absent."""

from __future__ import annotations

import pytest

from course_utils.allreduce import verdicts


def test_model_agreement_fails_when_one_point_is_off():
    predicted = {2: {"ring": [1.0, 2.0]}, 8: {"ring": [1.5, 3.0]}}
    good = {2: {"ring": [1.1, 2.1]}, 8: {"ring": [1.6, 2.9]}}
    assert verdicts.agrees_with_model(good, predicted).ok
    scheduled = {2: {"ring": [1.1, 2.1]}, 8: {"ring": [4.0, 2.9]}}  # cores, not the link
    assert not verdicts.agrees_with_model(scheduled, predicted).ok


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
    assert verdicts.reaches_link_bandwidth(11.5e6, 12.5e6).ok
    assert not verdicts.reaches_link_bandwidth(3e6, 12.5e6).ok


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
