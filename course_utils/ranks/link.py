"""An emulated network link: every rank's traffic pays a latency alpha and a bandwidth beta.

On a laptop the ranks share a few cores, so what a timing measures is mostly the OS
scheduler, not the network. A cluster is the opposite: each rank has its own cores and
waiting for the network costs no compute. This module makes the laptop behave like the
cluster, the way `tc netem` would (which needs root): the data still moves for real
through gloo, and each message's wire time, alpha + bytes / bandwidth, is added as a
*sleep*, so N ranks on 2 cores wait like N machines on a slow network.

Each rank has one full-duplex link. Messages it sends queue on its way out (a send waits
until the wire has carried every earlier one), and messages that arrive together queue on
its way in (a server receiving from N-1 workers takes N-1 wire times). The course's own
send paths (`send`, `recv`, `post`, `all_reduce`) and the DDP hook (`allreduce_hook`) pay
it; `active(link)` switches it on inside a rank. With the real link they are plain gloo.
"""

from __future__ import annotations

import contextlib
import math
import queue
import re
import threading
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

__all__ = [
    "REAL",
    "Link",
    "active",
    "add_argument",
    "all_reduce",
    "allreduce_hook",
    "current",
    "parse",
    "post",
    "recv",
    "resolve",
    "ring_allreduce_seconds",
    "send",
]


@dataclass(frozen=True)
class Link:
    """Latency per message (seconds) and bandwidth (bits per second); the real link is 0, inf."""

    alpha: float = 0.0
    bits_per_second: float = math.inf

    @property
    def emulated(self) -> bool:
        return self.alpha > 0 or math.isfinite(self.bits_per_second)

    @property
    def beta(self) -> float:
        """Seconds per byte."""
        return 8.0 / self.bits_per_second

    def wire_seconds(self, nbytes: float) -> float:
        return self.alpha + nbytes * self.beta if self.emulated else 0.0

    @property
    def label(self) -> str:
        """What a chart's subtitle says, e.g. 'emulated 100 Mbit/s link, α = 2 ms'."""
        if not self.emulated:
            return "real link (loopback, ranks share the cores)"
        bits = self.bits_per_second
        rate = f"{bits / 1e9:g} Gbit/s" if bits >= 1e9 else f"{bits / 1e6:g} Mbit/s"
        return f"emulated {rate} link, α = {self.alpha * 1e3:g} ms"

    @property
    def spec(self) -> str:
        """The string `parse` turns back into this link: 'real' or e.g. '100mbit,2ms'."""
        if not self.emulated:
            return "real"
        return f"{self.bits_per_second / 1e6:g}mbit,{self.alpha * 1e3:g}ms"


REAL = Link()
_UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
_DEFAULT_ALPHA = 1e-3


def parse(spec: str | Link | None) -> Link:
    """'real', '1gbit', '100mbit' (alpha 1 ms) or '100mbit,2ms': the link a `--link` names."""
    if isinstance(spec, Link):
        return spec
    text = (spec or "real").strip().lower().replace(" ", "")
    if text == "real":
        return REAL
    found = re.fullmatch(r"([\d.]+)(kbit|mbit|gbit)(?:,([\d.]+)(ms|us))?", text)
    if not found:
        raise ValueError(
            f"unknown link {spec!r}: use 'real', a bandwidth such as '1gbit' or '100mbit', "
            "or a bandwidth and a latency such as '100mbit,2ms'."
        )
    rate, unit, latency, latency_unit = found.groups()
    alpha = _DEFAULT_ALPHA
    if latency:
        alpha = float(latency) * (1e-3 if latency_unit == "ms" else 1e-6)
    return Link(alpha=alpha, bits_per_second=float(rate) * _UNITS[unit])


def resolve(spec: str | Link | None) -> Link:
    """`spec` as a Link; None means the current profile's default (`cpu`: emulated)."""
    if spec is None:
        from ..core.profiles import default_link

        spec = default_link()
    return parse(spec)


def add_argument(parser) -> None:
    """`--link` for a timing benchmark: 'real', or an emulated link such as '1gbit'."""
    parser.add_argument(
        "--link",
        default=None,
        help="'real', or an emulated link: '1gbit', '100mbit', '100mbit,2ms' "
        "(default: the profile's; cpu: an emulated 100 Mbit/s, 2 ms link)",
    )


def ring_allreduce_seconds(link: Link, nbytes: float, world: int) -> float:
    """Wire time of a ring allreduce: 2(N-1) messages of n/N bytes, one after another."""
    if world <= 1 or not link.emulated:
        return 0.0
    return 2 * (world - 1) * link.wire_seconds(nbytes / world)


class _Clock:
    """When this rank's outgoing and incoming wire is next free (time.perf_counter)."""

    def __init__(self):
        self.out = self.into = 0.0

    def reserve_out(self, seconds: float) -> float:
        self.out = max(time.perf_counter(), self.out) + seconds
        return self.out

    def account_in(self, seconds: float) -> float:
        """A message that just arrived took `seconds` on the wire; one that arrived together
        with it must wait until the wire had carried this one too."""
        self.into = max(self.into, time.perf_counter() - seconds) + seconds
        return self.into


_state = {"link": REAL, "clock": _Clock()}


def current() -> Link:
    """The link this process's traffic pays (the real one unless inside `active`)."""
    return _state["link"]


@contextlib.contextmanager
def active(link: Link | str | None):
    """Inside a rank: make the course's sends pay `link`'s wire time, on fresh wires."""
    previous = _state["link"], _state["clock"]
    _state["link"], _state["clock"] = parse(link), _Clock()
    try:
        yield _state["link"]
    finally:
        _state["link"], _state["clock"] = previous


def _sleep_until(deadline: float) -> None:
    left = deadline - time.perf_counter()
    if left > 0:
        time.sleep(left)


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def send(t: torch.Tensor, peer: int, tag: int = 0) -> None:
    """`dist.send`, after the wire has carried the message (and every earlier one)."""
    link = current()
    if link.emulated:
        _sleep_until(_state["clock"].reserve_out(link.wire_seconds(_nbytes(t))))
    dist.send(t, peer, tag=tag)


def recv(t: torch.Tensor, peer: int | None = None, tag: int = 0) -> int:
    """`dist.recv` (from anyone when `peer` is None); waits while messages queue on the way in."""
    sender = dist.recv(t, peer, tag=tag)
    link = current()
    if link.emulated:
        _sleep_until(_state["clock"].account_in(link.wire_seconds(_nbytes(t))))
    return sender


def post(*ops: tuple) -> None:
    """Post ("send" | "recv", tensor, peer) ops together and wait for all of them.

    The sends go out one after another on this rank's wire, the receives come in one after
    another. NCCL needs a send and a receive to one peer grouped (`batch_isend_irecv`), or
    both ranks wait for each other; gloo's plain isend/irecv are faster, so it gets those.
    """
    link = current()
    if link.emulated:
        clock = _state["clock"]
        out = [clock.reserve_out(link.wire_seconds(_nbytes(t))) for k, t, _ in ops if k == "send"]
        _sleep_until(max(out, default=0.0))
    kinds = {"send": dist.isend, "recv": dist.irecv}
    if dist.get_backend() == "nccl":
        requests = dist.batch_isend_irecv([dist.P2POp(kinds[k], t, p) for k, t, p in ops])
    else:
        requests = [kinds[k](t, p) for k, t, p in ops]
    for request in requests:
        request.wait()
    if link.emulated:
        clock = _state["clock"]
        into = [clock.account_in(link.wire_seconds(_nbytes(t))) for k, t, _ in ops if k == "recv"]
        _sleep_until(max(into, default=0.0))


def all_reduce(t: torch.Tensor) -> torch.Tensor:
    """`dist.all_reduce(t)` (sum), then the wire time a ring would take on this link."""
    link = current()
    deadline = 0.0
    if link.emulated:
        wire = ring_allreduce_seconds(link, _nbytes(t), dist.get_world_size())
        deadline = _state["clock"].reserve_out(wire)
    dist.all_reduce(t)
    _sleep_until(deadline)
    return t


class _Wire(threading.Thread):
    """Hands each finished allreduce to DDP only when the emulated wire has carried it.

    A daemon thread, so the training thread goes on with the backward pass meanwhile:
    buckets queue on the link the way they queue on a real network card.
    """

    def __init__(self):
        super().__init__(daemon=True, name="emulated-link")
        self.jobs: queue.Queue = queue.Queue()

    def run(self) -> None:
        while True:
            deadline, work, out = self.jobs.get()
            try:
                value = work.wait()
                _sleep_until(deadline)
                out.set_result(value[0] if isinstance(value, list) else value)
            except Exception as error:  # noqa: BLE001 - handed to the waiting DDP
                out.set_exception(error)


_wire: list[_Wire] = []


def _wire_thread() -> _Wire:
    if not _wire or not _wire[0].is_alive():
        _wire[:] = [_Wire()]
        _wire[0].start()
    return _wire[0]


def allreduce_hook(link: Link | None, bucket):
    """A DDP communication hook: average the bucket through gloo, over `link`'s wire.

    `model.register_comm_hook(link, allreduce_hook)`; with the real link (or None) it is
    DDP's own allreduce hook. It returns a torch.futures.Future of the averaged bucket
    (unannotated: DDP rejects a string annotation, which `from __future__` makes).
    """
    buffer = bucket.buffer()
    world = dist.get_world_size()
    buffer.div_(world)
    work = dist.all_reduce(buffer, async_op=True).get_future()
    link = link or REAL
    if not link.emulated:
        return work.then(lambda fut: fut.value()[0])
    deadline = _state["clock"].reserve_out(ring_allreduce_seconds(link, _nbytes(buffer), world))
    out = torch.futures.Future()
    _wire_thread().jobs.put((deadline, work, out))
    return out
