"""Controls over a figure that redraws itself: the course's widgets share this last step.

A figure is drawn with `draw`, not `canvas.draw_idle` alone. ipympl's front end keeps, as
the picture a saved notebook shows after a reopen, its canvas as it was just *before* the
newest frame arrived (ipympl 0.10's `handle_binary` reads the canvas before the new image
has loaded). A learner who moved a slider and saved would reopen a picture one change
behind the controls beside it (seen in 05's step-through explorer: ranks 5 beside a
picture of 4). So `draw` asks for one more frame once the newest has been shown: the
picture stored then is the newest.
"""

from __future__ import annotations

import asyncio

from .style import pyplot

CATCH_UP_SECONDS = 0.5  # after a frame is asked for, ask for the one the saved picture keeps


def draw(fig) -> None:
    """Redraw `fig` now and once more `CATCH_UP_SECONDS` later, from the kernel's event loop
    (in a script or a test there is none, and no front end to keep a picture)."""
    canvas = fig.canvas
    canvas.draw_idle()
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    pending = getattr(canvas, "_course_catch_up", None)
    if pending is not None:
        pending.cancel()  # a later change: only its catch-up is needed
    canvas._course_catch_up = loop.call_later(CATCH_UP_SECONDS, canvas.draw_idle)


def live_figure(figsize: tuple[float, float]):
    """A figure for controls to redraw, or None off ipympl (the caller shows a plain picture).

    pyplot lets go of it at once: a later inline cell must not show it again.
    """
    import matplotlib
    from matplotlib._pylab_helpers import Gcf

    plt = pyplot()
    backend = matplotlib.get_backend()
    if "ipympl" not in backend and "widget" not in backend:
        return None
    with plt.ioff():
        fig = plt.figure(figsize=figsize)
    fig.canvas.header_visible = False
    Gcf.figs.pop(fig.number, None)
    return fig


def show_controls(controls: dict, fig, redraw, per_row: int = 3):
    """Redraw `fig` whenever a control changes, draw it once now, and show the controls
    (`per_row` to a row) above its canvas; returns the box of controls, a single row's
    without a column around it."""
    import ipywidgets as w
    from IPython.display import display

    for control in controls.values():
        control.observe(redraw, names="value")
    redraw()
    items = list(controls.values())
    rows = [w.HBox(items[i : i + per_row]) for i in range(0, len(items), per_row)]
    box = rows[0] if len(rows) == 1 else w.VBox(rows)
    display(box, fig.canvas)
    return box
