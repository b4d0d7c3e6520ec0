"""The planner's check in one picture: predicted against measured, time and memory.

Each layout is a point; on the dashed diagonal the planner would be exact. Both axes start at
zero, so the distance below the diagonal reads as the share the planner misses. The time panel
names its clock (simulated, and the link) and the title says, from the data, whether the
planner's order and pick held.
"""

from __future__ import annotations

from ..core.style import PALETTE, finished, new_figure
from ..network.fabric import parse
from .plan_check import PlannerCheck, spearman

MARKERS = "osD^vP*X"


def _panel(ax, names, predicted, measured, pick, unit):
    """One point per layout, told apart by colour and marker (the legend names them); the
    pick is ringed."""
    for i, name in enumerate(names):
        ax.scatter([predicted[i]], [measured[i]], color=PALETTE[i % len(PALETTE)], zorder=3,
                   marker=MARKERS[i % len(MARKERS)], s=45,
                   label=f"{name} (the pick)" if name == pick else name)  # fmt: skip
        if name == pick:
            ax.scatter([predicted[i]], [measured[i]], s=180, facecolors="none",
                       edgecolors="black", zorder=2)  # fmt: skip
    high = max(predicted + measured)
    ax.plot([0, high * 1.05], [0, high * 1.05], "--", color="grey", lw=1)
    ax.set_xlim(0, high * 1.05)
    ax.set_ylim(0, high * 1.05)
    ax.set_xlabel(f"predicted ({unit})")
    ax.set_ylabel(f"measured ({unit})")


def planner_vs_runs(check: PlannerCheck):
    """`check`: `plan_check.check_planner`'s result. The pick is drawn in orange."""
    fig, (times, memory) = new_figure(ncols=2, width=5.0, height=4.0)
    names = [r.layout for r in check.layouts]
    measured = [r.measured_seconds for r in check.layouts]
    predicted = [r.predicted_seconds for r in check.layouts]
    _panel(times, names, predicted, measured, check.pick, "s per step")
    times.set_title(f"step time, {check.clock} clock\n{parse(check.link).label}", fontsize=9)
    megabytes = {k: [getattr(r, k) / 1e6 for r in check.layouts]
                 for k in ("predicted_peak_bytes", "measured_peak_bytes")}  # fmt: skip
    _panel(memory, names, *megabytes.values(), check.pick, "MB per rank")
    memory.set_title("peak memory, fullest rank", fontsize=9)
    rho = spearman(predicted, measured)
    fastest = names[measured.index(min(measured))]
    slower = measured[names.index(check.pick)] / min(measured) - 1
    verdict = (
        "is the fastest measured"
        if fastest == check.pick
        else f"runs {slower:.0%} slower than the fastest measured, {fastest}"
    )
    fig.suptitle(
        f"Planner vs {len(names)} layouts on {check.ranks} ranks: rank order ρ = {rho:.2f}; "
        f"its pick, {check.pick}, {verdict}",
        fontsize=10,
    )
    times.legend(fontsize=7, loc="upper left")
    return finished(fig)
