"""The fabrics a simulated run stands for: presets, a both-ways rate, specs that round-trip."""

from __future__ import annotations

import pytest

from course_utils.core import machine, profiles
from course_utils.network import fabric, wire
from course_utils.ranks.launch import launch


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
    # 6 steps of 1,000 bytes: their bytes take twice as long (10 us, not 5), alpha does not
    steps = 6 * (50e-6 + 2 * 1000 * 8 / 800e6), 6 * (50e-6 + 1000 * 8 / 800e6)
    assert fabric.ring_allreduce_seconds(shared, 4000, 4) == pytest.approx(steps[0])
    assert fabric.ring_allreduce_seconds(full, 4000, 4) == pytest.approx(steps[1])
    assert fabric.REAL.both_ways_slowdown == 1.0


def test_a_link_names_its_clock():
    assert fabric.REAL.clock == "real" and fabric.PRESETS["10gbe"].clock == "simulated"


def test_an_unknown_link_lists_the_presets():
    with pytest.raises(ValueError, match="ib-ndr.*this-machine"):
        fabric.parse("infiniband")


def test_auto_is_real_only_where_every_rank_has_a_core_or_a_gpu(monkeypatch):
    monkeypatch.setattr("course_utils.core.machine.machine_cores", lambda: 4)
    monkeypatch.setenv("COURSE_PROFILE", "cpu")
    simulated = fabric.parse(profiles.simulated_link())
    assert fabric.resolve("auto", 4) is fabric.REAL
    assert fabric.resolve("AUTO", 5) == simulated and simulated.emulated
    assert fabric.resolve("auto", 8, backend="nccl") is fabric.REAL
    assert fabric.resolve("auto") == simulated  # no world size: a core each is not promised
    assert fabric.resolve(None, 2) is fabric.REAL  # the cpu profile's link is auto
    assert fabric.resolve("10gbe", 2) is fabric.PRESETS["10gbe"]  # a named link is kept
    with pytest.raises(ValueError, match="world size"):
        fabric.parse("auto")


def _link_inside_a_rank(spec: str) -> str:
    with wire.active(spec) as link:
        return link.spec


def test_auto_inside_a_rank_is_decided_for_its_process_group(monkeypatch):
    monkeypatch.setenv("COURSE_PROFILE", "cpu")
    cores = machine.machine_cores()
    on_two = launch(_link_inside_a_rank, 2, args=("auto",), backend="gloo")
    assert on_two == ["real"] * 2 if cores >= 2 else [profiles.simulated_link()] * 2
    over = cores + 1
    if over <= 8:
        got = launch(_link_inside_a_rank, over, args=("auto",), backend="gloo")
        assert set(got) == {fabric.parse(profiles.simulated_link()).spec}
