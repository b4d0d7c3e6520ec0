"""Interleaved 1F1B and ZB-H1 on gloo ranks, in the course's engine and in PyTorch's: after
several SGD steps both train the weights one process trains, and hand each result on once."""

from __future__ import annotations

import pytest
import torch
from recorded_bars import last_states, record_rank_bars

from course_utils.model_parallel.pipeline import Work, mlp
from course_utils.model_parallel.schedule_check import check_handoffs
from course_utils.model_parallel.schedules import NAMES, plan
from course_utils.model_parallel.torch_pipelining import train_with_torch
from course_utils.model_parallel.virtual_pipeline import serial_training, train_pipeline

STEPS = 3


@pytest.fixture(scope="module")
def twin():
    model = mlp([40, 16, 16, 16, 10], seed=1)
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(32, 40, generator=gen), torch.randint(0, 10, (32,), generator=gen)
    return model, x, y, serial_training(model, x, y, STEPS)


def _gap(params, twin_params) -> float:
    return max((a - b).abs().max().item() for a, b in zip(params, twin_params, strict=True))


@pytest.mark.parametrize("schedule", NAMES)
def test_the_engine_trains_like_one_process_and_hands_each_result_on_once(schedule, twin):
    model, x, y, (losses, params) = twin
    run = train_pipeline(schedule, stages=2, microbatches=4, work=Work(model, x, y), steps=STEPS)
    assert _gap(run.params, params) < 1e-5
    assert run.losses == pytest.approx(losses, abs=1e-5)
    check_handoffs(run.sent, 2, 4, run.chunks)
    orders = plan(schedule).orders(2, 4)
    for tl in run.timelines:  # every rank ran its ops in the schedule's order, one at a time
        for r in range(2):
            mine = sorted(tl.compute(r), key=lambda e: e.start)
            assert [(e.kind, e.microbatch, e.chunk) for e in mine] == orders[r]
            assert all(a.end <= b.start + 1e-9 for a, b in zip(mine, mine[1:], strict=False))
        assert 0 < tl.bubble_fraction() < 1


def test_the_engine_counts_what_each_schedule_holds(twin):
    model, x, y, _ = twin
    runs = {
        n: train_pipeline(n, stages=2, microbatches=4, work=Work(model, x, y), steps=1)
        for n in ("1f1b", "zb-h1")
    }
    assert runs["1f1b"].timelines[0].peak_activations == (2, 1)
    assert runs["zb-h1"].timelines[0].peak_activations == (2, 2)  # rank 1 keeps a W back
    f1b, zb = runs["1f1b"].timelines[0].peak_bytes, runs["zb-h1"].timelines[0].peak_bytes
    assert zb[0] == f1b[0] and zb[1] > f1b[1]


@pytest.mark.parametrize("schedule", NAMES)
def test_pytorch_pipelining_trains_like_the_engine_and_one_process(schedule, twin):
    model, x, y, (losses, params) = twin
    torch_run = train_with_torch(
        schedule, stages=2, microbatches=4, work=Work(model, x, y), steps=STEPS
    )
    assert torch_run["ran"], torch_run.get("error")
    assert _gap(torch_run["params"], params) < 1e-5
    assert torch_run["losses"] == pytest.approx(losses, abs=1e-5)
    if schedule in ("interleaved", "zb-h1"):  # the action lists the ranks really held
        assert torch_run["orders"] == plan(schedule).orders(2, 4)


def test_a_pytorch_run_that_fails_is_reported_not_raised(twin):
    _, x, y, _ = twin
    result = train_with_torch(
        "interleaved",
        stages=2,
        microbatches=4,
        work=Work(mlp([40, 16, 10]), x, y),
        steps=1,
        timeout=30,
    )  # 2 blocks for 4 pieces
    assert result["ran"] is False and "cannot cut a model of 2 blocks" in result["error"]


def test_impossible_set_ups_are_refused_before_launching():
    with pytest.raises(ValueError, match="into 4 stages"):
        train_pipeline("interleaved", stages=2, microbatches=2, work=Work(mlp([40, 8, 10])))
    with pytest.raises(ValueError, match="unknown schedule"):
        train_pipeline("zigzag", stages=2, microbatches=2)


def test_measured_rows_name_their_schedule_clock_and_the_played_out_bubble(monkeypatch):
    from course_utils.model_parallel.bubble import measure_schedules

    states = record_rank_bars(monkeypatch)
    rows = measure_schedules(["1f1b", "zb-h1"], 2, 2, width=32, micro_batch_size=8, repeats=2)
    bar = last_states(states)["1f1b, zb-h1 on 2 ranks, M=2, simulated clock"]
    assert (bar["unit"], bar["total"], bar["n"], bar["closed"]) == ("step", 4, 4, True)
    assert [r["schedule"] for r in rows] == ["1f1b", "zb-h1"]
    assert all(r["clock"] == "simulated" and 0 < r["from_stages_and_link"] < 1 for r in rows)
    assert rows[1]["weight_seconds"] > 0 == rows[0]["weight_seconds"]
    assert rows[0]["handoffs"] == 4 and rows[0]["handoff_bytes"] == 4 * 8 * 32 * 4


def test_bench_runs_the_new_schedules_and_names_them_in_every_row():
    import argparse

    from course_utils.model_parallel import bench

    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    args = [
        "--stages",
        "2",
        "--microbatches",
        "2",
        "--width",
        "32",
        "--micro-batch-size",
        "8",
        "--schedule",
        "interleaved",
        "--repeats",
        "1",
    ]
    result = bench.run(parser.parse_args(args))
    assert result["schedule"] == "interleaved" and result["virtual_stages"] == 2
    row = result["rows"][0]
    assert (row["schedule"], row["virtual_stages"], row["clock"]) == ("interleaved", 2, "simulated")
    assert row["predicted"] == pytest.approx(1 / 5)  # (K-1)/(v·M+K-1)
    assert "F, B, W" in result["target"]
    assert result["meets_target"] == all(r["meets_link_prediction"] for r in result["rows"])
