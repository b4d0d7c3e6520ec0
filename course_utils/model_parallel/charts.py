"""Charts for the pipeline notebook: timelines, the bubble, activations held, traffic."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..core.style import PALETTE, finished, new_figure
from .timeline import Timeline

_COLOURS = {"F": PALETTE[0], "B": PALETTE[1], "W": PALETTE[2]}
_NAMES = {"F": "forward", "B": "backward"}


def paced_note(slot: float, micro_batch_size: int) -> str:
    """The subtitle of a sleep-paced timeline: what it is (an illustration) and how it was paced."""
    return (
        f"paced by sleep, an illustration: each op runs a real Linear layer on "
        f"{micro_batch_size} samples, padded with sleep to one slot ({slot * 1000:.0f} ms)"
    )


def real_note(link_label: str) -> str:
    """The subtitle of a real-compute chart on the simulated clock: how it was timed, and
    over which link."""
    return (
        "real compute, each stage timed on its simulated clock (CPU time + waits);\n"
        f"hand-offs over the {link_label}"
    )


def bubble_note(link_label: str) -> str:
    """The subtitle of the bubble chart, which shows both clocks."""
    return (
        "real clock: wall time, a core per stage, hand-offs over the real link (gloo);\n"
        f"simulated: CPU time + waits per stage, hand-offs over the {link_label}"
    )


class StepRatio(NamedTuple):
    """One step over another, in two units that need not agree."""

    seconds: float  # on the clock the runs were timed on
    forwards: float  # each step over its own run's slot (a measured run: its median forward)


def step_ratio(first: Timeline, second: Timeline) -> StepRatio:
    """`second`'s step over `first`'s, in seconds and in forwards. Two measured runs seldom
    have the same median forward, so the two ratios can differ by more than their noise:
    a chart and the line printed beside it must quote the same one."""
    return StepRatio(
        second.makespan() / first.makespan(),
        second.in_slots(second.makespan()) / first.in_slots(first.makespan()),
    )


def _on_ranks(tl: Timeline) -> bool:
    """A run on ranks (paced or measured) has seconds; one played out on paper
    (`simulate`, no bytes counted) has only forwards."""
    return bool(tl.peak_bytes)


def _compare_steps(timelines: dict) -> str:
    """The title of a two-panel timeline: the second run's step against the first's, in
    seconds (runs on ranks) and in forwards, both ratios from `step_ratio`."""
    (a, first), (b, second) = list(timelines.items())[0], list(timelines.items())[-1]
    ratio = step_ratio(first, second)
    fa, fb = first.in_slots(first.makespan()), second.in_slots(second.makespan())
    in_forwards = f"{ratio.forwards:.2f}x {a}'s in forwards ({fb:.1f} against {fa:.1f})"
    if not (_on_ranks(first) and _on_ranks(second)):
        return f"{b}'s step takes {in_forwards}"
    return (
        f"{b}'s step takes {ratio.seconds:.2f}x {a}'s in seconds ({second.makespan():.3f} "
        f"against {first.makespan():.3f} s)\nand {in_forwards}"
    )


def draw_ops(ax, tl: Timeline, unit: float, row: str, names: dict, fontsize: int = 7) -> None:
    """`tl`'s ops as boxes on `ax`, one row per rank (`row` names it) and `unit` seconds to
    one on the x axis: forward blue, backward orange, W green, idle blank, a later chunk
    hatched, each box labelled with its micro-batch; `names` gives each kind's legend."""
    shown = set()
    for e in tl.compute():
        ax.broken_barh(
            [(e.start / unit, (e.end - e.start) / unit)],
            (e.stage - 0.4, 0.8),
            facecolors=_COLOURS[e.kind],
            edgecolor="white",
            hatch="//" if e.chunk else None,
            label=names[e.kind] if e.kind not in shown else None,
        )
        shown.add(e.kind)
        middle = (e.start + e.end) / 2 / unit
        label = str(e.microbatch)
        ax.text(middle, e.stage, label, ha="center", va="center", fontsize=fontsize, color="white")
    ax.set_yticks(range(tl.stages), [f"{row} {s}" for s in range(tl.stages)])
    ax.set_ylim(tl.stages - 0.5, -0.5)
    ax.grid(axis="y", visible=False)


def pipeline_timeline(timelines: dict, note: str | None = None):
    """One row of boxes per stage, one panel per run: forward blue, backward orange, idle blank.

    `timelines` maps a panel label to a `Timeline`; times are shown in slots (one forward
    of one micro-batch on one stage: paced, the slot; measured, the median forward), so
    runs with the same slot line up. `note` says how the ops were timed. The title
    compares the last panel's step with the first's, in seconds and in forwards
    (`step_ratio`).
    """
    fig, axes = new_figure(
        nrows=len(timelines),
        width=9.0,
        height=0.55 + 0.42 * max(t.stages for t in timelines.values()),
    )
    end = max(max(e.end for e in t.compute()) / t.slot for t in timelines.values())
    for ax, (label, tl) in zip(axes, timelines.items(), strict=True):
        draw_ops(ax, tl, tl.slot, "stage", _NAMES)
        ax.set_xlim(0, end * 1.02)
        seconds = f"{tl.makespan():.3f} s, " if _on_ranks(tl) else ""
        ax.set_title(
            f"{label}: {seconds}{tl.in_slots(tl.makespan()):.1f} forwards", fontsize=10, loc="left"
        )
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower right", fontsize=8, ncols=2)
    axes[-1].set_xlabel("time in forwards (slots: one forward of one micro-batch on one stage)")
    title = _compare_steps(timelines) if len(timelines) > 1 else next(iter(timelines))
    fig.suptitle(title, fontsize=10)
    lines = note.count("\n") + 1 if note else 1
    if note:
        fig.text(0.01, 0.0, note, fontsize=8, style="italic", va="bottom")
    return finished(fig, rect=(0, 0.05 * lines, 1, 0.97))


def bubble_vs_microbatches(runs: dict[str, list[dict]], subtitle: str = ""):
    """Measured bubble fraction per M for each run (`measure_bubble`'s rows, which say their
    clock and K), each with GPipe's (K-1)/(M+K-1) for its K drawn through it in its colour;
    the title says, per run, how far the measurements are from it, in points of the step.
    Neither legend nor title spells the formula: notebook 06's exercise 1 asks for it."""
    fig, (ax,) = new_figure(width=6.5)
    ax.set_xscale("log", base=2)
    lines = []
    for n, (label, rows) in enumerate(runs.items()):
        colour = PALETTE[(3 + 2 * n) % len(PALETTE)]
        ms = np.array([r["microbatches"] for r in rows])
        k = rows[0]["stages"]
        grid = np.geomspace(ms.min(), ms.max(), 100)
        ax.plot(grid, (k - 1) / (grid + k - 1), color=colour, alpha=0.6,
                label=f"GPipe's prediction, K={k}")  # fmt: skip
        ax.plot(ms, [r["measured"] for r in rows], "o", color=colour,
                label=f"measured, {rows[0]['clock']} clock, K={k}")  # fmt: skip
        worst = max(abs(r["measured"] - r["predicted"]) for r in rows)
        lines.append(f"{label}, K = {k}: within {worst:.2f} of the step")
        ax.set_xticks(ms, [str(m) for m in ms])
    ax.set_xlabel("micro-batches per batch, M")
    ax.set_ylabel("bubble (idle share of the stages' time)")
    ax.set_ylim(0, 1)
    ax.set_title(
        f"measured bubble against GPipe's prediction\n{'; '.join(lines)}\n{subtitle}",
        fontsize=8,
    )
    ax.legend(fontsize=8)
    return finished(fig)


def activations_held(peak_bytes: dict[str, tuple[int, ...]], peak_counts: dict, microbatches: int):
    """Most activation bytes each stage kept at once, per schedule, each bar labelled with
    how many micro-batches' worth that was; the title compares the schedules' largest."""
    fig, (ax,) = new_figure(width=6.0)
    stages = len(next(iter(peak_bytes.values())))
    width = 0.8 / len(peak_bytes)
    for n, (name, per_stage) in enumerate(peak_bytes.items()):
        mib = np.array(per_stage) / 2**20
        bars = ax.bar(
            np.arange(stages) + (n - (len(peak_bytes) - 1) / 2) * width,
            mib,
            width,
            color=PALETTE[n],
            label=name,
        )
        ax.bar_label(bars, [f"{c} mb" for c in peak_counts[name]], fontsize=7)
    ax.set_xticks(range(stages), [f"stage {s}" for s in range(stages)])
    ax.set_ylabel("activations held at peak (MiB)")
    most = {name: max(b) / 2**20 for name, b in peak_bytes.items()}
    (a, ma), (b, mb) = list(most.items())[0], list(most.items())[-1]
    ax.set_title(
        f"M = {microbatches}: at most {mb:.1f} MiB held on a stage with {b}, {ma:.1f} MiB "
        f"with {a}\n(mb: micro-batches held at that moment)",
        fontsize=9,
    )
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)  # off the bars
    return finished(fig)


def layer_traffic(tables: dict[str, dict[str, list[float]]], collectives: dict[str, int]):
    """Bytes each rank puts on the wire per layer (ring collectives), forward and backward,
    per split style; the title compares the styles' collectives and total bytes."""
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
    ax.set_ylabel("sent per rank on the wire (KiB, ring collectives)")
    total = {style: sum(map(sum, t.values())) for style, t in tables.items()}
    (a, _), (b, _) = list(tables.items())[0], list(tables.items())[-1]
    ax.set_title(
        f"{b}: {collectives[b]} collectives against {collectives[a]}, "
        f"{total[b] / total[a]:.0%} of {a}'s wire bytes",
        fontsize=10,
    )
    ax.legend(fontsize=8)
    return finished(fig)
