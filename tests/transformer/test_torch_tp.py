"""PyTorch's `parallelize_module` with Colwise/Rowwise/SequenceParallel runs on gloo, holds
the same shards as the hand-written split and trains to the same parameters."""

from __future__ import annotations

import torch.distributed as dist

from course_utils.core.sizes_model_parallel import TransformerSizes
from course_utils.ranks.launch import launch
from course_utils.transformer import model as M
from course_utils.transformer import tp_runs

SIZES = TransformerSizes(vocab=16, width=16, heads=4, blocks=2, seq_len=8, batch=2, steps=3)


def test_torch_tp_and_sp_equal_one_process_on_2_and_4_ranks():
    runs = tp_runs.train_and_compare(SIZES, kinds=("torch_tp", "torch_sp"), world_sizes=(2, 4))
    assert set(runs) == {(k, n) for k in ("torch_tp", "torch_sp") for n in (2, 4)}
    for run in runs.values():
        assert run.max_diff < 1e-5, run.kind
        assert run.step_log == []  # PyTorch's collectives are not the chapter's
        assert run.losses[0] == run.reference_losses[0]


def _shards():
    """Each rank's local shard from PyTorch next to the hand-written one, by name."""
    hand = tp_runs.split(M.build(SIZES), "sp")
    ours = dict(hand.named_parameters())
    theirs = tp_runs.split(M.build(SIZES), "torch_sp")
    gaps = {
        name: (tp_runs._local(p.detach()) - ours[name].detach()).abs().max().item()
        for name, p in theirs.named_parameters()
    }
    return dist.get_rank(), gaps, ours.keys() == dict(theirs.named_parameters()).keys()


def test_torch_shards_are_the_hand_written_ones():
    for rank, gaps, same_names in launch(_shards, 4, backend="gloo"):
        assert same_names, rank
        assert max(gaps.values()) == 0.0, (rank, gaps)
