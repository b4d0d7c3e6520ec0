"""The hung, the slow and the silently different rank are each named; the verdicts fail
when nothing is wrong."""

from __future__ import annotations

import pytest

from course_utils.failures import culprits, verdicts
from course_utils.failures.resume import RunConfig

SMALL = RunConfig(hidden=16, train_samples=256, global_batch=32)


def test_a_hung_rank_is_named_by_monitored_barrier_and_located_by_the_stack_dump():
    report = culprits.find_hung_rank(3, hang_rank=1, barrier_timeout=1.0, timeout=3.0)
    assert report["barrier_names"] == [1] and report["launcher_names"] == 1
    assert "stuck_reading_a_shard" in report["where"]
    assert verdicts.hang_found(report, 1, "stuck_reading_a_shard")
    assert not verdicts.hang_found({**report, "barrier_names": []}, 1, "stuck_reading_a_shard")


def test_a_straggler_does_the_work_and_the_others_wait():
    """Bounds the delay guarantees: the slow rank sleeps it in its work, and the other rank's
    all-reduce cannot end before the slow rank's starts. How the times compare on a quiet
    machine is for the notebook's verdicts; a test on a shared machine cannot tell."""
    delay = 0.03
    table = culprits.time_ranks(SMALL, 2, slow_rank=1, delay=delay, steps=8)
    assert sorted(table) == [0, 1]
    assert table[1]["work"] >= delay
    assert all(t["step"] >= 0.9 * delay and 0 <= t["wait"] <= t["step"] for t in table.values())


def test_the_straggler_verdicts_hold_for_a_job_that_waits_for_its_slow_rank():
    table = {r: {"step": 0.035, "wait": 0.03, "work": 0.005} for r in range(4)}
    table[3] = {"step": 0.035, "wait": 0.0, "work": 0.035}
    assert verdicts.straggler_found(table, 3) and verdicts.job_waits_for_straggler(table, 3)


def test_the_straggler_verdicts_fail_when_every_rank_is_alike():
    even = {r: {"step": 0.01, "wait": 0.005, "work": 0.005} for r in range(4)}
    assert not verdicts.straggler_found(even, 3)
    alone = {
        0: {"step": 0.01, "wait": 0.0, "work": 0.01},
        1: {"step": 0.05, "wait": 0, "work": 0.05},
    }
    assert not verdicts.job_waits_for_straggler(alone, 1)


@pytest.fixture(scope="module")
def checked():
    """The notebook's three runs, small: healthy, a rank that forgets set_epoch, a drift."""
    return {
        "healthy": culprits.compare_ranks(SMALL, 2, every=2, steps=20),
        "forgot": culprits.compare_ranks(SMALL, 4, every=2, steps=20, forget_epoch_rank=2),
        "drifted": culprits.compare_ranks(SMALL, 4, every=2, steps=12, drift=(0, 5)),
    }


def test_checksums_name_the_rank_with_other_data_or_other_weights(checked):
    assert culprits.first_disagreement(checked["healthy"]) is None
    found = culprits.first_disagreement(checked["forgot"])
    assert found["kind"] == "data" and found["rank"] == 2 and found["step"] > 8
    drifted = checked["drifted"]
    assert culprits.first_disagreement(drifted) == {"step": 6, "kind": "parameters", "rank": 0}


def test_the_culprit_verdicts_fail_on_the_runs_without_their_fault(checked, capsys):
    """The notebook's three verdicts, as it calls them, each on the runs above that lack its
    fault: the healthy claim on the drift (found: parameters, rank 0, update 6) and on the
    forgotten set_epoch (data, rank 2); the drift's ("parameters", 2) on the healthy run (none
    found) and on the forgotten set_epoch (rank 2, but its data); the forgotten set_epoch's
    ("data", 1) on the healthy run and on the drift."""
    found = {name: culprits.first_disagreement(records) for name, records in checked.items()}
    capsys.readouterr()
    wrong_worlds = [
        (found["drifted"], None, None),
        (found["forgot"], None, None),
        (found["healthy"], "parameters", 2),
        (found["forgot"], "parameters", 2),
        (found["healthy"], "data", 1),
        (found["drifted"], "data", 1),
    ]
    assert not any([verdicts.culprit_found(*args) for args in wrong_worlds])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(wrong_worlds) and all(line.startswith("✗ ") for line in lines)


def test_the_culprit_verdict_fails_on_the_wrong_rank_or_a_healthy_run():
    found = {"step": 6, "kind": "parameters", "rank": 0}
    assert verdicts.culprit_found(found, "parameters", 0)
    assert not verdicts.culprit_found(found, "parameters", 1)
    assert not verdicts.culprit_found(None, "data", 1)
    assert not verdicts.culprit_found(found, None, None)
