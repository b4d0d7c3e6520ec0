"""Ring attention on 2 and 4 ranks, both splits, equals full causal attention forward and
backward; it sends exactly the bytes of its formula; the zigzag split balances the work."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.distributed as dist

from course_utils.core.profiles import get
from course_utils.parallel import context_parallel as ra
from course_utils.ranks.launch import launch
from course_utils.transformer.cp_ep_runs import ring_vs_full, work_by_layout
from course_utils.transformer.cp_ep_verdicts import (
    bytes_match_formula,
    ring_attention_equals_full,
    zigzag_balances_work,
)

SIZES = dataclasses.replace(get("cpu").transformer, batch=2, heads=2, seq_len=16, width=16)


@pytest.fixture(scope="module")
def runs():
    return [run for n in (2, 4) for run in ring_vs_full(SIZES, n)]


def test_ring_equals_full_attention_forward_and_backward(runs):
    assert {(r.world, r.layout) for r in runs} == {(n, s) for n in (2, 4) for s in ra.LAYOUTS}
    for run in runs:
        assert run.out_diff < 1e-5 and run.grad_diff < 1e-5, run
    assert ring_attention_equals_full(runs)


def test_bytes_and_messages_equal_the_formula_exactly(runs):
    for run in runs:
        n = run.world
        block = SIZES.batch * SIZES.heads * (SIZES.seq_len // n) * 8 * 4  # head_dim 8, fp32
        assert run.formula == {"forward": 2 * (n - 1) * block, "backward": (4 * n - 2) * block}
        assert all(m == {"forward": n - 1, "backward": 2 * (n - 1) + 1} for m in run.messages)
    assert bytes_match_formula(runs, "ring attention's formula")


def test_zigzag_balances_the_work_and_contiguous_does_not(runs):
    work = work_by_layout(SIZES, 4)
    assert work["contiguous"] == [16, 32, 48, 64]  # rank r sees r + 1 blocks of 4 x 4
    assert len(set(work["zigzag"])) == 1
    assert sum(work["zigzag"]) < sum(work["contiguous"])  # finer chunks skip more
    assert zigzag_balances_work(work["zigzag"])
    assert not zigzag_balances_work(work["contiguous"])  # the effect absent


def test_shard_and_unshard_are_inverse_and_zigzag_pairs_early_with_late():
    x = torch.arange(24.0).reshape(1, 1, 24, 1)
    parts = [ra.shard(x, 3, r, "zigzag") for r in range(3)]
    assert parts[0].flatten().tolist() == [0, 1, 2, 3, 20, 21, 22, 23]
    assert torch.equal(ra.unshard(parts, "zigzag"), x)


def test_merge_of_two_halves_is_attention_over_both():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(3, 6, 4, generator=g) for _ in range(3))
    full = torch.softmax(q @ k.mT / 2, -1) @ v
    halves = [ra._attend(q, k[:, s], v[:, s], None, 0.5) for s in (slice(0, 3), slice(3, 6))]
    out, lse = ra.merge(*halves[0], *halves[1])
    assert torch.allclose(out, full, atol=1e-6)
    assert torch.allclose(lse, torch.logsumexp(q @ k.mT / 2, -1), atol=1e-6)


def test_a_sequence_not_divisible_by_2n_is_refused_with_what_to_do():
    with pytest.raises(ValueError, match="not divisible by 8: pad the sequence"):
        ra.shard(torch.zeros(1, 1, 20, 2), 4, 0, "zigzag")
    ra.check_divisible(20, 4, "contiguous")  # N chunks are enough without zigzag
    with pytest.raises(ValueError, match="choose one of contiguous, zigzag"):
        ra.check_divisible(16, 2, "striped")


def _odd_local_length():
    q = torch.zeros(1, 1, 3, 2)  # cpu: 6 tokens over 2 ranks cannot be cut in 4 chunks
    try:
        ra.ring_attention(q, q, q, "zigzag")
    except ValueError as error:
        return str(error)
    return dist.get_rank()


def test_ring_attention_refuses_an_odd_share_on_the_ranks():
    messages = launch(_odd_local_length, 2, backend="gloo")
    assert all("6 tokens" in m and "not divisible by 4" in m for m in messages)
