"""Notebook 08's charts draw from plain data, and their titles come from that data."""

from __future__ import annotations

import torch

from course_utils.course import benchmarks
from course_utils.memory import charts
from course_utils.memory.formulas import comm_multiple, model_state_bytes


def _zero_rows():
    rows = []
    for world in (1, 2, 4):
        for stage in range(4):
            parts = model_state_bytes(100, world, stage, parts=True)
            rows.append(
                {
                    "stage": stage,
                    "world_size": world,
                    "rank": 0,
                    "numel": 100,
                    "held": parts,
                    "measured": sum(parts.values()),
                    "predicted": sum(parts.values()),
                    "bytes_sent": 400 * comm_multiple(stage, world),
                    "step_seconds": 0.01,
                }
            )
    return rows


def test_zero_charts_title_their_data():
    fig = charts.zero_bytes(_zero_rows())
    assert "4.0x less" in fig._suptitle.get_text()
    assert len(charts.zero_traffic(_zero_rows()).axes) == 2


def test_anatomy_timeline_precision_and_checkpoint_charts():
    row = {"rank": 0, "numel": 10, "params": 20, "grads": 20, "optimizer": 120, "activations": 5}
    assert "16 bytes per parameter" in charts.anatomy_bars([row]).axes[0].get_title()
    events = [
        ("forward", 0, 0.0, 0.001),
        ("all-gather", 0, 0.0, 0.001),
        ("prefetch", 0, 0.002, 0.003),
    ]
    assert "1 of its backward" in charts.fsdp_timeline(events).axes[0].get_title()
    under = {"fp16_lost": 0.9, "scaled_lost": 0.001}
    sums = {"exact_sum": 1.0, "fp16_sum": 0.25, "bf16_sum": 0.03, "fp32_sum": 1.0}
    assert "0.25" in charts.precision_panels(under, sums).axes[1].get_title()
    ckpt = [
        {"every": 0, "saved": 8e6, "peak": 9e6, "step_seconds": 1.0, "grad": torch.zeros(1)},
        {"every": 1, "saved": 1e6, "peak": 3e6, "step_seconds": 1.25, "grad": torch.zeros(1)},
    ]
    assert (
        charts.checkpoint_curve(ckpt).axes[0].get_title()
        == "8x fewer saved bytes, a 3.0x lower peak, for 25% more time"
    )


def test_the_peak_chart_names_the_least_at_the_peak_and_between_steps():
    rows = [
        {**r, "peak": r["measured"] + (300 if r["stage"] == 3 else 100),
         "predicted_peak": r["measured"]}
        for r in _zero_rows()
    ]  # fmt: skip
    title = charts.zero_peaks(rows)._suptitle.get_text()
    assert "least between steps ZeRO-3" in title and "least at the peak ZeRO-3" in title
    on_one = [r for r in rows if r["world_size"] == 1]  # nothing sharded: DDP is first
    assert "least at the peak DDP" in charts.zero_peaks(on_one)._suptitle.get_text()


def test_the_bench_command_finds_zero():
    assert "zero" in benchmarks.modules()
