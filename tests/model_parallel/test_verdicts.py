"""Every verdict of notebook 06 passes on a case with the effect and fails without it."""

from __future__ import annotations

import pytest

from course_utils.core.machine import MachineShare
from course_utils.model_parallel import verdicts as v
from course_utils.model_parallel.schedules import simulate


def test_the_paper_schedules_take_the_blogs_slots():
    """06 prints these beside the formulas (a count of the paper schedule: not a verdict)."""
    naive, piped = simulate("naive", 3, 3), simulate("gpipe", 3, 3)
    assert (round(naive.span("F")), round(piped.span("F"))) == (3 * 3, 3 + 3 - 1)
    assert (round(naive.makespan()), round(piped.makespan())) == (2 * 9, 2 * 5)


def test_matches_unsplit_fails_for_a_gradient_or_loss_that_differs():
    assert v.matches_unsplit({"gpipe": 1e-8}, {"gpipe": 2.3}, 2.3)
    assert not v.matches_unsplit({"gpipe": 1e-3}, {"gpipe": 2.3}, 2.3)
    assert not v.matches_unsplit({"gpipe": 1e-8}, {"gpipe": 2.4}, 2.3)


def _report(out=1e-8, grad=1e-8, stored=50, full=100):
    return {
        "output_max_diff": out,
        "grad_max_diff": grad,
        "params_stored": stored,
        "params_full": full,
    }


def test_tp_verdicts_fail_without_their_effect():
    assert v.tp_matches_unsplit([_report(), _report()])
    assert not v.tp_matches_unsplit([_report(), _report(grad=0.1)])
    assert v.tp_stores_a_share([_report(stored=52)], ranks=2)
    assert not v.tp_stores_a_share([_report(stored=100)], ranks=2)  # every rank keeps it all
    assert v.tp_talks_after_every_layer({"forward": [1, 1, 1], "backward": [1, 1, 1]})
    assert not v.tp_talks_after_every_layer({"forward": [0, 1, 0], "backward": [1, 0, 1]})


def test_pairing_verdicts_fail_when_pairing_saves_nothing():
    assert v.pairing_fewer_wire_bytes({"every_layer": 42624.0, "column_row": 22144.0})
    assert not v.pairing_fewer_wire_bytes({"every_layer": 42624.0, "column_row": 42624.0})
    assert v.pairing_halves_collectives({"every_layer": 8, "column_row": 4})
    assert not v.pairing_halves_collectives({"every_layer": 8, "column_row": 6})


def _rows(measured, m=(1, 2, 4, 8, 16), k=4, clock="simulated"):
    return [
        {
            "clock": clock,
            "microbatches": n,
            "measured": x,
            "predicted": (k - 1) / (n + k - 1),
            "from_stages_and_link": 1.04 * (k - 1) / (n + k - 1),
        }
        for n, x in zip(m, measured, strict=True)
    ]


def test_bubble_verdicts_fail_without_their_effect():
    good = _rows([0.751, 0.61, 0.438, 0.296, 0.169])
    assert v.bubble_matches(good) and v.bubble_shrinks(good)
    assert v.bubble_never_below_formula(good)
    assert not v.bubble_matches(_rows([0.751, 0.61, 0.438, 0.296, 0.30]))  # a stretched stage
    assert not v.bubble_shrinks(_rows([0.75, 0.75, 0.75, 0.75, 0.75]))  # M does not help
    assert not v.bubble_shrinks(_rows([0.75, 0.61, 0.438, 0.5, 0.3]))  # a rise past the noise
    assert v.bubble_shrinks(_rows([0.5, 0.34, 0.184, 0.184], m=(1, 2, 4, 8), k=2))  # noise
    assert not v.bubble_shrinks(_rows([0.5, 0.45, 0.4, 0.35], m=(1, 2, 4, 8), k=2))  # not half
    assert not v.bubble_never_below_formula(_rows([0.5, 0.6, 0.43, 0.28, 0.16]))
    assert v.bubble_never_below_formula(_rows([0.749, 0.599, 0.425, 0.266, 0.158]))  # noise
    assert not v.bubble_never_below_formula(_rows([0.75, 0.6, 0.43, 0.25, 0.16]))  # 8% below
    assert v.bubble_explained_by_stage_times(good)
    slow_link = _rows([0.9, 0.83, 0.75, 0.66, 0.6])  # hand-offs the prediction leaves out
    assert not v.bubble_explained_by_stage_times(slow_link)


def test_bubble_verdicts_name_their_clock_and_judge_only_up_to_the_m_asked(capsys):
    real = _rows([0.5, 0.34, 0.2, 0.112, 0.09], k=2, clock="real")  # M = 16: 53% over
    assert v.bubble_matches(real, up_to=8)
    assert "real clock:" in capsys.readouterr().out
    assert not v.bubble_matches(real)
    assert not v.bubble_matches(real, up_to=0)  # nothing judged is no evidence
    assert not v.bubble_matches(_rows([0.5, 0.34, 0.2, 0.2, 0.09], k=2, clock="real"), up_to=8)
    with pytest.raises(ValueError, match="different clocks"):
        v.bubble_shrinks(real[:2] + _rows([0.2], m=(4,), k=2))


def test_bubble_verdicts_on_the_real_clock_are_not_judged_on_a_busy_machine(capsys):
    busy = MachineShare(cores=2, seconds=5.0, others_cores=1.0, machine_cores=2)
    flat = _rows([0.5, 0.5, 0.5, 0.5, 0.5], k=2, clock="real")
    for check in (v.bubble_matches, v.bubble_shrinks, v.bubble_explained_by_stage_times,
                  v.bubble_never_below_formula):  # fmt: skip
        result = check(flat, machine=busy)
        assert not result.judged
    assert not v.same_step_time(1.3, 1.0, machine=busy).judged
    out = capsys.readouterr().out
    assert out.count("not judged") == 5 and "real clock: with real compute 1F1B's step" in out


def test_1f1b_verdicts_fail_when_it_holds_as_much_as_gpipe():
    mb = 4 << 20
    gpipe, f1b = (8, 8, 8, 8), (4, 3, 2, 1)
    assert v.same_step_time(1.02, 1.0)
    assert not v.same_step_time(1.3, 1.0)
    quiet = MachineShare(cores=2, seconds=3.0, others_cores=0.1, machine_cores=2)
    assert v.same_step_time(1.02, 1.0, machine=quiet)
    assert not v.same_step_time(1.3, 1.0, machine=quiet)
    assert all(v.f1b_holds_fewer(gpipe, f1b, 8))
    assert [bool(x) for x in v.f1b_holds_fewer(gpipe, gpipe, 8)] == [True, False]
    assert not v.f1b_holds_fewer(f1b, f1b, 8)[0]
    gpipe_bytes = tuple(8 * mb for _ in range(4))
    assert v.f1b_holds_fewer_bytes(gpipe_bytes, tuple(n * mb for n in f1b), 8)
    assert not v.f1b_holds_fewer_bytes(gpipe_bytes, gpipe_bytes, 8)
    assert not v.f1b_holds_fewer_bytes(gpipe_bytes, (0, 0, 0, 0), 8)  # nothing counted
    assert v.f1b_holds_fewer_bytes((2 * mb,) * 4, (2 * mb, 2 * mb, 2 * mb, mb), 2)  # M < K


def test_unbalanced_verdicts_fail_for_a_balanced_pipeline():
    times = [(0.05, 0.1), (0.1, 0.2), (0.05, 0.1), (0.05, 0.1)]
    assert v.heavy_stage_is_heavier(times, heavy=1, factor=2)
    assert not v.heavy_stage_is_heavier([(0.05, 0.1)] * 4, heavy=1, factor=2)
    assert v.step_as_predicted(2.9, 2.85)
    assert not v.step_as_predicted(3.5, 2.85)
    assert v.slows_more_than_the_work(1.7, 1.25)
    assert not v.slows_more_than_the_work(1.25, 1.25)  # only the extra work: no waiting
    assert v.waits_for_the_heavy_stage(0.47, 0.28)
    assert not v.waits_for_the_heavy_stage(0.29, 0.28)
