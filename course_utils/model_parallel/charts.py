"""Charts for the pipeline notebook: timelines, the bubble, activations held, traffic."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..core.style import PALETTE, new_figure

__all__ = ["pipeline_timeline", "bubble_vs_microbatches", "activations_held", "layer_traffic"]

_COLOURS = {"F": PALETTE[0], "B": PALETTE[1]}
_NAMES = {"F": "forward", "B": "backward"}


def pipeline_timeline(timelines: dict, title: str, note: str | None = None):
    """One row of boxes per stage, one panel per run: forward blue, backward orange, idle blank.

    `timelines` maps a panel label to a `Timeline`; times are shown in slots (one ideal
    forward), so runs with the same slot line up. `note` says how the ops were paced.
    """
    fig, axes = new_figure(
        nrows=len(timelines),
        width=9.0,
        height=0.55 + 0.42 * max(t.stages for t in timelines.values()),
    )
    end = max(max(e.end for e in t.compute()) / t.slot for t in timelines.values())
    for ax, (label, tl) in zip(axes, timelines.items(), strict=True):
        for kind, colour in _COLOURS.items():
            for s in range(tl.stages):
                boxes = [
                    (e.start / tl.slot, (e.end - e.start) / tl.slot)
                    for e in tl.compute(s)
                    if e.kind == kind
                ]
                ax.broken_barh(
                    boxes,
                    (s - 0.4, 0.8),
                    facecolors=colour,
                    edgecolor="white",
                    label=_NAMES[kind] if s == 0 else None,
                )
        for e in tl.compute():
            ax.text(
                (e.start + e.end) / 2 / tl.slot,
                e.stage,
                str(e.microbatch),
                ha="center",
                va="center",
                fontsize=7,
                color="white",
            )
        ax.set_yticks(range(tl.stages), [f"stage {s}" for s in range(tl.stages)])
        ax.set_ylim(tl.stages - 0.5, -0.5)
        ax.set_xlim(0, end * 1.02)
        ax.grid(axis="y", visible=False)
        ax.set_title(f"{label}: {tl.in_slots(tl.makespan()):.1f} slots", fontsize=10, loc="left")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper right", fontsize=8, ncols=2)
    axes[-1].set_xlabel("time (slots: one forward of one micro-batch on one stage)")
    fig.suptitle(title)
    if note:
        fig.text(0.01, 0.0, note, fontsize=8, style="italic", va="bottom")
    fig.tight_layout(rect=(0, 0.04 if note else 0, 1, 0.97))
    plt.close(fig)  # shown once, as the cell's result
    return fig


def bubble_vs_microbatches(rows: list[dict], stages: int, subtitle: str = ""):
    """Measured bubble fraction per M, with GPipe's (K-1)/(M+K-1) drawn through them; the
    title says how far the measurements are from it. Neither legend nor title spells the
    formula: notebook 06's exercise 1 asks for it."""
    fig, (ax,) = new_figure(width=6.0)
    ms = np.array([r["microbatches"] for r in rows])
    grid = np.geomspace(ms.min(), ms.max(), 100)
    ax.plot(
        grid,
        (stages - 1) / (grid + stages - 1),
        color=PALETTE[0],
        label=f"GPipe's prediction, K={stages}",
    )
    ax.plot(ms, [r["measured"] for r in rows], "o", color=PALETTE[3], label="measured")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ms, [str(m) for m in ms])
    ax.set_xlabel("micro-batches per batch, M")
    ax.set_ylabel("bubble (idle share of the stages' time)")
    ax.set_ylim(0, 1)
    worst = max(
        abs(r["measured"] * (m + stages - 1) / (stages - 1) - 1)
        for m, r in zip(ms, rows, strict=True)
    )
    ax.set_title(
        f"K = {stages}, M = {ms.min()} to {ms.max()}: measured within {worst:.0%} of "
        f"GPipe's prediction\n{subtitle}",
        fontsize=9,
    )
    ax.legend()
    fig.tight_layout()
    plt.close(fig)  # shown once, as the cell's result
    return fig


def activations_held(peaks: dict[str, tuple[int, ...]], microbatches: int):
    """Most micro-batches' activations each stage kept at once, per schedule."""
    fig, (ax,) = new_figure(width=6.0)
    stages = len(next(iter(peaks.values())))
    width = 0.8 / len(peaks)
    for n, (name, per_stage) in enumerate(peaks.items()):
        ax.bar(
            np.arange(stages) + (n - (len(peaks) - 1) / 2) * width,
            per_stage,
            width,
            color=PALETTE[n],
            label=name,
        )
    ax.axhline(microbatches, color=PALETTE[7], lw=0.8, ls="--", label=f"M = {microbatches}")
    ax.set_xticks(range(stages), [f"stage {s}" for s in range(stages)])
    ax.set_ylabel("activations held at peak (micro-batches)")
    ax.set_title("1F1B holds at most K micro-batches, GPipe all M")
    ax.legend()
    fig.tight_layout()
    plt.close(fig)  # shown once, as the cell's result
    return fig


def layer_traffic(tables: dict[str, dict[str, list[int]]]):
    """Bytes each rank's collectives produce per layer, forward and backward, per split style."""
    fig, (ax,) = new_figure(width=7.0)
    layers = len(next(iter(tables.values()))["forward"])
    bars = [(style, d) for style in tables for d in ("forward", "backward")]
    width = 0.8 / len(bars)
    for n, (style, direction) in enumerate(bars):
        kib = np.array(tables[style][direction]) / 1024
        ax.bar(
            np.arange(layers) + (n - (len(bars) - 1) / 2) * width,
            kib,
            width,
            color=PALETTE[n],
            label=f"{style}, {direction}",
            hatch="//" if direction == "backward" else None,
            edgecolor="white",
        )
    ax.set_xticks(range(layers), [f"layer {n}" for n in range(layers)])
    ax.set_ylabel("communicated per rank (KiB)")
    ax.set_title("Column-then-row splitting talks once per pair of layers each way")
    ax.legend(fontsize=8)
    fig.tight_layout()
    plt.close(fig)  # shown once, as the cell's result
    return fig
