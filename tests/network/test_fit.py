"""this-machine's terms: each fitted from runs of its own, and the link they make."""

from __future__ import annotations

import pytest

from course_utils.network import fabric
from course_utils.network import fit as network_fit


def test_link_terms_are_measured_on_two_real_ranks():
    sizes = (1 << 10, 1 << 14)
    measured = network_fit.measure_link_terms(sizes, repeats=2)
    assert set(measured) == {"one_way", "both_ways", "add"}
    assert all(len(v) == 2 and all(t > 0 for t in v) for v in measured.values())


def test_fitted_terms_come_from_their_own_measurements():
    sizes = (1 << 10, 1 << 20, 1 << 24)
    measured = {
        "one_way": [2e-5 + n * 2.5e-10 for n in sizes],  # 4 GB/s one way
        "both_ways": [3e-5 + n * 5e-10 for n in sizes],  # 2 GB/s each way at once
        "add": [n * 1e-10 for n in sizes],
    }
    terms = network_fit.fit_link_terms(sizes, measured)
    assert terms.one_way.alpha == pytest.approx(2e-5)
    assert terms.one_way.beta == pytest.approx(2.5e-10)
    assert terms.both_ways.bandwidth_gb_s == pytest.approx(2.0)
    assert terms.gamma == pytest.approx(1e-10)
    link = terms.link()
    assert link.alpha == pytest.approx(2e-5) and link.beta == pytest.approx(2.5e-10)
    assert link.both_ways_slowdown == pytest.approx(2.0)
    assert link.name == "this-machine" and "this-machine" in link.label
    assert terms.as_row()["gamma_seconds_per_gb"] == pytest.approx(0.1)


def test_both_ways_never_faster_than_one_way():
    terms = network_fit.LinkTerms(
        one_way=network_fit.AlphaBeta(1e-5, 2e-9),
        both_ways=network_fit.AlphaBeta(1e-5, 1e-9),  # a noisy fit: faster both ways
        gamma=0.0,
    )
    assert terms.link().both_ways_slowdown == 1.0


def test_this_machine_is_fitted_once_and_named_by_parse(monkeypatch):
    calls = []

    def measured(nbytes, repeats=5):
        calls.append(nbytes)
        return {
            "one_way": [1e-5 + n * 1e-9 for n in nbytes],
            "both_ways": [1e-5 + n * 1.5e-9 for n in nbytes],
            "add": [n * 1e-10 for n in nbytes],
        }

    monkeypatch.setattr(network_fit, "measure_link_terms", measured)
    monkeypatch.setattr(network_fit, "_FITTED", [])
    link = fabric.parse("this-machine")
    assert fabric.parse("this-machine") == link and len(calls) == 1
    assert link.beta == pytest.approx(1e-9) and link.both_ways_slowdown == pytest.approx(1.5)
