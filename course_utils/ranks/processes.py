"""The one process manager that `launch`, the sweep's trials, the local torchrun nodes and
the notebook's `sweep` command share.

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
import threading
import time
from collections.abc import Callable

import psutil
import torch

from ..core import progress
from ..core.errors import CourseError, Stopped
from . import bootstrap as rank_setup
from .start_method import FORKSERVER_PRELOAD, default_start_method


def context(start_method: str | None = None, backend: str = "gloo"):
    """The multiprocessing context to start children with (`default_start_method` if None).

    Before a fork, torch's lazily loaded modules are imported here once, so that the
    children inherit them instead of each importing them again. The forkserver's server
    imports them as it starts, with every course module imported here by then (the
    notebook's chapter, the function it launches): a rank that imported them itself paid
    about 1.2 s a launch for a chapter on 2 cores.
    """
    method = start_method or default_start_method(backend)
    if method == "fork":
        warm_up_imports()
    ctx = mp.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(FORKSERVER_PRELOAD + course_modules_here())
    return ctx


def course_modules_here() -> list[str]:
    """The course's modules this process has imported (not `__main__`, which the server
    must not run), in the order they were imported."""
    return [m for m in list(sys.modules) if m.startswith("course_utils.") and "__main__" not in m]


_warm_up: threading.Thread | None = None
_warmed_up = threading.Event()


def warm_up_imports() -> None:
    """Run one tiny SGD step, once, for what it imports (torch._dynamo, sympy: ~1-3 s).

    Forked children inherit this process's modules; without it every rank of every launch,
    and every trial of a sweep, would import them again, on cores it shares with the
    others, and a trial would count that second as its training time. The step runs in a
    thread that an interrupt cannot reach: an interrupt landing in the middle of an import
    would leave sympy or torch._dynamo half-initialised, and every later launch in that
    kernel would fail. The interrupt still stops the wait here at once; the imports finish
    behind it, and the next launch waits for them (a fork before that would copy their
    import locks held, and the children would hang on them). The wait polls an event:
    Python 3.11's `Thread.join`, once interrupted, reports the thread finished while it runs.
    """
    global _warm_up
    if _warm_up is None:
        _warm_up = threading.Thread(target=_one_sgd_step, name="course-warm-up", daemon=True)
        _warm_up.start()
    try:
        while not _warmed_up.is_set():
            time.sleep(0.02)
    except KeyboardInterrupt:
        raise Stopped(
            "interrupted while torch finished its first imports: nothing was started; "
            "nothing is left running"
        ) from None


def _one_sgd_step() -> None:
    """The imports come with the optimizer's step; the gradients are set by hand, not by
    backward(): on a machine with a GPU the first backward pass starts autograd's thread per
    GPU, after which a forked child's own backward fails (the fork server must run none)."""
    try:
        layer = torch.nn.Linear(2, 2)
        for parameter in layer.parameters():
            parameter.grad = torch.zeros_like(parameter)
        torch.optim.SGD(layer.parameters(), lr=0.1).step()
    finally:
        _warmed_up.set()


@contextlib.contextmanager
def interrupts_held():
    """Hold an interrupt (SIGINT) that arrives inside the block, and raise it right after.

    Forking runs `os.register_at_fork` hooks (logging's among them); a KeyboardInterrupt
    raised inside one is printed as "Exception ignored" and lost, and one that lands
    between the fork and the parent's note of the child's pid leaks that child. Stopping
    children must not be cut short either. Only the main thread can hold signals; elsewhere
    the block runs as it is.
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is None  # set outside Python: cannot be restored
    ):
        yield
        return
    held: list = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held and callable(previous):
            previous(signal.SIGINT, held[0])  # Python's default handler raises KeyboardInterrupt
        elif held and previous != signal.SIG_IGN:
            raise KeyboardInterrupt


@contextlib.contextmanager
def main_module_hidden(method: str):
    """Keep spawn, and the forkserver's server as it starts, from re-running the caller's
    script.

    The function travels by value, so a spawned child never needs `__main__`; without this a
    script that calls launch() at top level (no `if __name__ == "__main__"`) would recurse.
    """
    main = sys.modules.get("__main__")
    if method not in ("spawn", "forkserver") or main is None:
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


def parent_to_die_with(method: str) -> int | None:
    """The process a child started by `method` must die with: this one, which forks or spawns
    it, or (None) the forkserver, its parent under forkserver, which ends with this one."""
    return None if method == "forkserver" else os.getpid()


def _let_the_forkserver_end() -> None:
    """A child of the forkserver is handed the kernel's end of the server's "alive" pipe,
    and the server lives until every holder closes it: so after a killed kernel the server
    lived on for its children, and they, tied to it, for it. Closed here, the server ends
    with the kernel, and its children with it."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    fd = getattr(server, "_forkserver_alive_fd", None)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)
        server._forkserver_alive_fd = None


def child_setup(
    parent_pid: int | None, threads: int, stdout: int | None = None, stderr: int | None = None
) -> None:
    """First thing in a child: make it stoppable, quiet on interrupt, and sized to its cores.

    Its own process group lets `kill_group` reach whatever it starts; it dies with its
    parent (a restarted kernel); the parent alone decides what an interrupt stops. Output
    goes to `stdout`/`stderr` (file descriptors, e.g. pipes to the parent) when given, and
    always through the process's own descriptors 1 and 2: a notebook's streams wait on the
    kernel's I/O thread, which a forked child lacks, so a print there would hang forever.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.setpgid(0, 0)
    if parent_pid is None:
        _let_the_forkserver_end()
    rank_setup.tie_to_parent(os.getppid() if parent_pid is None else parent_pid)
    if stdout is not None:
        os.dup2(stdout, 1)
    if stderr is not None:
        os.dup2(stderr, 2)
    sys.stdout = open(1, "w", buffering=1, closefd=False, errors="replace")
    sys.stderr = open(2, "w", buffering=1, closefd=False, errors="replace")
    progress.silence()  # no bar of its own: a launch's rank 0 is given one by child.py
    rank_setup.cap_threads(threads)


def start_command(cmd: list[str], **popen_kwargs) -> subprocess.Popen:
    """Run `cmd` in a new session (a group `stop` can kill whole) that dies with this process."""
    return subprocess.Popen(
        cmd, start_new_session=True, preexec_fn=rank_setup.tie_to_parent, **popen_kwargs
    )


def run_command(
    cmd: list[str], on_error_line: Callable[[str], bool] | None = None, env: dict | None = None
) -> subprocess.CompletedProcess:
    """`subprocess.run(cmd, capture_output=True)`, but started by `start_command`, so an
    interrupt or an error here stops it and everything it started, never leaving them.

    With `on_error_line`, each line the command writes on stderr is handed to it as it comes
    (a progress bar's state, to draw while the command runs) and kept unless it returns True.
    """
    with interrupts_held():  # recorded, or not started
        child = start_command(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        if on_error_line is None:
            out, err = child.communicate()
        else:
            out, err = _read_as_it_comes(child, on_error_line)
    finally:
        with interrupts_held():  # a second interrupt must not cut the stop short
            stop(child)
    return subprocess.CompletedProcess(cmd, child.returncode, out, err)


def _read_as_it_comes(child: subprocess.Popen, on_error_line) -> tuple[bytes, bytes]:
    """stderr line by line here, stdout whole on a thread: a full stdout pipe would stall
    the child while this side waited for its next stderr line."""
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.append(child.stdout.read()), daemon=True)
    reader.start()
    kept = [line for line in child.stderr if not on_error_line(line.decode(errors="replace"))]
    child.wait()
    reader.join()
    return (out[0] if out else b""), b"".join(kept)


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

    A child that already ended is left alone unless something in its group still runs. A
    killed command the system still holds after `wait` s (finishing a read from a stalled
    disk, say) is named with its state, not reported as a command that timed out.
    """
    started = [p for p in processes if p.pid is not None]
    for p in started:
        ended = (p.poll() if isinstance(p, subprocess.Popen) else p.exitcode) is not None
        if not (ended and not group_alive(p.pid)):
            kill_group(p.pid)
    held = []
    for p in started:
        if not isinstance(p, subprocess.Popen):
            p.join(timeout=wait)
            continue
        try:
            p.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            held.append(p)
    if held:
        raise CourseError(
            f"process {', '.join(map(_held, held))} was sent SIGKILL but had not ended {wait:g} "
            "s later: the system still holds it. It runs no more code and ends when the system "
            f"lets it go; `ps -p {','.join(str(p.pid) for p in held)}` shows whether it has."
        )


def _held(p: subprocess.Popen) -> str:
    """'PID (command, state disk-sleep)': the state as psutil reads it, on Linux and macOS."""
    try:
        state = psutil.Process(p.pid).status()
    except psutil.Error:
        state = "unknown"
    return f"{p.pid} ({' '.join(map(str, p.args[:3]))}, state {state})"


def exit_reason(exitcode: int | None) -> str:
    """How a child ended, from its exit code: 'was killed by SIGKILL', 'exited with code 3'."""
    if exitcode is not None and exitcode < 0:
        return f"was killed by {signal.Signals(-exitcode).name}"
    return f"exited with code {exitcode}"
