"""Controls over a figure that redraws itself: the course's widgets share this last step."""

from __future__ import annotations

__all__ = ["show_controls"]


def show_controls(controls: dict, fig, redraw, per_row: int = 3):
    """Redraw `fig` whenever a control changes, draw it once now, and show the controls
    (`per_row` to a row) above its canvas; returns the box of controls."""
    import ipywidgets as w
    from IPython.display import display

    for control in controls.values():
        control.observe(redraw, names="value")
    redraw()
    items = list(controls.values())
    box = w.VBox([w.HBox(items[i : i + per_row]) for i in range(0, len(items), per_row)])
    display(box, fig.canvas)
    return box
