"""The verdicts on schedules past 1F1B pass with their effect and fail without it."""

from __future__ import annotations

import pytest

from course_utils.core.machine import MachineShare
from course_utils.model_parallel import verdicts as v


def _row(schedule, measured, played=None, clock="simulated", m=8):
    return {
        "schedule": schedule,
        "clock": clock,
        "stages": 2,
        "microbatches": m,
        "measured": measured,
        "from_stages_and_link": played or measured,
    }


def test_schedule_bubble_verdicts_fail_without_their_effect(capsys):
    rows = [_row("1f1b", 0.12), _row("interleaved", 0.07, 0.075), _row("zb-h1", 0.05, 0.048)]
    assert v.bubble_below(rows, "interleaved") and v.bubble_below(rows, "zb-h1")
    assert "simulated clock:" in capsys.readouterr().out
    no_gain = [_row("1f1b", 0.12), _row("interleaved", 0.121), _row("zb-h1", 0.10)]
    assert not v.bubble_below(no_gain, "interleaved") and not v.bubble_below(no_gain, "zb-h1")
    both = ("interleaved", "zb-h1")
    assert v.bubble_below(rows, both) and "each below 1f1b's" in repr(v.bubble_below(rows, both))
    one_gains = [r for r in rows if r["schedule"] != "zb-h1"] + [
        r for r in no_gain if r["schedule"] == "zb-h1"
    ]
    assert not v.bubble_below(one_gains, both)
    other_m = [_row("1f1b", 0.12), _row("interleaved", 0.05, m=16)]  # not the same M
    assert not v.bubble_below(other_m, "interleaved")
    with pytest.raises(ValueError, match="different clocks"):
        v.bubble_below([_row("1f1b", 0.1), _row("zb-h1", 0.05, clock="real")], "zb-h1")
    with pytest.raises(ValueError, match="no row for 'interleaved'"):
        v.bubble_below([_row("1f1b", 0.1)], "interleaved")


def test_schedule_verdicts_on_a_busy_machine_are_not_judged(capsys):
    busy = MachineShare(cores=2, seconds=3.0, others_cores=1.0, machine_cores=2)
    rows = [_row("1f1b", 0.2, clock="real"), _row("zb-h1", 0.1, clock="real")]
    assert not v.bubble_below(rows, "zb-h1", machine=busy).judged
    assert capsys.readouterr().out.count("not judged") == 1


def test_memory_training_and_order_verdicts_fail_without_their_effect():
    assert v.zb_holds_as_much_as_1f1b((4, 4, 4, 4), (4, 3, 2, 1))
    assert not v.zb_holds_as_much_as_1f1b((5, 5, 4, 4), (4, 3, 2, 1))  # W kept too long
    assert v.trains_like_one_process({"zb-h1": 1e-8, "torch zb-h1": 2e-8})
    assert not v.trains_like_one_process({"zb-h1": 1e-3})  # a W added twice
    assert not v.trains_like_one_process({})
    assert not v.trains_like_one_process({"zb-h1": 1e-8, "torch zb-h1": float("inf")})  # failed
    assert v.orders_match_pytorch({"interleaved": [], "gpipe": []})
    assert not v.orders_match_pytorch({"interleaved": [], "gpipe": ["rank 0, op 4: ..."]})
    assert not v.orders_match_pytorch({})


def test_the_bubble_below_verdict_fails_for_a_schedule_that_gains_nothing():
    """06's measurement on the simulated link, at the notebook's sizes: GPipe, whose bubble
    on paper is 1F1B's, must not pass as below it (it came out 0.005 below to 0.020 above
    in 8 runs, two at a time on 2 cores); interleaving must. Each schedule keeps its least
    disturbed of 10 steps: with 5, interleaving came out within 0.03 of 1F1B once under the
    unit tests' load (a fresh clone's CI, 2026-11-30), and GPipe 0.039 below it in 1 of 4
    quiet runs, where interleaving is 0.07-0.12 below and GPipe about level."""
    from course_utils.model_parallel import bubble

    rows = bubble.measure_schedules(
        ["1f1b", "gpipe", "interleaved"], 2, 4, width=1024, micro_batch_size=128, repeats=10
    )
    assert not v.bubble_below(rows, "gpipe").ok
    assert v.bubble_below(rows, "interleaved").ok
