"""Tie a worker that torchrun started to its agent, before anything slow happens.

torchrun starts every worker in a session of its own, so stopping an agent (a notebook's
Stop kills the agent's process group) never reaches its workers: only a death signal the
worker asks for does. A worker that imports torch and the course first (seconds) and asks
only then may find its agent already gone, its parent init or a subreaper, and tie itself
to that: it then trains on alone, or waits for ever on a rendezvous nobody serves. So the
worker asks first, and checks that its parent is still a torchrun agent. This module
imports nothing heavy: call it before the rest.

Importing any module of the course imports the course's package first, and with it
torch: seconds. So the jobs the course starts (`local_nodes.run_local_nodes`) have torchrun
run this very file by its path, `TIED_WORKER MODULE ARGS...`: it ties the worker, then runs
MODULE as `python -m MODULE ARGS...` would.
"""

from __future__ import annotations

import ctypes
import os
import runpy
import signal
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
AGENT_MODULES = ("torch.distributed.run", "torch.distributed.launch")  # `python -m ...`
ORPHANED = 3  # the exit code of a worker whose agent was gone before it could tie itself
TIED_WORKER = os.path.abspath(__file__)  # the script torchrun runs: this file


def tie_to_agent(worker: str = "this worker") -> int:
    """Die with the agent that started this worker (Linux); returns the agent's pid.

    The death signal covers every later moment; the check after it covers the moment
    before, when the parent may already be init: its pid then is no torchrun's.
    """
    agent = os.getppid()
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != agent or not runs_torchrun(agent):
            print(
                f"{worker}: the torchrun agent that started it is gone (parent pid "
                f"{os.getppid()}); leaving.",
                file=sys.stderr,
                flush=True,
            )
            os._exit(ORPHANED)
    return agent


def runs_torchrun(pid: int) -> bool:
    """Whether process `pid` is a torchrun agent, from its command line (True if unreadable:
    the death signal alone then guards the worker)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().decode(errors="replace").split("\0")
    except OSError:
        return True
    return any(a in AGENT_MODULES or os.path.basename(a) == "torchrun" for a in args)


def run_module_tied(argv: list[str]) -> None:
    """Tie this worker to its agent, then run module `argv[0]` with `argv[1:]` as arguments."""
    tie_to_agent(argv[0])
    sys.path[0] = os.getcwd()  # where `python -m` looks first, not this file's folder
    sys.argv = list(argv)
    runpy.run_module(argv[0], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(f"usage: torchrun ... {TIED_WORKER} MODULE [ARGS...]")
    run_module_tied(sys.argv[1:])
