"""What the ranks print: streamed with a `[rank r]` prefix, held while they set up, and
captured (a hung rank's stack dump) at a timeout.

Lines a rank prints before every rank has joined the group are only set-up noise (no
learner's code has run): they are held, shown once the ranks start or with an error,
and dropped when the ranks are started again.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import time
from multiprocessing.connection import wait

from . import diagnosis

_DUMP_WAIT = 1.0  # seconds for hung ranks to print where they are stuck
# what gloo itself prints on every rank as a group connects, in some torch releases (2.10):
# never the learner's, and in front of a command's JSON it would make it unreadable
_GLOO_CONNECTED = re.compile(rb"^\[Gloo\] Rank \d+ is connected to \d+ peer ranks")


def is_gloo_noise(line: bytes) -> bool:
    return bool(_GLOO_CONNECTED.match(line))


def show_held(ranks: list) -> None:
    for rk in ranks:
        for stream, line in rk.held:
            _emit(rk.rank, stream, line)
        rk.held.clear()


def read_output(rk, fd: int) -> None:
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
        if is_gloo_noise(line) or rk.bar.feed(line.decode("utf-8", errors="replace")):
            continue  # a bar's state (rank 0's `progress.LineBar`) is drawn, not printed
        rk.last_lines.append(line.decode("utf-8", errors="replace").rstrip("\r"))
        if rk.released:
            _emit(rk.rank, entry[0], line)
        else:
            rk.held.append((entry[0], line))


def _emit(r: int, stream, line: bytes) -> None:
    text = line.decode("utf-8", errors="replace").rstrip("\r")
    print(f"[rank {r}] {text}", file=stream, flush=True)


def drain(ranks: list, until: float) -> None:
    """Read what the ranks printed last; their pipes close when they exit."""
    while any(rk.streams for rk in ranks) and time.monotonic() < until:
        fds = [fd for rk in ranks for fd in rk.streams]
        for fd in wait(fds, timeout=max(0.0, until - time.monotonic())):
            owner = next(rk for rk in ranks if fd in rk.streams)
            read_output(owner, fd)


def stack_dumps(ranks: list) -> dict[int, list[str]]:
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


def _flush_partial(rk, fd: int) -> None:
    entry = rk.streams[fd]
    if entry[1]:
        _emit(rk.rank, entry[0], entry[1])
        entry[1] = b""


def _capture(rk, fd: int, sink: list) -> None:
    """Like read_output, but keep stderr lines (the stack dump) instead of printing them."""
    entry = rk.streams[fd]
    if entry[0] is not sys.stderr:
        read_output(rk, fd)
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
    texts = (line.decode("utf-8", errors="replace") for line in lines)
    sink.extend(text for text in texts if not rk.bar.feed(text))


@contextlib.contextmanager
def quiet_stderr():
    """Inside a rank: drop what C++ code writes to stderr meanwhile (torch.profiler logs its
    start and stop there), which the learner would otherwise see prefixed `[rank r]`."""
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
