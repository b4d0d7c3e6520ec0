"""A run killed by SIGKILL resumes from its DCP checkpoint bit for bit; 4 ranks' checkpoint
loads into 2; and the claims about them fail when the effect is absent."""

from __future__ import annotations

import tempfile
from dataclasses import replace

import pytest
import torch

from course_utils.failures import batches, resharding, verdicts, young
from course_utils.failures.resume import RunConfig, kill_and_resume

SMALL = RunConfig(steps=20, every=6, hidden=16, train_samples=256, kill_rank=1, kill_at=15)


@pytest.fixture(scope="module")
def resumed():
    return kill_and_resume(SMALL, 2, timeout=60)


def test_a_killed_run_resumes_bit_for_bit_from_its_last_checkpoint(resumed):
    assert "rank 1 of 2" in resumed.error and "SIGKILL" in resumed.error
    assert resumed.resumed_from == 12 and resumed.redone_steps == 3
    assert resumed.tail_equal()
    assert resumed.killed_losses == resumed.full["losses"][:15]
    assert len(set(resumed.digests["full"] + resumed.digests["resumed"])) == 1
    assert 0 < resumed.kill_to_resume_seconds < 30
    assert verdicts.resume_is_exact(resumed) and verdicts.resumed_from_last_checkpoint(resumed)


def test_the_resume_verdicts_fail_without_the_effect(resumed):
    broken = replace(resumed, resumed={**resumed.resumed, "losses": [0.0]})
    assert not verdicts.resume_is_exact(broken)
    assert not verdicts.resumed_from_last_checkpoint(replace(resumed, every=5))
    assert not verdicts.killed_rank_named("no rank failed", 1)
    assert not verdicts.recovers_quickly(45.0)


def test_four_ranks_checkpoint_loads_into_two_and_training_goes_on():
    out = resharding.reshard(replace(SMALL, kill_rank=None), 4, 2, save_at=8, timeout=60)
    assert out["start"] == 8 and out["world_sizes"] == (4, 2)
    assert set(out["loaded_digests"]) == {out["saved_digest"]}
    assert out["gap"] < 1e-5
    assert verdicts.reshard_matches(True, out["gap"])
    assert not verdicts.reshard_matches(False, 0.0) and not verdicts.reshard_matches(True, 1e-2)


def test_the_sampler_position_survives_a_pass_boundary():
    b = batches.GlobalBatches(64, 16, rank=0, world_size=2, seed=0)
    b.set_epoch(0)
    taken = list(b)
    assert b.state_dict() == {"epoch": 1, "batches_done": 0} and len(taken) == 4
    again = batches.GlobalBatches(64, 16, rank=0, world_size=2, seed=0)
    again.load_state_dict({"epoch": 0, "batches_done": 2})
    assert [t.tolist() for t in again] == [t.tolist() for t in taken[2:]]
    with pytest.raises(ValueError, match="split evenly"):
        batches.GlobalBatches(64, 10, rank=0, world_size=4)


def test_global_batches_are_the_same_whatever_the_number_of_ranks():
    def union(world):
        parts = [list(batches.GlobalBatches(64, 16, r, world, seed=3)) for r in range(world)]
        return [sorted(torch.cat([p[i] for p in parts]).tolist()) for i in range(4)]

    assert union(4) == union(2) == union(1)


def test_youngs_formula_and_its_verdict():
    assert young.young_interval(2.0, 100.0) == pytest.approx(20.0)
    runs = {None: {"seconds": 1.0, "saving": 0.0}}
    runs |= {k: {"seconds": 1.0 + 1 / k, "saving": 1 / k} for k in (1, 2, 4, 8, 16)}
    lost = young.lost_time(runs, steps=16, mtbf_steps=100, restart=0.5)
    assert lost["save_seconds"] == pytest.approx(1 / 16)
    assert lost["young_steps"] == pytest.approx((2 / 16 * 100 / 16) ** 0.5 * 16)
    assert verdicts.young_agrees(lost["lost"], lost["young_steps"])
    assert not verdicts.young_agrees({1: 1.0, 2: 2.0, 32: 3.0}, young_steps=16)
    assert not verdicts.young_agrees({1: 3.0, 4: 1.3, 16: 1.0}, young_steps=5)


def test_a_checkpoint_folder_without_metadata_is_not_complete():
    from course_utils.failures import checkpoint

    with tempfile.TemporaryDirectory() as root:
        assert checkpoint.latest(root) is None
        (checkpoint.step_folder(root, 4)).mkdir()
        assert checkpoint.latest(root) is None
        (checkpoint.step_folder(root, 4) / ".metadata").write_bytes(b"")
        assert checkpoint.latest(root) == 4
