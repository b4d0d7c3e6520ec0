"""Megatron tensor parallel by hand equals one process after several SGD steps, sends
exactly the formula's bytes per block, and fails loudly where it should."""

from __future__ import annotations

import pytest
import torch.distributed as dist

from course_utils.core.sizes_model_parallel import TransformerSizes
from course_utils.ranks.launch import launch
from course_utils.transformer import model as M
from course_utils.transformer import tp_formulas, tp_runs
from course_utils.transformer.tensor_parallel import tensor_parallel_model

SIZES = TransformerSizes(vocab=16, width=16, heads=4, blocks=2, seq_len=8, batch=2, steps=3)


@pytest.fixture(scope="module")
def runs():
    return tp_runs.train_and_compare(SIZES, kinds=("tp",), world_sizes=(2, 4))


@pytest.mark.parametrize("n", [2, 4])
def test_tp_equals_one_process_and_sends_the_formula_s_bytes(runs, n):
    run = runs["tp", n]
    assert run.max_diff < 1e-5
    assert run.losses == pytest.approx(run.reference_losses, abs=1e-5)
    per_block = tp_runs.bytes_per_block(run.step_log)
    assert per_block == {b: tp_formulas.block_bytes(SIZES, n, "tp") for b in range(2)}
    assert all(m.where.startswith("block ") for m in run.step_log)  # nothing outside blocks
    assert len(run.step_log) == 2 * 2 * SIZES.blocks


def _broken_and_refused():
    """A split model without g's all-reduce drifts from one process; sizes that do not
    split evenly are refused."""
    model = M.build(SIZES)
    broken = tensor_parallel_model(model, leave=lambda x: x)
    tokens = M.batches(SIZES, 1)[0, :, :-1]
    gap = (broken(tokens) - model(tokens)).abs().max().item()
    odd = TransformerSizes(vocab=16, width=12, heads=3, blocks=1, seq_len=8)
    try:
        tensor_parallel_model(M.build(odd))
        refused = ""
    except ValueError as error:
        refused = str(error)
    return dist.get_rank(), gap, refused


def test_a_missing_all_reduce_shows_and_uneven_heads_are_refused():
    for rank, gap, refused in launch(_broken_and_refused, 2, backend="gloo"):
        assert gap > 1e-3, rank
        assert "3 attention heads cannot be split evenly over 2 ranks" in refused
