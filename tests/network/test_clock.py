"""The simulator's clock on a fake time: wires that queue, late wake-ups that hide behind
the wire, CPU time that counts, and a link whose two directions share the rank's bandwidth."""

from __future__ import annotations

import math

import pytest

from course_utils.network import clock as link_clock
from course_utils.network.clock import Clock


class FakeTime:
    """What `link_clock` reads as `time`, moved by hand: the real time moves when a rank
    sleeps, the thread's CPU time only when it computes."""

    def __init__(self):
        self.real, self.cpu = 1024.0, 0.0

    def perf_counter(self) -> float:
        return self.real

    def thread_time(self) -> float:
        return self.cpu

    def sleep(self, seconds: float) -> None:
        self.real += seconds

    def compute(self, seconds: float) -> None:
        self.real += seconds
        self.cpu += seconds


@pytest.fixture
def fake_time(monkeypatch) -> FakeTime:
    fake = FakeTime()
    monkeypatch.setattr(link_clock, "time", fake)
    return fake


WIRE = 2.0**-5  # 31.25 ms, exact in binary


def _send(clock: Clock) -> float:
    """What `dist.send` on a simulated link does with the clock: stamp the message, wait
    until it has left."""
    arrives = clock.send(WIRE)
    clock.wait_until(arrives)
    return arrives


def _recv(clock: Clock, arrives: float) -> None:
    """What `dist.recv` on a simulated link does with the clock, for a message stamped `arrives`."""
    clock.advance()
    clock.wait_until(clock.received(WIRE, arrives))


def test_clock_queues_messages_on_the_way_out(fake_time):
    clock = Clock()
    assert [clock.send(WIRE) for _ in range(3)] == [1024 + WIRE, 1024 + 2 * WIRE, 1024 + 3 * WIRE]


def test_clock_queues_messages_that_arrive_together_on_the_way_in(fake_time):
    """Three stamps of one moment: the third is in after three wire times, not one."""
    server, workers = Clock(), [Clock() for _ in range(3)]
    stamps = [w.send(WIRE) for w in workers]
    assert stamps == [1024 + WIRE] * 3
    assert [server.received(WIRE, s) for s in stamps] == [1024 + k * WIRE for k in (1, 2, 3)]


def _ping_pong(fake: FakeTime, lag: float, late: float = 0.01) -> float:
    """Two ranks' clocks pass a message back and forth 8 times; each sender wakes `late`
    before it sends (the scheduler's doing). When the last message is in, on both clocks."""
    clocks, start = [Clock(lag), Clock(lag)], fake.real
    for clock in clocks:
        clock.restart(at=start)
    for turn in range(8):
        sender, receiver = clocks[turn % 2], clocks[1 - turn % 2]
        fake.sleep(late)
        _recv(receiver, _send(sender))
    assert clocks[0].now == clocks[1].now
    return clocks[0].now - start


def test_late_wakeups_hide_behind_the_wire_instead_of_adding_up(fake_time):
    """A wake-up later than the wire is free but within `LAG` costs nothing; a clock that
    followed the real time (lag 0) would add up all eight of them."""
    assert _ping_pong(fake_time, link_clock.LAG) == pytest.approx(8 * WIRE, abs=1e-12)
    assert _ping_pong(fake_time, 0.0) == pytest.approx(8 * WIRE + 8 * 0.01, abs=1e-12)


def test_a_virtual_clock_counts_cpu_time_not_time_spent_descheduled(fake_time):
    virtual, lagged = Clock(math.inf), Clock()
    virtual.advance(), lagged.advance()
    fake_time.compute(0.002)
    fake_time.sleep(1.0)  # descheduled for a second: real time moves, CPU time does not
    assert virtual.advance() == pytest.approx(1024 + 0.002, abs=1e-12)
    assert lagged.advance() == pytest.approx(fake_time.real - link_clock.LAG, abs=1e-12)


def test_a_virtual_clock_times_a_ping_pong_like_a_lagging_one_without_sleeping_it(fake_time):
    """Eight messages: the same time on both clocks, but only the lagging one waits it out
    on the real clock (a race on it may matter there); the virtual one goes on at once."""
    start = fake_time.real
    assert _ping_pong(fake_time, math.inf, late=0.0) == pytest.approx(8 * WIRE, abs=1e-12)
    assert fake_time.real == start
    assert _ping_pong(fake_time, link_clock.LAG, late=0.0) == pytest.approx(8 * WIRE, abs=1e-12)
    assert fake_time.real == pytest.approx(start + 8 * WIRE, abs=1e-12)


def test_a_message_that_arrives_while_the_rank_sends_is_slowed_on_a_shared_link(fake_time):
    """An exchange on a link whose directions share the rank (slowdown 1.5): the part of
    the incoming message that overlaps the outgoing one takes 1.5 times as long."""
    for slowdown, expected in ((1.0, WIRE), (1.5, 1.5 * WIRE)):
        a, b = Clock(both_ways_slowdown=slowdown), Clock(both_ways_slowdown=slowdown)
        from_a, from_b = a.send(WIRE), b.send(WIRE)
        assert a.received(WIRE, from_b) - 1024 == pytest.approx(expected, abs=1e-12)
        assert b.received(WIRE, from_a) - 1024 == pytest.approx(expected, abs=1e-12)


def test_a_shared_link_slows_an_exchanges_bytes_not_its_latency(fake_time):
    """The same exchange where a quarter of each message's wire time is its alpha: only the
    other three quarters, the bytes, take 1.5 times as long."""
    alpha = WIRE / 4
    a, b = (Clock(both_ways_slowdown=1.5, alpha=alpha) for _ in range(2))
    from_a, from_b = a.send(WIRE), b.send(WIRE)
    expected = alpha + 1.5 * (WIRE - alpha)
    assert a.received(WIRE, from_b) - 1024 == pytest.approx(expected, abs=1e-12)
    assert b.received(WIRE, from_a) - 1024 == pytest.approx(expected, abs=1e-12)


def test_a_message_alone_on_a_shared_link_pays_one_way(fake_time):
    """A tree's round: the child sends, the parent only receives; nothing overlaps."""
    child, parent = Clock(both_ways_slowdown=2.0), Clock(both_ways_slowdown=2.0)
    assert parent.received(WIRE, child.send(WIRE)) - 1024 == pytest.approx(WIRE, abs=1e-12)
    half_over = Clock(lag=0.0, both_ways_slowdown=2.0)  # its own send leaves halfway in
    fake_time.sleep(WIRE / 2)
    half_over.send(WIRE)
    into = half_over.received(WIRE, 1024 + WIRE)
    assert into - 1024 == pytest.approx(WIRE + WIRE / 2, abs=1e-12)


def test_cpu_spent_inside_not_counted_is_not_the_rank_s_work(fake_time):
    clock = Clock(math.inf)
    clock.advance()
    fake_time.compute(0.003)  # the rank's own work
    with clock.not_counted():
        fake_time.compute(0.5)  # packing a stamp, gloo moving the bytes
    fake_time.compute(0.001)
    assert clock.advance() == pytest.approx(1024 + 0.004, abs=1e-12)


def test_a_rank_that_waited_for_a_hook_s_result_is_at_its_deadline(monkeypatch):
    """DDP's backward blocks until every bucket is back: what the rank computes next is
    stamped after the last bucket's deadline, not at a time from before the wait."""
    from course_utils.network import hook, wire

    with wire.active("8mbit,20ms"):
        start = wire.now()
        wire.waited_until(start + 5.0)
        assert wire.now() >= start + 5.0
        wire.waited_until(start)  # an earlier deadline never moves the clock back
        assert wire.now() >= start + 5.0
        monkeypatch.setattr(hook, "_last_deadline", [start + 9.0])
        hook.waited_for_every_bucket()
        assert wire.now() >= start + 9.0


def test_a_message_waited_for_after_a_later_one_still_came_first(fake_time):
    """A tree's parent waits for its children in turn: the child whose message arrived first
    but is waited for second took the wire before the other, not after it (waited for in
    arrival order or not, the parent is done when the later message is in)."""
    parent, early, late = Clock(), Clock(), Clock()
    first = early.send(WIRE)
    fake_time.sleep(3 * WIRE)
    late.now = late.out = 1024 + 3 * WIRE
    second = late.send(WIRE)
    assert parent.received(WIRE, second) == pytest.approx(second, abs=1e-12)
    assert parent.received(WIRE, first) == pytest.approx(first, abs=1e-12)
    together = Clock()  # two that overlap on the wire still queue, whichever is waited first
    assert together.received(WIRE, second) == pytest.approx(second, abs=1e-12)
    assert together.received(WIRE, second - WIRE / 2) == pytest.approx(second + WIRE, abs=1e-12)
