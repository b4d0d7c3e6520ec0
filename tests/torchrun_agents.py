"""Stopping a torchrun agent the moment its worker exists, as a notebook's Stop can.

torchrun starts each worker in a session of its own, so the agent's death reaches it only
through what the worker arranged itself. Two tests (ranks' torchrun entry point and 09's
elastic worker) start one agent, wait for the worker running their module, kill the agent's
process group and watch how long the worker outlives it.
"""

from __future__ import annotations

import subprocess
import tempfile
import time

import psutil

from course_utils.ranks import agent, processes

# The killed agents' TMPDIRs, where torchelastic leaves its folders: removed once their
# workers, still running when a test gets them, are gone (`seconds_it_outlives`).
_AGENTS_TMPDIRS: list[tempfile.TemporaryDirectory] = []


def stop_the_agent_once_its_worker_runs(cmd: list[str], env: dict, module: str):
    """(whether the agent ran as a torchrun agent while alive, the worker running `module`
    as a psutil.Process), the agent already stopped."""
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    scratch = tempfile.TemporaryDirectory(prefix="killed-agent-")  # its torchelastic_* folder
    _AGENTS_TMPDIRS.append(scratch)
    started = processes.start_command(cmd, env={**env, "TMPDIR": scratch.name}, **quiet)
    worker = None
    try:
        deadline = time.monotonic() + 60  # torchrun imports torch first: seconds on 2 cores
        while worker is None and started.poll() is None and time.monotonic() < deadline:
            workers = [
                p for p in psutil.Process(started.pid).children(recursive=True)
                if module in " ".join(_cmdline(p))
            ]  # fmt: skip
            worker = workers[0] if workers else time.sleep(0.005)
        assert worker is not None, "the agent started no worker within 60 s"
        return agent.runs_torchrun(started.pid), worker
    finally:
        processes.stop(started)  # what a notebook's Stop does: the agent's group, SIGKILL


def seconds_it_outlives(worker, bound: float) -> float:
    """How long `worker` stays alive after now, at most `bound` (then it is killed)."""
    stopped = time.monotonic()
    try:
        while _alive(worker) and time.monotonic() - stopped < bound:
            time.sleep(0.05)
        return time.monotonic() - stopped
    finally:
        if _alive(worker):
            worker.kill()
        while _AGENTS_TMPDIRS:
            _AGENTS_TMPDIRS.pop().cleanup()


def _alive(process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _cmdline(process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []
