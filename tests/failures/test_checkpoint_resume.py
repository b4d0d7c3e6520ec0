"""A run killed by SIGKILL resumes from its DCP checkpoint bit for bit, its sampler knows
where it is, Young's interval is replayed on measured runs; and the claims about them fail
when the effect is absent (resharding: test_resharding.py)."""

from __future__ import annotations

import tempfile
from dataclasses import replace

import numpy as np
import pytest
import torch

from course_utils.failures import batches, verdicts, young
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


def _timed_runs(steps: int, step: float, save: float, intervals=(1, 2, 4, 8, 16)) -> dict:
    """Runs as `young.time_intervals` returns them: every update `step` s, every save `save` s."""

    def run(k):
        ends = list(
            np.cumsum([step + (save if k and i % k == 0 else 0) for i in range(1, steps + 1)])
        )
        saves = [save] * (steps // k if k else 0)
        return {"seconds": ends[-1], "saving": sum(saves), "saves": saves, "update_ends": ends}

    return {k: run(k) for k in (None, *intervals)}


def _walked(update_ends, every, mtbf, restart, baseline, jobs, cycles, seed=0) -> float:
    """replay_failures' serial twin: the job walked one update at a time, same random gaps."""
    one = np.diff([0.0, *update_ends])
    rng, spent = np.random.default_rng(seed), 0.0
    for _ in range(jobs):
        done, finished = 0, False
        while not finished:
            gap, elapsed, i = rng.exponential(mtbf), 0.0, done
            while i < len(one) * cycles and elapsed + one[i % len(one)] <= gap:
                elapsed, i = elapsed + one[i % len(one)], i + 1
            if i == len(one) * cycles:
                spent, finished = spent + elapsed, True
            else:
                spent, done = spent + gap + restart, max(done, i // every * every)
    return (spent / jobs - cycles * baseline) / (cycles * baseline / mtbf)


def test_replayed_failures_equal_the_job_walked_one_update_at_a_time():
    runs = _timed_runs(steps=16, step=0.01, save=0.03)
    for k in (1, 4, 16):
        args = (runs[k]["update_ends"], k, 0.3, 0.05, runs[None]["seconds"])
        fast = young.replay_failures(*args, jobs=30, cycles=5, seed=1)
        assert fast == pytest.approx(_walked(*args, jobs=30, cycles=5, seed=1))


def test_a_failure_costs_half_an_update_and_the_restart_when_every_update_is_saved_free():
    runs = _timed_runs(steps=16, step=0.01, save=0.0)
    lost = young.replay_failures(runs[1]["update_ends"], 1, 1.0, 0.2, runs[None]["seconds"])
    assert lost == pytest.approx(0.2 + 0.005, rel=0.05)


def test_saves_go_in_after_every_kth_update_of_the_plain_run():
    assert young.with_saves([1.0, 2.0, 3.0, 4.0], 2, [0.5, 0.25]) == [1.0, 2.5, 3.5, 4.75]
    assert young.with_saves([1.0, 2.0], 4, []) == [1.0, 2.0]


def test_youngs_formula_and_its_verdict():
    assert young.young_interval(2.0, 100.0) == pytest.approx(20.0)
    runs = _timed_runs(steps=32, step=0.01, save=0.02, intervals=(1, 2, 4, 8, 16, 32))
    lost = young.lost_time(runs, steps=32, mtbf_steps=50, restart=0.1)
    assert lost["save_seconds"] == pytest.approx(0.02)
    assert lost["young_steps"] == pytest.approx((2 * 0.02 * 0.5) ** 0.5 / 0.01)
    assert min(lost["lost"], key=lost["lost"].get) in (8, 16)  # Young: 14 updates
    assert verdicts.young_agrees(lost["lost"], lost["young_steps"])
    assert not verdicts.young_agrees({1: 1.0, 2: 2.0, 32: 3.0}, young_steps=16)
    assert not verdicts.young_agrees({1: 3.0, 4: 1.3, 16: 1.0}, young_steps=5)
    # saves that cost more the more updates they cover (C = 10 ms per update since the last):
    # Young assumes one C, and the replay shows that saving every update is then best
    for k, run in runs.items():
        if k:
            run["saves"] = [0.01 * k] * (32 // k)
            run["saving"] = 0.01 * 32
    lost = young.lost_time(runs, steps=32, mtbf_steps=50, restart=0.0)
    assert min(lost["lost"], key=lost["lost"].get) == 1 and lost["young_steps"] > 8
    assert not verdicts.young_agrees(lost["lost"], lost["young_steps"])


def test_replay_refuses_what_it_cannot_replay():
    with pytest.raises(ValueError, match="every >= 1"):
        young.replay_failures([0.1, 0.2], 0, 1.0, 0.0, 0.2)
    with pytest.raises(ValueError, match="mtbf > 0"):
        young.replay_failures([], 1, 1.0, 0.0, 0.2)


def test_a_checkpoint_folder_without_metadata_is_not_complete():
    from course_utils.parallel import checkpoint

    with tempfile.TemporaryDirectory() as root:
        assert checkpoint.latest(root) is None
        (checkpoint.step_folder(root, 4)).mkdir()
        assert checkpoint.latest(root) is None
        (checkpoint.step_folder(root, 4) / ".metadata").write_bytes(b"")
        assert checkpoint.latest(root) == 4
