"""Each context- and expert-parallel verdict fails when its effect is absent; the charts
draw from plain run data and compute their titles from it."""

from __future__ import annotations

from course_utils.transformer.cp_ep_charts import router_load, work_per_rank
from course_utils.transformer.cp_ep_runs import MoERun, RingRun
from course_utils.transformer.cp_ep_verdicts import (
    bytes_match_formula,
    ep_equals_one_process,
    imbalance,
    ring_attention_equals_full,
    skewed_router_unbalances_ranks,
    zigzag_balances_work,
)


def _ring(out_diff=1e-7, grad_diff=1e-7, sent=None) -> RingRun:
    formula = {"forward": 100, "backward": 300}
    return RingRun(2, "zigzag", out_diff, grad_diff, [sent or formula] * 2, formula,
                   [{"forward": 1, "backward": 3}] * 2, [10, 10])  # fmt: skip


def _moe(tokens_per_rank, grad_diff=1e-7, dropped=0) -> MoERun:
    n = len(tokens_per_rank)
    formula = [{"forward": 8, "backward": 0}] * n
    return MoERun(n, 0.0, 2, 1.25, 0.0, grad_diff, 40, tokens_per_rank, tokens_per_rank,
                  tokens_per_rank, dropped, formula, formula)  # fmt: skip


def test_ring_equality_fails_for_a_wrong_gradient(capsys):
    assert ring_attention_equals_full([_ring()])
    assert not ring_attention_equals_full([_ring(grad_diff=0.3)])
    assert not ring_attention_equals_full([])
    assert "✗ ring attention (zigzag split)" in capsys.readouterr().out


def test_zigzag_verdict_fails_for_a_contiguous_split():
    assert zigzag_balances_work([144, 144, 144, 144])
    assert not zigzag_balances_work([64, 128, 192, 256])


def test_ep_equality_fails_for_a_wrong_gradient():
    assert ep_equals_one_process([_moe([10, 10])])
    assert not ep_equals_one_process([_moe([10, 10], grad_diff=1e-3)])


def test_bytes_verdict_fails_for_one_byte_off():
    assert bytes_match_formula([_ring()], "ring")
    assert not bytes_match_formula([_ring(sent={"forward": 100, "backward": 301})], "ring")
    assert bytes_match_formula([_moe([1, 2])], "routing")
    off = _moe([1, 2])
    off.sent = [{"forward": 8, "backward": 0}, {"forward": 9, "backward": 0}]
    assert not bytes_match_formula([off], "routing")


def test_skew_verdict_fails_when_both_routers_are_balanced_or_both_skewed():
    balanced, skewed = _moe([64, 58, 62, 70]), _moe([80, 42, 38, 48])
    assert imbalance([10, 30]) == 1.5
    assert skewed_router_unbalances_ranks(balanced, skewed)
    assert not skewed_router_unbalances_ranks(balanced, balanced)
    assert not skewed_router_unbalances_ranks(skewed, skewed)


def test_charts_titles_come_from_the_data():
    fig = work_per_rank({"contiguous": [1, 2, 3, 4], "zigzag": [5, 5, 5, 5]})
    assert "contiguous 4.00x, zigzag 1.00x" in fig.axes[0].get_title()
    fig = router_load({"balanced": _moe([64, 64]), "skewed": _moe([96, 32], dropped=7)})
    assert "skewed: busiest rank 1.50x the mean, 7 dropped" in fig._suptitle.get_text()
