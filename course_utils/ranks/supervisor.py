"""The parent's side of `launch`: watch every rank until each has a result, or stop them all.

One loop waits on every rank's pipes and exit at once: output lines are printed with a
`[rank r]` prefix as they come, results and errors are received, a rank that vanishes is
recorded as dead. The first failure (after a short grace, to see which came first) or
the timeout stops every rank; `diagnosis` then says what happened.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import signal
import sys
import time
from dataclasses import dataclass, field
from multiprocessing.connection import wait

import cloudpickle

from . import diagnosis, processes

_GRACE = 0.3  # seconds to collect simultaneous failures before deciding which came first
_DUMP_WAIT = 1.0  # seconds for hung ranks to print where they are stuck


@dataclass
class RankFailure:
    """How one rank failed; in the results of `launch(..., allow_failures=True)`."""

    rank: int
    when: float
    kind: str  # "raised" | "died" | "unreadable" (a result that cannot be unpickled here)
    exc_type: str = ""
    message: str = ""
    traceback: str = ""
    original: BaseException | None = None
    secondary: bool = False


@dataclass
class RankHandle:
    """The parent's view of one rank: its process, its result pipe and its output streams."""

    rank: int
    process: mp.process.BaseProcess
    result_conn: object
    streams: dict = field(default_factory=dict)  # fd -> [target stream, pending bytes]
    done: bool = False
    result: object = None
    joined: bool = False
    released: bool = False


def supervise(ranks: list[RankHandle], spec) -> list:
    deadline = time.monotonic() + spec.timeout
    failures: dict[int, RankFailure] = {}
    decide_at = None
    while not all(rk.done for rk in ranks):
        now = time.monotonic()
        if decide_at is not None and now >= decide_at:
            break
        if now >= deadline:
            captured = _stack_dumps(ranks)
            stop_all(ranks)
            diagnosis.raise_timeout(captured, [rk.rank for rk in ranks], spec)
        limit = min(deadline, decide_at or deadline) - now
        _pump(ranks, failures, timeout=max(0.0, limit))
        _release_once_all_joined(ranks)
        if failures and decide_at is None and not spec.allow_failures:
            decide_at = time.monotonic() + _GRACE
    if failures and (not spec.allow_failures or len(failures) == len(ranks)):
        stop_all(ranks)
        _drain(ranks, until=time.monotonic() + 0.5)
        diagnosis.raise_failure(failures, spec)
    _release_once_all_joined(ranks)
    _drain(ranks, until=time.monotonic() + 2.0)
    for failure in sorted(failures.values(), key=lambda f: f.rank):
        how = f"raised {failure.exc_type}" if failure.kind == "raised" else failure.message
        print(
            f"[launch] rank {failure.rank} of {spec.world_size} {how}; the other ranks went on "
            "(allow_failures=True).",
            file=sys.stderr,
        )
    return [failures.get(rk.rank) or rk.result for rk in ranks]


def _pump(ranks: list[RankHandle], failures: dict, timeout: float) -> None:
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
            while not rk.done and _has_message(rk):
                _receive(rk, failures)
            if not rk.done:
                _record_death(rk, failures)


def _has_message(rk: RankHandle) -> bool:
    try:
        return rk.result_conn.poll(0)
    except (EOFError, OSError):
        return False


def _release_once_all_joined(ranks: list[RankHandle]) -> None:
    """Let finished ranks leave once every rank has joined the group (see child.py)."""
    if not all(rk.joined or rk.done for rk in ranks):
        return
    for rk in ranks:
        if not rk.released:
            rk.released = True
            try:
                rk.result_conn.send_bytes(b"go")
            except OSError:
                pass  # it is gone already


def _receive(rk: RankHandle, failures: dict) -> None:
    try:
        status, body = pickle.loads(rk.result_conn.recv_bytes())
    except (EOFError, OSError):
        _record_death(rk, failures)
        return
    if status == "joined":
        rk.joined = True
        return
    rk.done = True
    if status == "ok":
        try:
            rk.result = cloudpickle.loads(body)
        except Exception as exc:
            failures[rk.rank] = RankFailure(
                rank=rk.rank,
                when=time.monotonic(),
                kind="unreadable",
                exc_type=type(exc).__name__,
                message=f"returned a value that cannot be unpickled here ({type(exc).__name__}: "
                f"{exc}); return plain data: tensors, numbers, lists, dicts",
            )
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


def _record_death(rk: RankHandle, failures: dict) -> None:
    rk.done = True
    rk.process.join(timeout=1.0)
    failures[rk.rank] = RankFailure(
        rank=rk.rank,
        when=time.monotonic(),
        kind="died",
        exc_type="",
        message=f"{processes.exit_reason(rk.process.exitcode)} before returning a result",
    )


def _read_output(rk: RankHandle, fd: int) -> None:
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


def _drain(ranks: list[RankHandle], until: float) -> None:
    """Read what the ranks printed last; their pipes close when they exit."""
    while any(rk.streams for rk in ranks) and time.monotonic() < until:
        fds = [fd for rk in ranks for fd in rk.streams]
        for fd in wait(fds, timeout=max(0.0, until - time.monotonic())):
            owner = next(rk for rk in ranks if fd in rk.streams)
            _read_output(owner, fd)


def _stack_dumps(ranks: list[RankHandle]) -> dict[int, list[str]]:
    """Ask the unfinished ranks where they are (faulthandler on SIGUSR1); keep what they print."""
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
        if all(diagnosis.innermost_frame(lines) for lines in captured.values()):
            until = min(until, time.monotonic() + 0.1)  # the rest of each dump
    return captured


def _flush_partial(rk: RankHandle, fd: int) -> None:
    entry = rk.streams[fd]
    if entry[1]:
        _emit(rk.rank, entry[0], entry[1])
        entry[1] = b""


def _capture(rk: RankHandle, fd: int, sink: list) -> None:
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


def stop_all(ranks: list[RankHandle]) -> None:
    """Kill every rank and its children; reap them so nothing outlives the launch."""
    processes.stop(*(rk.process for rk in ranks))
    for rk in ranks:
        rk.result_conn.close()


def close_streams(ranks: list[RankHandle]) -> None:
    for rk in ranks:
        for entry in rk.streams.values():
            entry[2].close()
        rk.streams.clear()
