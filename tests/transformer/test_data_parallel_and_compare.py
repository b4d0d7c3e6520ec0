"""Data parallel and FSDP on the transformer equal one process and send their formula's
bytes; the comparison's predicted times count a ring's messages; its verdict names the
parallelism whose bytes are off; the chart and the bench run."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import matplotlib
import pytest

from course_utils.core.errors import LaunchError
from course_utils.core.profiles import get
from course_utils.network.fabric import Link
from course_utils.transformer import charts, comm, compare, data_parallel
from course_utils.transformer.bench import run as bench_run

SIZES = replace(get("cpu").transformer, steps=2)


def test_dp_and_fsdp_equal_one_process_and_send_their_formula_on_2_and_4_ranks():
    runs = data_parallel.train_batch_split(SIZES, world_sizes=(2, 4))
    assert {n for _, n in runs} == {2, 4}
    for (kind, n), run in runs.items():
        assert run.max_diff <= SIZES.tolerance, kind
        assert comm.bytes_sent(run.step_log) == data_parallel.batch_split_bytes(
            run.parameters, n, kind, run.tensors
        )
    assert [m.op for m in runs["fsdp", 2].step_log] == ["all_gather", "reduce_scatter"]
    assert [m.op for m in runs["dp", 2].step_log] == ["all_reduce"]


def test_a_batch_that_does_not_split_is_refused_with_what_to_do():
    with pytest.raises(LaunchError, match="multiple"):
        data_parallel.train_batch_split(replace(SIZES, batch=3), kinds=("dp",), world_sizes=(2,))
    with pytest.raises(ValueError, match="dp, fsdp"):
        data_parallel.batch_split_bytes(100, 2, "zero")


def _message(op, ranks=4):
    """A 400-byte tensor's collective on 4 ranks: what a ring sends of it (a send: 300)."""
    sent = 600 if op == "all_reduce" else 300
    return comm.Message(op, "block 0 mlp", "forward", ranks, sent)


def test_predicted_time_counts_a_ring_s_messages():
    per_message = Link(alpha=1.0, bits_per_second=float("inf"))
    counts = {"all_reduce": 6, "all_gather": 3, "reduce_scatter": 3, "all_to_all": 3, "send": 1}
    for op, messages in counts.items():
        assert compare.predicted_seconds([_message(op)], per_message) == messages, op
    bandwidth = Link(alpha=0.0, bits_per_second=8.0)  # one byte per second
    assert compare.predicted_seconds([_message("all_reduce")], bandwidth) == 6 * 100
    assert compare.predicted_seconds([_message("all_to_all")], bandwidth) == 300


def _row(name, measured, formula, unit="block"):
    return compare.Row(name, unit, measured, formula, [_message("send")], "x")


def test_the_verdict_names_the_parallelism_whose_bytes_are_off():
    assert compare.every_row_matches_its_formula([_row("TP", 8, 8), _row("DP", 4, 4, "step")]).ok
    wrong = compare.every_row_matches_its_formula([_row("TP", 8, 8), _row("EP", 5, 4)])
    assert not wrong.ok and "not EP" in wrong.claim
    assert _row("TP", 8, 8).per_step(blocks=3) == 24 and _row("DP", 8, 8, "step").per_step(3) == 8


def test_the_chart_s_title_names_the_costliest_on_the_slowest_fabric():
    matplotlib.use("Agg")
    rows = [_row("TP", 8, 8), _row("DP", 4, 4, "step")]
    rows[0] = compare.Row("TP", "block", 8, 8, [_message("all_reduce")] * 4, "x")
    title = charts.which_when(rows, blocks=2, world=4)._suptitle.get_text()
    assert f"on {compare.FABRICS[-1]}, TP would wait" in title and "prediction" in title


def test_bench_transformer_meets_its_target_on_two_ranks():
    result = bench_run(SimpleNamespace(world_sizes=[2]))
    assert result["all_met"] and {r["parallelism"] for r in result["rows"]} == {
        "TP", "SP", "CP", "EP", "DP", "FSDP"
    }  # fmt: skip
    assert all(r["clock"] for r in result["rows"])
