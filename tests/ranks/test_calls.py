"""Independent calls in child processes, started and watched as launch's ranks are: each
call's value comes back in order, a call that raises, dies or hangs is named while the
others are kept, and nothing started here is left running - not even what a child
started itself. (conftest.py's autouse fixture fails any test here that leaves a child of
this process behind.)"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import psutil
import pytest
import torch

from course_utils.core.errors import ChildError, CourseError
from course_utils.ranks import processes
from course_utils.ranks.launch import run_calls, run_in_child


def whoami(x: int = 0, pause: float = 0.0) -> dict:
    time.sleep(pause)
    return {
        "x": x,
        "pid": os.getpid(),
        "threads": torch.get_num_threads(),
        "gpu": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }


def faulty(x: int = 0) -> int:
    if x == 1:
        raise ZeroDivisionError("call 1 divides by zero")
    if x == 2:
        os._exit(3)
    if x == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    if x == 4:
        time.sleep(60)
    return x


def test_values_come_back_in_order_each_from_its_own_child():
    outcomes = run_calls(whoami, [{"x": x} for x in range(4)], jobs=2)
    assert [o.value["x"] for o in outcomes] == [0, 1, 2, 3] and all(o.ok for o in outcomes)
    pids = {o.value["pid"] for o in outcomes}
    assert len(pids) == 4 and os.getpid() not in pids
    assert {o.value["threads"] for o in outcomes} == {1}  # forked: one thread
    assert {o.slot for o in outcomes} == {0, 1}
    assert all(o.start <= o.end for o in outcomes)


def test_a_function_defined_here_travels_by_value():
    offset = 10
    outcomes = run_calls(lambda x: x + offset, [{"x": 1}, {"x": 2}], jobs=2)
    assert [o.value for o in outcomes] == [11, 12]


def test_each_lane_sees_its_own_gpu():
    outcomes = run_calls(
        whoami, [{"x": x} for x in range(3)], jobs=2, gpus=("7", "9"), start_method="fork"
    )
    assert {o.slot: o.value["gpu"] for o in outcomes} == {0: "7", 1: "9"}
    assert run_calls(whoami, [{}])[0].value["gpu"] is None


def test_calls_given_a_gpu_are_spawned_unless_a_method_is_asked_for(monkeypatch):
    chosen = []
    real_context = processes.context

    def recording_context(start_method=None, backend="gloo"):
        ctx = real_context(start_method, backend)
        chosen.append(ctx.get_start_method())
        return real_context("fork")  # the choice is what is tested; a fork keeps it quick

    monkeypatch.setattr(processes, "context", recording_context)
    run_calls(whoami, [{}], gpus=("0",))
    run_calls(whoami, [{}])
    run_calls(whoami, [{}], gpus=("0",), start_method="fork")
    assert chosen == ["spawn", "fork", "fork"]


@pytest.mark.parametrize(
    "x, status, error",
    [
        (1, "raised", "ZeroDivisionError: call 1 divides by zero"),
        (2, "died", "exited with code 3"),
        (3, "died", "was killed by SIGKILL"),
        (4, "timeout", "TimeoutError: stopped after 1 s"),
    ],
    ids=["raises", "exits", "sigkilled", "hangs"],
)
def test_a_call_that_raises_dies_or_hangs_is_named_and_the_others_kept(x, status, error):
    start = time.monotonic()
    ok, failed = run_calls(faulty, [{"x": 0}, {"x": x}], jobs=2, timeout=1)
    assert time.monotonic() - start < 30
    assert ok.ok and ok.value == 0
    assert (failed.status, failed.error) == (status, error) and not failed.ok
    assert ("Traceback" in failed.traceback) == (status == "raised")


def test_a_value_that_cannot_be_pickled_is_an_error_not_a_hang():
    (outcome,) = run_calls(threading.Lock, [{}])
    assert outcome.status == "raised" and "pickle" in outcome.error


def test_what_a_child_started_itself_is_stopped_with_it():
    def start_a_grandchild():
        return subprocess.Popen(["sleep", "60"]).pid

    (outcome,) = run_calls(start_a_grandchild, [{}])
    grandchild = psutil.Process(outcome.value)
    assert psutil.wait_procs([grandchild], timeout=5)[1] == []  # gone, however it ended


def test_an_error_in_the_caller_stops_every_child():
    def fail_on_first(outcome):
        raise RuntimeError("the caller's progress bar broke")

    calls = [{"pause": 0}, {"pause": 60}, {"pause": 60}]
    with pytest.raises(RuntimeError, match="progress bar broke"):
        run_calls(whoami, calls, jobs=2, on_done=fail_on_first)
    # the autouse fixture fails this test if a child is still alive


def test_a_killed_command_the_system_still_holds_is_named_with_its_state(monkeypatch):
    """As an agent in the middle of a read from a stalled disk: the SIGKILL is sent, but the
    system lets the process go only later (a Stop once saw 10 s go by)."""
    child = processes.start_command(["sleep", "60"])

    def held_by_the_system(timeout=None):
        raise subprocess.TimeoutExpired(child.args, timeout)

    monkeypatch.setattr(child, "wait", held_by_the_system)
    with pytest.raises(CourseError) as stopped:
        processes.stop(child, wait=0.1)
    message = str(stopped.value)
    assert f"process {child.pid} (sleep 60, state " in message
    assert "had not ended 0.1 s later" in message and f"`ps -p {child.pid}`" in message
    monkeypatch.undo()
    assert child.wait(timeout=10) == -signal.SIGKILL  # the kill was sent all the same


@pytest.mark.parametrize("jobs", [0, -1, True, 1.5, "2"])
def test_jobs_must_be_a_whole_number(jobs):
    with pytest.raises(ValueError, match="jobs must be a whole number"):
        run_calls(whoami, [{}], jobs=jobs)


def test_run_in_child_returns_the_childs_value():
    value = run_in_child(whoami, start_method="fork", timeout=30)
    assert value["pid"] != os.getpid()


@pytest.mark.parametrize(
    "x, message",
    [
        (1, "faulty failed in its child process: ZeroDivisionError"),
        (3, "the child process running faulty was killed by SIGKILL before answering"),
        (4, "faulty failed in its child process: TimeoutError: stopped after 1 s"),
    ],
    ids=["raises", "sigkilled", "hangs"],
)
def test_run_in_child_raises_what_went_wrong(x, message):
    with pytest.raises(ChildError, match=message) as caught:
        run_in_child(faulty, {"x": x}, timeout=1)
    assert caught.value.outcome.status in ("raised", "died", "timeout")
