"""Sequence parallel equals one process, moves tensor parallel's bytes per block as
reduce-scatters and all-gathers, and needs its parameter-gradient sync."""

from __future__ import annotations

import pytest
import torch.distributed as dist

from course_utils.core.sizes_model_parallel import TransformerSizes
from course_utils.ranks.launch import launch
from course_utils.transformer import model as M
from course_utils.transformer import tp_formulas, tp_runs
from course_utils.transformer.sequence_parallel import sequence_parallel_model

SIZES = TransformerSizes(vocab=16, width=16, heads=4, blocks=2, seq_len=8, batch=2, steps=3)


@pytest.fixture(scope="module")
def runs():
    return tp_runs.train_and_compare(SIZES, kinds=("sp",), world_sizes=(2, 4))


@pytest.mark.parametrize("n", [2, 4])
def test_sp_equals_one_process_and_sends_the_formula_s_bytes(runs, n):
    run = runs["sp", n]
    assert run.max_diff < 1e-5
    assert run.losses == pytest.approx(run.reference_losses, abs=1e-5)
    per_block = tp_runs.bytes_per_block(run.step_log)
    assert per_block == {b: tp_formulas.block_bytes(SIZES, n, "sp") for b in range(2)}
    assert tp_formulas.sent_per_block(SIZES, n, "sp") == tp_formulas.sent_per_block(SIZES, n, "tp")
    outside = [(m.where, m.direction, m.op) for m in run.step_log if not m.where.startswith("b")]
    assert outside == [
        ("head", "forward", "all_gather"),
        ("embedding", "backward", "all_gather"),
        ("sequence-parallel parameters", "backward", "all_reduce"),
    ]


def _without_sync_and_uneven():
    """Skipping the LayerNorms' gradient sum leaves each rank with its positions' share;
    a sequence that does not split evenly is refused."""
    reference = M.one_process_steps(SIZES, 2)["params"]
    model = sequence_parallel_model(M.build(SIZES))
    M.train_steps(model, M.batches(SIZES, 2), SIZES.lr)  # no sync_sequence_parallel_grads
    trained = M.build(SIZES)
    trained.load_state_dict(reference)
    twin = dict(sequence_parallel_model(trained).named_parameters())
    gap = max((p - twin[k]).abs().max().item() for k, p in model.named_parameters())
    odd = TransformerSizes(vocab=16, width=16, heads=4, blocks=1, seq_len=6, batch=2)
    try:
        sequence_parallel_model(M.build(odd))(M.batches(odd, 1)[0, :, :-1])
        refused = ""
    except ValueError as error:
        refused = str(error)
    return dist.get_rank(), gap, refused


def test_without_the_gradient_sync_sp_drifts_and_uneven_sequences_are_refused():
    for rank, gap, refused in launch(_without_sync_and_uneven, 4, backend="gloo"):
        assert gap > 1e-4, rank
        assert "6 tokens cannot be split evenly over 4 ranks" in refused
