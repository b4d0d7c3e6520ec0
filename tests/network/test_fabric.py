"""The fabrics a simulated run stands for: presets, a both-ways rate, specs that round-trip."""

from __future__ import annotations

import pytest

from course_utils.network import fabric


def test_presets_are_named_and_ordered_by_bandwidth():
    rates = [link.bits_per_second for link in fabric.PRESETS.values()]
    assert rates == sorted(rates) and len(rates) == 5
    for name, link in fabric.PRESETS.items():
        assert fabric.parse(name) is link and link.spec == name and name in link.label
    assert fabric.parse("NVLink4").beta == pytest.approx(8 / 3.6e12)


def test_a_both_ways_rate_slows_a_ring_and_round_trips_through_its_spec():
    shared = fabric.parse("800mbit,50us,both-ways=400mbit")
    assert shared.both_ways_slowdown == pytest.approx(2.0)
    assert fabric.parse(shared.spec) == shared and shared.spec.endswith("50us,both-ways=400mbit")
    assert "400 Mbit/s each way when both are busy" in shared.label and "50 µs" in shared.label
    full = fabric.parse("800mbit,50us")
    assert full.both_ways_slowdown == 1.0
    assert fabric.ring_allreduce_seconds(shared, 4000, 4) == pytest.approx(
        2 * fabric.ring_allreduce_seconds(full, 4000, 4)
    )
    assert fabric.REAL.both_ways_slowdown == 1.0


def test_an_unknown_link_lists_the_presets():
    with pytest.raises(ValueError, match="ib-ndr.*this-machine"):
        fabric.parse("infiniband")
