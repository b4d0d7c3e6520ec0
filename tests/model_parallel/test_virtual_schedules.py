"""Interleaved 1F1B and ZB-H1 on paper: their bubbles against the formulas, the ops PyTorch
runs for the same K, M, v, and the checker's refusals of schedules that could not train."""

from __future__ import annotations

import pytest

from course_utils.model_parallel import torch_pipelining, verdicts
from course_utils.model_parallel.schedule_check import (
    check_handoffs,
    check_orders,
    expected_handoffs,
)
from course_utils.model_parallel.schedule_play import (
    Costs,
    handoff_seconds,
    play_out,
    posting_seconds,
    simulate,
)
from course_utils.model_parallel.schedules import (
    NAMES,
    bubble_formula,
    handoffs_per_step,
    interleaved_bubble_formula,
    interleaved_order,
    plan,
    zb_h1_bubble_formula,
    zb_h1_order,
)
from course_utils.model_parallel.timeline import Event, Timeline
from course_utils.model_parallel.torch_pipelining import order_differences, unexplained_differences

PIPES = [(2, 2), (2, 4), (2, 16), (4, 8), (4, 16)]


@pytest.mark.parametrize("stages, microbatches", PIPES)
def test_played_out_bubbles_are_the_formulas(stages, microbatches):
    k, m = stages, microbatches
    for name in ("gpipe", "1f1b"):
        tl = play_out(name, k, m)
        assert tl.makespan() == simulate(name, k, m, costs=Costs(backward=2.0)).makespan()
        assert tl.bubble_fraction() == pytest.approx(bubble_formula(k, m))
    for v in (2, 3):
        tl = play_out("interleaved", k, m, chunks=v)
        assert tl.bubble_fraction() == pytest.approx(interleaved_bubble_formula(k, m, v))
    assert play_out("zb-h1", k, m).bubble_fraction() == pytest.approx(zb_h1_bubble_formula(k, m))


def test_interleaving_and_splitting_the_backward_shrink_the_bubble_of_1f1b():
    bubbles = {n: play_out(n, 2, 16).bubble_fraction() for n in NAMES}
    assert bubbles["interleaved"] == pytest.approx(1 / 33)  # (K-1)/(v·M+K-1)
    assert bubbles["zb-h1"] < bubbles["interleaved"] < bubbles["1f1b"] == bubbles["gpipe"]
    v4 = play_out("interleaved", 4, 8, chunks=4).bubble_fraction()
    assert v4 < play_out("interleaved", 4, 8, chunks=2).bubble_fraction()


def test_interleaving_hands_off_more_and_zb_h1_holds_1f1b_s_peak():
    assert handoffs_per_step(2, 8, 1) == 16 and handoffs_per_step(2, 8, 2) == 48
    assert handoffs_per_step(4, 8, 2) / handoffs_per_step(4, 8, 1) == pytest.approx(7 / 3)
    assert len(expected_handoffs(4, 8, 2)) == handoffs_per_step(4, 8, 2)
    assert play_out("zb-h1", 4, 8).peak_activations == (4, 4, 4, 4)
    assert play_out("1f1b", 4, 8).peak_activations == (4, 3, 2, 1)
    assert play_out("interleaved", 2, 8).peak_activations == (5, 3)  # chunks, half a stage each


@pytest.mark.parametrize("stages, microbatches", [(2, 1), (2, 4), (3, 6), (4, 8), (4, 16)])
def test_interleaved_and_zb_h1_run_pytorch_s_ops_in_pytorch_s_order(stages, microbatches):
    for chunks in (1, 2, 3):
        assert order_differences("interleaved", stages, microbatches, chunks) == []
    assert order_differences("zb-h1", stages, microbatches) == []


def test_gpipe_and_1f1b_differ_from_pytorch_only_where_known():
    """GPipe: PyTorch runs the backwards oldest first, the course newest first (both GPipe).
    1F1B: PyTorch's pipeline_order numbers the last rank's forwards from 1 (a picture only)."""
    gpipe = order_differences("gpipe", 2, 4)
    assert len(gpipe) == 2 and all("('B', 3, 0)" in line for line in gpipe)
    f1b = order_differences("1f1b", 4, 8)
    assert len(f1b) == 1 and f1b[0].startswith("rank 3, op 0")
    for name in ("gpipe", "1f1b"):
        for stages, microbatches in ((2, 4), (3, 5), (4, 8)):
            assert unexplained_differences(name, stages, microbatches) == []


def test_a_difference_beside_the_known_one_is_left_unexplained(monkeypatch):
    """GPipe's known difference explains oldest-first backwards, and nothing more: PyTorch
    running a forward late, or not reordering the backwards any more, is left in."""
    real = torch_pipelining.torch_orders

    def late_forward(*args):
        orders = real(*args)
        orders[0][1], orders[0][2] = orders[0][2], orders[0][1]
        return orders

    monkeypatch.setattr(torch_pipelining, "torch_orders", late_forward)
    late = {"gpipe": unexplained_differences("gpipe", 2, 4)}
    assert late["gpipe"] == [
        "rank 0, op 1: the course runs "
        "[('F', 1, 0), ('F', 2, 0), ('F', 3, 0)], PyTorch [('F', 2, 0), ('F', 1, 0), ('F', 3, 0)]"
    ]
    assert not verdicts.orders_match_pytorch(late)  # and 06's verdict prints ✗
    monkeypatch.setattr(torch_pipelining, "torch_orders", lambda s, *a: plan(s).orders(*a[:2]))
    assert len(unexplained_differences("gpipe", 2, 4)) == 2  # the known one no longer holds


def test_zb_h1_delays_rank_r_s_weight_gradients_by_r():
    assert zb_h1_order(0, 2, 3) == [
        ("F", 0, 0),
        ("F", 1, 0),
        ("B", 0, 0),
        ("W", 0, 0),
        ("F", 2, 0),
        ("B", 1, 0),
        ("W", 1, 0),
        ("B", 2, 0),
        ("W", 2, 0),
    ]
    assert zb_h1_order(1, 2, 3)[:5] == [
        ("F", 0, 0),
        ("B", 0, 0),
        ("F", 1, 0),
        ("B", 1, 0),
        ("W", 0, 0),
    ]


def _broken(orders, k=2, m=2, v=2):
    with pytest.raises(ValueError) as error:
        check_orders(orders, k, m, v)
    return str(error.value)


def test_broken_schedules_are_refused_with_the_reason():
    good = plan("interleaved").orders(2, 2)
    assert check_orders(good, 2, 2, 2)
    swapped = [list(good[0]), good[1]]
    first = swapped[0].index(("F", 0, 1))
    swapped[0][0], swapped[0][first] = swapped[0][first], swapped[0][0]  # chunk 1 before 0
    assert "virtual stages out of order: F0 of chunk 1 runs before F0" in _broken(swapped)
    zb = plan("zb-h1").orders(2, 2)
    w_first = [[("W", 0, 0), *(op for op in zb[0] if op != ("W", 0, 0))], zb[1]]
    assert "W0 comes before B0" in _broken(w_first, v=1)
    twice = [zb[0] + [("F", 1, 0)], zb[1]]
    assert "F1 appears twice: its result would be handed on twice" in _broken(twice, v=1)
    mixed = [zb[0], plan("1f1b").orders(2, 2)[1]]
    assert "all or none" in _broken(mixed, v=1)
    assert "never runs W1" in _broken([[op for op in zb[0] if op != ("W", 1, 0)], zb[1]], v=1)
    with pytest.raises(ValueError, match="deadlock"):
        play_out("interleaved", 2, 2, orders=[good[1], good[0]])  # each rank waits on the other
    with pytest.raises(ValueError, match="multiple of M // K"):
        interleaved_order(0, 3, 16)


def test_a_hand_off_sent_twice_or_never_is_refused():
    sent = [(g % 2, (g + 1 if k == "F" else g - 1) % 2) for k, _, g in expected_handoffs(2, 2, 2)]
    assert len(sent) == 12 and sent.count((0, 1)) == 6
    check_handoffs(sent, 2, 2, 2)
    with pytest.raises(ValueError, match="rank 0 sent 7 hand-offs to rank 1 in one step; the sch"):
        check_handoffs([*sent, (0, 1)], 2, 2, 2)
    fewer = list(sent)
    fewer.remove((1, 0))
    with pytest.raises(ValueError, match="rank 1 sent 5 hand-offs to rank 0"):
        check_handoffs(fewer, 2, 2, 2)
    with pytest.raises(ValueError, match="rank 0 sent 1 hand-offs to rank 0"):
        check_handoffs([*sent, (0, 0)], 2, 2, 2)


def test_play_out_replays_each_measured_op_and_charges_each_hand_off():
    tl = play_out("interleaved", 2, 4)
    again = play_out("interleaved", 2, 4, per_op=tl.op_durations())
    assert again.events == tl.events
    slow = play_out("interleaved", 2, 4, costs=Costs(handoff=0.25))
    assert slow.makespan() > tl.makespan() and slow.bubble_fraction() > tl.bubble_fraction()
    with pytest.raises(ValueError, match="no duration"):
        play_out("zb-h1", 2, 2, per_op={})


def test_the_time_spent_handing_a_result_on_keeps_the_rank_busy_but_not_the_result():
    """Rank 0 spends 0.3 s after its F0 handing it on (a measured step counts that as busy):
    played out with it, rank 1 still gets F0 at 1.0 and the bubble is the measured one;
    played out without it, those 0.3 s would count as idle."""
    events = [
        Event(0, "F", 0, 0.0, 1.0),
        Event(0, "wait", -1, 1.3, 2.5),  # 1.0 to 1.3: sending F0
        Event(0, "B", 0, 2.5, 3.5),
        Event(0, "W", 0, 3.5, 4.5),
        Event(1, "wait", -1, 0.0, 1.0),
        Event(1, "F", 0, 1.0, 2.0),
        Event(1, "B", 0, 2.0, 2.5),
        Event(1, "W", 0, 2.5, 3.0),
    ]
    measured = Timeline("zb-h1", 2, 1, events)
    posting = posting_seconds(measured)
    assert posting.pop((0, "F", 0, 0)) == pytest.approx(0.3)
    assert set(posting.values()) == {0.0}  # the last ops have none: nothing follows them
    played = play_out(
        "zb-h1", 2, 1, per_op=measured.op_durations(), posting=posting_seconds(measured)
    )
    assert [(e.stage, e.kind, e.start) for e in played.events if e.kind == "F"] == [
        (0, "F", 0.0),
        (1, "F", 1.0),
    ]
    assert played.makespan() == measured.makespan() == 4.5
    assert played.bubble_fraction() == pytest.approx(measured.bubble_fraction())  # 3.7 / 9
    without = play_out("zb-h1", 2, 1, per_op=measured.op_durations())
    assert without.bubble_fraction() == pytest.approx(4.0 / 9)


def test_handoff_seconds_follow_the_piece_that_sent_it():
    events = [
        Event(0, "F", 0, 0.0, 1.0, chunk=0),
        Event(1, "wait", -1, 0.0, 1.5),  # rank 1 waits for piece 0's F0: 0.5 s
        Event(1, "F", 0, 1.5, 2.0, chunk=0),
        Event(0, "wait", -1, 1.0, 2.25),  # rank 0's chunk 1 waits for piece 1: 0.25 s
        Event(0, "F", 0, 2.25, 3.0, chunk=1),
    ]
    events.sort(key=lambda e: (e.stage, e.start))
    assert sorted(handoff_seconds(Timeline("interleaved", 2, 1, events), 2)) == [0.25, 0.5]


def test_schedule_charts_take_plain_data_and_compute_their_titles():
    from course_utils.model_parallel import schedule_charts as charts

    timelines = {n: play_out(n, 2, 4) for n in NAMES}
    fig = charts.schedule_timelines(timelines, note="on paper: F = B = W")
    assert fig._suptitle.get_text() == (
        "K = 2, M = 4: idle share of the step, gpipe 20%, 1f1b 20%, interleaved 11%, zb-h1 8%"
    )
    rows = [
        {
            "schedule": n,
            "stages": 2,
            "microbatches": 4,
            "clock": "simulated",
            "measured": b,
            "from_stages_and_link": b,
            "predicted": b,
        }
        for n, b in (("1f1b", 0.2), ("zb-h1", 0.08))
    ]
    title = charts.bubble_by_schedule(rows).axes[0].get_title()
    assert title == "K = 2, M = 4, simulated clock: zb-h1 idles least, 8.0% of the step"


def test_only_results_that_leave_the_rank_take_time_on_its_link():
    """K = 2, M = 1, a hand-off of 5 slots: F0, over, F0 and B0 on rank 1, back, B0. The
    last rank's forward hands nothing on (the loss is there): were it charged on rank 1's
    link, B0's gradient would leave 5 slots later."""
    tl = play_out("1f1b", 2, 1, costs=Costs(weight=0.0, handoff=5.0))
    assert tl.makespan() == 1 + 5 + 1 + 1 + 5 + 1
    assert simulate("1f1b", 2, 1, costs=Costs(handoff=5.0)).events == tl.events
