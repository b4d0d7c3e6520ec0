"""Issue #25: a Stop in 09's elastic cell, at any moment of the torchrun job's start, leaves
no agent and no worker behind.

torchrun starts each worker in a session of its own, so a worker outlives the kernel's
process tree unless it notices its agent is gone: the process table is searched for the
elastic worker's module, not only the kernel's children. One kernel runs the cell ten
times, as a learner pressing Stop and running it again would; each run is interrupted at
another moment after the agents start, from their first instant to the workers' first
updates (on 2 cores the first round's workers train about 8 s after their agents start).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import psutil
import pytest
from jupyter_kernel import leftovers, run, wait_for_reply

from course_utils.failures import elastic

# (whose first process the moment is counted from, seconds after it)
MOMENTS = (
    *(("agents", s) for s in (0.0, 0.5, 1.5, 3.0)),
    *(("worker", s) for s in (0.0, 0.2, 0.5, 1.0, 2.0, 3.5)),
)

SETUP = """
import tempfile
from course_utils import failures, profiles
from course_utils.failures import elastic

S = profiles.get("cpu").failures
job = failures.config_from(
    S, steps=S.elastic_steps, kill_rank=S.elastic_kill_rank, kill_at=S.elastic_kill_at
)
tempfile.tempdir = {folder!r}  # the job's folder, named in its command lines
elastic.launch = lambda *args, **kwargs: [{{"digest": None}}]  # the twin: not stopped here
"""
CELL = "elastic.elastic_restart(job, S.nodes, S.max_restarts, timeout=S.timeout)"


def _elastic_processes(folder: Path) -> list[str]:
    """Agents and workers of the elastic jobs of this test, and of no other test: their
    command lines name the worker module and the job's folder, made in `folder`."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            line = " ".join(p.info["cmdline"] or [])
            ours = elastic.WORKER in line and str(folder) in line
            if ours and p.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(f"{p.info['pid']} {line}")
        except psutil.NoSuchProcess:
            pass
    return found


def _runs(folder: Path, who: str) -> bool:
    """Whether an agent (`who` = "agents") or a worker of this test's job runs."""
    agent = "torch.distributed.run"
    lines = _elastic_processes(folder)
    return any((agent in line) == (who == "agents") for line in lines)


def _wait_for(event, failure: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not event():
        assert time.monotonic() < deadline, f"{failure} within {seconds:g} s"
        time.sleep(0.02)


def _left_after(pid: int, folder: Path, seconds: float) -> list[str]:
    deadline = time.monotonic() + seconds
    while (left := leftovers(pid) + _elastic_processes(folder)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the death signal is Linux's")
def test_a_stop_at_any_moment_of_the_elastic_start_leaves_no_process(kernel, tmp_path):
    km, kc = kernel
    pid = km.provisioner.process.pid
    assert run(kc, SETUP.format(folder=str(tmp_path)), timeout=60)["status"] == "ok"
    failures = {}
    for moment in MOMENTS:
        msg_id = kc.execute(CELL, stop_on_error=False)
        who, seconds = moment
        _wait_for(lambda who=who: _runs(tmp_path, who), f"no process of the {who} started")
        time.sleep(seconds)
        km.interrupt_kernel()
        reply = wait_for_reply(kc, msg_id, timeout=15)
        left = _left_after(pid, tmp_path, 5)
        if reply["status"] != "error" or "left running" not in reply.get("evalue", ""):
            failures[moment] = f"the cell ended {reply['status']}: {reply.get('evalue')}"
        elif left:
            failures[moment] = f"left running 5 s after the Stop: {[a[:80] for a in left]}"
            for line in left:  # for the next moments: a fresh start
                psutil.Process(int(line.split()[0])).kill()
    assert failures == {}, f"Stops at these moments after the agents started: {failures}"
