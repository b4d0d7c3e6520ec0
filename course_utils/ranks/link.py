"""An emulated network link: every rank's traffic pays a latency alpha and a bandwidth beta.

On a laptop the ranks share a few cores, so a timing measures mostly the OS scheduler.
On a cluster each rank has its own cores and waiting for the network costs no compute.
This module makes the laptop behave like that, as `tc netem` would (which needs root):
the data moves for real through gloo, and each message's wire time, alpha + bytes /
bandwidth, is added as a *sleep*: N ranks on 2 cores wait like N machines on a network.

Each rank has one full-duplex link. Messages it sends queue on its way out (a send waits
until the wire has carried every earlier one), and messages that arrive together queue on
its way in (a server receiving from N-1 workers takes N-1 wire times); `link_clock` keeps
that time, so that a late wake-up does not add to the next message. The course's own
send paths (`send`, `recv`, `post`, `all_reduce`) and the DDP hook (`link_hook`) pay it;
`active(link)` switches it on inside a rank. With the real link they are plain gloo.
"""

from __future__ import annotations

import contextlib
import math
import re
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from .link_clock import Clock, latest_moment

__all__ = [
    "REAL",
    "Link",
    "active",
    "add_argument",
    "all_reduce",
    "current",
    "irecv",
    "isend",
    "now",
    "parse",
    "post",
    "recv",
    "resolve",
    "restart",
    "ring_allreduce_seconds",
    "send",
    "timer",
    "wire_deadline",
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
        rate, alpha = self.bits_per_second / 1e6, self.alpha * 1e3
        return f"{rate:g}mbit,{alpha:g}ms" if self.emulated else "real"


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
    alpha = float(latency) * (1e-3 if latency_unit == "ms" else 1e-6) if latency else _DEFAULT_ALPHA
    return Link(alpha=alpha, bits_per_second=float(rate) * _UNITS[unit])


def resolve(spec: str | Link | None) -> Link:
    """`spec` as a Link; None means the current profile's default (`cpu`: emulated)."""
    if spec is None:
        from ..core.profiles import default_link

        spec = default_link()
    return parse(spec)


def add_argument(parser, default: str = "the profile's; cpu: an emulated 100 Mbit/s, 5 ms link"):
    """`--link` for a timing benchmark: 'real', or an emulated link such as '1gbit'."""
    parser.add_argument(
        "--link",
        default=None,
        help=f"'real', or an emulated link: '1gbit', '100mbit', '100mbit,2ms' (default: {default})",
    )


def ring_allreduce_seconds(link: Link, nbytes: float, world: int) -> float:
    """Wire time of a ring allreduce: 2(N-1) messages of n/N bytes, one after another."""
    return 2 * (world - 1) * link.wire_seconds(nbytes / world) if world > 1 else 0.0


_state = {"link": REAL, "clock": Clock()}


def current() -> Link:
    """The link this process's traffic pays (the real one unless inside `active`)."""
    return _state["link"]


@contextlib.contextmanager
def active(link: Link | str | None, virtual: bool = False):
    """Inside a rank: make the course's sends pay `link`'s wire time, on fresh wires.

    `virtual`: time is this rank's CPU time plus the wire, never the real time it spent
    descheduled (for compute measured as if every rank had a core of its own; see `now`).
    """
    previous = _state["link"], _state["clock"]
    _state["link"], _state["clock"] = parse(link), Clock(math.inf) if virtual else Clock()
    try:
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


class _Received:
    def __init__(self, buffer, t, handle, seconds):
        self.buffer, self.t, self.handle, self.seconds = buffer, t, handle, seconds

    def wait(self) -> None:
        """The data is here, and this rank's clock has moved to when its last byte arrived."""
        self.handle.wait()
        clock = _state["clock"]
        clock.wait_until(clock.received(self.seconds, _unpacked(self.buffer, self.t)))


def isend(t: torch.Tensor, peer: int, tag: int = 0):
    """`dist.isend` over the link: the message queues on this rank's outgoing wire."""
    link = current()
    if not link.emulated:
        return dist.isend(t, peer, tag=tag)
    arrives = _state["clock"].send(link.wire_seconds(_nbytes(t)))
    return dist.isend(_packed(t, arrives), peer, tag=tag)


def irecv(t: torch.Tensor, peer: int, tag: int = 0):
    """`dist.irecv` over the link: its `wait()` returns when the last byte has arrived."""
    link = current()
    if not link.emulated:
        return dist.irecv(t, peer, tag=tag)
    buffer = torch.empty(8 + _nbytes(t), dtype=torch.uint8, device=t.device)  # stamp + bytes
    return _Received(buffer, t, dist.irecv(buffer, peer, tag=tag), link.wire_seconds(_nbytes(t)))


def restart() -> float:
    """Start every rank's clock at the last rank's exit from the barrier before this call
    (on every rank): a rank let out late would stamp all it sends that much later (8 ranks
    on 2 cores added 2-20 ms to a 15 ms allreduce). Returns that moment, on the real time's
    scale: when a timing starts, on every rank alike, whichever the link."""
    _state["clock"].restart(at=latest_moment())
    return _state["clock"].now


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


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


def send(t: torch.Tensor, peer: int, tag: int = 0) -> None:
    """`dist.send`: returns when the wire has carried the message (after every earlier one)."""
    link = current()
    if not link.emulated:
        dist.send(t, peer, tag=tag)
        return
    clock = _state["clock"]
    arrives = clock.send(link.wire_seconds(_nbytes(t)))
    dist.send(_packed(t, arrives), peer, tag=tag)
    clock.wait_until(arrives)


def recv(t: torch.Tensor, peer: int | None = None, tag: int = 0) -> int:
    """`dist.recv` (from anyone when `peer` is None): returns when the last byte has arrived
    over this rank's incoming wire, which carries one message at a time."""
    link = current()
    if not link.emulated:
        return dist.recv(t, peer, tag=tag)
    clock = _state["clock"]
    clock.advance()
    buffer = _packed(t)
    sender = dist.recv(buffer, peer, tag=tag)
    arrives = _unpacked(buffer, t)
    clock.wait_until(clock.received(link.wire_seconds(_nbytes(t)), arrives))
    return sender


def post(*ops: tuple) -> None:
    """Post ("send" | "recv", tensor, peer) ops together and wait for all of them.

    NCCL needs a send and a receive to one peer grouped (`batch_isend_irecv`), or both
    ranks wait for each other; gloo's plain isend/irecv are faster, so it gets those. Over
    an emulated link each message carries its stamp, and the rank is done when its last
    send has left and its last receive has arrived.
    """
    link = current()
    clock = _state["clock"]
    wire = {id(t): link.wire_seconds(_nbytes(t)) for _, t, _ in ops}
    sent = []
    if link.emulated:
        sent = [clock.send(wire[id(t)]) for kind, t, _ in ops if kind == "send"]
        stamps = iter(sent)
        ops = [(k, _packed(t, next(stamps) if k == "send" else 0.0), p, t) for k, t, p in ops]
    kinds = {"send": dist.isend, "recv": dist.irecv}
    if dist.get_backend() == "nccl":
        requests = dist.batch_isend_irecv([dist.P2POp(kinds[k], t, p) for k, t, p, *_ in ops])
    else:
        ordered = sorted(ops, key=lambda op: op[0] != "recv")  # a posted receive takes data at once
        requests = [kinds[k](t, p) for k, t, p, *_ in ordered]
    for request in requests:
        request.wait()
    if link.emulated:
        arrivals = sorted(  # the incoming wire carries them in the order they come
            (_unpacked(buffer, t), wire[id(t)]) for k, buffer, _, t in ops if k == "recv"
        )
        done = [clock.received(seconds, moment) for moment, seconds in arrivals]
        clock.wait_until(max(sent + done, default=0.0))


def all_reduce(t: torch.Tensor) -> torch.Tensor:
    """`dist.all_reduce(t)` (sum), done when a ring on this link would be done."""
    link = current()
    if not link.emulated:
        dist.all_reduce(t)
        return t
    clock = _state["clock"]
    done = clock.send(ring_allreduce_seconds(link, _nbytes(t), dist.get_world_size()))
    dist.all_reduce(t)
    clock.wait_until(done)
    return t


def wire_deadline(seconds: float) -> float:
    """Reserve this rank's outgoing wire for `seconds`; when it will be free (for hooks)."""
    return _state["clock"].send(seconds)
