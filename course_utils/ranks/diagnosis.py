"""How a child ended, in words: which rank failed first, where the ranks hung, how a call ended.

The supervisor records the failures and, at a timeout, each unfinished rank's
faulthandler stack dump; these functions turn them into the `LaunchError` or
`LaunchTimeout` the learner reads, or into an independent call's `Outcome`. A rank's
own exception beats a peer's "connection closed"; a timeout where every rank waits
inside torch.distributed is called a deadlock.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass

from ..core.errors import LaunchError, LaunchTimeout
from . import processes

_FRAME = re.compile(r'File "(.*)", line (\d+) in (.*)')


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
    in_setup: bool = False  # raised while joining the group, before `fn` ran


@dataclass
class Outcome:
    """How one independent call ended, and when (`time.perf_counter()` in this process).

    `status` is "ok" (`value` holds what the call returned), "raised" (`error` is
    "ValueError: ..." and `traceback` its text), "died" (its process ended without
    answering; `error` says how, e.g. "was killed by SIGKILL") or "timeout".
    """

    index: int  # position in the calls
    slot: int  # which of the `jobs` lanes ran it
    start: float
    end: float
    status: str = "ok"
    value: object = None
    error: str = ""
    traceback: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def call_outcome(rk, lane: int, failure, now: float, timeout) -> Outcome:
    """How the call that `rk` ran ended, from the failure recorded for it or its lack of one."""
    outcome = Outcome(rk.rank, lane, rk.started, now, value=rk.result)
    if not rk.done:
        outcome.status, outcome.error = "timeout", f"TimeoutError: stopped after {timeout:g} s"
    elif failure is not None and failure.kind == "died":
        outcome.status, outcome.error = "died", processes.exit_reason(rk.process.exitcode)
    elif failure is not None:
        outcome.status, outcome.error = "raised", f"{failure.exc_type}: {failure.message}"
        outcome.traceback = failure.traceback
    return outcome


def raise_failure(failures: dict, spec, returned: list[int] = ()):
    """Raise the `LaunchError` for the rank that failed first in time, not a peer's echo of it.

    `returned` are the ranks whose function had returned normally: a peer's "connection
    closed" after that is no crash, but a message that rank never sent.
    """
    primary = [f for f in failures.values() if not f.secondary] or list(failures.values())
    first = min(primary, key=lambda f: (f.when, f.rank))
    n = spec.world_size
    others = "The other ranks were stopped; nothing is left running." if n > 1 else ""
    if first.kind == "raised" and first.secondary and returned:
        others = (
            f"No rank crashed: {numbered(sorted(returned))} had returned normally, so rank "
            f"{first.rank} waited for a message that was never sent (check that every recv has "
            f"a matching send). {others}"
        )
    if first.kind == "raised":
        message = (
            f"rank {first.rank} of {n} raised {first.exc_type} in worker `{spec.name}`: "
            f"{_one_line(first.message)} (its traceback is shown above).\n{others}"
        )
        # Printed, not chained as a cause: Jupyter would head a cause with its class name
        # twice, above a second "Traceback (most recent call last)".
        print(_headed(first.traceback, first.rank), file=sys.stderr, flush=True)
    else:
        message = f"rank {first.rank} of {n} {first.message} in worker `{spec.name}`."
        if first.kind == "died" and first.traceback:
            last = "\n".join(f"    {line}" for line in first.traceback.splitlines())
            message += f" Its last lines of output:\n{last}"
        message += f"\n{others}"
    error = LaunchError(
        message.strip(),
        rank=first.rank,
        world_size=n,
        exc_type=first.exc_type or None,
        remote_traceback=(first.traceback or None) if first.kind == "raised" else None,
        original=first.original,
    )
    raise error from None


def _headed(traceback_text: str, rank: int) -> str:
    """The rank's traceback under one header that names the rank."""
    plain = "Traceback (most recent call last):"
    if traceback_text.startswith(plain):
        return f"Traceback of rank {rank} (most recent call last):" + traceback_text[len(plain) :]
    return f"Traceback of rank {rank}:\n{traceback_text}"


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def raise_timeout(captured: dict[int, list[str]], ranks: list[int], spec):
    """Raise the `LaunchTimeout` naming the stalled ranks and where each one was.

    `captured` holds the stack-dump lines of each rank still running at the timeout.
    """
    where = {r: innermost_frame(lines) for r, lines in captured.items()}
    stuck = [r for r, frame in where.items() if frame and not _in_communication(frame)]
    waiting = [r for r, frame in where.items() if frame and _in_communication(frame)]
    n = spec.world_size
    lines = []
    if stuck:
        lines.append(
            f"{numbered(stuck)} of {n} did not finish within {spec.timeout:g} s in worker "
            f"`{spec.name}`."
        )
    elif waiting and _out_of_step(where, waiting):
        odd, call, usual = _out_of_step(where, waiting)
        lines.append(
            f"{numbered(waiting)} of {n} were all waiting to communicate after "
            f"{spec.timeout:g} s in worker `{spec.name}`, in different collectives: "
            f"{numbered(odd)} in {call}, the others in {usual}. A deadlock: every rank must "
            "call the same collectives in the same order."
        )
        waiting = odd + [r for r in waiting if r not in odd]
    elif waiting:
        lines.append(
            f"{numbered(waiting)} of {n} were all waiting to communicate after "
            f"{spec.timeout:g} s in worker `{spec.name}`: a deadlock (each waits for a message "
            "that no rank sends, e.g. every rank calls a blocking recv before its send)."
        )
    else:
        lines.append(
            f"{numbered(sorted(captured) or ranks)} of {n} did not "
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


def _out_of_step(where: dict, waiting: list[int]) -> tuple[list[int], str, str] | None:
    """The ranks waiting in another collective than most of them (the collective they
    called, the one the others called), or None when every rank waits in the same one."""
    calls = {r: where[r].rsplit(" in ", 1)[-1] for r in waiting}
    if len(set(calls.values())) < 2:
        return None
    usual = max(sorted(set(calls.values())), key=list(calls.values()).count)
    odd = [r for r in waiting if calls[r] != usual]
    return odd, calls[odd[0]], usual


def numbered(rs: list[int], noun: str = "rank") -> str:
    """'rank 2', 'ranks 0, 1 and 3' (or nodes)."""
    if len(rs) == 1:
        return f"{noun} {rs[0]}"
    return f"{noun}s " + ", ".join(map(str, rs[:-1])) + f" and {rs[-1]}"


def innermost_frame(lines: list[str]) -> str | None:
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
