"""`this-machine`: the simulator's terms fitted on the real link here, each from runs of its own.

Two real ranks (the wall clock; each should have a core) measure, for every size:
- a ping-pong: one message at a time, one way (alpha and beta when only one direction is
  busy, as in a tree's or a parameter server's rounds);
- a simultaneous exchange: both ranks send at once, as a ring's or a butterfly's steps do.
  On loopback the two directions share the cores and the memory that copy the bytes,
  so each goes slower than alone: `Link.both_ways_bits_per_second`;
- a local add of two tensors of that size: Thakur's gamma, seconds per reduced byte. It
  is reported, not charged: the simulator counts a reduction's adds as the CPU time they
  take, like any other work of the rank.
Each is the fastest of a few runs of several back-to-back messages, timed on rank 0 from
its own clock, so no barrier or start-up skew is in it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ..ranks.bootstrap import device
from . import fabric
from .fabric import Link

FIT_BYTES = (1 << 10, 1 << 16, 1 << 20, 1 << 24)  # alpha from the smallest, beta to the largest
_BACK_TO_BACK = 16  # the first message after a barrier wakes a sleeping peer


@dataclass(frozen=True)
class AlphaBeta:
    """Latency per message (seconds) and time per byte (seconds), fitted from a ping-pong."""

    alpha: float
    beta: float

    @property
    def bandwidth_gb_s(self) -> float:
        return 1e-9 / self.beta if self.beta > 0 else float("inf")

    def message_seconds(self, nbytes: float) -> float:
        return self.alpha + nbytes * self.beta


def fit_alpha_beta(nbytes: list[int], seconds: list[float]) -> AlphaBeta:
    """alpha from the smallest message, beta from the slope up to the largest.

    A least-squares line would let the large messages swamp alpha (even make it
    negative); the two ends of a ping-pong pin down what each parameter means.
    """
    if len(nbytes) < 2 or len(nbytes) != len(seconds):
        raise ValueError("fit_alpha_beta needs at least two (size, time) pairs of equal length.")
    pairs = sorted(zip(nbytes, seconds, strict=True))
    (n0, t0), (n1, t1) = pairs[0], pairs[-1]
    beta = max((t1 - t0) / (n1 - n0), 1e-15)
    alpha = max(t0 - n0 * beta, 1e-9)
    return AlphaBeta(alpha=alpha, beta=beta)


@dataclass(frozen=True)
class LinkTerms:
    """The real link's terms, each fitted from its own measurement."""

    one_way: AlphaBeta
    both_ways: AlphaBeta
    gamma: float  # seconds per byte reduced (one float32 add of two tensors)

    def link(self) -> Link:
        """The simulated link that stands for this machine's real one."""
        return Link(
            alpha=self.one_way.alpha,
            bits_per_second=8.0 / self.one_way.beta,
            both_ways_bits_per_second=8.0 / max(self.both_ways.beta, self.one_way.beta),
            name="this-machine",
        )

    def as_row(self) -> dict:
        """The terms in the units a reader compares: seconds, GB/s, seconds per GB."""
        return {
            "one_way_alpha_seconds": round(self.one_way.alpha, 7),
            "one_way_gb_s": round(self.one_way.bandwidth_gb_s, 3),
            "both_ways_alpha_seconds": round(self.both_ways.alpha, 7),
            "both_ways_gb_s_each": round(self.both_ways.bandwidth_gb_s, 3),
            "gamma_seconds_per_gb": round(self.gamma * 1e9, 4),
        }


def fit_link_terms(nbytes: tuple, measured: dict) -> LinkTerms:
    """The terms from `measure_link_terms`' times."""
    sizes = list(nbytes)
    largest = max(range(len(sizes)), key=sizes.__getitem__)
    return LinkTerms(
        one_way=fit_alpha_beta(sizes, measured["one_way"]),
        both_ways=fit_alpha_beta(sizes, measured["both_ways"]),
        gamma=measured["add"][largest] / sizes[largest],
    )


def measure_link_terms(nbytes: tuple = FIT_BYTES, repeats: int = 5, timeout: float = 120) -> dict:
    """{"one_way": [...], "both_ways": [...], "add": [...]}: seconds per message of each
    size alone, per message each way at once, and per add of two such tensors."""
    from ..core.backends import GLOO
    from ..ranks.launch import launch

    return launch(
        measure_on_ranks, 2, args=(tuple(nbytes), repeats), timeout=timeout, backend=GLOO
    )[0]


def measure_on_ranks(nbytes: tuple = FIT_BYTES, repeats: int = 5) -> dict:
    """`measure_link_terms` inside a launched group (ranks 0 and 1 measure, any others
    wait), so that a check can fit and then time in one launch, on the same processes.
    Every rank gets rank 0's times."""
    pair = dist.new_group([0, 1]) if dist.get_world_size() > 2 else None
    times = torch.zeros(3, len(nbytes), dtype=torch.float64, device=device())
    if dist.get_rank() < 2:
        for row, both_ways in enumerate((False, True)):
            fastest = [_fastest(n, repeats, both_ways, pair) for n in nbytes]
            times[row] = torch.tensor(fastest, device=times.device)
        times[2] = torch.tensor([_fastest_add(n, repeats) for n in nbytes], device=times.device)
    dist.broadcast(times, 0)
    return dict(zip(("one_way", "both_ways", "add"), times.tolist(), strict=True))


_FITTED: list[LinkTerms] = []


def this_machine(refit: bool = False) -> Link:
    """The link fitted here (measured once per process, a few seconds)."""
    if refit or not _FITTED:
        _FITTED[:] = [fit_link_terms(FIT_BYTES, measure_link_terms(FIT_BYTES))]
    return _FITTED[0].link()


fabric.FITTED[fabric.THIS_MACHINE] = this_machine


def _fastest(nbytes: int, repeats: int, both_ways: bool, pair=None) -> float:
    """Seconds per message: rank 0's clock over back-to-back round trips (one way: a ping
    then a pong; both ways: each rank sends and receives at once), fastest of `repeats`."""
    rank, peer = dist.get_rank(), 1 - dist.get_rank()
    out = torch.ones(max(1, nbytes // 4), device=device())
    into = torch.empty_like(out)  # reused: its pages are in after the warm-up
    times = []
    for i in range(repeats + 1):
        dist.barrier(group=pair)
        start = time.perf_counter()
        for _ in range(_BACK_TO_BACK):
            if both_ways:
                receiving = dist.irecv(into, peer)
                dist.isend(out, peer).wait()
                receiving.wait()
            elif rank == 0:
                dist.send(out, peer)
                dist.recv(into, peer)
            else:
                dist.recv(into, peer)
                dist.send(out, peer)
        if out.is_cuda:
            torch.cuda.synchronize()
        per_message = (time.perf_counter() - start) / _BACK_TO_BACK / (1 if both_ways else 2)
        if i:  # the first is a warm-up
            times.append(per_message)
    return min(times)


def _fastest_add(nbytes: int, repeats: int) -> float:
    """One in-place add of two float32 tensors of `nbytes`, as a reduction step does."""
    a = torch.ones(max(1, nbytes // 4), device=device())
    b = torch.ones_like(a)
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        a.add_(b)
        if a.is_cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return min(times[1:])
