"""Notebook 09's verdicts, run through the notebook's own runs in a world with one slip, each
print ✗. The culprit verdicts also fail on test_culprits.py's runs that lack their fault.
torchrun's workers do not see a monkeypatch, so the elastic verdicts' wrong worlds are slips
in the job the notebook hands `elastic_restart`: one that never saves, one that never fails."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from verdict_lines import fails, holds

from course_utils.failures import culprits, elastic, resume, verdicts
from course_utils.failures.resume import RunConfig, kill_and_resume
from course_utils.parallel import checkpoint

RESUME = RunConfig(steps=20, every=6, hidden=16, train_samples=256, kill_rank=1, kill_at=15)
SMALL = RunConfig(hidden=16, train_samples=256, global_batch=32)


class WithoutOptimizer(checkpoint.TrainingState):
    """A resume that restores the model, the sampler and the RNG, but not the optimizer."""

    def __init__(self, model, optimizer, batches, step: int = 0, parts=checkpoint.PARTS):
        super().__init__(model, optimizer, batches, step, [p for p in parts if p != "optimizer"])


def test_a_resume_that_forgets_the_momentum_is_not_exact(monkeypatch, capsys):
    """Slip: the load leaves SGD's momentum buffers out, so the resumed run restarts them at
    zero. It still resumes from update 12; its first loss (before any step) equals the
    uninterrupted run's, its second differs (2.2701 against 2.2669), and so do its weights."""
    monkeypatch.setattr(checkpoint, "TrainingState", WithoutOptimizer)
    run = kill_and_resume(RESUME, 2, timeout=60)
    assert run.resumed_from == 12 and not run.tail_equal()
    fails(capsys, lambda: verdicts.resume_is_exact(run))


def first_checkpoint(root) -> int | None:
    """`checkpoint.latest` with the slip: the oldest complete checkpoint, not the newest."""
    done = [int(p.parent.name.split("-")[1]) for p in Path(root).glob("step-*/.metadata")]
    return min(done, default=None)


def test_a_resume_from_the_first_checkpoint_is_not_from_the_last(monkeypatch, capsys):
    """Slip: the resume picks the oldest checkpoint (update 6, of those at 6 and 12). It goes
    on from there bit for bit, so `resume_is_exact` holds; only this verdict sees the 9
    updates redone where 3 would do."""
    monkeypatch.setattr(checkpoint, "latest", first_checkpoint)
    run = kill_and_resume(RESUME, 2, timeout=60)
    assert run.resumed_from == 6 and run.tail_equal()
    fails(capsys, lambda: verdicts.resumed_from_last_checkpoint(run))


def test_a_rank_that_is_slow_but_not_stuck_is_no_hang(monkeypatch, capsys):
    """Slip in the world: rank 1's read lasts 0.2 s, well within the barrier's 1 s. The
    barrier passes and the launch ends: no rank named, no stack dump."""
    monkeypatch.setattr(culprits, "stuck_reading_a_shard", lambda seconds: time.sleep(0.2))
    hang = culprits.find_hung_rank(2, hang_rank=1, barrier_timeout=1.0, timeout=3.0)
    assert hang["barrier_names"] == [] and hang["launcher_names"] is None
    fails(capsys, lambda: verdicts.hang_found(hang, 1, "stuck_reading_a_shard"))


def test_a_run_where_no_rank_is_slowed_has_no_straggler(capsys):
    """No rank sleeps: each rank's work is about 1 ms an update (0.9-1.2 ms in five runs,
    beside 7-12 ms of waiting in the all-reduce on 2 shared cores), none 3x the other's."""
    table = culprits.time_ranks(SMALL, 2, slow_rank=None, delay=0.03, steps=20)
    fails(capsys, lambda: verdicts.straggler_found(table, 1))


def test_ranks_that_never_average_their_gradients_do_not_wait(monkeypatch, capsys):
    """Slip: the gradients are not all-reduced (the hook does nothing), so no rank waits for
    another: rank 1's update lasts 32-34 ms (its 30 ms of sleep), rank 0's about 3 ms."""
    monkeypatch.setattr(culprits, "average_gradients", lambda net: None)
    table = culprits.time_ranks(SMALL, 2, slow_rank=1, delay=0.03, steps=8)
    assert table[0]["step"] < 0.5 * table[1]["work"]
    fails(capsys, lambda: verdicts.job_waits_for_straggler(table, 1))


def test_replicas_without_ddp_are_not_a_healthy_run(monkeypatch, capsys):
    """Slip: the model is not wrapped in DDP, so each rank trains its own replica on its own
    data: at the first check (update 2) the parameter checksums differ."""
    monkeypatch.setattr(culprits, "replica", lambda model: model)
    records = culprits.compare_ranks(SMALL, 2, every=2, steps=2)
    found = culprits.first_disagreement(records)
    assert found == {"step": 2, "kind": "parameters", "rank": 0}
    fails(capsys, lambda: verdicts.culprit_found(found, None, None))


def test_ranks_that_all_take_the_same_samples_are_not_a_healthy_run(monkeypatch, capsys):
    """Slip: the sampler is built without the rank (every rank takes rank 0's share), the
    classic missing DistributedSampler. The weights agree, so only the data check sees it:
    every pair of ranks shares samples, and no one rank is to blame."""
    real = resume.GlobalBatches
    monkeypatch.setattr(
        resume, "GlobalBatches", lambda n, batch, rank, *rest: real(n, batch, 0, *rest)
    )
    records = culprits.compare_ranks(SMALL, 2, every=2, steps=2)
    found = culprits.first_disagreement(records)
    assert found == {"step": 2, "kind": "data", "rank": None}
    fails(capsys, lambda: verdicts.culprit_found(found, None, None))


# the job of test_elastic.py, whose right world resumes from update 4 with both verdicts ✓
ELASTIC = RunConfig(steps=12, every=4, hidden=16, train_samples=256, kill_rank=1, kill_at=6)


def test_a_job_that_never_saves_is_restarted_but_starts_again_from_scratch(capsys):
    """Slip: no checkpoints (`every=None`). The agents still see rank 1 killed and restart
    the group, but the new round finds nothing to load and starts at update 0, not at 4."""
    out = elastic.elastic_restart(replace(ELASTIC, every=None), 2, max_restarts=1, timeout=90)
    assert [r["start"] for r in out["ranks"]] == [0, 0]
    holds(capsys, lambda: verdicts.agent_restarted(out["agent"], nodes=2))
    fails(capsys, lambda: verdicts.elastic_recovered(out["ranks"], out["twin_digest"], 4))


def test_a_job_that_never_fails_shows_no_restart(capsys):
    """Slip: no rank is killed. One round runs from update 0 to the end; no agent reports a
    killed worker or restarts one."""
    out = elastic.elastic_restart(replace(ELASTIC, kill_rank=None), 2, max_restarts=1, timeout=90)
    assert not any("will restart" in line for line in out["agent"])
    fails(capsys, lambda: verdicts.agent_restarted(out["agent"], nodes=2))
    fails(capsys, lambda: verdicts.elastic_recovered(out["ranks"], out["twin_digest"], 4))
