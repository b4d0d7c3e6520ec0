"""The worker torchrun's agents start for the elastic run; it dies with its agent.

    python -m torch.distributed.run --nnodes=2 --nproc-per-node=1 --max-restarts=1 \\
        --rdzv-backend=c10d --rdzv-endpoint=HOST:PORT ... \\
        -m course_utils.failures.elastic_worker --config '{"steps": 24, ...}'

torchrun starts every worker in a session of its own, so stopping an agent (a notebook's
Stop kills the agent's process group) never reaches its workers: only a death signal
asked for by the worker does. This module asks for it first, before the seconds of
imports that the training needs (`elastic.run_worker`). A worker whose agent died before
that moment has been handed to init (or a subreaper), which is no torchrun agent: it leaves
at once instead of training on alone. Only light modules are imported above `main`.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
AGENT_MODULES = ("torch.distributed.run", "torch.distributed.launch")  # `python -m ...`
ORPHANED = 3  # the exit code of a worker whose agent was gone before it could tie itself
NAME = f"{__package__}.elastic_worker"  # also when run as __main__


def tie_to_agent() -> int:
    """Die with the agent that started this worker (Linux); returns the agent's pid.

    The death signal covers every later moment; the check after it covers the moment
    before, when the parent may already be init: its pid then is no torchrun's.
    """
    agent = os.getppid()
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != agent or not runs_torchrun(agent):
            print(
                f"{NAME}: the torchrun agent that started this worker is gone (parent "
                f"pid {os.getppid()}); leaving.",
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


def main(argv: list[str] | None = None) -> int:
    if "TORCHELASTIC_RUN_ID" not in os.environ:
        raise SystemExit(
            f"{NAME} is torchrun's worker: run it under `python -m torch.distributed.run` (see "
            "its docstring), or call course_utils.failures.elastic_restart, which does."
        )
    agent = tie_to_agent()
    from .elastic import run_worker  # torch and the course: seconds, now tied to the agent

    return run_worker(argv, agent)


if __name__ == "__main__":
    sys.exit(main())
