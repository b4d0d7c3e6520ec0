"""Each TP/SP verdict passes on what the runs measure and fails where its effect is absent;
the charts draw from plain data."""

from __future__ import annotations

import pytest

from course_utils.core.sizes_model_parallel import TransformerSizes
from course_utils.transformer import tp_charts, tp_formulas, tp_runs
from course_utils.transformer import tp_verdicts as v
from course_utils.transformer.tp_runs import MemoryRun

SIZES = TransformerSizes(vocab=16, width=16, heads=4, blocks=2, seq_len=8, batch=2, steps=3)


@pytest.fixture(scope="module")
def memory():
    return tp_runs.measure_memory(SIZES, world_sizes=(2, 4))


def test_sp_saves_exactly_the_layernorms_share(memory):
    predicted = {n: tp_formulas.layernorm_bytes_saved(SIZES, n) for n in (2, 4)}
    by = {(r.kind, r.world_size): r.saved for r in memory}
    assert {n: by["tp", n] - by["sp", n] for n in (2, 4)} == predicted
    assert by["one", 1] > by["tp", 2] > by["tp", 4]
    assert v.sp_cuts_activation_memory(memory).ok
    assert v.sp_saving_is_the_layernorms(memory, predicted).ok
    assert tp_charts.activation_memory(memory).axes


def test_memory_verdicts_fail_when_sp_saves_nothing(memory):
    as_tp = [MemoryRun("sp" if r.kind == "tp" else r.kind, r.world_size, r.saved, 0, 0)
             for r in memory if r.kind != "sp"] + [r for r in memory if r.kind == "tp"]  # fmt: skip
    predicted = {n: tp_formulas.layernorm_bytes_saved(SIZES, n) for n in (2, 4)}
    assert not v.sp_cuts_activation_memory(as_tp).ok
    assert not v.sp_saving_is_the_layernorms(as_tp, predicted).ok
    assert not v.sp_cuts_activation_memory([]).ok


def test_equality_verdict_fails_above_its_tolerance():
    assert v.tp_equals_one_process({("tp", 2): 3e-8, ("sp", 4): 1e-6}).ok
    assert not v.tp_equals_one_process({("tp", 2): 3e-8, ("sp", 4): 2e-5}).ok
    assert not v.tp_equals_one_process({}).ok


def test_bytes_verdicts_are_exact_and_fail_on_one_byte_or_a_missing_op():
    formula = tp_formulas.block_bytes(SIZES, 2, "tp")
    assert v.tp_bytes_match_formula([({0: formula, 1: formula}, formula)] * 2).ok
    off = {"forward": {"all_reduce": formula["forward"]["all_reduce"] + 1},
           "backward": formula["backward"]}  # fmt: skip
    assert not v.tp_bytes_match_formula(
        [({0: formula}, formula), ({0: formula, 1: off}, formula)]
    ).ok
    assert not v.tp_bytes_match_formula([({0: {"forward": formula["forward"]}}, formula)]).ok
    assert not v.tp_bytes_match_formula([({}, formula)]).ok and not v.tp_bytes_match_formula([]).ok
    tp = {n: tp_formulas.sent_per_block(SIZES, n, "tp") for n in (2, 4)}
    sp = {n: tp_formulas.sent_per_block(SIZES, n, "sp") for n in (2, 4)}
    assert v.sp_moves_the_same_bytes_as_tp(tp, sp).ok
    assert not v.sp_moves_the_same_bytes_as_tp(tp, {2: sp[2], 4: 2 * sp[4]}).ok


def test_formulas_and_the_bytes_chart():
    a = tp_formulas.activation_bytes(SIZES)
    assert tp_formulas.block_bytes(SIZES, 4, "tp")["backward"] == {"all_reduce": 2 * 6 * a // 4}
    assert tp_formulas.block_bytes(SIZES, 4, "sp")["forward"]["reduce_scatter"] == 2 * 3 * a // 4
    with pytest.raises(ValueError, match="'cp'"):
        tp_formulas.block_bytes(SIZES, 2, "cp")
    formula = {(k, n): tp_formulas.block_bytes(SIZES, n, k) for n in (2, 4) for k in ("tp", "sp")}
    fig = tp_charts.bytes_per_block(formula, formula)
    assert fig.axes[0].get_title().startswith("12 of 12 measured bars equal")
