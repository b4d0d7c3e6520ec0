"""Charts of the link lessons: time against N, the simulator against the real link, busbw.

Each takes plain tables of measured seconds and computes its title from them; the link a
chart was measured on goes in its subtitle.
"""

from __future__ import annotations

import statistics

from ..core.style import PALETTE, finished, new_figure
from .charts import _label, _style, legend_outside
from .simulator_check import medians, ratios
from .verdicts import bus_bandwidth, growth


def time_against_ranks(by_n: dict, nbytes: int, index: int = -1, subtitle: str = ""):
    """Each algorithm's time for one message size against N, titled with how much each grew.

    `by_n`: {world_size: {algorithm: [seconds per size]}}; `index` picks the size.
    """
    fig, (ax,) = new_figure(width=6.5, height=4.0)
    worlds = sorted(by_n)
    grown = {}
    for i, name in enumerate(by_n[worlds[0]]):
        times = {n: by_n[n][name][index] for n in worlds}
        style = _style(name, PALETTE[i])
        ax.semilogy(worlds, [times[n] for n in worlds], label=_label(name), **style)
        grown[name] = growth(times)
    ax.set_xlabel("ranks N")
    ax.set_xticks(worlds)
    ax.set_ylabel(f"time per allreduce of {nbytes:,} bytes (s)")
    legend_outside(ax, fontsize=8)
    parts = ", ".join(f"{_label(k)} x{v:.1f}" for k, v in grown.items() if k != "builtin")
    ax.set_title(f"From N = {worlds[0]} to {worlds[-1]}: {parts}\n{subtitle}", fontsize=9)
    return finished(fig)


def simulator_against_real(checks: list[dict], nbytes: list, world: int):
    """Each algorithm's real time (wall clock, a core per rank) and its time in the
    simulator set to the link fitted here (`simulator_check.against_the_real_link`), the
    median over the fits, titled with the spread of simulated / real that is judged."""
    fig, (ax,) = new_figure(width=7.0, height=4.0)
    real, simulated = medians(checks, "real"), medians(checks, "simulated")
    for i, name in enumerate(real):
        ax.loglog(nbytes, real[name], "o-", color=PALETTE[i], label=f"{_label(name)}, real")
        ax.loglog(
            nbytes, simulated[name], "s--", color=PALETTE[i], label=f"{_label(name)}, simulated"
        )
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("time per allreduce (s)")
    legend_outside(ax, fontsize=7)
    ordered = sorted(r for row in ratios(checks).values() for r in row)
    median = statistics.median(ordered)
    ax.set_title(
        f"N = {world}: simulated / real from {ordered[0]:.2f} to {ordered[-1]:.2f} "
        f"(median {median:.2f}; each the median of {len(checks)} fit(s))\n"
        f"real clock: gloo on loopback; {checks[0]['link'].label} (the first fit)",
        fontsize=9,
    )
    return finished(fig)


def bus_bandwidth_sweep(curves: dict, world: int, link_rate: float | None = None):
    """Bus bandwidth (nccl-tests' busbw) against message size, one curve per (link, algorithm).

    `curves`: {(link label, algorithm): (sizes in bytes, seconds)}; `link_rate`: the
    emulated link's bytes per second, drawn as a line. The title gives the ring's busbw on
    each link at the largest message and the size from which it reaches half of that.
    """
    fig, (ax,) = new_figure(width=7.0, height=4.2)
    peaks = {}
    for i, ((link, name), (sizes, seconds)) in enumerate(curves.items()):
        busbw = [bus_bandwidth(n, t, world) / 1e6 for n, t in zip(sizes, seconds, strict=True)]
        style = ("o-" if "real" in link else "s-") if name != "builtin" else "x--"
        short = link.split(",")[0]  # the full label is in the title
        size = 5 if name == "builtin" else 7
        ax.loglog(sizes, busbw, style, color=PALETTE[i], ms=size, label=f"{_label(name)}, {short}")
        if name != "builtin":
            half = next(n for n, b in zip(sizes, busbw, strict=True) if b >= busbw[-1] / 2)
            peaks[link.split(",")[0]] = (busbw[-1], sizes[-1], half)
    if link_rate:
        ax.axhline(link_rate / 1e6, color="grey", ls=":", label="simulated link's bandwidth")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (MB/s)")
    legend_outside(ax)
    lines = [
        f"{link}: {b:,.0f} MB/s at {_size(top)}, half of that from {_size(n)} on"
        for link, (b, top, n) in peaks.items()
    ]
    emulated = [link for link, _ in curves if "real" not in link][:1]
    title = [f"The ring's bus bandwidth on {world} ranks", *lines, *emulated]
    fig.suptitle("\n".join(title), fontsize=9)
    return finished(fig)


def _size(nbytes: float) -> str:
    """4 KiB, 64 MiB: the way nccl-tests' sizes read."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes:g} B"
