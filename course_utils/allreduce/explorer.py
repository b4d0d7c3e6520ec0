"""Step through an allreduce round by round: pick the algorithm and the number of ranks.

With ipympl (`%matplotlib widget`) the picture redraws in place as the controls move, and
its stored output keeps a PNG of the first view, so the notebook shows a picture on the
web and under nbval. Without ipympl it shows every round of the default run instead.
"""

from __future__ import annotations

import functools

from ..core.widgets import draw, live_figure
from . import charts
from .algorithms import ALGORITHMS
from .runs import traced_run


def demo_values(algorithm: str, world_size: int) -> list:
    """Rank r holds r+1, as in the lecture; the ring gets one number per chunk."""
    width = world_size if algorithm == "ring" else 1
    return [[r + 1] * width for r in range(world_size)]


@functools.lru_cache(maxsize=64)
def _traces(algorithm: str, world_size: int) -> tuple:
    return tuple(traced_run(algorithm, demo_values(algorithm, world_size)))


def step_through(algorithm: str = "tree", world_size: int = 7, max_ranks: int = 8):
    """Show the controls and the picture; returns the control box (or None without ipympl)."""
    from IPython.display import display

    fig = live_figure((6.5, 0.5 * max_ranks + 1.6))
    if fig is None:
        display(charts.allreduce_rounds(list(_traces(algorithm, world_size)), algorithm))
        return None
    import ipywidgets as w

    pick = w.Dropdown(options=list(ALGORITHMS), value=algorithm, description="algorithm")
    ranks = w.IntSlider(value=world_size, min=2, max=max_ranks, description="ranks")
    last = len(_traces(algorithm, world_size)[0].rounds) - 1
    step = w.IntSlider(value=min(1, last), min=0, max=last)  # open on the first messages
    step.description = "round"

    def redraw(*_):
        traces = list(_traces(pick.value, ranks.value))
        step.max = len(traces[0].rounds) - 1
        fig.clear()
        ax = fig.add_subplot()
        charts.allreduce_round(traces, min(step.value, step.max), ax=ax)
        ax.set_title(f"{pick.value}, {ranks.value} ranks\n{ax.get_title()}", fontsize=9)
        draw(fig)

    def restart(*_):
        step.value = 0
        redraw()

    pick.observe(restart, names="value")
    ranks.observe(restart, names="value")
    step.observe(redraw, names="value")
    redraw()
    controls = w.HBox([pick, ranks, step])
    display(controls, fig.canvas)
    return controls
