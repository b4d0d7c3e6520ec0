"""Notebook 10's closing chart: every parallelism's traffic per step, and what it would cost."""

from __future__ import annotations

import numpy as np

from ..core.style import PALETTE, finished, new_figure
from .compare import FABRICS, Row


def which_when(rows: list[Row], blocks: int, world: int):
    """Left: bytes one rank sends per training step (measured; a block's or MoE layer's
    times `blocks`). Right: that traffic's predicted wire time per step on each fabric
    (α + n/β per message, one after another), log scale. The title names the costliest
    and cheapest on the slowest fabric."""
    fig, (bytes_ax, time_ax) = new_figure(ncols=2, width=5.2)
    names = [r.parallelism for r in rows]
    at = np.arange(len(rows))
    bytes_ax.bar(at, [r.per_step(blocks) / 1e3 for r in rows], color=PALETTE[0])
    bytes_ax.set_xticks(at, names)
    bytes_ax.set_ylabel("kB one rank sends per step (measured)")
    width = 0.8 / len(FABRICS)
    for n, fabric in enumerate(FABRICS):
        seconds = [r.seconds_per_step(fabric, blocks) * 1e6 for r in rows]
        time_ax.bar(at + (n - (len(FABRICS) - 1) / 2) * width, seconds, width,
                    color=PALETTE[n + 1], label=fabric)  # fmt: skip
    time_ax.set_yscale("log")
    time_ax.set_xticks(at, names)
    time_ax.set_ylabel("predicted wire time per step (µs)")
    time_ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    slow = {r.parallelism: r.seconds_per_step(FABRICS[-1], blocks) for r in rows}
    most, least = max(slow, key=slow.get), min(slow, key=slow.get)
    fig.suptitle(
        f"{world} ranks, {blocks} blocks: on {FABRICS[-1]}, {most} would wait "
        f"{slow[most] / slow[least]:.1f}x as long as {least} per step (prediction)",
        fontsize=9,
    )
    return finished(fig)
