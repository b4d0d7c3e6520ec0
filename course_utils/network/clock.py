"""The simulator's clock: when each rank's wire is free, in a time the scheduler cannot stretch.

Sleeping `alpha + bytes/beta` before each send would let every late wake-up (a rank on a
busy 2-core laptop can wait a whole scheduler tick for a core) add to the next message,
and a ring's 2(N-1) dependent steps would add them all up. So each rank keeps a
*virtual* clock: it advances by the rank's own CPU time (its compute, as if it had a core
to itself) and by the wire times of the messages it sends and receives, and each message
carries the time its last byte arrives. The data moves for real at once. A *lagging*
clock then sleeps until its virtual time, so real work of up to a wire time hides behind
the wire, as the transfer itself would on a real network card, and ranks that race on
the real clock (workers sending to a server) arrive in the order their wires would have
them arrive. A purely *virtual* clock does not sleep: a timing of an algorithm whose
messages wait only for each other reads nothing but the clocks.

The clock counts the rank's own work (its compute, the reduction's adds), never the CPU
spent by the simulator itself or inside gloo moving the bytes (`not_counted`): the
wire time charged for a message already stands for that. A link whose two directions
share one rank's bandwidth (`Link.both_ways_slowdown`, two processes on one machine)
stretches the part of a message's bytes that arrives while the rank's own bytes are on the
wire. Its latency alpha is not stretched: alpha is a message's fixed cost, not bandwidth.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time

import torch
import torch.distributed as dist

from ..ranks.bootstrap import device

LAG = 0.05  # seconds: a rank whose real time runs this far ahead (it waited outside the
# link, in a barrier or a sleep) moves its virtual clock up to it


class Clock:
    """One rank's virtual time, and when its outgoing and incoming wires are next free."""

    def __init__(self, lag: float = LAG, both_ways_slowdown: float = 1.0, alpha: float = 0.0):
        self.lag = lag  # math.inf: a purely virtual clock (compute counts as CPU time only)
        self.both_ways_slowdown, self.alpha = both_ways_slowdown, alpha
        self.restart()

    def restart(self, at: float | None = None) -> None:
        """Start afresh from the real time, or from the moment `at` on it (one that every
        rank agreed on): after a barrier, say, before timing something."""
        self.now = self.out = self.into = time.perf_counter() if at is None else at
        self.incoming = []  # (start, end) of the messages on the incoming wire
        self.sending_since = self.now  # the start of the last message on the outgoing wire
        self._cpu = {threading.get_ident(): time.thread_time()}  # counted from here on

    def advance(self) -> float:
        """Count the CPU time this thread used since its last message; returns the time."""
        thread, cpu = threading.get_ident(), time.thread_time()
        self.now += max(0.0, cpu - self._cpu.get(thread, cpu))
        self._cpu[thread] = cpu
        self.now = max(self.now, time.perf_counter() - self.lag)
        return self.now

    def send(self, seconds: float) -> float:
        """A message of `seconds` on the wire, after every earlier one: when its last byte
        arrives (the receiver gets this stamp)."""
        self.sending_since = max(self.advance(), self.out)
        self.out = self.sending_since + seconds
        return self.out

    def received(self, seconds: float, arrives: float) -> float:
        """A message whose last byte arrives at `arrives`: later if the incoming wire was
        busy with another one then (messages that arrive together queue), and later still
        for the part that came in while this rank was sending, on a link whose two
        directions share the rank's bandwidth. A rank may wait for its messages in another
        order than they came (a tree's parent waits for its children in turn): one that came
        first takes the wire's first free gap, not the end of the queue. Each message's
        bytes follow its latency `alpha`; only bytes overlapping bytes are slowed."""
        start = arrives - seconds
        for begin, end in sorted(self.incoming):
            if start + seconds <= begin:
                break
            start = max(start, end)
        bytes_overlap = min(start + seconds, self.out) - self.alpha - max(start, self.sending_since)
        both_ways = max(0.0, bytes_overlap)
        done = start + seconds + both_ways * (self.both_ways_slowdown - 1.0)
        self.incoming = [*self.incoming[-63:], (start, done)]  # older ones cannot matter
        self.into = max(self.into, done)
        return done

    @contextlib.contextmanager
    def not_counted(self):
        """CPU time spent inside this block is not the rank's work (the simulator packing a
        stamp, gloo moving bytes): the wire time already stands for it."""
        self.advance()
        try:
            yield
        finally:
            self._cpu[threading.get_ident()] = time.thread_time()

    def wait_until(self, moment: float) -> None:
        """This rank is busy until `moment` (its virtual time). A lagging clock sleeps until
        the real one, since what the rank does next may race other ranks on the real clock
        (which gradient reaches a server first). A purely virtual clock goes on at once:
        none of its times reads the real clock, so a sleep would change none of them and
        only make the learner wait."""
        self.now = max(self.now, moment)
        left = self.now - time.perf_counter()
        if left > 0 and not math.isinf(self.lag):
            time.sleep(left)
        self._cpu[threading.get_ident()] = time.thread_time()  # sleeping is not compute


def latest_moment() -> float | None:
    """The latest of every rank's real time now (one all-reduce): a start that all the
    ranks' clocks can share. None outside a process group."""
    if not dist.is_initialized():
        return None
    from .recorder import torch_own  # the simulator's own message: never counted

    moment = torch.tensor([time.perf_counter()], dtype=torch.float64, device=device())
    torch_own("all_reduce")(moment, op=dist.ReduceOp.MAX)
    return moment.item()
