"""The expert-parallel MoE on 2 and 4 ranks equals its one-process twin forward and backward,
sends exactly the bytes the one-process routing predicts, and a skewed router shows."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from course_utils.core.profiles import get
from course_utils.parallel import expert_parallel as ex
from course_utils.transformer.cp_ep_formulas import ep_bytes
from course_utils.transformer.cp_ep_runs import moe_vs_one_process
from course_utils.transformer.cp_ep_verdicts import (
    bytes_match_formula,
    ep_equals_one_process,
    skewed_router_unbalances_ranks,
)

SIZES = dataclasses.replace(get("cpu").transformer, batch=2, seq_len=16, width=16)


@pytest.fixture(scope="module")
def runs():
    return {n: moe_vs_one_process(SIZES, n) for n in (2, 4)}


def test_expert_parallel_equals_one_process(runs):
    every = [run for by_router in runs.values() for run in by_router.values()]
    for run in every:
        assert run.out_diff < 1e-5 and run.grad_diff < 1e-5, run
    assert ep_equals_one_process(every)


def test_token_counts_add_up(runs):
    tokens = SIZES.batch * SIZES.seq_len
    for n, by_router in runs.items():
        for run in by_router.values():
            assert sum(run.wanted_per_expert) == tokens * SIZES.top_k
            assert sum(run.kept_per_expert) == tokens * SIZES.top_k - run.dropped
            assert sum(run.tokens_per_rank) == sum(run.kept_per_expert)
            assert max(run.kept_per_expert) <= run.capacity * n
    assert runs[4]["skewed"].dropped > runs[4]["balanced"].dropped


def test_bytes_equal_the_formula_from_one_process_routing(runs):
    every = [run for by_router in runs.values() for run in by_router.values()]
    for run in every:
        assert [s["forward"] for s in run.sent] == [f["forward"] for f in run.formula]
        assert [s["backward"] for s in run.sent] == [f["backward"] for f in run.formula]
    assert bytes_match_formula(every, "the routing")


def test_skewed_router_unbalances_the_ranks(runs):
    assert skewed_router_unbalances_ranks(runs[4]["balanced"], runs[4]["skewed"])
    assert not skewed_router_unbalances_ranks(runs[4]["balanced"], runs[4]["balanced"])


def test_ep_bytes_by_hand():
    # 2 ranks, 2 experts: rank 0 keeps 3 rows at home and sends 1 to expert 1; rank 1 sends 2
    per_rank = ep_bytes([[3, 1], [2, 5]], width=4)
    row = 4 * 4
    assert per_rank[0] == {"forward": 3 * row + 8, "backward": 3 * row, "rows_out": 3}
    assert per_rank[1] == {"forward": 3 * row + 8, "backward": 3 * row, "rows_out": 3}


def test_one_process_without_capacity_is_the_dense_top_k_mixture():
    w = ex.make_weights(8, 16, 4, seed=3)
    x = torch.randn(10, 8, generator=torch.Generator().manual_seed(4))
    out, (routing,) = ex.moe_one_process(x, w, top_k=2, capacity_factor=10.0)
    assert routing.dropped() == 0
    probs = F.softmax(x @ w.router, -1)
    top = probs.topk(2, -1)
    dense = torch.stack([ex.expert_mlp(x, w, e) for e in range(4)], 1)  # tokens, experts, width
    picked = dense.gather(1, top.indices[..., None].expand(-1, -1, 8))
    want = (picked * (top.values / top.values.sum(-1, keepdim=True))[..., None]).sum(1)
    assert torch.allclose(out, want, atol=1e-6)


def test_capacity_keeps_first_choices_before_second_in_token_order():
    router = torch.zeros(2, 3)
    router[0, 0], router[1, 1] = 5.0, 1.0  # every token: expert 0 first, expert 1 second
    x = torch.tensor([[1.0, 0.0]] * 4)
    routing = ex.route(x, router, top_k=2, capacity_factor=0.75)  # capacity 2 per expert
    assert routing.capacity == 2
    assert routing.kept[:, 0].tolist() == [True, True, False, False]
    assert routing.kept[:, 1].tolist() == [True, True, False, False]
    assert routing.dropped() == 4


def test_experts_that_do_not_spread_evenly_are_refused():
    with pytest.raises(ValueError, match="cannot be spread evenly over 3 ranks"):
        ex.make_weights(4, 8, 4).for_rank(0, 3, torch.device("cpu"))
