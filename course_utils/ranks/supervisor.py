"""The parent's side of `launch`: watch every child until each has a result, or stop them.

One loop waits on every child's pipes and exit at once: output lines are printed with a
`[rank r]` prefix as they come, results and errors are received, a child that vanishes is
recorded as dead. For a launch's ranks, the first failure (after a short grace, to see
which came first) or the timeout stops every rank; `diagnosis` then says what happened.
Independent calls (`supervise_calls`) run a few at a time, each stopped on its own.
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
import sys
import time
from collections import deque
from dataclasses import dataclass, field, replace
from multiprocessing.connection import wait

import cloudpickle

from ..core import progress
from . import diagnosis, processes, rank_output
from .diagnosis import RankFailure
from .limits import START_UP_SECONDS

LAST_LINES = 6  # of a rank's output, kept to say why it died
_GRACE = 0.3  # seconds to collect simultaneous failures before deciding which came first
SETUP_ATTEMPTS = 3  # starts of the ranks when peers fail to connect while the group forms
setup_restarts = 0  # how many times, in this process, ranks were started again (for bench)


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
    held: list = field(default_factory=list)  # (stream, line) printed before release
    bar: progress.Mirror = field(default_factory=progress.Mirror)  # draws rank 0's bar lines
    started: float = field(default_factory=time.perf_counter)
    last_lines: deque = field(default_factory=lambda: deque(maxlen=LAST_LINES))  # its last words


class _SetupRace(Exception):
    """A rank failed to connect to its peers while joining the group, before any ran `fn`."""


def supervise(ranks: list[RankHandle], spec, restart=None) -> list:
    """Watch the ranks to the end; `restart(spec)` starts them again after a failed join.

    About one launch in 60 on a loaded 2-core machine, a gloo rank's connection to a
    peer was closed while the group was forming, though no rank had failed. No learner's
    code has run by then (ranks start it together, once all have joined), so the ranks
    are started again through a fresh rendezvous file, up to `SETUP_ATTEMPTS` times.
    """
    for attempt in range(1, SETUP_ATTEMPTS + 1):
        try:
            return _watch(ranks, spec, may_retry=restart is not None and attempt < SETUP_ATTEMPTS)
        except _SetupRace:
            global setup_restarts
            setup_restarts += 1
            stop_all(ranks)
            close_streams(ranks)
            ranks.clear()
            spec = replace(spec, init_method=f"{spec.init_method}.{attempt}")
            restart(spec)
    raise AssertionError("unreachable")


def _watch(ranks: list[RankHandle], spec, may_retry: bool) -> list:
    deadline = time.monotonic() + spec.timeout + START_UP_SECONDS  # until all run `fn`
    failures: dict[int, RankFailure] = {}
    decide_at = None
    while not all(rk.done for rk in ranks):
        now = time.monotonic()
        if decide_at is not None and now >= decide_at:
            break
        if now >= deadline:
            captured = rank_output.stack_dumps(ranks)
            stop_all(ranks)
            rank_output.show_held(ranks)
            if not all(rk.released for rk in ranks):  # still starting: say how long it had
                spec = replace(spec, timeout=spec.timeout + START_UP_SECONDS)
            diagnosis.raise_timeout(captured, [rk.rank for rk in ranks], spec)
        limit = min(deadline, decide_at or deadline) - now
        _pump(ranks, failures, timeout=max(0.0, limit))
        if may_retry and _failed_to_join(ranks, failures):
            raise _SetupRace
        if not all(rk.released for rk in ranks) and _release_once_all_joined(ranks):
            deadline = time.monotonic() + spec.timeout  # the function's own time starts now
        if failures and decide_at is None and not spec.allow_failures:
            decide_at = time.monotonic() + _GRACE
    if failures and (not spec.allow_failures or len(failures) == len(ranks)):
        stop_all(ranks)
        rank_output.drain(ranks, until=time.monotonic() + 0.5)
        rank_output.show_held(ranks)
        returned = [rk.rank for rk in ranks if rk.done and rk.rank not in failures]
        for rk in ranks:  # a rank that died left no traceback: what it printed last says why
            if rk.rank in failures and failures[rk.rank].kind == "died":
                failures[rk.rank].traceback = "\n".join(rk.last_lines)
        diagnosis.raise_failure(failures, spec, returned)
    _release_once_all_joined(ranks)
    rank_output.drain(ranks, until=time.monotonic() + 2.0)
    for failure in sorted(failures.values(), key=lambda f: f.rank):
        how = f"raised {failure.exc_type}" if failure.kind == "raised" else failure.message
        print(
            f"[launch] rank {failure.rank} of {spec.world_size} {how}; the other ranks went on "
            "(allow_failures=True).",
            file=sys.stderr,
        )
    return [failures.get(rk.rank) or rk.result for rk in ranks]


def supervise_calls(start_call, count: int, jobs: int, timeout: float | None, on_done=None) -> list:
    """The `Outcome` of calls 0 to `count - 1`, each started by `start_call(index, lane)` in
    one of `jobs` lanes as a lane comes free.

    Calls are independent: one that raises, dies or runs past `timeout` is recorded while
    the others go on, and each is stopped, with all it started, as soon as it has ended.
    `on_done(outcome)` hears of each as it ends. Whatever happens, none is left running.
    """
    pending, running, ended = list(range(count)), {}, {}  # running: lane -> handle
    try:
        while pending or running:
            for lane in range(jobs):
                if lane not in running and pending:
                    with processes.interrupts_held():  # started and recorded, or not started
                        running[lane] = start_call(pending.pop(0), lane)
            for outcome in _next_ended(running, timeout):
                ended[outcome.index] = outcome
                if on_done is not None:
                    on_done(outcome)
    finally:
        stop_all(list(running.values()))
    return [ended[i] for i in range(count)]


def _next_ended(running: dict, timeout: float | None) -> list:
    """Wait until a call answers, ends or overruns `timeout`; stop those, then forget them.

    A call leaves `running` only once it is stopped, so that an interrupt at any point
    here leaves it to `supervise_calls` to stop."""
    failures: dict[int, RankFailure] = {}
    first = min(rk.started for rk in running.values())
    left = None if timeout is None else max(0.0, first + timeout - time.perf_counter())
    _pump(list(running.values()), failures, timeout=left)
    now = time.perf_counter()
    done = {
        lane: rk
        for lane, rk in running.items()
        if rk.done or (timeout is not None and now - rk.started >= timeout)
    }
    stop_all(list(done.values()))
    for lane in done:
        del running[lane]
    ended = [(rk, lane, failures.get(rk.rank)) for lane, rk in done.items()]
    return [diagnosis.call_outcome(*how, now, timeout) for how in ended]


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
            rank_output.read_output(rk, obj)
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


def _failed_to_join(ranks: list[RankHandle], failures: dict) -> bool:
    """A peer's connection broke while the group formed, and nobody has run `fn` yet."""
    return not any(rk.released for rk in ranks) and any(
        f.in_setup and f.secondary and "time" not in f.message.lower() for f in failures.values()
    )


def _release_once_all_joined(ranks: list[RankHandle]) -> bool:
    """Let the ranks run the function once every rank has joined the group (see child.py);
    whether they have all been let go.

    What a rank printed before (only set-up noise: no learner's code has run) is shown
    then, or with the error if the launch fails, and dropped if the ranks start again.
    """
    if not all(rk.joined or rk.done for rk in ranks):
        return False
    for rk in ranks:
        if not rk.released:
            rk.released = True
            try:
                rk.result_conn.send_bytes(b"go")
            except OSError:
                pass  # it is gone already
    rank_output.show_held(ranks)
    return True


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
        in_setup=body.get("in_setup", False),
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


def stop_all(ranks: list[RankHandle]) -> None:
    """Kill every rank and its children; reap them so nothing outlives the launch."""
    processes.stop(*(rk.process for rk in ranks))
    for rk in ranks:
        rk.result_conn.close()


def close_streams(ranks: list[RankHandle]) -> None:
    for rk in ranks:
        rk.bar.close()
        for entry in rk.streams.values():
            entry[2].close()
        rk.streams.clear()
