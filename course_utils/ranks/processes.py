"""The one process manager that `launch`, the sweep's trials and the local torchrun nodes share.

Starting a child the course can always stop takes the same few steps wherever it happens:
fork when it is safe (spawn once CUDA runs here) with torch's lazy imports done once
beforehand; in the child, its own process group, death with its parent, no reaction to
the notebook's interrupt, standard streams on its own file descriptors and a cap on its
threads; and at the end, a kill of its whole group and a reap. Each step is written here
once.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import subprocess
import sys

import torch

from . import bootstrap as rank_setup


def default_start_method(backend: str = "gloo") -> str:
    """Fork (0.15 s for 4 ranks) unless the children need CUDA that fork cannot give them.

    A forked child cannot start CUDA once this process has (PyTorch's "bad fork"), and NCCL
    ranks each start CUDA on their own GPU, so they are spawned. The course never starts
    CUDA in the kernel on its own (GPUs are counted through NVML, see `core.gpus`).
    """
    cuda_here = torch.cuda.is_initialized() or torch.cuda._is_in_bad_fork()
    if backend == "nccl" or cuda_here or "fork" not in mp.get_all_start_methods():
        return "spawn"
    return "fork"


def context(start_method: str | None = None, backend: str = "gloo"):
    """The multiprocessing context to start children with (`default_start_method` if None).

    Before a fork, torch's lazily loaded modules are imported here once, so that the
    children inherit them instead of each importing them again.
    """
    method = start_method or default_start_method(backend)
    if method == "fork":
        warm_up_imports()
    return mp.get_context(method)


_warmed_up = False


def warm_up_imports() -> None:
    """Run one tiny SGD step here, once, for what it imports (torch._dynamo, sympy: ~1-3 s).

    Forked children inherit this process's modules; without it every rank of every launch,
    and every trial of a sweep, would import them again, on cores it shares with the
    others, and a trial would count that second as its training time.
    """
    global _warmed_up
    if not _warmed_up:
        layer = torch.nn.Linear(2, 2)
        layer(torch.zeros(1, 2)).sum().backward()
        torch.optim.SGD(layer.parameters(), lr=0.1).step()
        _warmed_up = True


@contextlib.contextmanager
def main_module_hidden(method: str):
    """Keep spawn from re-running the caller's script in every child.

    The function travels by value, so a spawned child never needs `__main__`; without this a
    script that calls launch() at top level (no `if __name__ == "__main__"`) would recurse.
    """
    main = sys.modules.get("__main__")
    if method != "spawn" or main is None:
        yield
        return
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if k in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__dict__["__spec__"] = None
    try:
        yield
    finally:
        main.__dict__.update(saved)
        if "__spec__" not in saved:
            main.__dict__.pop("__spec__", None)


def child_setup(
    parent_pid: int, threads: int, stdout: int | None = None, stderr: int | None = None
) -> None:
    """First thing in a child: make it stoppable, quiet on interrupt, and sized to its cores.

    Its own process group lets `kill_group` reach whatever it starts; it dies with its
    parent (a restarted kernel); the parent alone decides what an interrupt stops. Output
    goes to `stdout`/`stderr` (file descriptors, e.g. pipes to the parent) when given, and
    always through the process's own descriptors 1 and 2: a notebook's streams wait on the
    kernel's I/O thread, which a forked child lacks, so a print there would hang forever.
    """
    os.setpgid(0, 0)
    rank_setup.tie_to_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if stdout is not None:
        os.dup2(stdout, 1)
    if stderr is not None:
        os.dup2(stderr, 2)
    sys.stdout = open(1, "w", buffering=1, closefd=False, errors="replace")
    sys.stderr = open(2, "w", buffering=1, closefd=False, errors="replace")
    rank_setup.cap_threads(threads)


def start_command(cmd: list[str], **popen_kwargs) -> subprocess.Popen:
    """Run `cmd` in a new session (a group `stop` can kill whole) that dies with this process."""
    return subprocess.Popen(
        cmd, start_new_session=True, preexec_fn=rank_setup.tie_to_parent, **popen_kwargs
    )


def kill_group(pid: int) -> None:
    """SIGKILL process `pid` and every process in the group it leads."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def stop(*processes, wait: float = 5.0) -> None:
    """Kill children (multiprocessing or subprocess) and all they started, then reap them.

    A child that already ended is left alone unless something in its group still runs.
    """
    started = [p for p in processes if p.pid is not None]
    for p in started:
        ended = (p.poll() if isinstance(p, subprocess.Popen) else p.exitcode) is not None
        if not (ended and not group_alive(p.pid)):
            kill_group(p.pid)
    for p in started:
        if isinstance(p, subprocess.Popen):
            p.wait(timeout=wait)
        else:
            p.join(timeout=wait)


def exit_reason(exitcode: int | None) -> str:
    """How a child ended, from its exit code: 'was killed by SIGKILL', 'exited with code 3'."""
    if exitcode is not None and exitcode < 0:
        return f"was killed by {signal.Signals(-exitcode).name}"
    return f"exited with code {exitcode}"
