"""Charts for notebook 00."""

from __future__ import annotations

from ..core.style import PALETTE, finished, new_figure


def launch_times(world_sizes: list[int], seconds: list[float], title: str):
    """Seconds to start N ranks, join one process group and return a value, against N."""
    fig, (ax,) = new_figure(width=6)
    ax.bar([str(n) for n in world_sizes], seconds, color=PALETTE[0])
    for i, s in enumerate(seconds):
        ax.annotate(f"{s:.2f} s", (i, s), textcoords="offset points", xytext=(0, 3), ha="center")
    ax.set(xlabel="ranks (processes)", ylabel="seconds per launch (median)", title=title)
    return finished(fig)
