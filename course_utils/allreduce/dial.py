"""Dial the link: bandwidth and latency sliders over the alpha-beta predictions.

With ipympl (`%matplotlib widget`) the picture redraws as the sliders move and its stored
output keeps a PNG of the first view; without ipympl it shows that first view (the
profile's link) as a plain picture. To *measure* another link, pass it to
`time_allreduce(..., link="1gbit")`.
"""

from __future__ import annotations

from ..core.style import PALETTE, pyplot
from ..core.widgets import draw, live_figure, show_controls
from ..network.wire import Link
from .algorithms import ALGORITHMS
from .charts import _label, legend_outside
from .cost_model import AlphaBeta, crossover_bytes, predicted_seconds


def draw_link(ax, link: Link, world_size: int, nbytes: list) -> None:
    """Each algorithm's predicted time over `link`, and where the ring overtakes the butterfly."""
    model = AlphaBeta(alpha=link.alpha, beta=link.beta)
    for i, name in enumerate(ALGORITHMS):
        times = [predicted_seconds(name, world_size, n, model) for n in nbytes]
        ax.loglog(nbytes, times, "-", color=PALETTE[i], label=_label(name))
    cross = crossover_bytes("butterfly", "ring", world_size, model)
    if cross:
        ax.axvline(cross, color="grey", ls=":", lw=1)
    where = f"above {cross:,.0f} bytes" if cross else "never"
    ax.set_title(
        f"{link.label}, N = {world_size}: the ring beats the butterfly {where}", fontsize=9
    )
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("predicted time per allreduce (s)")
    legend_outside(ax)  # the sliders move the lines anywhere: no corner stays empty
    ax.figure.tight_layout()


def link_dial(link: Link, world_size: int = 8, nbytes: list | None = None):
    """Show the sliders and the picture; returns the control box (or None without ipympl)."""
    from IPython.display import display

    nbytes = nbytes or [2**k for k in range(8, 27)]
    fig = live_figure((7.5, 4.0))
    if fig is None:
        plt = pyplot()
        with plt.ioff():
            fig = plt.figure(figsize=(7.5, 4.0))
        draw_link(fig.add_subplot(), link, world_size, nbytes)
        plt.close(fig)
        display(fig)
        return None
    import ipywidgets as w

    # steps of 0.001 in the exponent: the 5 ms link reads 5 ms (the default 0.1 snaps it to
    # 10^0.7 = 5.01187 ms, which no text of the course says)
    fine = {"base": 10, "step": 0.001, "readout_format": ".3g"}
    rate = w.FloatLogSlider(
        value=link.bits_per_second / 1e6, min=0, max=5, description="Mbit/s", **fine
    )
    alpha = w.FloatLogSlider(value=link.alpha * 1e3, min=-3, max=2, description="α (ms)", **fine)
    ranks = w.IntSlider(value=world_size, min=2, max=64, description="ranks")

    def redraw(*_):
        fig.clear()
        dialed = Link(alpha=alpha.value / 1e3, bits_per_second=rate.value * 1e6)
        draw_link(fig.add_subplot(), dialed, ranks.value, nbytes)
        draw(fig)

    return show_controls({"rate": rate, "alpha": alpha, "ranks": ranks}, fig, redraw)
