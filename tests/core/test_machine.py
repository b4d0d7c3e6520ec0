"""A real-clock verdict is judged only on a measurement that had the cores it needed."""

from __future__ import annotations

import configparser
import os
import re
import time
from collections import namedtuple
from pathlib import Path

import pytest

from course_utils.core import checks, machine
from course_utils.core.machine import MachineShare
from course_utils.ranks import start_method
from course_utils.ranks.launch import launch

SANITIZE = Path(__file__).parents[1] / "nbval_sanitize.cfg"
CpuTimes = namedtuple("CpuTimes", "user idle")


def share(others: float, cores: int = 2, machine_cores: int = 2) -> MachineShare:
    return MachineShare(cores=cores, seconds=1.0, others_cores=others, machine_cores=machine_cores)


def test_a_hog_beside_two_ranks_on_two_cores_makes_the_machine_busy():
    assert share(1.0).busy
    assert not share(0.1).busy  # a terminal, a notebook server


def test_a_hog_leaves_a_one_core_measurement_its_core():
    assert not share(1.0, cores=1).busy
    assert share(1.5, cores=1).busy


def test_a_wider_machine_leaves_room_for_others():
    assert not share(3.0, cores=2, machine_cores=8).busy
    assert share(6.5, cores=2, machine_cores=8).busy


def test_a_busy_verdict_is_not_judged_either_way(capsys):
    for ok in (True, False):
        v = checks.verdict(ok, "the claim", share(1.0))
        assert not v.judged and not v.ok
    assert capsys.readouterr().out.splitlines() == [f"{checks.NOT_JUDGED} the claim"] * 2
    assert checks.verdict(False, "the claim", share(0.0)).judged


def test_nbval_reads_a_not_judged_line_as_the_stored_pass():
    config = configparser.ConfigParser()
    config.read(SANITIZE)
    section = config["not-judged"]
    line = re.sub(section["regex"], section["replace"], f"{checks.NOT_JUDGED} the claim")
    assert line == f"{checks.PASS} the claim"


def _spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_the_watched_process_own_work_is_not_counted_as_others():
    with machine.watch(cores=1) as w:
        _spin(0.3)
    # other tests may run beside this one: what it took itself is at most what it ran
    assert w.share.seconds >= 0.3
    assert w.share.others_cores <= w.share.machine_cores


def test_ranks_a_forkserver_started_and_reaped_count_as_this_process_own_work(monkeypatch):
    """Under forkserver the ranks are the server's children, reaped by it: their CPU time
    must still count as ours, not as other programs' (it did not: 1.8 of 2 cores)."""
    monkeypatch.setenv(start_method.START_METHOD_VAR, "forkserver")
    launch(os.getpid, 2)  # the server starts, and stays for the next launch
    own, alive = machine._own_seconds()
    launch(_spin, 2, args=(0.3,))
    own_after, alive_after = machine._own_seconds()
    ours = own_after - own + sum(alive_after.values()) - sum(alive.values())
    assert ours >= 2 * 0.3


def test_only_the_cores_this_process_may_run_on_count(monkeypatch):
    cpu = [CpuTimes(user=busy, idle=10.0) for busy in (1.0, 2.0, 4.0, 8.0)]
    monkeypatch.setattr(machine.psutil, "cpu_times", lambda percpu=False: cpu)
    monkeypatch.setattr(machine.os, "sched_getaffinity", lambda pid: {1, 3}, raising=False)
    assert machine._machine_busy_seconds() == 2.0 + 8.0  # a pod pinned to cores 1 and 3


def test_a_quiet_measurement_is_taken_once(monkeypatch):
    monkeypatch.setattr(machine, "_machine_busy_seconds", lambda: 0.0)
    monkeypatch.setattr(machine, "_own_seconds", lambda: (0.0, {}))
    calls = []
    value, s = machine.on_a_quiet_machine(lambda: calls.append(1) or len(calls), cores=2)
    assert (value, s.busy, calls) == (1, False, [1])


def _a_hog_beside_it(monkeypatch):
    """Every read of the machine sees 50 more core-seconds than the last: a hog beside it."""
    clock = iter(range(1000))
    monkeypatch.setattr(machine, "_machine_busy_seconds", lambda: 50.0 * next(clock))
    monkeypatch.setattr(machine, "_own_seconds", lambda: (0.0, {}))
    monkeypatch.setattr(machine.time, "sleep", lambda seconds: None)


def test_a_busy_measurement_is_repeated_a_bounded_number_of_times(monkeypatch, capsys):
    _a_hog_beside_it(monkeypatch)
    monkeypatch.setattr(machine, "quiet_soon", lambda cores: True)  # the hog comes and goes
    calls = []
    _, s = machine.on_a_quiet_machine(lambda: calls.append(1), cores=2, attempts=3)
    assert s.busy and len(calls) == 3
    out = capsys.readouterr().out
    assert out.count("measuring again") == 2 and out.count("not judged") == 1


def test_a_machine_that_stays_busy_is_not_measured_again(monkeypatch, capsys):
    _a_hog_beside_it(monkeypatch)
    calls = []
    _, s = machine.on_a_quiet_machine(lambda: calls.append(1), cores=2, attempts=3)
    assert s.busy and len(calls) == 1
    assert "not judged" in capsys.readouterr().out


def test_quiet_soon_sees_a_quiet_window(monkeypatch):
    monkeypatch.setattr(machine, "_machine_busy_seconds", lambda: 0.0)
    monkeypatch.setattr(machine, "_own_seconds", lambda: (0.0, {}))
    assert machine.quiet_soon(cores=2, within=1.0, window=0.01)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_cores_and_attempts_must_be_whole_numbers(bad):
    with pytest.raises(ValueError, match="whole number"):
        machine.watch(cores=bad)
    with pytest.raises(ValueError, match="whole number"):
        machine.on_a_quiet_machine(lambda: None, cores=1, attempts=bad)


def test_verdicts_go_to_the_log_that_make_stress_counts(tmp_path, monkeypatch):
    log = tmp_path / "verdicts.txt"
    monkeypatch.setenv(checks.LOG_VARIABLE, str(log))
    checks.verdict(True, "holds")
    checks.verdict(True, "fast", share(1.0))
    assert log.read_text().splitlines() == ["✓ holds", f"{checks.NOT_JUDGED} fast"]
