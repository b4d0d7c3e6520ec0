"""Calls of one function, each in a child process of its own, a few at a time.

The sweep's trials and doctor's fork probe start here instead of each keeping a loop of
pipes, waits and kills: every child is started, tied to this process, capped and stopped
by `processes`; a call that overruns its timeout is stopped; one whose process ends
without answering is named by how it ended; and whatever happens (a failed call, an
error here, an interrupt) no child is left running when `run_calls` returns or raises.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import wait

import cloudpickle

from ..core.errors import CourseError
from . import bootstrap as rank_setup
from . import processes


@dataclass
class Outcome:
    """How one call ended, and when (`time.perf_counter()` in this process).

    `status` is "ok" (`value` holds what the call returned), "raised" (`error` is
    "ValueError: ..." and `traceback` its text), "died" (its process ended without
    answering; `error` says how, e.g. "was killed by SIGKILL") or "timeout".
    """

    index: int  # position in `calls`
    slot: int  # which of the `jobs` lanes ran it
    start: float
    end: float = 0.0
    status: str = "running"
    value: object = None
    error: str = ""
    traceback: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class ChildError(CourseError):
    """The call `run_in_child` made raised, died or overran its timeout; `outcome` says which."""

    def __init__(self, message: str, outcome: Outcome):
        super().__init__(message)
        self.outcome = outcome


@dataclass
class _Child:
    process: object
    conn: object
    outcome: Outcome


def check_jobs(jobs) -> int:
    """`jobs` if it is a whole number of children at a time >= 1, else a ValueError."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a whole number >= 1, got {jobs!r}.")
    return jobs


def run_calls(
    fn: Callable,
    calls: Sequence[dict],
    jobs: int = 1,
    timeout: float | None = None,
    start_method: str | None = None,
    gpus: Sequence[str] = (),
    on_done: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Call `fn(**kwargs)` for each `kwargs` in `calls`, each in a new child, `jobs` at once.

    Returns one `Outcome` per call, in the order of `calls`; a call that fails does not stop
    the others. `fn` travels by value (cloudpickle), so it may be defined in a notebook.
    Children are forked unless CUDA runs here (`processes.default_start_method`); a forked
    child computes on one thread, a spawned one on its share of the cores. With `gpus`,
    lane k sees only GPU `gpus[k % len(gpus)]`. `on_done` is told of each call as it ends
    (a progress bar), from this process.
    """
    check_jobs(jobs)
    payload = cloudpickle.dumps(fn)
    ctx = processes.context(start_method)  # warms up torch's imports before a fork
    method = ctx.get_start_method()
    threads = rank_setup.threads_for(min(jobs, len(calls)), method)
    pending, running, ended = list(enumerate(calls)), {}, {}  # running: slot -> _Child
    try:
        while pending or running:
            for slot in range(jobs):
                if slot not in running and pending:
                    index, kwargs = pending.pop(0)
                    gpu = gpus[slot % len(gpus)] if gpus else None
                    with processes.main_module_hidden(method), processes.interrupts_held():
                        outcome = Outcome(index, slot, time.perf_counter())
                        running[slot] = _start(ctx, payload, kwargs, threads, gpu, outcome)
            for outcome in _reap_next(running, timeout):
                ended[outcome.index] = outcome
                if on_done is not None:
                    on_done(outcome)
    finally:
        _stop(*running.values())
    return [ended[i] for i in range(len(calls))]


def run_in_child(
    fn: Callable,
    kwargs: dict | None = None,
    start_method: str | None = None,
    timeout: float | None = None,
):
    """`fn(**kwargs)`'s return value, computed in a child process; `ChildError` if it fails.

    For a question only a fresh child can answer (doctor's "could a forked child still use
    CUDA?"), asked with the same care as any child of the course: stopped at `timeout`,
    and gone when this returns.
    """
    (outcome,) = run_calls(fn, [kwargs or {}], timeout=timeout, start_method=start_method)
    if outcome.ok:
        return outcome.value
    name = getattr(fn, "__qualname__", repr(fn))
    if outcome.status == "died":
        message = f"the child process running {name} {outcome.error} before answering"
    else:
        message = f"{name} failed in its child process: {outcome.error}"
    raise ChildError(message, outcome)


def _start(ctx, payload: bytes, kwargs: dict, threads: int, gpu: str | None, outcome: Outcome):
    read, write = ctx.Pipe(duplex=False)
    args = (payload, kwargs, threads, gpu, os.getpid(), write)
    process = ctx.Process(target=_child_main, args=args, name="course-call", daemon=True)
    try:
        process.start()
    except BaseException:
        read.close()
        raise
    finally:
        write.close()
    return _Child(process, read, outcome)


def _child_main(payload, kwargs, threads, gpu, parent_pid, conn) -> None:
    """In the child: set it up as every course child is, run the call, send back its outcome."""
    processes.child_setup(parent_pid, threads)
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    try:
        message = ("ok", cloudpickle.loads(payload)(**kwargs))
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the parent
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        message = ("raised", (f"{type(exc).__name__}: {exc}", text))
    try:
        conn.send(message)
    except Exception as exc:  # a value that cannot be pickled; nothing of it was sent
        conn.send(("raised", (f"{type(exc).__name__}: {exc}", "")))
    sys.stdout.flush()
    os._exit(0)


def _reap_next(running: dict, timeout: float | None) -> list[Outcome]:
    """Wait until a child answers, ends or overruns `timeout`; stop those, then forget them.

    A child leaves `running` only once it is stopped, so an interrupt at any point here
    leaves it to `run_calls` to stop.
    """
    waits = {}
    for slot, child in running.items():
        waits[child.conn] = waits[child.process.sentinel] = slot
    wait_for = None
    if timeout is not None:
        first = min(c.outcome.start for c in running.values())
        wait_for = max(0.0, first + timeout - time.perf_counter())
    ready = {waits[obj] for obj in wait(list(waits), wait_for)}
    now = time.perf_counter()
    for slot in ready:
        child = running[slot]
        child.outcome.status, body = _answer(child)
        if child.outcome.status == "ok":
            child.outcome.value = body
        else:
            child.outcome.error, child.outcome.traceback = body
    if timeout is not None:
        for slot, child in running.items():
            if slot not in ready and now - child.outcome.start >= timeout:
                child.outcome.status = "timeout"
                child.outcome.error = f"TimeoutError: stopped after {timeout:g} s"
    done = sorted(s for s, c in running.items() if c.outcome.status != "running")
    _stop(*(running[s] for s in done))
    for slot in done:
        running[slot].outcome.end = now
    return [running.pop(slot).outcome for slot in done]


def _answer(child: _Child) -> tuple[str, object]:
    """What a child that is ready sent, or ("died", (how it ended, "")) if it sent nothing."""
    if child.conn.poll():
        try:
            return child.conn.recv()
        except (EOFError, OSError):
            pass
    child.process.join(timeout=1.0)
    return "died", (processes.exit_reason(child.process.exitcode), "")


def _stop(*children: _Child) -> None:
    try:
        processes.stop(*(c.process for c in children))
    finally:
        for c in children:
            c.conn.close()
