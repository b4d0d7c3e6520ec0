"""The fabric a simulated run stands for: its latency alpha, its bandwidth, and its presets.

A link is what one message pays: alpha + bytes / bandwidth. A network card is full
duplex, so by default a rank sends and receives at once at full rate. Two processes on one
machine are not: their "wire" is the cores copying bytes through the memory, so a rank
that sends and receives at once moves each direction slower (`both_ways_bits_per_second`,
fitted on this machine's real link by `network.fit`).

The presets are real fabrics, per direction, with alpha as a small message's end-to-end
latency through the usual software (sockets for Ethernet, NCCL for the rest), from public
figures: TCP over 1 and 10 GbE (a few tens of microseconds per message); 100 GbE RoCE and
InfiniBand NDR 400 Gbit/s (ConnectX-7, the H100 clusters' fabric) with a few microseconds;
NVLink 4 (H100 SXM: 18 links x 25 GB/s each way = 450 GB/s per direction per GPU, about
1 us). nccl-tests' PERFORMANCE.md defines the bus bandwidth these are compared with.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Link:
    """Latency per message (seconds) and bandwidth (bits per second); the real link is 0, inf.

    `both_ways_bits_per_second`: the rate of each direction while a rank sends and receives
    at once (None: the same as one way, a full-duplex card). `name`: the preset it is.
    """

    alpha: float = 0.0
    bits_per_second: float = math.inf
    both_ways_bits_per_second: float | None = None
    name: str = ""

    @property
    def emulated(self) -> bool:
        return self.alpha > 0 or math.isfinite(self.bits_per_second)

    @property
    def clock(self) -> str:
        """The clock a timing over this link is on, as every bench names it."""
        return "simulated" if self.emulated else "real"

    @property
    def beta(self) -> float:
        """Seconds per byte."""
        return 8.0 / self.bits_per_second

    @property
    def both_ways_slowdown(self) -> float:
        """How much longer a byte takes while the rank's other direction is busy too (>= 1)."""
        if self.both_ways_bits_per_second is None or not self.emulated:
            return 1.0
        return max(1.0, self.bits_per_second / self.both_ways_bits_per_second)

    def wire_seconds(self, nbytes: float) -> float:
        return self.alpha + nbytes * self.beta if self.emulated else 0.0

    @property
    def label(self) -> str:
        """What a chart's subtitle says, e.g. 'simulated 100 Mbit/s link, α = 2 ms'."""
        if not self.emulated:
            return "real link (this machine's loopback), wall clock"
        both = self.both_ways_bits_per_second
        duplex = f" ({_rate(both)} each way when both are busy)" if both else ""
        named = f"{self.name}: " if self.name else ""
        return f"simulated {named}{_rate(self.bits_per_second)} link{duplex}, α = {_ms(self.alpha)}"

    @property
    def spec(self) -> str:
        """The string `parse` turns back into this link: 'real', a preset's name, or e.g.
        '100mbit,2ms' or '20000mbit,0.05ms,both-ways=12000mbit'."""
        if not self.emulated:
            return "real"
        if self.name in PRESETS:
            return self.name
        alpha = f"{self.alpha * 1e3:g}ms" if self.alpha >= 1e-3 else f"{self.alpha * 1e6:g}us"
        text = f"{self.bits_per_second / 1e6:g}mbit,{alpha}"
        both = self.both_ways_bits_per_second
        return f"{text},both-ways={both / 1e6:g}mbit" if both else text


def _rate(bits: float) -> str:
    return f"{bits / 1e9:.3g} Gbit/s" if bits >= 1e9 else f"{bits / 1e6:.3g} Mbit/s"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-4 else f"{seconds * 1e6:.3g} µs"


REAL = Link()
AUTO = "auto"  # real where every rank has a core or a GPU, simulated otherwise (`resolve`)
PRESETS = {
    "1gbe": Link(alpha=50e-6, bits_per_second=1e9, name="1gbe"),
    "10gbe": Link(alpha=20e-6, bits_per_second=10e9, name="10gbe"),
    "100gbe-roce": Link(alpha=5e-6, bits_per_second=100e9, name="100gbe-roce"),
    "ib-ndr": Link(alpha=3e-6, bits_per_second=400e9, name="ib-ndr"),
    "nvlink4": Link(alpha=1e-6, bits_per_second=3600e9, name="nvlink4"),
}
THIS_MACHINE = "this-machine"
FITTED: dict = {}  # name -> a function that measures and returns the link (`fit` adds its own)
_UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
_DEFAULT_ALPHA = 1e-3
_SPEC = re.compile(
    r"([\d.]+)(kbit|mbit|gbit)(?:,([\d.]+)(ms|us))?(?:,both-ways=([\d.]+)(kbit|mbit|gbit))?"
)


def parse(spec: str | Link | None) -> Link:
    """'real', a preset ('1gbe', ..., 'nvlink4'), 'this-machine' (alpha and beta fitted on
    the real link here: two ranks measure them, a few seconds), or a rate and a latency:
    '1gbit', '100mbit' (alpha 1 ms) or '100mbit,2ms'."""
    if isinstance(spec, Link):
        return spec
    text = (spec or "real").strip().lower().replace(" ", "")
    if text == "real":
        return REAL
    if text == AUTO:
        raise ValueError(
            "'auto' depends on how many ranks will run: pass it to `resolve` with their "
            "world size, or name the link ('real', a preset, or e.g. '100mbit,5ms')."
        )
    if text in PRESETS:
        return PRESETS[text]
    if text in FITTED:
        return FITTED[text]()
    found = _SPEC.fullmatch(text)
    if not found:
        raise ValueError(
            f"unknown link {spec!r}: use 'real', 'auto', a preset ({', '.join(PRESETS)}, "
            f"{THIS_MACHINE}), a bandwidth such as '1gbit' or '100mbit', or a bandwidth and "
            "a latency such as '100mbit,2ms'."
        )
    rate, unit, latency, latency_unit, both, both_unit = found.groups()
    alpha = float(latency) * (1e-3 if latency_unit == "ms" else 1e-6) if latency else _DEFAULT_ALPHA
    return Link(
        alpha=alpha,
        bits_per_second=float(rate) * _UNITS[unit],
        both_ways_bits_per_second=float(both) * _UNITS[both_unit] if both else None,
    )


def resolve(spec: str | Link | None, world_size: int | None = None, backend: str = "gloo") -> Link:
    """`spec` as a Link; None means the current profile's link (`cpu`: 'auto').

    'auto' is the real link where `world_size` ranks can each have a core of their own
    (or a GPU, over NCCL): then a time is the wall clock's. Otherwise the ranks would
    queue for the cores, and the wall clock would measure the scheduler, so the run
    crosses the profile's simulated link instead. A sweep passes its largest world size,
    so that one curve stays on one clock; no world size means the real link cannot be
    promised.
    """
    from ..core.profiles import default_link, simulated_link

    spec = default_link() if spec is None else spec
    if isinstance(spec, str) and spec.strip().lower() == AUTO:
        return REAL if runs_real(world_size, backend) else parse(simulated_link())
    return parse(spec)


def runs_real(world_size: int | None, backend: str = "gloo") -> bool:
    """Whether `world_size` ranks get a core each (gloo) or run on GPUs (NCCL)."""
    from ..core.machine import machine_cores

    if backend == "nccl":
        return True
    return world_size is not None and world_size <= machine_cores()


def add_argument(
    parser,
    default: str = "auto: real where every rank has a core, else the profile's simulated link",
):
    """`--link` for a timing benchmark: 'real', 'auto', a preset, or a link such as '1gbit'."""
    parser.add_argument(
        "--link",
        default=None,
        help=f"'real'; 'auto'; a preset: {', '.join(PRESETS)}, {THIS_MACHINE}; or a simulated "
        f"link: '1gbit', '100mbit', '100mbit,2ms' (default: {default})",
    )


def ring_allreduce_seconds(link: Link, nbytes: float, world: int) -> float:
    """Wire time of a ring allreduce: 2(N-1) messages of n/N bytes, one after another, each
    while the rank also receives one (both ways at once: the bytes, not alpha, slow down)."""
    if world <= 1 or not link.emulated:
        return 0.0
    step = link.alpha + nbytes / world * link.beta * link.both_ways_slowdown
    return 2 * (world - 1) * step
