"""How every child the course starts is started: fork, forkserver or spawn, chosen once.

`launch`'s ranks, the sweep's trials and doctor's probe all start through
`processes.context`, which asks here. `python -m course_utils doctor` prints the choice
and why.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys

import torch

from ..core.errors import CourseError
from ..core.gpus import visible_gpus

START_METHOD_VAR = "COURSE_START_METHOD"
START_METHODS = ("fork", "forkserver", "spawn")
# what the server forks ranks from: imported there once, not by every rank (with the course's
# modules the kernel has imported when the server starts: `processes.context`)
FORKSERVER_PRELOAD = ["torch", "torch.distributed", "course_utils.ranks.child"]
FORKSERVER_PRELOAD += ["course_utils.ranks.server_warm_up"]


class NativeWindows(CourseError):
    """The course's ranks cannot start on native Windows; WSL2 runs them."""


WSL2 = (
    "the course's ranks need Linux or macOS: native Windows has none of the process groups "
    "and signals that start and stop them, and PyTorch's own distributed support there is "
    "limited. Run the course in WSL2 instead: in PowerShell, `wsl --install -d Ubuntu` "
    "(then restart), and in the Ubuntu terminal, inside a clone of the course, `make lab`."
)


def refuse_native_windows() -> None:
    """Stop at once, with what to do, before anything POSIX-only runs (doctor, `launch`)."""
    if sys.platform == "win32":
        raise NativeWindows(WSL2)


def default_start_method(backend: str = "gloo") -> str:
    return start_method_and_why(backend)[0]


def start_method_and_why(backend: str = "gloo") -> tuple[str, str]:
    """How every child the course starts is started, and why: one choice for all of them.

    NCCL ranks are spawned: each starts CUDA on its own GPU, which a forked child cannot do
    once this process has (PyTorch's "bad fork"; the course never starts CUDA in the kernel
    on its own, see `core.gpus`). Otherwise `COURSE_START_METHOD` decides where it is set;
    else fork (0.15 s for 4 ranks) where it is safe: Linux below Python 3.14, CUDA not
    started here. macOS gets forkserver, since fork is unsafe with its system frameworks
    (CPython spawns there by default since 3.8), as does Python 3.14, whose default it is.
    So does a machine with a GPU: the first backward pass here, on any device, starts
    autograd's thread per GPU, and a forked child's first backward then fails ("Unable to
    handle autograd's threading in combination with fork-based multiprocessing": 04's
    gloo ranks on an H200, 2026-11-28); the fork server is a fresh process that ran none.
    """
    cuda_here = torch.cuda.is_initialized() or torch.cuda._is_in_bad_fork()
    if backend == "nccl":
        return "spawn", "NCCL ranks each start CUDA on their GPU"
    chosen = os.environ.get(START_METHOD_VAR, "").strip().lower()
    if chosen:
        return _checked(chosen, cuda_here), f"{START_METHOD_VAR}={chosen}"
    if cuda_here:
        return "spawn", "CUDA runs in this process: a forked child could not use it"
    if not can_fork():
        return "spawn", "this platform cannot fork"
    if visible_gpus().count and "forkserver" in mp.get_all_start_methods():
        return "forkserver", "a GPU here: once this process runs backward(), a forked child's fails"
    if sys.platform == "darwin":
        return "forkserver", "macOS, where fork is unsafe with the system's frameworks"
    if sys.version_info >= (3, 14):
        return "forkserver", "Python 3.14's default on Linux"
    return "fork", "Linux below Python 3.14, no CUDA here: fork is safe and fastest"


def _checked(chosen: str, cuda_here: bool) -> str:
    if chosen not in START_METHODS:
        raise ValueError(
            f"{START_METHOD_VAR}={chosen!r} is not a start method: use one of "
            f"{', '.join(START_METHODS)}, or unset it for the platform's default."
        )
    if chosen not in mp.get_all_start_methods():
        raise ValueError(f"{START_METHOD_VAR}={chosen}: this platform cannot {chosen}; use spawn.")
    if chosen == "fork" and cuda_here:
        raise ValueError(
            f"{START_METHOD_VAR}=fork, but CUDA runs in this process, so forked ranks could "
            "not use it: unset it (the course spawns then), or restart the kernel."
        )
    return chosen


def can_fork() -> bool:
    """Whether this platform can fork at all (Windows cannot; macOS can, though it is unsafe)."""
    return "fork" in mp.get_all_start_methods()
