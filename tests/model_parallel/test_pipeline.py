"""Pipelines against their serial twin: same loss and gradients under every schedule,
timelines that keep the schedule's promises, and clear refusals of impossible set-ups."""

from __future__ import annotations

import pytest
import torch
from pipeline_timelines import assert_well_formed

from course_utils.model_parallel.pipeline import Work, mlp, serial_step, split
from course_utils.model_parallel.schedule_play import simulate
from course_utils.model_parallel.schedules import (
    bubble_formula,
    check_order,
    gpipe_order,
    one_f_one_b_order,
)
from course_utils.model_parallel.virtual_pipeline import Pacing, run_pipeline


def _batch(n: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, 40, generator=gen), torch.randint(0, 10, (n,), generator=gen)


# ------------------------------------------------------------- schedules, on paper


@pytest.mark.parametrize("stages, microbatches", [(2, 1), (3, 3), (4, 8), (5, 2)])
def test_simulated_steps_take_the_textbook_number_of_slots(stages, microbatches):
    naive = simulate("naive", stages, microbatches)
    assert naive.makespan() == 2 * stages * microbatches
    for name in ("gpipe", "1f1b"):
        timeline = simulate(name, stages, microbatches)
        assert timeline.makespan() == 2 * (microbatches + stages - 1)
        assert timeline.bubble_fraction() == pytest.approx(bubble_formula(stages, microbatches))


def test_blog_picture_on_paper_is_nine_slots_against_five():
    assert simulate("naive", 3, 3).span("F") == 9
    assert simulate("gpipe", 3, 3).span("F") == 5


def test_one_f_one_b_holds_at_most_stages_minus_rank_microbatches():
    assert simulate("gpipe", 4, 8).peak_activations == (8, 8, 8, 8)
    assert simulate("1f1b", 4, 8).peak_activations == (4, 3, 2, 1)
    assert simulate("1f1b", 4, 2).peak_activations == (2, 2, 2, 1)


def test_a_heavy_stage_sets_the_pace():
    balanced = simulate("gpipe", 4, 8)
    heavy = simulate("gpipe", 4, 8, stage_cost=(1, 2, 1, 1))
    assert heavy.makespan() == 2 * (5 + 7 * 2)
    assert heavy.makespan() / balanced.makespan() > 5 / 4


def test_orders_that_cannot_train_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="B0 comes before F0"):
        check_order([("B", 0), ("F", 0)], 1)
    with pytest.raises(ValueError, match="never runs B1"):
        check_order([("F", 0), ("F", 1), ("B", 0)], 2)
    with pytest.raises(ValueError, match="appears twice"):
        check_order([("F", 0), ("F", 0)], 1)
    with pytest.raises(ValueError, match="unknown schedule"):
        simulate("zigzag", 2, 2)


def test_mismatched_orders_deadlock_on_paper():
    orders = [one_f_one_b_order(0, 1, 2), gpipe_order(1, 2, 2)]  # stage 0 alternates too early
    with pytest.raises(ValueError, match="deadlock"):
        simulate("gpipe", 2, 2, orders=orders)


def test_split_keeps_every_block_in_order():
    model = mlp([40, 8, 8, 8, 8, 10])
    parts = split(model, 3)
    assert [len(p) for p in parts] == [2, 1, 2]
    flat = [m for p in parts for m in p]
    assert flat == list(model.children())
    with pytest.raises(ValueError, match="cannot cut a model of 5 blocks into 6 stages"):
        split(model, 6)


# ------------------------------------------------------------- real pipelines on ranks


@pytest.mark.parametrize("schedule", ["naive", "gpipe", "1f1b"])
@pytest.mark.parametrize("stages", [2, 3])
def test_pipeline_gradients_equal_the_unsplit_model(schedule, stages):
    model = mlp([40, 16, 16, 16, 10], seed=1)
    x, y = _batch(24)
    loss, grads = serial_step(model, x, y)
    run = run_pipeline(schedule, stages=stages, microbatches=4, work=Work(model, x, y))
    assert run.loss == pytest.approx(loss, abs=1e-6)
    assert len(run.grads) == len(grads)
    for mine, twin in zip(run.grads, grads, strict=True):
        assert torch.allclose(mine, twin, atol=1e-6)


def test_measured_activations_held_follow_the_schedule():
    gpipe = run_pipeline("gpipe", stages=4, microbatches=6).timeline
    f1b = run_pipeline("1f1b", stages=4, microbatches=6).timeline
    assert gpipe.peak_activations == (6, 6, 6, 6)
    assert f1b.peak_activations == (4, 3, 2, 1)


@pytest.mark.parametrize("schedule", ["naive", "gpipe", "1f1b"])
def test_slotted_timeline_keeps_the_schedule_s_order_and_dependencies(schedule):
    """Ops padded with sleep to a slot, timed on the wall clock: each op lasts at least its
    slot and the step at least the schedule's slots on paper (the sleeps guarantee that);
    how much longer a loaded machine makes it is not the code's doing, so only the order
    and the hand-offs are checked, which a stage that ran ahead of its input would break."""
    timeline = run_pipeline(schedule, stages=3, microbatches=3, pacing=Pacing(slot=0.03)).timeline
    assert_well_formed(timeline)
    assert all(e.end - e.start >= 0.03 for e in timeline.compute())
    paper = simulate(schedule, 3, 3)
    assert timeline.in_slots(timeline.makespan()) >= paper.makespan()
    assert timeline.in_slots(timeline.span("F")) >= paper.span("F")


def test_impossible_setups_are_refused_before_launching():
    with pytest.raises(ValueError, match="multiple of 4"):
        run_pipeline(stages=2, microbatches=4, work=Work(None, *_batch(10)))
    with pytest.raises(ValueError, match="into 3 stages"):
        run_pipeline(stages=3, microbatches=2, work=Work(mlp([40, 32, 10])))
    with pytest.raises(ValueError, match="stage_cost has 1 entries for 2 stages"):
        run_pipeline(stages=2, microbatches=2, pacing=Pacing(0.01, stage_cost=(1.0,)))
    with pytest.raises(ValueError, match="both x and y"):
        run_pipeline(stages=2, microbatches=2, work=Work(x=_batch(4)[0]))


@pytest.mark.parametrize("pacing", [{"backward_ratio": 2.0}, {"stage_cost": (1.0, 2.0)}])
def test_a_pacing_that_would_pad_nothing_is_refused(pacing):
    """Without a slot nothing is padded, so a backward ratio or stage costs alone once left
    the timeline as it was, and 06's exercise 3 showed no effect."""
    with pytest.raises(ValueError, match="without a slot nothing is padded"):
        Pacing(**pacing)


# ------------------------------------------------------------- charts and benchmark


def test_charts_take_plain_data_and_compute_their_titles():
    from matplotlib.figure import Figure

    from course_utils.model_parallel import charts as plots

    timelines = {"GPipe": simulate("gpipe", 3, 4), "1F1B": simulate("1f1b", 3, 4)}
    rows = {
        label: [{"microbatches": m, "measured": (1 + e) * bubble_formula(k, m), "stages": k,
                 "predicted": bubble_formula(k, m), "clock": clock} for m in (1, 2, 4)]
        for label, k, e, clock in (("real", 2, 0.1, "real"), ("simulated", 4, 0.0, "simulated"))
    }  # fmt: skip
    peaks = {k: tuple(n * 2**20 for n in t.peak_activations) for k, t in timelines.items()}
    figures = [
        plots.pipeline_timeline(timelines, note=plots.paced_note(0.04, 8)),
        plots.pipeline_timeline({"naive": simulate("naive", 3, 4), **timelines}),
        plots.bubble_vs_microbatches(rows, plots.bubble_note("emulated link")),
        plots.activations_held(peaks, {k: t.peak_activations for k, t in timelines.items()}, 4),
        plots.layer_traffic(
            {
                "every_layer": {"forward": [2, 2], "backward": [2, 2]},
                "column_row": {"forward": [0, 2], "backward": [2, 0]},
            },
            {"every_layer": 4, "column_row": 2},
        ),
    ]
    assert all(isinstance(f, Figure) for f in figures)
    titles = [f._suptitle.get_text() for f in figures[:2]] + [
        f.axes[0].get_title() for f in figures[3:]
    ]
    bubble_title = figures[2].axes[0].get_title()
    assert bubble_title.startswith("measured bubble against GPipe's prediction\nreal, K = 2: ")
    assert "within 0.05 of the step; simulated, K = 4: within 0.00 of the step" in bubble_title
    assert "real clock: wall time" in bubble_title
    # played out on paper: forwards only; the title's ratio is step_ratio's
    assert titles[0] == "1F1B's step takes 1.00x GPipe's in forwards (12.0 against 12.0)"
    assert titles[1] == "1F1B's step takes 0.50x naive's in forwards (12.0 against 24.0)"
    assert titles[2].startswith("M = 4: at most 3.0 MiB held on a stage with 1F1B, 4.0 MiB")
    assert titles[3] == "column_row: 2 collectives against 4, 50% of every_layer's wire bytes"
    assert "paced by sleep, an illustration" in plots.paced_note(0.04, 8)
    assert "simulated clock" in plots.real_note("emulated 1 Gbit/s link, α = 1 ms")


def _measured(timeline, seconds_per_slot: float, median_forward: float):
    """A timeline as a run on ranks gives it: in seconds, with its own median forward."""
    from course_utils.model_parallel.timeline import Event, Timeline

    scaled = [
        Event(e.stage, e.kind, e.microbatch, e.start * seconds_per_slot, e.end * seconds_per_slot)
        for e in timeline.events
    ]
    return Timeline(
        timeline.schedule, timeline.stages, timeline.microbatches, scaled, slot=median_forward,
        peak_activations=timeline.peak_activations, peak_bytes=(1,) * timeline.stages,
    )  # fmt: skip


def test_a_measured_timeline_title_gives_the_step_in_seconds_and_in_forwards():
    """06 once printed a 1.73x slowdown (seconds) under a chart titled 1.67x (forwards,
    each run's own median forward): the title now says both, from step_ratio, which the
    notebook prints too."""
    from course_utils.model_parallel import charts as plots

    balanced = _measured(simulate("gpipe", 4, 8), 0.1, 0.1)  # 22 slots: 2.2 s, 22 forwards
    heavy = _measured(simulate("gpipe", 4, 8), 0.173, 0.1038)  # 3.806 s, 36.7 forwards
    ratio = plots.step_ratio(balanced, heavy)
    assert ratio.seconds == pytest.approx(1.73) and ratio.forwards == pytest.approx(1.6667, 1e-3)
    title = plots.pipeline_timeline({"balanced": balanced, "heavy": heavy})._suptitle.get_text()
    assert title == (
        "heavy's step takes 1.73x balanced's in seconds (3.806 against 2.200 s)\n"
        "and 1.67x balanced's in forwards (36.7 against 22.0)"
    )
    # 1F1B a little slower in seconds, faster in forwards: the title does not call it a tie
    gpipe = _measured(simulate("gpipe", 4, 8), 0.0368, 0.035)
    f1b = _measured(simulate("1f1b", 4, 8), 0.0382, 0.046)
    title = plots.pipeline_timeline({"GPipe": gpipe, "1F1B": f1b})._suptitle.get_text()
    assert "1F1B's step takes 1.04x GPipe's in seconds" in title and "as long" not in title
    assert "0.79x GPipe's in forwards" in title


def test_bench_reports_measured_and_predicted_bubble_per_m_with_real_compute():
    import argparse

    from course_utils.model_parallel import bench

    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    args = parser.parse_args(
        ["--stages", "2", "--microbatches", "1,4", "--width", "256", "--micro-batch-size", "16",
         "--link", "1gbit"]
    )  # fmt: skip
    result = bench.run(args)
    assert result["paced"] is False and result["link"] == "1000mbit,1ms"
    assert [r["microbatches"] for r in result["rows"]] == [1, 4]
    assert [r["predicted"] for r in result["rows"]] == [0.5, 0.2]
    assert all(0 < r["measured"] < 1 for r in result["rows"])
    assert all(r["handoff_over_forward"] > 0 for r in result["rows"])
    assert all(r["step_over_played_out"] > 0 < r["backward_over_forward"] for r in result["rows"])
    assert result["stage_cost"] == [1, 1] and "played out" in result["target"]
    assert result["meets_target"] == all(r["meets_target"] for r in result["rows"])
    assert "15%" in result["target"]
    assert (result["why"] is None) == result["meets_target"]
    assert result["clock"] == "simulated" and result["judged"] is True


def test_bench_on_the_real_link_is_not_judged_when_the_machine_was_busy(monkeypatch):
    import argparse

    from course_utils.core.machine import MachineShare
    from course_utils.model_parallel import bench, bubble

    row = {"clock": "real", "microbatches": 2, "measured": 0.9, "predicted": 1 / 3,
           "from_stages_and_link": 0.3, "step_over_played_out": 2.0, "backward_over_forward": 2.0,
           "forward_seconds": 0.01, "handoff_seconds": 0.0}  # fmt: skip
    monkeypatch.setattr(bubble, "measure_bubble", lambda *a, **kw: [dict(row)])
    busy = MachineShare(cores=2, seconds=3.0, others_cores=1.0, machine_cores=2)
    monkeypatch.setattr(bench, "on_a_quiet_machine", lambda measure, cores: (measure(), busy))
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    args = ["--link", "real", "--stages", "2", "--microbatches", "2"]
    result = bench.run(parser.parse_args(args))
    assert result["clock"] == "real" and result["rows"][0]["clock"] == "real"
    assert result["judged"] is False and result["meets_target"] is None
    assert result["why"].startswith("not judged")


def test_bench_link_defaults_to_the_notebook_s_stage_to_stage_link(monkeypatch):
    import argparse

    from course_utils.model_parallel import bench, bubble
    from course_utils.network import wire

    seen = {}
    monkeypatch.setattr(bubble, "measure_bubble", lambda *a, **kw: seen.update(kw) or [])
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    result = bench.run(parser.parse_args(["--microbatches", "1"]))
    expected = wire.parse(bubble.HANDOFF_LINK).spec
    assert seen["link"] == expected == result["link"]


def test_bench_says_why_a_target_was_missed():
    from course_utils.model_parallel.bench import _why

    assert "hand-off takes up to 3.2 forwards" in _why(3.2, emulated=True, stages=4)
    assert "more stages than cores" in _why(0.0, emulated=False, stages=10_000)
    assert "op times differ" in _why(0.001, emulated=True, stages=4)
