"""Notebook 10's context- and expert-parallel checkers pass the reference solutions (here,
not in the package) and name each classic mistake."""

from __future__ import annotations

import pytest
import torch
from reference import load_solution

from course_utils.parallel.expert_parallel import route
from course_utils.transformer.cp_ep_exercises import (
    COMBINE_CASES,
    check_block_mask,
    check_combine,
    check_merge,
)

SOLUTION = load_solution("10_transformer.py")
merge, block_mask, combine = SOLUTION.merge, SOLUTION.block_mask, SOLUTION.combine

# ------------------------------------------------------------- mistakes


def averaged(out_a, lse_a, out_b, lse_b):
    return (out_a + out_b) / 2, torch.logaddexp(lse_a, lse_b)


def summed(out_a, lse_a, out_b, lse_b):
    return out_a + out_b, torch.logaddexp(lse_a, lse_b)


def local_triangle(q_positions, k_positions):
    return torch.ones(len(q_positions), len(k_positions), dtype=torch.bool).tril()


def in_arrival_order(returned, token, gate, num_tokens):
    rows = returned * gate[:, None]
    return torch.zeros(num_tokens, returned.shape[1]).index_add(0, token.sort().values, rows)


def _line(capsys) -> str:
    return capsys.readouterr().out.strip().splitlines()[-1]


def test_reference_solutions_pass(capsys):
    assert check_merge(merge)
    assert _line(capsys).startswith("✓ merge")
    assert check_block_mask(block_mask)
    assert _line(capsys).startswith("✓ block_mask")
    assert check_combine(combine)
    assert _line(capsys).startswith("✓ combine")


def unsolved(*args):
    raise NotImplementedError


def returns_nothing(*args):
    pass


@pytest.mark.parametrize("checker", [check_merge, check_block_mask, check_combine])
def test_unsolved_says_so(capsys, checker):
    for fn in (unsolved, returns_nothing, None):
        assert not checker(fn)
        assert _line(capsys) == "✗ not solved yet"


@pytest.mark.parametrize("wrong", [averaged, summed])
def test_merge_without_rescale_is_named(capsys, wrong):
    assert not check_merge(wrong)
    assert _line(capsys).startswith("✗ no rescale")


def test_merge_with_a_wrong_lse_is_caught(capsys):
    assert not check_merge(lambda oa, la, ob, lb: (merge(oa, la, ob, lb)[0], la + lb))
    assert "lse should be" in _line(capsys)


def test_a_per_block_mask_is_named(capsys):
    assert not check_block_mask(local_triangle)
    assert _line(capsys).startswith("✗ mask applied per block")


def test_an_anticausal_mask_is_caught(capsys):
    assert not check_block_mask(lambda q, k: k[None, :] >= q[:, None])
    assert "queries see keys after them" in _line(capsys)


def test_combine_out_of_order_is_named(capsys):
    assert not check_combine(in_arrival_order)
    assert _line(capsys).startswith("✗ tokens not sent back in order")


def test_combine_without_gates_is_caught(capsys):
    def ungated(returned, token, gate, num_tokens):
        return combine(returned, token, torch.ones_like(gate), num_tokens)

    assert not check_combine(ungated)
    assert "weighted by its gate" in _line(capsys)


def test_a_hard_coded_answer_fails_at_another_size(capsys):
    fixed = combine(*_first_case())
    assert not check_combine(lambda *args: fixed)
    assert "should be (num_tokens, width)" in _line(capsys)


def _first_case():
    tokens, width, experts, top_k, cf = COMBINE_CASES[0]
    g = torch.Generator().manual_seed(tokens * width)
    x = torch.randn(tokens, width, generator=g)
    token, _, gate = route(x, torch.randn(width, experts, generator=g), top_k, cf).assignments()
    return torch.randn(len(token), width, generator=g), token, gate, tokens


def test_a_checker_never_raises_at_the_learner(capsys):
    assert not check_merge(lambda *a: 1 / 0)
    assert "merge raised ZeroDivisionError" in _line(capsys)


def test_the_course_s_own_merge_and_mask_are_refused(capsys):
    from course_utils.core.own_answers import message
    from course_utils.parallel import context_parallel as ring_attention

    assert not check_merge(ring_attention.merge)
    assert not check_merge(lambda *parts: ring_attention.merge(*parts))
    assert not check_block_mask(ring_attention.causal_mask)
    assert not check_block_mask(lambda q, k: ring_attention.causal_mask(q, k))
    out = capsys.readouterr().out
    assert out.count(message("merge")) == 2 and out.count(message("causal mask")) == 2
