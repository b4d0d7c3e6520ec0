"""The two-node verdicts, the profiler's overlap, the layout prediction and strong scaling,
each fed a case where its effect is absent."""

from __future__ import annotations

import math

import pytest
import torch

from course_utils.ddp import charts, scaling, scaling_charts, trace, verdicts
from course_utils.ddp.torchrun_train import CountingLoader, parameter_digest
from course_utils.network import wire
from course_utils.ranks.examples import spread_over_nodes

SLOW = wire.parse("100mbit,5ms")


def node(rank, node_rank, agent, digest=(1.0, 2.0, 3.0), samples=8.0):
    return {
        "rank": rank, "node_rank": node_rank, "local_rank": 0, "parent_pid": agent,
        "parameter_digest": list(digest), "samples_per_update": samples,
    }  # fmt: skip


def test_two_node_verdicts_pass_on_a_real_two_agent_job():
    reports = [node(0, 0, 100), node(1, 1, 200)]
    assert spread_over_nodes(reports, nnodes=2, per_node=1).ok
    assert verdicts.same_parameters(reports).ok
    assert verdicts.samples_per_update(reports) == 2 * 8


def test_one_agent_is_not_two_nodes():
    one_agent = [node(0, 0, 100), node(1, 0, 100)]
    assert not spread_over_nodes(one_agent, nnodes=2, per_node=1).ok


def test_differing_parameters_fail_the_same_model_verdict():
    apart = [node(0, 0, 100), node(1, 1, 200, digest=(1.0, 2.0, 3.001))]
    assert verdicts.digest_spread(apart) == pytest.approx(0.001 / 3.001)
    assert not verdicts.same_parameters(apart).ok
    assert not verdicts.same_parameters([node(0, 0, 100)]).ok  # nothing to compare


def test_the_samples_per_update_are_summed_over_the_ranks():
    short = [node(0, 0, 100), node(1, 1, 200, samples=4.0)]
    assert verdicts.samples_per_update(short) == 12


def test_parameter_digest_sees_one_changed_weight():
    model = torch.nn.Linear(4, 3)
    before = parameter_digest(model)
    assert parameter_digest(model) == before
    with torch.no_grad():
        model.weight[1, 2] += 1e-3
    assert parameter_digest(model) != before


def test_counting_loader_counts_what_it_yields():
    batches = [(torch.zeros(5, 2), torch.zeros(5)), (torch.zeros(3, 2), torch.zeros(3))]
    loader = CountingLoader(batches)
    assert len(loader) == 2 and len(list(loader)) == 2 and loader.samples == 8


def test_interval_overlap():
    assert trace.merged([(3, 4), (0, 2), (1, 2.5)]) == [(0, 2.5), (3, 4)]
    # 1.5 s of both, out of 3 s of communication and 2.5 s of backward: the shorter
    assert trace.overlap_fraction([(0, 1), (2, 4)], [(0.5, 3)]) == pytest.approx(1.5 / 2.5)
    # a fast backward pass inside a long queue of all-reduces is wholly overlapped
    assert trace.overlap_fraction([(0, 10)], [(1, 2)]) == 1.0
    assert trace.overlap_fraction([(5, 6)], [(0, 1), (2, 3)]) == 0
    assert trace.overlap_fraction([], [(0, 1)]) == 0 == trace.overlap_fraction([(0, 1)], [])


def test_profiler_sees_ddp_overlap_and_none_after_backward():
    kw = dict(layers=4, width=256, batch=128, link="1gbit,1ms")
    ddp_step = trace.profiled_step(True, trace_dir="", **kw)
    after = trace.profiled_step(False, **kw)
    assert all(t["allreduce"] and t["backward"] for t in ddp_step + after)
    assert ddp_step[0]["trace"].endswith(trace.TRACE_NAME)
    assert max(t["overlap"] for t in after) == 0
    slow = wire.parse(kw["link"])
    assert not verdicts.communication_overlaps_backward(after, slow).ok  # effect absent
    assert verdicts.communication_overlaps_backward([{"overlap": 0.6}, {"overlap": 0.4}], slow).ok
    assert verdicts.none_overlaps_after_backward(after, slow).ok
    assert not verdicts.none_overlaps_after_backward([{"overlap": 0.0}, {"overlap": 0.3}], slow).ok
    assert "simulated link" in repr(verdicts.none_overlaps_after_backward(after, slow))
    assert repr(verdicts.none_overlaps_after_backward(after, wire.REAL)).startswith("✓ real clock")
    assert "DDP" in charts.profiled_title({"DDP": ddp_step, "after": after}, wire.parse(kw["link"]))
    assert charts.profiled_timeline({"DDP": ddp_step, "after": after}, "t") is not None


def test_compute_fit_recovers_a_line():
    assert scaling.fit_compute([1, 2, 4], [1.5, 2.0, 3.0]) == pytest.approx((1.0, 0.5))
    assert scaling.fit_compute([8], [4.0]) == pytest.approx((0.0, 0.5))


def test_predicted_step_is_compute_plus_the_ring():
    compute, comm = scaling.predicted_step((0.001, 1e-5), 100, 4, SLOW, 40_000)
    assert compute == pytest.approx(0.002)
    assert comm == pytest.approx(wire.ring_allreduce_seconds(SLOW, 40_000, 4))
    assert scaling.predicted_step((0.001, 1e-5), 100, 1, SLOW, 40_000)[1] == 0


def points(batch, steps_ms):
    return [
        scaling.ScalingPoint(n, batch, compute / 1000, comm / 1000)
        for n, (compute, comm) in steps_ms.items()
    ]


def test_crossover_verdict_needs_wins_above_and_losses_below():
    small = points(256, {1: (10, 0), 2: (5, 20)})
    large = points(4096, {1: (100, 0), 2: (50, 20)})
    assert scaling.crossover({256: small, 4096: large}) == pytest.approx((0.1, 0.01))
    assert scaling.two_ranks_win_above({256: small, 4096: large}, SLOW).ok
    assert not scaling.two_ranks_win_above({256: small}, SLOW).ok  # DDP never wins: no crossover
    assert not scaling.two_ranks_win_above({4096: large}, SLOW).ok  # never loses: none seen
    odd = points(512, {1: (200, 0), 2: (100, 150)})  # more compute, yet it loses
    assert not scaling.two_ranks_win_above({256: small, 4096: large, 512: odd}, SLOW).ok


def test_strong_scaling_measures_compute_and_the_link():
    run = scaling.strong_scaling((1, 2), 256, width=32, steps=1, link=SLOW)
    assert [p.world_size for p in run] == [1, 2]
    assert run[0].communication == 0.0 and run[1].communication > SLOW.alpha
    assert all(p.compute > 0 for p in run)
    measured, predicted, lecture = scaling.layouts(
        run, SLOW, scaling.gradient_bytes(32), ((1024, 1), (16, 64))
    )
    assert list(measured) == list(predicted) == ["2 x 128"]
    assert sum(lecture["1024 x 1"]) > sum(lecture["16 x 64"])
    assert math.isfinite(scaling.speedup(run)[2])
    assert "Global batch 256" in scaling_charts.strong_scaling_title({256: run})
    assert scaling_charts.strong_scaling_chart({256: run}, SLOW.label) is not None
    assert scaling_charts.layout_prediction(measured, predicted, lecture, SLOW.label)


def test_strong_scaling_takes_the_slowest_compute_and_the_slowest_all_reduce(monkeypatch):
    per_rank = [(0.002, 0.005), (0.003, 0.001)]  # rank 1 computes longest, rank 0 sends longest
    monkeypatch.setattr(scaling, "launch", lambda *args, **kwargs: per_rank)
    (point,) = scaling.strong_scaling((2,), 256, link=SLOW)
    assert (point.compute, point.communication) == (0.003, 0.005)


def test_strong_scaling_title_calls_a_tie_a_tie():
    """04 once titled 1.33x against 1.33x '4 ranks are fastest'."""
    tie = points(32768, {1: (120, 0), 2: (60, 30), 4: (30, 60)})  # 1.33x and 1.33x
    title = scaling_charts.strong_scaling_title({32768: tie})
    assert title.startswith("Global batch 32768: 2 and 4 ranks tie within 2%, up to 1.33x")
    clear = points(32768, {1: (120, 0), 2: (60, 30), 4: (30, 40)})  # 1.33x and 1.71x
    title = scaling_charts.strong_scaling_title({32768: clear})
    assert title.startswith("Global batch 32768: 4 ranks are fastest, 1.71x one process")
    assert "tie" in scaling_charts.strong_scaling_title({32768: clear}, tie=0.3)


def test_chart_titles_follow_the_numbers():
    curves = {"DDP": [1.0, 0.5], "one, 32": [1.0, 0.52], "one, 8": [2.0, 1.5]}
    assert "closest to one, 32" in charts.comparison_title(curves, "DDP")
    curves["one, 8"] = [1.0, 0.5]
    assert "closest to one, 8" in charts.comparison_title(curves, "DDP")
    timeline = {"layers": [("layer 2", 0.001), ("layer 1", 0.002)], "allreduces": [(0.0015,)]}
    assert charts.overlap_title(timeline).startswith("1 of 1")
    timeline["allreduces"] = [(0.003,)]
    assert charts.overlap_title(timeline).startswith("0 of 1")


def test_lr_scaling_title_counts_the_wins_of_the_scaled_lr():
    from course_utils.ddp.experiments import ScalingRow

    rows = [ScalingRow(8, 0.05, s, 0.5, 1.0) for s in (False, True)]
    rows += [ScalingRow(32, 0.05, False, 0.3, 1.0), ScalingRow(32, 0.2, True, 0.5, 1.0)]
    assert charts.lr_scaling_title(rows).startswith("Scaled lr beats fixed at 1 of 1")
    rows[-1] = ScalingRow(32, 0.2, True, 0.2, 1.0)
    assert charts.lr_scaling_title(rows).startswith("Scaled lr beats fixed at 0 of 1")
