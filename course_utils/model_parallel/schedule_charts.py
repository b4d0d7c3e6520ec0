"""Charts for the schedules past 1F1B: their timelines side by side, and their bubbles."""

from __future__ import annotations

import numpy as np

from ..core.style import PALETTE, finished, new_figure
from .charts import draw_ops
from .timeline import Timeline

_NAMES = {"F": "forward", "B": "backward (B: input gradient when split)", "W": "weight gradient"}


def _title(timelines: dict[str, Timeline]) -> str:
    first = next(iter(timelines.values()))
    parts = ", ".join(f"{label} {tl.bubble_fraction():.0%}" for label, tl in timelines.items())
    return f"K = {first.stages}, M = {first.microbatches}: idle share of the step, {parts}"


def schedule_timelines(timelines: dict[str, Timeline], note: str | None = None):
    """One panel per schedule, one row per rank: F, B and W boxes, a later chunk hatched,
    each labelled with its micro-batch. Times are in the first panel's slots (on paper: one
    forward of a whole stage), so that schedules of the same model line up; the title gives
    every schedule's bubble, computed from the timelines."""
    unit = next(iter(timelines.values())).slot
    k = max(t.stages for t in timelines.values())
    fig, axes = new_figure(nrows=len(timelines), width=9.0, height=0.5 + 0.42 * k)
    end = max(max(e.end for e in t.compute()) for t in timelines.values()) / unit
    for ax, (label, tl) in zip(axes, timelines.items(), strict=True):
        draw_ops(ax, tl, unit, "rank", _NAMES, fontsize=6)
        ax.set_xlim(0, end * 1.02)
        ax.set_title(
            f"{label}: {tl.makespan() / unit:.1f} slots, {tl.bubble_fraction():.0%} idle",
            fontsize=9,
            loc="left",
        )
    handles = {h.get_label(): h for ax in axes for h in ax.get_legend_handles_labels()[0]}
    fig.legend(handles.values(), handles.keys(), loc="lower right", fontsize=7, ncols=3)
    axes[-1].set_xlabel(
        "time in slots (one forward of one micro-batch on a whole stage); "
        "hatched: the rank's second chunk"
    )
    fig.suptitle(_title(timelines), fontsize=10)
    if note:
        fig.text(0.01, 0.0, note, fontsize=8, style="italic", va="bottom")
    return finished(fig, rect=(0, 0.05, 1, 0.97))


def bubble_by_schedule(rows: list[dict] | dict[str, list[dict]]):
    """Per schedule (`bubble.measure_schedules`' rows, one K, M and clock): the
    measured bubble beside the schedule played out with the measured times and its formula;
    rows of several clocks ({clock: rows}) get a panel each. Each title names its clock and
    the schedule that idled least, from the rows."""
    panels = rows if isinstance(rows, dict) else {"": rows}
    fig, axes = new_figure(ncols=len(panels), width=6.5 if len(panels) == 1 else 5.0)
    for ax, panel in zip(axes, panels.values(), strict=True):
        _bubble_panel(ax, panel)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, ncols=len(labels), loc="lower center")
    return finished(fig, rect=(0, 0.08, 1, 1))  # the legend below the panels, clear of the bars


def _bubble_panel(ax, rows: list[dict]) -> None:
    names = [r["schedule"] for r in rows]
    series = {
        "measured": [r["measured"] for r in rows],
        "played out with the measured F, B, W, hand-offs": [
            r["from_stages_and_link"] for r in rows
        ],
        "formula (free hand-offs, equal ops)": [r["predicted"] for r in rows],
    }
    width = 0.8 / len(series)
    for n, (label, values) in enumerate(series.items()):
        ax.bar(
            np.arange(len(rows)) + (n - 1) * width, values, width, color=PALETTE[n + 3], label=label
        )
    ax.set_xticks(range(len(rows)), names)
    ax.set_ylabel("bubble (idle share of the ranks' time)")
    best = min(rows, key=lambda r: r["measured"])
    first = rows[0]
    ax.set_title(
        f"K = {first['stages']}, M = {first['microbatches']}, {first['clock']} clock: "
        f"{best['schedule']} idles least, {best['measured']:.1%} of the step",
        fontsize=9,
    )
