"""Notebook 10's verdicts, run through the notebook's own runs in a world with one slip, each
print ✗.

Each test patches one plausible mistake into the algorithm the notebook runs (ranks start
with fork, so the patch reaches them), runs the notebook's call at the smallest sizes, on
2 ranks, and feeds the verdict what the notebook feeds it.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.distributed as dist
from torch import nn
from verdict_lines import fails, holds

from course_utils.core.profiles import get
from course_utils.core.sizes_model_parallel import TransformerSizes
from course_utils.parallel import context_parallel as ra
from course_utils.parallel import expert_parallel as ex
from course_utils.parallel import sequence_parallel as sp
from course_utils.parallel import tensor_parallel as tp
from course_utils.transformer import cp_ep_runs, tp_formulas, tp_runs
from course_utils.transformer import cp_ep_verdicts as cv
from course_utils.transformer import tp_verdicts as tv
from course_utils.transformer.sequence_parallel import sequence_parallel_model

TP = TransformerSizes(vocab=16, width=16, heads=4, blocks=2, seq_len=8, batch=2, steps=3)
CP_EP = dataclasses.replace(get("cpu").transformer, batch=2, heads=2, seq_len=16, width=16)
N = 2


def diffs(runs) -> dict:
    return {key: run.max_diff for key, run in runs.items()}


def bytes_runs(runs) -> list:
    """What notebook 10's `tp_bytes_match_formula` cell passes, for the runs made."""
    return [
        (tp_runs.bytes_per_block(run.step_log), tp_formulas.block_bytes(TP, n, kind))
        for (kind, n), run in runs.items()
    ]


def sent_per_block(runs) -> dict[str, dict[int, int]]:
    """Bytes per block (block 0, both directions) per kind and N, as the notebook sums them."""
    out: dict[str, dict[int, int]] = {}
    for (kind, n), run in runs.items():
        block = tp_runs.bytes_per_block(run.step_log)[0]
        out.setdefault(kind, {})[n] = sum(sum(ops.values()) for ops in block.values())
    return out


# tensor parallel


def _f_backward_without_all_reduce(ctx, grad):
    return grad, None


def _f_forward_all_reduce(ctx, x, group):
    ctx.group = group
    total = x.contiguous().clone()
    dist.all_reduce(total, group=group)
    return total


def _identity_backward(ctx, grad):
    return grad, None


def _g_forward_identity(ctx, partial, group):
    ctx.group = group
    return partial.view_as(partial)


def _g_backward_all_reduce(ctx, grad):
    grad = grad.contiguous().clone()
    dist.all_reduce(grad, group=ctx.group)
    return grad, None


def _skip_f_backward(mp):
    mp.setattr(tp.CopyToTensorRegion, "backward", staticmethod(_f_backward_without_all_reduce))


def _swap_f_and_g(mp):
    mp.setattr(tp.CopyToTensorRegion, "forward", staticmethod(_f_forward_all_reduce))
    mp.setattr(tp.CopyToTensorRegion, "backward", staticmethod(_identity_backward))
    mp.setattr(tp.ReduceFromTensorRegion, "forward", staticmethod(_g_forward_identity))
    mp.setattr(tp.ReduceFromTensorRegion, "backward", staticmethod(_g_backward_all_reduce))


@pytest.mark.parametrize(
    "slip", [_skip_f_backward, _swap_f_and_g], ids=["f_backward_without_all_reduce", "f_g_swapped"]
)
def test_tp_with_f_or_g_wrong_does_not_equal_one_process(monkeypatch, capsys, slip):
    """f whose backward returns its rank's partial input gradient without all-reducing it:
    the LayerNorms and embeddings below see only this rank's heads' and neurons' share
    (largest parameter difference after one step on 2 ranks: 1.3e-04). f and g swapped
    (all-reduce forward at the entry, backward at the exit): the formula's bytes exactly,
    but the entry sums N copies of its input (1.6e-03)."""
    slip(monkeypatch)
    runs = tp_runs.train_and_compare(TP, kinds=("tp",), world_sizes=(N,), steps=1)
    fails(capsys, lambda: tv.tp_equals_one_process(diffs(runs), TP.tolerance))


def _g_backward_averaged(ctx, grad):
    grad = grad.contiguous().clone()
    dist.all_reduce(grad)
    return grad / dist.get_world_size(), None


def test_tp_whose_g_also_all_reduces_backward_sends_more_than_the_formula(monkeypatch, capsys):
    """g that also averages its gradient over the ranks backward, "to be safe": the gradient
    is already the same on every rank, so the numbers are right (difference 1.5e-08, ✓) and
    only the bytes show it: 4096 B backward per block on 2 ranks where the formula says 2048."""
    monkeypatch.setattr(tp.ReduceFromTensorRegion, "backward", staticmethod(_g_backward_averaged))
    runs = tp_runs.train_and_compare(TP, kinds=("tp",), world_sizes=(N,), steps=1)
    holds(capsys, lambda: tv.tp_equals_one_process(diffs(runs), TP.tolerance))
    fails(capsys, lambda: tv.tp_bytes_match_formula(bytes_runs(runs)))


# sequence parallel


def _reduce_scatter_by_all_reduce(x, group=None):
    """The sum over the ranks by all-reduce, of which this rank keeps its positions."""
    total = x.contiguous().clone()
    dist.all_reduce(total, group=group)
    return sp.my_positions(total, group)


@pytest.fixture(scope="module")
def sp_by_all_reduce():
    """TP and SP on 2 ranks, SP's reduce-scatters done as an all-reduce kept in part."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sp, "reduce_scatter_sequence", _reduce_scatter_by_all_reduce)
        return tp_runs.train_and_compare(TP, kinds=("tp", "sp"), world_sizes=(N,), steps=1)


def test_sp_that_reduces_by_all_reduce_moves_more_bytes_than_tp(sp_by_all_reduce, capsys):
    """SP whose reduce-scatter is an all-reduce of which each rank keeps its own positions:
    right numbers (difference 1.5e-08, ✓), but 6144 B per block on 2 ranks where TP sends
    4096, and all-reduces where the formula has reduce-scatters."""
    per_block = sent_per_block(sp_by_all_reduce)
    fails(capsys, lambda: tv.sp_moves_the_same_bytes_as_tp(per_block["tp"], per_block["sp"]))
    fails(capsys, lambda: tv.tp_bytes_match_formula(bytes_runs(sp_by_all_reduce)))
    holds(capsys, lambda: tv.tp_equals_one_process(diffs(sp_by_all_reduce), TP.tolerance))


class _LayerNormOnTheWholeSequence(nn.LayerNorm):
    """A LayerNorm that gathers the sequence first, as if it normalised across positions."""

    def forward(self, x):
        return sp.split(super().forward(sp.join(x)))


def _sp_gathering_before_each_layernorm(model):
    split = sequence_parallel_model(model)
    for m in split.modules():
        if isinstance(m, nn.LayerNorm):
            m.__class__ = _LayerNormOnTheWholeSequence
    return split


@pytest.fixture(scope="module")
def memory_gathering_before_layernorms():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tp_runs, "sequence_parallel_model", _sp_gathering_before_each_layernorm)
        return tp_runs.measure_memory(TP, world_sizes=(N,))


def test_sp_that_gathers_before_the_layernorms_keeps_as_much_as_tp(
    memory_gathering_before_layernorms, capsys
):
    """SP whose LayerNorms gather the whole sequence first: they keep whole inputs and
    statistics again, and SP keeps what TP keeps (23,632 B per rank on 2 ranks, 0% fewer;
    the right SP keeps 20,752)."""
    fails(capsys, lambda: tv.sp_cuts_activation_memory(memory_gathering_before_layernorms))


def test_sp_that_gathers_before_the_layernorms_saves_not_their_share(
    memory_gathering_before_layernorms, capsys
):
    """The same run: it saves 0 B where the LayerNorms' share is 2,880 B (which the right SP
    saves exactly)."""
    predicted = {N: tp_formulas.layernorm_bytes_saved(TP, N)}
    fails(
        capsys,
        lambda: tv.sp_saving_is_the_layernorms(memory_gathering_before_layernorms, predicted),
    )


# context parallel: ring attention


_real_block_pairs = ra.block_pairs


def _block_pairs_without_masks(q_positions, k_positions, piece):
    for qs, ks, _ in _real_block_pairs(q_positions, k_positions, piece):
        yield qs, ks, None


def _merge_by_adding(out_a, lse_a, out_b, lse_b):
    return out_a + out_b, torch.logaddexp(lse_a, lse_b)


@pytest.mark.parametrize(
    "name, slip",
    [("block_pairs", _block_pairs_without_masks), ("merge", _merge_by_adding)],
    ids=["diagonal_unmasked", "merge_without_rescaling"],
)
def test_ring_attention_with_a_slip_does_not_equal_full(monkeypatch, capsys, name, slip):
    """The diagonal block attended without its causal mask (every pair that is not skipped
    taken whole): output difference 1.05 relative on 2 ranks (zigzag), 1.15 (contiguous).
    Blocks merged by adding their outputs, without rescaling each by its share exp(lse) of
    the denominator: 1.69 and 1.88."""
    monkeypatch.setattr(ra, name, slip)
    rings = cp_ep_runs.ring_runs(CP_EP, world_sizes=(N,))
    fails(capsys, lambda: cv.ring_attention_equals_full(rings, CP_EP.tolerance))


_real_exchange = ra.exchange


def _exchange_in_float64(send, to, into, source):
    wide = torch.empty_like(into, dtype=torch.float64)
    _real_exchange(send.double(), to, wide, source)
    into.copy_(wide)


def test_ring_attention_whose_blocks_travel_in_float64_sends_twice_the_formula(monkeypatch, capsys):
    """K/V blocks and their gradients widened to float64 for the hop (a learner after an
    exact merge): the output is full attention's again (rounding is fp32's either way),
    and every message carries twice the bytes ring attention's formula counts."""
    monkeypatch.setattr(ra, "exchange", _exchange_in_float64)
    rings = cp_ep_runs.ring_runs(CP_EP, world_sizes=(N,))
    holds(capsys, lambda: cv.ring_attention_equals_full(rings, CP_EP.tolerance))
    assert all(run.sent[0]["forward"] == 2 * run.formula["forward"] for run in rings)
    fails(capsys, lambda: cv.bytes_match_formula(rings, "ring attention's formula"))


def test_contiguous_split_does_not_balance_work(capsys):
    """The contiguous split through the notebook's work count: [64, 128] scores on 2 ranks
    (the last rank's queries see every key), 2x; the zigzag split gives [80, 80]."""
    work = cp_ep_runs.work_by_layout(CP_EP, N)
    fails(capsys, lambda: cv.zigzag_balances_work(work["contiguous"], layout="contiguous"))


_real_pieces = ra._pieces


def _zigzag_pairing_r_with_n_plus_r(seq_len, world, rank, layout):
    """Chunk r of each half of the sequence, r and N + r, in place of r and 2N - 1 - r."""
    if layout != "zigzag":
        return _real_pieces(seq_len, world, rank, layout)
    ra.check_divisible(seq_len, world, layout)
    size = seq_len // (2 * world)
    return [range(c * size, (c + 1) * size) for c in (rank, world + rank)]


def test_zigzag_pairing_chunk_r_with_n_plus_r_does_not_balance_work(monkeypatch, capsys):
    """Rank r given chunks r and N + r: both its chunks lie later the larger r is, so the
    work still grows with the rank, [64, 96] scores on 2 ranks, 1.5x."""
    monkeypatch.setattr(ra, "_pieces", _zigzag_pairing_r_with_n_plus_r)
    work = cp_ep_runs.work_by_layout(CP_EP, N)
    fails(capsys, lambda: cv.zigzag_balances_work(work["zigzag"]))


# expert parallel


_real_for_rank = ex.MoEWeights.for_rank


def _for_rank_without_offset(self, rank, world, device):
    """Rank 0's experts on every rank, numbered as if they were the rank's own."""
    w = _real_for_rank(self, 0, world, device)
    w.first = rank * (self.w1.shape[0] // world)
    return w


def test_moe_whose_ranks_all_hold_the_first_experts_does_not_equal_one_process(monkeypatch, capsys):
    """Every rank slices experts 0..E/N-1, its offset forgotten: rank 1's tokens bound for
    experts 2 and 3 meet experts 0 and 1's weights (output difference 0.82 relative with the
    balanced router, 0.23 with the skewed one; the bytes still match the routing)."""
    monkeypatch.setattr(ex.MoEWeights, "for_rank", _for_rank_without_offset)
    moe = cp_ep_runs.moe_runs(CP_EP, world_sizes=(N,))
    every_run = [run for by_router in moe.values() for run in by_router.values()]
    fails(capsys, lambda: cv.ep_equals_one_process(every_run, CP_EP.tolerance))


_real_assignments = ex.Routing.assignments


def _assignments_with_dropped_choices(self):
    """Every choice, a dropped one with gate 0: it travels and is computed for nothing."""
    every = ex.Routing(
        self.expert, self.gate * self.kept, torch.ones_like(self.kept), self.experts, self.capacity
    )
    return _real_assignments(every)


def test_moe_that_sends_dropped_choices_sends_more_than_the_routing_says(monkeypatch, capsys):
    """Dropped choices zeroed by their gate instead of left at home: the numbers are right
    (difference 1.7e-07, ✓), but they travel: rank 0 sends 2,128 B forward where the kept
    choices' formula says 1,744 (skewed router, 12 dropped; balanced: 2,576 for 2,448)."""
    monkeypatch.setattr(ex.Routing, "assignments", _assignments_with_dropped_choices)
    moe = cp_ep_runs.moe_runs(CP_EP, world_sizes=(N,))
    every_run = [run for by_router in moe.values() for run in by_router.values()]
    holds(capsys, lambda: cv.ep_equals_one_process(every_run, CP_EP.tolerance))
    fails(capsys, lambda: cv.bytes_match_formula(every_run, "the one-process routing"))


_real_expert_parallel = cp_ep_runs.moe_expert_parallel


def _without_the_skew(x, w, top_k, capacity_factor, skew=0.0):
    return _real_expert_parallel(x, w, top_k, capacity_factor)


def test_moe_whose_ranks_drop_the_router_bias_is_not_unbalanced(monkeypatch, capsys):
    """The ranks' MoE called without the skew (its default is 0): the "skewed" run routes as
    the balanced one, [32, 30] rows per rank, 1.03x the mean, where the right ranks compute
    [35, 17], 1.35x."""
    monkeypatch.setattr(cp_ep_runs, "moe_expert_parallel", _without_the_skew)
    moe = cp_ep_runs.moe_runs(CP_EP, world_sizes=(N,))
    fails(capsys, lambda: cv.skewed_router_unbalances_ranks(moe[N]["balanced"], moe[N]["skewed"]))
