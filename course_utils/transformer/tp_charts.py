"""Notebook 10's figures for tensor and sequence parallel, from plain data."""

from __future__ import annotations

import numpy as np

from ..core.style import PALETTE, finished, new_figure
from .tp_runs import MemoryRun

_NAMES = {"tp": "tensor parallel", "sp": "sequence parallel", "one": "one process"}


def bytes_per_block(measured: dict, formula: dict):
    """Bars: bytes one rank sends per block, per (kind, N), split by direction and op;
    a black tick on each bar marks the formula's value.

    `measured`: {(kind, N): {direction: {op: bytes}}} (one block's, from `bytes_per_block`);
    `formula`: the same keys, from `tp_formulas.block_bytes`. The title counts the bars
    that equal their formula and compares SP's total with TP's at each N."""
    fig, (ax,) = new_figure(width=8.0)
    runs = list(measured)
    segments = sorted({(d, op) for t in measured.values() for d in t for op in t[d]})
    x = np.arange(len(runs))
    width = 0.8 / 2
    exact = bars = 0
    for side, direction in enumerate(("forward", "backward")):
        bottom = np.zeros(len(runs))
        for n, (d, op) in enumerate(s for s in segments if s[0] == direction):
            got = np.array([measured[r][d].get(op, 0) for r in runs]) / 1024
            want = np.array([formula[r][d].get(op, 0) for r in runs]) / 1024
            where = x + (side - 0.5) * width
            ax.bar(where, got, width, bottom=bottom, color=PALETTE[(2 * n + side) % 8],
                   hatch="//" if direction == "backward" else None, edgecolor="white",
                   label=f"{direction}, {op.replace('_', '-')}")  # fmt: skip
            ax.hlines(bottom + want, where - width / 2, where + width / 2, color="black")
            drawn = (got > 0) | (want > 0)
            exact += int(np.sum((got == want) & drawn))
            bars += int(np.sum(drawn))
            bottom += got
    ax.set_xticks(x, [f"{_NAMES.get(k, k)}\nN = {n}" for k, n in runs], fontsize=8)
    ax.set_ylabel("sent per rank per block (KiB)")
    totals = {r: sum(sum(ops.values()) for ops in measured[r].values()) for r in runs}
    ratios = [f"N = {n}: SP sends {totals['sp', n] / totals['tp', n]:.2f}x TP's bytes"
              for k, n in runs if k == "sp" and ("tp", n) in totals]  # fmt: skip
    ax.set_title(
        f"{exact} of {bars} measured bars equal their formula (black ticks)\n" + "; ".join(ratios),
        fontsize=9,
    )
    ax.set_ylim(0, 1.45 * max(totals.values()) / 2 / 1024)
    ax.legend(fontsize=7, ncols=3, loc="upper left")
    return finished(fig)


def activation_memory(runs: list[MemoryRun]):
    """Activation bytes per rank kept for the backward (`MemoryRun.saved`) against N, TP and
    SP, from one process at N = 1, beside a perfect 1/N split; the title gives SP's cut
    against TP at the largest N."""
    fig, (ax,) = new_figure(width=6.0)
    one = [r for r in runs if r.kind == "one"]
    for n, kind in enumerate(("tp", "sp")):
        rows = sorted(one + [r for r in runs if r.kind == kind], key=lambda r: r.world_size)
        ax.plot([r.world_size for r in rows], [r.saved / 2**10 for r in rows], "o-",
                color=PALETTE[n], label=_NAMES[kind])  # fmt: skip
    ns = sorted({r.world_size for r in runs})
    if one:
        ax.plot(ns, [one[0].saved / n / 2**10 for n in ns], ":", color="grey",
                label="one process / N")  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.set_xlabel("ranks, N")
    ax.set_ylabel("activations kept (KiB per rank)")
    top = max(n for n in ns if n > 1)
    by = {(r.kind, r.world_size): r.saved for r in runs}
    cut = 1 - by["sp", top] / by["tp", top]
    ax.set_title(f"at N = {top}, sequence parallel keeps {cut:.0%} less per rank than tensor "
                 "parallel", fontsize=9)  # fmt: skip
    ax.legend(fontsize=8)
    return finished(fig)
