"""The network simulator's wire: every rank's traffic pays a latency alpha and a bandwidth beta.

On a laptop the ranks share a few cores, so a timing measures mostly the OS scheduler.
On a cluster each rank has its own cores and waiting for the network costs no compute.
This module makes the laptop behave like that, as `tc netem` would (which needs root):
the data moves for real through gloo, and each message's wire time, alpha + bytes /
bandwidth, is charged on the rank's clock and, where ranks race on the real clock, slept
as well: N ranks on 2 cores wait like N machines on a network (`clock`).

Each rank has one link (`fabric`: full duplex unless fitted otherwise). Messages it sends
queue on its way out (a send waits until the wire has carried every earlier one), and
messages that arrive together queue on its way in (a server receiving from N-1 workers
takes N-1 wire times); `clock` keeps that time, so that a late wake-up does not add to the
next message. Inside `active(link)` every message sent through `torch.distributed` pays
it (`recorder` wraps torch's point-to-point functions and calls `charged`), as does every
blocking all-reduce of a sum and the DDP hook (`hook`). With the real link they are plain gloo. The
built-in `all_reduce` is *charged as a ring* (its formula), so a time of it on a simulated
link is a prediction, never a measurement.
"""

from __future__ import annotations

import contextlib
import math
import time

import torch
import torch.distributed as dist

from ..ranks.launch import carry
from . import recorder
from .clock import LAG, Clock, latest_moment
from .fabric import AUTO, PRESETS, REAL, Link, add_argument, parse, resolve, ring_allreduce_seconds
from .messages import nbytes

__all__ = ["PRESETS", "REAL", "Link", "active", "carried", "add_argument", "all_reduce"]
__all__ += ["current", "now", "parse", "resolve", "restart", "ring_allreduce_seconds"]
__all__ += ["timer", "waited_until", "wire_deadline"]


_state = {"link": REAL, "clock": Clock()}


def current() -> Link:
    """The link this process's traffic pays (the real one unless inside `active`)."""
    return _state["link"]


@contextlib.contextmanager
def active(link: Link | str | None, virtual: bool = False):
    """Inside a rank: make the course's sends pay `link`'s wire time, on fresh wires.

    `virtual`: time is this rank's CPU time plus the wire, never the real time it spent
    descheduled (for compute measured as if every rank had a core of its own; see `now`),
    and no rank sleeps its wire time: for code whose messages wait only for each other.
    'auto' is decided here for this process group's size and backend (`fabric.resolve`).
    """
    previous = _state["link"], _state["clock"]
    if isinstance(link, str) and link.strip().lower() == AUTO and dist.is_initialized():
        link = resolve(link, dist.get_world_size(), dist.get_backend())
    _state["link"] = parse(link)
    slowdown, alpha = _state["link"].both_ways_slowdown, _state["link"].alpha
    _state["clock"] = Clock(math.inf if virtual else LAG, slowdown, alpha)
    simulated = recorder.simulated(_Wire) if _state["link"].emulated else contextlib.nullcontext()
    try:
        with simulated:
            yield _state["link"]
    finally:
        _state["link"], _state["clock"] = previous


def now() -> float:
    """This rank's time on the link clock: its own CPU time plus every wait for the wire,
    never more than `link_clock.LAG` behind the real time (under `active(..., virtual=True)`
    it may fall behind without limit)."""
    return _state["clock"].advance()


def timer():
    """What to time a step with: the link clock over an emulated link (a rank the scheduler
    wakes late adds nothing under the clock's lag), the wall clock over the real one."""
    return now if current().emulated else time.perf_counter


class _Sent:
    """An isend's handle on a simulated link: `arrives` is when its last byte is in."""

    def __init__(self, handle, arrives: float):
        self.handle, self.arrives = handle, arrives

    def wait(self, timeout=None) -> bool:
        return self.handle.wait() if timeout is None else self.handle.wait(timeout)


class _Received:
    def __init__(self, buffer, t, handle, seconds):
        self.buffer, self.t, self.handle, self.seconds = buffer, t, handle, seconds

    def wait(self, timeout=None) -> bool:
        """The data is here, and this rank's clock has moved to when its last byte arrived."""
        clock = _state["clock"]
        with clock.not_counted():
            self.handle.wait() if timeout is None else self.handle.wait(timeout)
            arrives = _unpacked(self.buffer, self.t)
        clock.wait_until(clock.received(self.seconds, arrives))
        return True


def charged(op: str, t: torch.Tensor, peer: int | None, group, tag: int):
    """torch's `op` ("send", "recv", "isend" or "irecv") with the message's wire time charged
    on this rank's clock (`recorder` calls this for every message on a simulated link).

    A message queues on the sender's outgoing wire and carries, in front of its bytes, the
    moment its last byte arrives; a receive returns (or its `wait()` does) when the last
    byte is in, after every message before it on this rank's incoming wire."""
    own, clock = recorder.torch_own(op), _state["clock"]
    seconds = current().wire_seconds(nbytes(t))
    if op in ("send", "isend"):
        arrives = clock.send(seconds)
        with clock.not_counted():
            handle = own(_packed(t, arrives), peer, group, tag)
        if op == "send":
            clock.wait_until(arrives)
            return handle
        return _Sent(handle, arrives)
    with clock.not_counted():
        buffer = torch.empty(8 + nbytes(t), dtype=torch.uint8, device=t.device)  # stamp, bytes
        handle = own(buffer, peer, group, tag)
    if op == "irecv":
        return _Received(buffer, t, handle, seconds)
    with clock.not_counted():  # `handle` is the sender's rank: the bytes are here
        arrives = _unpacked(buffer, t)
    clock.wait_until(clock.received(seconds, arrives))
    return handle


class _Wire:
    """What the recorder calls for each message on a simulated link."""

    charged = staticmethod(charged)
    now = staticmethod(now)
    all_reduce = staticmethod(lambda t, group: _charged_all_reduce(t, group))

    @staticmethod
    def not_counted():
        return _state["clock"].not_counted()


def carried(fn):
    """`fn` as `launch` sends it to its ranks: inside a `recorder.recording()` here, each rank
    records too, on the link active here, and returns (its value, its messages)."""
    if isinstance(fn, _Recorded):
        return fn
    return _Recorded(fn, current()) if recorder.writing() else fn


def merged(results: list, fn) -> list:
    """The ranks' values; their messages go to the recording open here, in rank order."""
    if not isinstance(fn, _Recorded) or not recorder.writing():
        return results
    for result in results:
        recorder.write(result[1] if isinstance(result, tuple) else [])
    return [result[0] if isinstance(result, tuple) else result for result in results]


class _Recorded:
    def __init__(self, fn, link: Link):
        self.fn, self.link = fn, link

    def __call__(self, *args, **kwargs):
        with active(self.link), recorder.recording() as log:
            value = self.fn(*args, **kwargs)
        return value, log.messages


carry(carried, merged)


def restart() -> float:
    """Start every rank's clock at the last rank's exit from the barrier before this call
    (on every rank): a rank let out late would stamp all it sends that much later (8 ranks
    on 2 cores added 2-20 ms to a 15 ms allreduce). Returns that moment, on the real time's
    scale: when a timing starts, on every rank alike, whichever the link."""
    _state["clock"].restart(at=latest_moment())
    return _state["clock"].now


def _packed(t: torch.Tensor, stamp: float = 0.0) -> torch.Tensor:
    """The message's bytes with its stamp (when its last byte arrives) appended: one
    message, not two, so that a step costs the ranks' shared cores as little as it can."""
    stamp_bytes = torch.tensor([stamp], dtype=torch.float64, device=t.device).view(torch.uint8)
    raw = t.detach().contiguous().view(-1).view(torch.uint8)
    return torch.cat([stamp_bytes, raw])  # stamp first: both stay aligned for their dtype


def _unpacked(buffer: torch.Tensor, t: torch.Tensor) -> float:
    """Copy a packed message into `t`; its stamp."""
    t.copy_(buffer[8:].view(t.dtype).view(t.shape))
    return buffer[:8].view(torch.float64).item()


def all_reduce(t: torch.Tensor, group=None) -> torch.Tensor:
    """`dist.all_reduce(t, group=group)` (sum), returning `t`: on a simulated link the
    recorder charges it as a ring (`_charged_all_reduce`), as it does the learner's."""
    dist.all_reduce(t, group=group)
    return t


def _charged_all_reduce(t: torch.Tensor, group) -> torch.Tensor:
    """torch's all-reduce (sum), done when a ring on this link would be done.

    A ring starts when its last member enters. Under a lagging clock a rank that waited in
    gloo for the others has caught up with the real time already; a purely virtual clock
    (`active(..., virtual=True)`) never does, so there the members first agree on the
    latest entry (a MAX, not counted) and the ring is charged from that moment."""
    link, clock = current(), _state["clock"]
    if math.isinf(clock.lag):
        clock.wait_until(_latest_entry(clock, group, t.device))
    seconds = ring_allreduce_seconds(link, nbytes(t), dist.get_world_size(group))
    done = clock.send(seconds)
    with clock.not_counted():
        recorder.torch_own("all_reduce")(t, group=group)
    clock.wait_until(done)
    return t


def _latest_entry(clock: Clock, group, where: torch.device) -> float:
    """The latest moment, over `group`, at which a member's clock and outgoing wire are free."""
    entry = max(clock.advance(), clock.out)
    with clock.not_counted():
        moment = torch.tensor([entry], dtype=torch.float64, device=where)
        recorder.torch_own("all_reduce")(moment, op=dist.ReduceOp.MAX, group=group)
    return moment.item()


def wire_deadline(seconds: float) -> float:
    """Reserve this rank's outgoing wire for `seconds`; when it will be free (for hooks)."""
    return _state["clock"].send(seconds)


def waited_until(moment: float) -> None:
    """The rank has waited for a hook's result due at `moment` (DDP's backward blocks until
    every bucket is back): its clock is there too, so what it computes next is stamped
    after it, not at a time from before the wait."""
    clock = _state["clock"]
    clock.now = max(clock.now, moment)
