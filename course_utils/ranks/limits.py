"""What a launch may ask of this machine, checked before any rank starts, and its temp folder.

A thousand ranks on a laptop do not fail with a message: the notebook's kernel, or the
whole machine, is killed for memory. So the number of ranks is capped by the cores and
the free memory, with a way to override; a timeout must be a real number of seconds.
Each launch meets through a fresh folder named after the process that made it, so a
folder left by a kernel that was killed is removed by the next launch on the machine.
"""

from __future__ import annotations

import math
import numbers
import os
import shutil
import tempfile
from pathlib import Path

from .bootstrap import usable_cores

MAX_RANKS_VAR = "COURSE_MAX_RANKS"
RANKS_PER_CORE = 4
MIN_CAP = 8  # the course's notebooks start up to 8 ranks, on a 2-core laptop too
RANK_MEMORY = 100 * 2**20  # bytes a CPU rank may need beyond what it shares with its parent
RENDEZVOUS_PREFIX = "course-launch-"
# how much longer than `timeout` a launch's ranks may take to start and join their group:
# `timeout` is the function's own time (spawn takes 6-8 s to start 4 ranks on 2 cores,
# fork 0.2 s; a 3 s timeout under spawn stopped ranks still importing torch)
START_UP_SECONDS = 60.0


def max_ranks() -> tuple[int, str]:
    """How many ranks this machine can hold, and why: `COURSE_MAX_RANKS`, cores or memory."""
    override = os.environ.get(MAX_RANKS_VAR, "")
    if override.isdigit() and int(override) > 0:
        return int(override), f"{MAX_RANKS_VAR}={override}"
    cores = usable_cores()
    by_cores = max(MIN_CAP, RANKS_PER_CORE * cores)
    import psutil

    available = psutil.virtual_memory().available
    by_memory = max(1, available // RANK_MEMORY)
    if by_memory < by_cores:
        return int(by_memory), (
            f"{available / 2**30:.1f} GiB of free memory at about "
            f"{RANK_MEMORY // 2**20} MB per rank"
        )
    return by_cores, f"{RANKS_PER_CORE} per core on {cores} cores"


def check_world_size(world_size) -> int:
    """`world_size` as an int (numpy integers too), refused below 1 or above `max_ranks`."""
    if isinstance(world_size, bool) or not isinstance(world_size, numbers.Integral):
        raise ValueError(f"world_size must be a whole number >= 1, got {world_size!r}.")
    n = int(world_size)
    if n < 1:
        raise ValueError(f"world_size must be a whole number >= 1, got {n}.")
    limit, why = max_ranks()
    if n > limit:
        raise ValueError(
            f"world_size={n} is more ranks than this machine can hold: at most {limit} ({why}). "
            f"Use fewer ranks, or set the environment variable {MAX_RANKS_VAR} to allow more."
        )
    return n


def check_jobs(jobs) -> int:
    """`jobs` if it is a whole number of children at a time >= 1, else a ValueError."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a whole number >= 1, got {jobs!r}.")
    return jobs


def check_timeout(timeout) -> float:
    """A finite number of seconds above 0 (inf overflows gloo's timer; nan fails in the rank)."""
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, numbers.Real)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise ValueError(f"timeout must be a positive, finite number of seconds, got {timeout!r}.")
    return float(timeout)


def rendezvous_folder() -> str:
    """A fresh folder for one launch's rendezvous file, after removing those of dead launchers."""
    sweep_rendezvous_folders()
    return tempfile.mkdtemp(prefix=f"{RENDEZVOUS_PREFIX}{os.getpid()}-")


def sweep_rendezvous_folders(root: str | None = None) -> list[Path]:
    """Remove the rendezvous folders whose launching process is gone; return them."""
    removed = []
    for folder in Path(root or tempfile.gettempdir()).glob(RENDEZVOUS_PREFIX + "*-*"):
        pid = folder.name[len(RENDEZVOUS_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True
