"""What every rank does before the learner's function runs, under `launch` and under torchrun.

One place for it, so that a function behaves the same on a laptop and on several nodes:
the rank is tied to its parent's life, uses its share of the cores, knows its device,
and joins a real process group.
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
import signal
import socket
import sys
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from ..core import progress
from ..core.errors import BackendError
from ..core.gpus import visible_gpus
from ..core.machine import machine_cores
from .agent import tie_to_agent

BACKENDS = ("auto", "gloo", "nccl")


def usable_cores() -> int:
    """Cores this process may run on (the affinity mask, not the machine's count)."""
    return machine_cores()


THREADS_VAR = "COURSE_THREADS_PER_RANK"


def threads_per_rank(ranks_on_this_machine: int) -> int:
    """Share the cores so that N ranks on a laptop do not oversubscribe it.

    `COURSE_THREADS_PER_RANK` overrides it, for ranks that cannot see their neighbours
    (several torchrun agents rehearsing a multi-node job on one machine).
    """
    if os.environ.get(THREADS_VAR, "").isdigit():
        return max(1, int(os.environ[THREADS_VAR]))
    return max(1, usable_cores() // max(1, ranks_on_this_machine))


def threads_for(ranks_on_this_machine: int, start_method: str) -> int:
    """Threads for a rank started by `start_method`: its share of the cores, or 1 if forked.

    A child forked after its parent used OpenMP threads hangs the first time it uses more
    than one itself (GNU OpenMP cannot rebuild its pool after fork), and a notebook kernel
    has usually trained something before. So forked ranks compute on one thread; spawned
    ones (start_method='spawn', or torchrun) get their share of the cores.
    """
    return 1 if start_method == "fork" else threads_per_rank(ranks_on_this_machine)


def resolve_backend(backend: str, ranks_on_this_machine: int) -> str:
    """Turn 'auto' into 'nccl' or 'gloo', refusing a choice that cannot run here.

    'auto' is NCCL when every rank on this machine can have its own GPU and gloo when
    there is no GPU at all; with some GPUs but fewer than ranks it refuses rather than
    silently running somewhere the learner did not expect.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is not one of {', '.join(map(repr, BACKENDS))}.")
    gpus = visible_gpus().count
    if backend == "gloo":
        return "gloo"
    if backend == "auto" and gpus == 0:
        return "gloo"
    if gpus < ranks_on_this_machine:
        plural = "GPU is" if gpus == 1 else "GPUs are"
        raise BackendError(
            f"backend={backend!r} needs one GPU per rank for NCCL, but world_size="
            f"{ranks_on_this_machine} and {gpus} {plural} visible. Use backend='gloo' "
            f"(CPU) or world_size<={gpus}."
            if gpus
            else f"backend='nccl' needs one GPU per rank, but no GPU is visible "
            f"(world_size={ranks_on_this_machine}). Use backend='gloo' (CPU)."
        )
    if not dist.is_nccl_available():
        raise BackendError(
            "this torch build has no NCCL; use backend='gloo' (CPU) or a CUDA build of torch."
        )
    return "nccl"


def tie_to_parent(parent_pid: int | None = None) -> None:
    """Die with the parent (a killed or restarted kernel), so no rank outlives its launch.

    Without `parent_pid` it only asks the kernel for the death signal (Linux), which is
    what a `subprocess.Popen(preexec_fn=tie_to_parent)` can do between fork and exec.
    """
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
        if parent_pid is not None and os.getppid() != parent_pid:  # it died before prctl
            os._exit(1)
        return
    if parent_pid is None:
        return

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def loopback_interface() -> str | None:
    """The loopback interface name (lo, lo0), so single-machine gloo works offline."""
    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        return None
    return next((n for n in names if n.startswith("lo")), None)


def set_rank_environment(rank: int, world_size: int, local_rank: int, local_world_size: int):
    """The variables torchrun sets, so code reading them works under `launch` too."""
    os.environ.update(
        RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_RANK=str(local_rank),
        LOCAL_WORLD_SIZE=str(local_world_size),
    )


def cap_threads(threads: int) -> None:
    """Use `threads` threads here and in what this process starts (OpenMP reads the variable)."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)


def prepare(backend: str, local_rank: int, threads: int) -> torch.device:
    """Cap threads and pick the device; returns the device this rank should compute on."""
    cap_threads(threads)
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def init_process_group(backend: str, timeout: float, init_method: str, rank=None, world_size=None):
    """Join the process group; a peer that never arrives becomes an error after `timeout` s.
    Only rank 0 keeps its progress bars: one bar per job, however many ranks run it."""
    kwargs = {"rank": rank, "world_size": world_size} if rank is not None else {}
    dist.init_process_group(
        backend, init_method=init_method, timeout=timedelta(seconds=timeout), **kwargs
    )
    if dist.get_rank() != 0:
        progress.silence()


TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR")


def join_from_torchrun(backend: str = "auto", timeout: float = 300.0) -> torch.device:
    """Set up a rank that torchrun started: the same steps as under `launch`, from its env."""
    missing = [v for v in TORCHRUN_VARS if v not in os.environ]
    if missing:
        raise SystemExit(
            f"{', '.join(missing)} not set: run this under torchrun, e.g. "
            "`python -m torch.distributed.run --nproc-per-node=2 -m <module> ...`"
        )
    faulthandler.enable()  # a crash in C++ (SIGSEGV, SIGABRT) still shows the Python stack
    tie_to_agent(f"rank {os.environ['RANK']}")  # an agent gone during our imports: leave
    local_rank = int(os.environ["LOCAL_RANK"])
    local_world = int(os.environ["LOCAL_WORLD_SIZE"])
    backend = resolve_backend(backend, local_world)
    where = prepare(backend, local_rank, threads_per_rank(local_world))
    init_process_group(backend, timeout, "env://")
    return where


def leave(code: int = 0) -> None:
    """End a torchrun rank once its group is torn down, skipping C++ static destructors.

    About one run in three, a gloo rank that had finished (results printed, group
    destroyed) aborted in a destructor at interpreter exit ("terminate called without an
    active exception"), failing a job that had succeeded. `launch`'s ranks leave this way too.
    """
    if dist.is_initialized():
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def device() -> torch.device:
    """The device the calling rank computes on: its own GPU under NCCL, else the CPU."""
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def synchronize(where: torch.device | None = None) -> None:
    """End a timed region when the GPU has finished its work, not when the work was queued
    (CUDA kernels and NCCL collectives return at once); nothing to wait for on a CPU."""
    where = device() if where is None else torch.device(where)
    if where.type == "cuda":
        torch.cuda.synchronize(where)
