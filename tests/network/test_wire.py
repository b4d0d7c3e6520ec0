"""The emulated link: data still moves through gloo, and each message pays alpha + bytes/beta."""

from __future__ import annotations

import math
import time

import pytest
import torch
import torch.distributed as dist

from course_utils.ddp.wire import OnLink, on_link_hook
from course_utils.network import wire
from course_utils.network.clock import Clock, latest_moment
from course_utils.parallel.allreduce import ring_allreduce
from course_utils.ranks.launch import launch

SLOW = "8mbit,20ms"  # 1 MB/s: 10 KB take 10 ms on the wire, on top of 20 ms latency


def test_parse_names_and_labels():
    assert wire.parse("real") is wire.REAL and not wire.REAL.emulated
    fast = wire.parse("1gbit")
    assert fast.bits_per_second == 1e9 and fast.alpha == 1e-3
    slow = wire.parse("100mbit,2ms")
    assert slow.beta == pytest.approx(8e-8) and slow.alpha == pytest.approx(2e-3)
    assert slow.label == "simulated 100 Mbit/s link, α = 2 ms"
    assert wire.parse(slow.spec) == slow
    assert wire.REAL.wire_seconds(1 << 30) == 0
    with pytest.raises(ValueError, match="100mbit,2ms"):
        wire.parse("fast")


def test_ring_wire_time_is_two_n_minus_one_chunks():
    slow = wire.parse(SLOW)
    assert wire.ring_allreduce_seconds(slow, 4000, 4) == pytest.approx(6 * (0.02 + 1000 / 1e6))
    assert wire.ring_allreduce_seconds(wire.REAL, 4000, 4) == 0
    assert wire.ring_allreduce_seconds(slow, 4000, 1) == 0


def test_a_step_is_timed_on_the_link_clock_over_an_emulated_link_and_the_wall_clock_otherwise():
    assert wire.timer() is time.perf_counter
    with wire.active(SLOW):
        assert wire.timer() is wire.now
    with wire.active("real"):
        assert wire.timer() is time.perf_counter


def _timed_exchange(spec: str, virtual: bool) -> tuple:
    """Rank 0 sends 10 KB to rank 1 three times in a row: the wire carries them one by one.
    Returns the real seconds and the link clock's (CPU time plus the wire, nothing else)."""
    payload = torch.full((2500,), float(dist.get_rank() + 1))
    with wire.active(spec, virtual=virtual):
        dist.barrier()
        start = wire.restart()  # as every timing does: all clocks start at one moment
        for _ in range(3):
            if dist.get_rank() == 0:
                dist.send(payload, 1)
            else:
                dist.recv(payload, 0)
        on_the_link = wire.now() - start
        elapsed = time.perf_counter() - start
    return elapsed, on_the_link, payload[0].item()


@pytest.mark.parametrize("virtual", [False, True], ids=["lagging", "virtual"])
def test_messages_pay_their_wire_time_once_and_still_arrive(virtual):
    """The link clock counts each message once. A receiver that charged the wire again on top
    of the sender's stamp would read 6 wire times; one that ignored the stamp, 0 (this rank
    computes next to nothing). A lagging clock's ranks sleep the wire time on the real
    clock too; a virtual one's need not (`test_clock` has that exactly)."""
    (sent, sent_link, _), (received, on_the_link, value) = launch(
        _timed_exchange, 2, args=(SLOW, virtual), backend="gloo"
    )
    three = 3 * wire.parse(SLOW).wire_seconds(10_000)  # 90 ms
    assert value == 1.0  # the data moved
    assert virtual or (three <= received and three <= sent)
    assert three <= on_the_link < 4 / 3 * three and three <= sent_link < 4 / 3 * three


def _clock_start_after_a_late_exit(spec: str) -> float:
    """Rank 1 leaves the barrier 50 ms after rank 0, as a rank the scheduler woke late."""
    with wire.active(spec):
        dist.barrier()
        if dist.get_rank() == 1:
            time.sleep(0.05)
        return wire.restart()


def test_every_rank_s_clock_starts_at_the_last_rank_s_exit_from_the_barrier():
    starts = launch(_clock_start_after_a_late_exit, 2, args=(SLOW,), backend="gloo")
    assert starts[0] == starts[1]  # 0.05 apart if each started on its own
    assert latest_moment() is None  # outside a process group: the clock starts on its own


def _gather_on_rank_0(spec: str, virtual: bool) -> tuple[float, float]:
    """Three workers send to rank 0 at once: its incoming wire takes them one after another.
    Returns the real seconds and the link clock's."""
    payload = torch.ones(2500)
    with wire.active(spec, virtual=virtual):
        dist.barrier()
        start = wire.restart()  # as every timing does: all clocks start at one moment
        if dist.get_rank() == 0:
            for worker in (1, 2, 3):
                dist.recv(payload, worker)
        else:
            dist.send(payload, 0)
        return time.perf_counter() - start, wire.now() - start


@pytest.mark.parametrize("virtual", [False, True], ids=["lagging", "virtual"])
def test_messages_that_arrive_together_queue_on_the_way_in(virtual):
    """Without the queue (each message taken as it arrives) rank 0 would be done after one
    wire time, on the link clock, and on the real one where the clock lags (a virtual
    clock's rank does not sleep); `test_clock_queues_...` has the exact arithmetic."""
    elapsed, on_the_link = launch(_gather_on_rank_0, 4, args=(SLOW, virtual), backend="gloo")[0]
    one = wire.parse(SLOW).wire_seconds(10_000)
    assert virtual or 3 * one <= elapsed
    assert 3 * one <= on_the_link < 4 * one


def _ring_and_hook(spec: str) -> tuple:
    """A ring of 8 floats, then a DDP step through the link's hook, each timed from a
    restart; after the hook, how far past that restart the outgoing wire is next free."""
    x = torch.arange(8.0) * (dist.get_rank() + 1)
    with wire.active(spec):
        dist.barrier()
        start = wire.restart()  # as every timing does: all clocks start at one moment
        ring_allreduce(x)
        ring_seconds = time.perf_counter() - start
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2, bias=False))
        model.register_comm_hook(OnLink("allreduce", wire.current()), on_link_hook)
        with torch.no_grad():
            model.module.weight.fill_(1.0)
        dist.barrier()
        start = wire.restart()
        model(torch.full((1, 4), float(dist.get_rank()))).sum().backward()
        hook_seconds = time.perf_counter() - start
        wire_out = wire._state["clock"].out - start
        grad = model.module.weight.grad.clone()
    return x, ring_seconds, hook_seconds, grad, wire_out


def test_ring_and_ddp_hook_pay_the_link_and_sum_correctly():
    results = launch(_ring_and_hook, 2, args=(SLOW,), backend="gloo")
    slow = wire.parse(SLOW)
    for x, ring_seconds, hook_seconds, grad, out in results:
        assert torch.equal(x, torch.arange(8.0) * 3)
        assert ring_seconds >= 2 * slow.wire_seconds(16)
        assert hook_seconds >= wire.ring_allreduce_seconds(slow, 32, 2)
        assert out >= wire.ring_allreduce_seconds(slow, 32, 2) - 1e-9  # the hook took the wire
        assert torch.allclose(grad, torch.full((2, 4), 0.5))  # mean of inputs 0 and 1


def _ring_and_hook_counting_messages(spec: str) -> tuple:
    """`_ring_and_hook`, and how many messages this rank's link clock was asked to carry."""
    carried = []
    send, received = Clock.send, Clock.received
    Clock.send = lambda clock, seconds: carried.append(seconds) or send(clock, seconds)
    Clock.received = lambda clock, *a: carried.append(a[0]) or received(clock, *a)
    try:
        return *_ring_and_hook(spec), len(carried)
    finally:
        Clock.send, Clock.received = send, received


def test_real_link_adds_nothing():
    """Nothing goes through the link clock, so nothing waits for it: the real link going
    through the emulated path, even at 0 s a message, would count the ring's messages."""
    emulated = launch(_ring_and_hook_counting_messages, 2, args=(SLOW,), backend="gloo")
    real = launch(_ring_and_hook_counting_messages, 2, args=("real",), backend="gloo")
    for (x, _, _, grad, _, carried), (_, *_, on_emulated) in zip(real, emulated, strict=True):
        assert torch.equal(x, torch.arange(8.0) * 3)
        assert torch.allclose(grad, torch.full((2, 4), 0.5))
        assert carried == 0 < on_emulated
    assert math.isinf(wire.REAL.bits_per_second)


def _pingpong_with_late_wakeups(spec: str) -> float:
    """Before each send a rank loses 10 ms to the scheduler (a sleep stands in for it)."""
    payload = torch.ones(2500)
    other = 1 - dist.get_rank()
    with wire.active(spec):
        dist.barrier()
        start = wire.restart()
        for turn in range(8):
            if turn % 2 == dist.get_rank():
                time.sleep(0.01)
                dist.send(payload, other)
            else:
                dist.recv(payload, other)
        return time.perf_counter() - start


def test_a_ping_pong_with_late_wakeups_still_pays_every_wire():
    """On the real clock only what the emulation guarantees: the ranks sleep every wire
    time. Whether the wake-ups hide behind the wire is the clock's arithmetic, checked
    exactly on a fake clock (`test_late_wakeups_hide_behind_the_wire_...`)."""
    elapsed = max(launch(_pingpong_with_late_wakeups, 2, args=(SLOW,), backend="gloo"))
    assert 8 * wire.parse(SLOW).wire_seconds(10_000) <= elapsed


def _odd_sizes_and_dtypes(spec: str) -> list:
    """Chunks whose byte counts are not multiples of 8, in several dtypes, both ways."""
    other = 1 - dist.get_rank()
    got = []
    with wire.active(spec):
        for dtype in (torch.float32, torch.int64, torch.float16, torch.uint8):
            mine = (torch.arange(13) * (dist.get_rank() + 1)).to(dtype)
            theirs = torch.empty(13, dtype=dtype)
            works = [dist.isend(mine[:7], other), dist.irecv(theirs[:7], other)]
            for work in works:
                work.wait()
            got.append(theirs[:7].clone())
    return got


def test_packed_stamps_keep_every_dtype_and_odd_length_intact():
    for rank, got in enumerate(launch(_odd_sizes_and_dtypes, 2, args=(SLOW,), backend="gloo")):
        for t in got:
            assert t.tolist() == [i * (2 - rank) for i in range(7)]
