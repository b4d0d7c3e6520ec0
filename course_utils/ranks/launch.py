"""Start N ranks of a function under a real torch.distributed process group, from a notebook.

`launch(fn, 4)` forks four processes (spawn once CUDA is initialised), each joins a
process group through a fresh rendezvous file, runs `fn`, and sends back its return
value. The parent streams each rank's output with a `[rank r]` prefix, and turns any
failure into a `LaunchError` naming the rank that failed first, with its own traceback.
Whatever happens - an exception, a hang, a killed rank, an interrupted kernel - every
process of the launch is gone when the call returns.
"""

from __future__ import annotations

import contextlib
import faulthandler
import multiprocessing as mp
import os
import pickle
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import wait

import cloudpickle
import torch
import torch.distributed as dist

from ..core.errors import LaunchError, LaunchTimeout, RemoteTraceback
from . import bootstrap as rank_setup

DEFAULT_TIMEOUT = 120.0
_GRACE = 0.3  # seconds to collect simultaneous failures before deciding which came first
_DUMP_WAIT = 1.0
_FRAME = re.compile(
    r'File "(.*)", line (\d+) in (.*)'
)  # seconds for hung ranks to print where they are stuck

# Messages that a rank raises because a *peer* failed, not because of its own code.
_SECONDARY_MARKERS = (
    "connection closed by peer",
    "connection reset by peer",
    "broken pipe",
    "socket closed",
    "remote process exited",
    "timed out",
    "timeout",
    "nccl communicator was aborted",
)


@dataclass
class RankFailure:
    """How one rank failed; in the results of `launch(..., allow_failures=True)`."""

    rank: int
    when: float
    kind: str  # "raised" | "died"
    exc_type: str = ""
    message: str = ""
    traceback: str = ""
    original: BaseException | None = None
    secondary: bool = False


@dataclass
class _Rank:
    rank: int
    process: mp.process.BaseProcess
    result_conn: object
    streams: dict = field(default_factory=dict)  # fd -> [target stream, pending bytes]
    done: bool = False
    result: object = None


def launch(
    fn,
    world_size: int,
    *,
    backend: str = "auto",
    timeout: float = DEFAULT_TIMEOUT,
    args: tuple = (),
    kwargs: dict | None = None,
    start_method: str | None = None,
    allow_failures: bool = False,
) -> list:
    """Run `fn(*args, **kwargs)` on `world_size` ranks and return their results in rank order.

    By default the first failure stops every rank and raises `LaunchError`. With
    `allow_failures=True` the other ranks go on (a training that must survive a dead
    worker), each failed rank's entry in the results is a `RankFailure`, and a line says
    which ranks failed; only if every rank fails does the call raise.

    Inside `fn`, `torch.distributed` is initialised: `dist.get_rank()`, collectives and
    point-to-point operations work as under torchrun. Tensors in the results come back
    on the CPU. `start_method` is chosen for you: fork (fast; each rank computes on one
    thread, see `rank.threads_for`), or spawn once CUDA is in use (each rank gets its
    share of the cores).
    """
    kwargs = {} if kwargs is None else kwargs
    _check_arguments(fn, world_size, timeout, args, kwargs)
    backend = rank_setup.resolve_backend(backend, world_size)
    payload = _pickle_payload(fn, args, kwargs)
    method = start_method or _default_start_method(backend)
    if method == "fork":
        _warm_up_lazy_imports()
    ctx = mp.get_context(method)
    workdir = tempfile.mkdtemp(prefix="course-launch-")
    spec = _Spec(
        world_size=world_size,
        backend=backend,
        timeout=float(timeout),
        init_method="file://" + os.path.join(workdir, "rendezvous"),
        payload=payload,
        parent_pid=os.getpid(),
        name=getattr(fn, "__name__", type(fn).__name__),
        allow_failures=allow_failures,
        threads=rank_setup.threads_for(world_size, method),
    )
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    ranks: list[_Rank] = []
    try:
        with main_module_hidden(method):
            for r in range(world_size):
                ranks.append(_start_rank(ctx, spec, r))
        return _supervise(ranks, spec)
    finally:
        _stop_all(ranks)
        _close_streams(ranks)
        shutil.rmtree(workdir, ignore_errors=True)


def live_children() -> list[int]:
    """PIDs of processes this one started that are still alive (should be [] after a launch).

    multiprocessing's own helper (the resource tracker that spawn starts once per process,
    and which exits with it) is not counted.
    """
    import psutil

    alive = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() == psutil.STATUS_ZOMBIE or _is_multiprocessing_helper(p.cmdline()):
                continue
        except psutil.NoSuchProcess:
            continue
        alive.append(p.pid)
    return alive


def _is_multiprocessing_helper(cmdline: list[str]) -> bool:
    text = " ".join(cmdline)
    return "multiprocessing.resource_tracker" in text or "multiprocessing.forkserver" in text


# ---------------------------------------------------------------- before anything starts


def _check_arguments(fn, world_size, timeout, args, kwargs) -> None:
    if not callable(fn):
        raise TypeError(f"launch() needs a function to run on every rank, got {fn!r}.")
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a whole number >= 1, got {world_size!r}.")
    if not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}.")
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"args must be a tuple of positional arguments, got {type(args).__name__}.")
    if not isinstance(kwargs, dict):
        raise TypeError(f"kwargs must be a dict, got {type(kwargs).__name__}.")


def _pickle_payload(fn, args, kwargs) -> bytes:
    """Send the function by value, so that one defined in a notebook cell runs in every rank."""
    try:
        return cloudpickle.dumps((fn, tuple(args), kwargs))
    except Exception as exc:
        culprit = _unpicklable_part(fn, args, kwargs)
        raise TypeError(
            f"{culprit} cannot be sent to the ranks ({type(exc).__name__}: {exc}). Pass plain "
            "data (tensors, numbers, lists, dicts), or create the object inside the function."
        ) from exc


def _unpicklable_part(fn, args, kwargs) -> str:
    parts = [("the function", fn)]
    parts += [(f"argument {i} ({type(a).__name__})", a) for i, a in enumerate(args)]
    parts += [(f"keyword argument {k!r} ({type(v).__name__})", v) for k, v in kwargs.items()]
    for label, value in parts:
        try:
            cloudpickle.dumps(value)
        except Exception:
            return label
    return "an argument"


_warmed_up = False


def _warm_up_lazy_imports() -> None:
    """Import once here what the first optimizer pulls in (torch._dynamo, sympy: ~1-3 s).

    Forked ranks inherit this process's modules; without it every rank of every launch
    would import them again, on cores it shares with the other ranks.
    """
    global _warmed_up
    if not _warmed_up:
        torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        _warmed_up = True


def _default_start_method(backend: str) -> str:
    """Fork is fast (0.15 s for 4 ranks); it is unsafe once CUDA runs in this process."""
    if "fork" in mp.get_all_start_methods() and not torch.cuda.is_initialized():
        return "fork"
    return "spawn"


@contextlib.contextmanager
def main_module_hidden(method: str):
    """Keep spawn from re-running the caller's script in every rank.

    The function travels by value, so a spawned rank never needs `__main__`; without this a
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


# ---------------------------------------------------------------- the rank's side


@dataclass(frozen=True)
class _Spec:
    world_size: int
    backend: str
    timeout: float
    init_method: str
    payload: bytes
    parent_pid: int
    name: str
    allow_failures: bool = False
    threads: int = 1


def _start_rank(ctx, spec: _Spec, r: int) -> _Rank:
    result_read, result_write = ctx.Pipe(duplex=False)
    out_read, out_write = ctx.Pipe(duplex=False)
    err_read, err_write = ctx.Pipe(duplex=False)
    process = ctx.Process(
        target=_rank_main,
        args=(spec, r, result_write, out_write, err_write),
        name=f"course-rank-{r}",
    )
    process.start()
    for conn in (result_write, out_write, err_write):
        conn.close()
    streams = {
        out_read.fileno(): [sys.stdout, b"", out_read],
        err_read.fileno(): [sys.stderr, b"", err_read],
    }
    return _Rank(rank=r, process=process, result_conn=result_read, streams=streams)


def _rank_main(spec: _Spec, r: int, result_conn, out_conn, err_conn) -> None:
    """Runs in the child: bootstrap, run the function, send back its result or its error."""
    os.setpgid(0, 0)  # own process group, so teardown also reaches its children
    rank_setup.tie_to_parent(spec.parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; it stops us on interrupt
    os.dup2(out_conn.fileno(), 1)
    os.dup2(err_conn.fileno(), 2)
    sys.stdout = open(1, "w", buffering=1, closefd=False, errors="replace")
    sys.stderr = open(2, "w", buffering=1, closefd=False, errors="replace")
    # A crash in C++ (gloo aborting on a bad buffer, a segfault) shows this rank's Python
    # stack under its own prefix; an inherited handler would write to the parent's terminal.
    faulthandler.enable(file=sys.stderr, all_threads=False)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=False)
    rank_setup.set_rank_environment(r, spec.world_size, r, spec.world_size)
    if spec.backend == "gloo" and "GLOO_SOCKET_IFNAME" not in os.environ:
        lo = rank_setup.loopback_interface()
        if lo:
            os.environ["GLOO_SOCKET_IFNAME"] = lo
    rank_setup.prepare(spec.backend, r, spec.threads)
    try:
        fn, args, kwargs = cloudpickle.loads(spec.payload)
        rank_setup.init_process_group(
            spec.backend, spec.timeout, spec.init_method, rank=r, world_size=spec.world_size
        )
        value = fn(*args, **kwargs)
        message = ("ok", _dumps_result(_to_cpu(value)))
    except BaseException as exc:  # noqa: BLE001 - everything must reach the parent
        message = ("error", _describe_exception(exc))
    sys.stdout.flush()
    sys.stderr.flush()
    result_conn.send_bytes(pickle.dumps(message))
    if message[0] == "error":
        # Stay until the parent stops us: exiting now would make every peer fail with a
        # "connection closed" of its own, burying this rank's real error in their noise.
        time.sleep(spec.timeout + 60)
    elif dist.is_initialized():
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _dumps_result(value) -> bytes:
    try:
        return cloudpickle.dumps(value)
    except Exception as exc:
        raise TypeError(
            f"the function returned a {type(value).__name__}, which cannot be sent back "
            f"({exc}). Return plain data: tensors, numbers, lists, dicts."
        ) from exc


def _to_cpu(value):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return type(value)(_to_cpu(v) for v in value)
    if isinstance(value, dict) and type(value) is dict:
        return {k: _to_cpu(v) for k, v in value.items()}
    return value


def _describe_exception(exc: BaseException) -> dict:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    try:
        original = cloudpickle.dumps(exc)
        pickle.loads(original)
    except Exception:
        original = None
    message = str(exc)
    return {
        "when": time.monotonic(),
        "exc_type": type(exc).__name__,
        "message": message,
        "traceback": text,
        "original": original,
        "secondary": _is_secondary(exc, message),
    }


def _is_secondary(exc: BaseException, message: str) -> bool:
    """A communication error is usually a peer's failure seen from here, not this rank's own."""
    comm_errors = tuple(
        t for t in (getattr(dist, "DistError", None), getattr(dist, "DistBackendError", None)) if t
    )
    lowered = message.lower()
    return isinstance(exc, comm_errors) or any(m in lowered for m in _SECONDARY_MARKERS)


# ---------------------------------------------------------------- the parent's side


def _supervise(ranks: list[_Rank], spec: _Spec) -> list:
    deadline = time.monotonic() + spec.timeout
    failures: dict[int, RankFailure] = {}
    decide_at = None
    while not all(rk.done for rk in ranks):
        now = time.monotonic()
        if decide_at is not None and now >= decide_at:
            break
        if now >= deadline:
            _raise_timeout(ranks, spec)
        limit = min(deadline, decide_at or deadline) - now
        _pump(ranks, failures, timeout=max(0.0, limit))
        if failures and decide_at is None and not spec.allow_failures:
            decide_at = time.monotonic() + _GRACE
    if failures and (not spec.allow_failures or len(failures) == len(ranks)):
        _raise_failure(failures, ranks, spec)
    _drain(ranks, until=time.monotonic() + 2.0)
    for failure in sorted(failures.values(), key=lambda f: f.rank):
        how = f"raised {failure.exc_type}" if failure.kind == "raised" else failure.message
        print(
            f"[launch] rank {failure.rank} of {spec.world_size} {how}; the other ranks went on "
            "(allow_failures=True).",
            file=sys.stderr,
        )
    return [failures.get(rk.rank) or rk.result for rk in ranks]


def _pump(ranks: list[_Rank], failures: dict, timeout: float) -> None:
    """Wait for one batch of events: output lines, results, or exits; handle them in that order."""
    by_object = {}
    for rk in ranks:
        for fd in rk.streams:
            by_object[fd] = ("out", rk)
        if not rk.done:
            by_object[rk.result_conn] = ("result", rk)
            by_object[rk.process.sentinel] = ("exit", rk)
    ready = wait(list(by_object), timeout=timeout)
    order = {"out": 0, "result": 1, "exit": 2}
    for obj in sorted(ready, key=lambda o: order[by_object[o][0]]):
        kind, rk = by_object[obj]
        if kind == "out":
            _read_output(rk, obj)
        elif not rk.done and kind == "result":
            _receive(rk, failures)
        elif not rk.done and kind == "exit":
            if rk.result_conn.poll(0):
                _receive(rk, failures)
            else:
                _record_death(rk, failures)


def _receive(rk: _Rank, failures: dict) -> None:
    try:
        status, body = pickle.loads(rk.result_conn.recv_bytes())
    except (EOFError, OSError):
        _record_death(rk, failures)
        return
    rk.done = True
    if status == "ok":
        rk.result = cloudpickle.loads(body)
        return
    original = None
    if body["original"] is not None:
        try:
            original = pickle.loads(body["original"])
        except Exception:
            original = None
    failures[rk.rank] = RankFailure(
        rank=rk.rank,
        when=body["when"],
        kind="raised",
        exc_type=body["exc_type"],
        message=body["message"],
        traceback=body["traceback"],
        original=original,
        secondary=body["secondary"],
    )


def _record_death(rk: _Rank, failures: dict) -> None:
    rk.done = True
    rk.process.join(timeout=1.0)
    code = rk.process.exitcode
    if code is not None and code < 0:
        how = f"was killed by {signal.Signals(-code).name}"
    else:
        how = f"exited with code {code}"
    failures[rk.rank] = RankFailure(
        rank=rk.rank,
        when=time.monotonic(),
        kind="died",
        exc_type="",
        message=f"{how} before returning a result",
    )


def _read_output(rk: _Rank, fd: int) -> None:
    entry = rk.streams[fd]
    try:
        chunk = os.read(fd, 65536)
    except OSError:
        chunk = b""
    if not chunk:
        if entry[1]:
            _emit(rk.rank, entry[0], entry[1])
        entry[2].close()
        del rk.streams[fd]
        return
    lines = (entry[1] + chunk).split(b"\n")
    entry[1] = lines.pop()
    for line in lines:
        _emit(rk.rank, entry[0], line)


def _emit(r: int, stream, line: bytes) -> None:
    text = line.decode("utf-8", errors="replace").rstrip("\r")
    print(f"[rank {r}] {text}", file=stream, flush=True)


def _drain(ranks: list[_Rank], until: float) -> None:
    """Read what the ranks printed last; their pipes close when they exit."""
    while any(rk.streams for rk in ranks) and time.monotonic() < until:
        fds = [fd for rk in ranks for fd in rk.streams]
        for fd in wait(fds, timeout=max(0.0, until - time.monotonic())):
            owner = next(rk for rk in ranks if fd in rk.streams)
            _read_output(owner, fd)


def _raise_failure(failures: dict, ranks: list[_Rank], spec: _Spec):
    primary = [f for f in failures.values() if not f.secondary] or list(failures.values())
    first = min(primary, key=lambda f: (f.when, f.rank))
    _stop_all(ranks)
    _drain(ranks, until=time.monotonic() + 0.5)
    n = spec.world_size
    others = "The other ranks were stopped; nothing is left running." if n > 1 else ""
    if first.kind == "raised":
        message = (
            f"rank {first.rank} of {n} raised {first.exc_type} in worker `{spec.name}`: "
            f"{_one_line(first.message)} (its traceback is shown above).\n{others}"
        )
        cause = RemoteTraceback(f"Traceback of rank {first.rank}:\n{first.traceback}")
    else:
        message = f"rank {first.rank} of {n} {first.message} in worker `{spec.name}`.\n{others}"
        cause = None
    error = LaunchError(
        message.strip(),
        rank=first.rank,
        world_size=n,
        exc_type=first.exc_type or None,
        remote_traceback=first.traceback or None,
        original=first.original,
    )
    raise error from cause


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _raise_timeout(ranks: list[_Rank], spec: _Spec):
    """Ask the unfinished ranks where they are (faulthandler), then stop them all and explain."""
    alive = [rk for rk in ranks if not rk.done and rk.process.is_alive()]
    captured = {rk.rank: [] for rk in alive}
    for rk in alive:
        for fd in list(rk.streams):
            _flush_partial(rk, fd)
        try:
            os.kill(rk.process.pid, signal.SIGUSR1)
        except ProcessLookupError:
            pass
    until = time.monotonic() + _DUMP_WAIT
    while time.monotonic() < until:
        fds = [fd for rk in alive for fd in rk.streams]
        if not fds:
            break
        for fd in wait(fds, timeout=max(0.0, until - time.monotonic())):
            owner = next(rk for rk in alive if fd in rk.streams)
            _capture(owner, fd, captured[owner.rank])
        if all(_innermost_frame(lines) for lines in captured.values()):
            until = min(until, time.monotonic() + 0.1)  # the rest of each dump
    _stop_all(ranks)
    where = {r: _innermost_frame(lines) for r, lines in captured.items()}
    stuck = [r for r, frame in where.items() if frame and not _in_communication(frame)]
    waiting = [r for r, frame in where.items() if frame and _in_communication(frame)]
    n = spec.world_size
    lines = []
    if stuck:
        lines.append(
            f"{_ranks_phrase(stuck)} of {n} did not finish within {spec.timeout:g} s in worker "
            f"`{spec.name}`."
        )
    elif waiting:
        lines.append(
            f"{_ranks_phrase(waiting)} of {n} were all waiting to communicate after "
            f"{spec.timeout:g} s in worker `{spec.name}`: a deadlock (each waits for a message "
            "that no rank sends, e.g. every rank calls a blocking recv before its send)."
        )
    else:
        lines.append(
            f"{_ranks_phrase(sorted(captured) or [rk.rank for rk in ranks])} of {n} did not "
            f"finish within {spec.timeout:g} s in worker `{spec.name}`."
        )
    for r in sorted(where):
        if where[r]:
            state = "waiting in communication" if _in_communication(where[r]) else "busy"
            lines.append(f"  rank {r} was {state} at {where[r]}")
    lines.append(
        "All ranks were stopped; nothing is left running. Raise `timeout=` if it is just slow."
    )
    stalled = stuck or waiting or sorted(captured)
    raise LaunchTimeout("\n".join(lines), rank=stalled[0] if stalled else None, world_size=n)


def _ranks_phrase(rs: list[int]) -> str:
    if len(rs) == 1:
        return f"rank {rs[0]}"
    return "ranks " + ", ".join(map(str, rs[:-1])) + f" and {rs[-1]}"


def _flush_partial(rk: _Rank, fd: int) -> None:
    entry = rk.streams[fd]
    if entry[1]:
        _emit(rk.rank, entry[0], entry[1])
        entry[1] = b""


def _capture(rk: _Rank, fd: int, sink: list) -> None:
    """Like _read_output, but keep stderr lines (the stack dump) instead of printing them."""
    entry = rk.streams[fd]
    if entry[0] is not sys.stderr:
        _read_output(rk, fd)
        return
    try:
        chunk = os.read(fd, 65536)
    except OSError:
        chunk = b""
    if not chunk:
        entry[2].close()
        del rk.streams[fd]
        return
    lines = (entry[1] + chunk).split(b"\n")
    entry[1] = lines.pop()
    sink.extend(line.decode("utf-8", errors="replace") for line in lines)


def _innermost_frame(lines: list[str]) -> str | None:
    """The first frame of a faulthandler dump is where the rank is now: 'file:line in func'."""
    for line in lines:
        match = _FRAME.match(line.strip())
        if match:
            path, lineno, func = match.groups()
            return f"{_short_path(path)}:{lineno} in {func}"
    return None


def _short_path(path: str) -> str:
    marker = "site-packages" + os.sep
    return path.split(marker, 1)[1] if marker in path else path


def _in_communication(frame: str) -> bool:
    return "torch/distributed" in frame or "torch\\distributed" in frame


def _stop_all(ranks: list[_Rank]) -> None:
    """Kill every rank and its children; reap them so nothing outlives the launch."""
    for rk in ranks:
        pid = rk.process.pid
        if pid is None or rk.process.exitcode is not None and not _group_alive(pid):
            continue
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    for rk in ranks:
        rk.process.join(timeout=5.0)
        rk.result_conn.close()


def _close_streams(ranks: list[_Rank]) -> None:
    for rk in ranks:
        for entry in rk.streams.values():
            entry[2].close()
        rk.streams.clear()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False
