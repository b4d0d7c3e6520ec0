"""A memory calculator: bytes per rank for a model size, ranks, ZeRO stage, precision, recompute.

`per_rank_bytes` is the formula (`formulas.model_state_bytes`) plus the activations,
which checkpointing shrinks by the share the notebook measured. `memory_calculator` shows it
with sliders: with ipympl the picture redraws as they move, and the stored output keeps a
PNG of the first view for the web and nbval; without ipympl it shows that picture alone.
"""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
from matplotlib._pylab_helpers import Gcf

from ..core.widgets import draw, show_controls
from . import charts
from .formulas import PRECISIONS, model_state_bytes, per_parameter, working_set_bytes
from .zero import STAGES

__all__ = ["memory_calculator", "per_rank_bytes"]


def per_rank_bytes(
    params: float,
    ranks: int,
    stage: int,
    precision: str = "mixed",
    activations: float = 0.0,
    checkpointing: bool = False,
    kept: float = 1.0,
    largest_layer: float = 0.0,
) -> dict:
    """Bytes one rank holds at a step's peak, by kind: the model state, the activations
    (per rank; times `kept` when checkpointing, the share of the peak's activation bytes
    that checkpointing every block left), and, given the parameters of the largest layer,
    the working set of gathered layers, full gradients and Adam's temporaries
    (`formulas.working_set_bytes`). Without `largest_layer`: what it holds between steps
    plus the activations."""
    parts = model_state_bytes(params, ranks, stage, precision, parts=True)
    parts["activations"] = activations * (kept if checkpointing else 1.0)
    grad_bytes = per_parameter(precision)[1]
    parts["working set"] = (
        working_set_bytes(ranks, stage, largest_layer, parts["activations"], grad_bytes=grad_bytes)
        if largest_layer
        else 0.0
    )
    return parts


def _picture(params, ranks, stage, precision, activations, checkpointing, kept, ax=None):
    by_stage = {
        s: per_rank_bytes(params, ranks, s, precision, activations, checkpointing, kept)
        for s in STAGES
    }
    total = sum(by_stage[stage].values()) / 1e9
    title = f"{params:.3g} parameters, {ranks} ranks, {precision}: {total:.3g} GB per rank"
    return charts.state_by_stage(by_stage, chosen=stage, ax=ax, title=title)


def memory_calculator(
    params: float = 7e9,
    ranks: int = 8,
    stage: int = 3,
    precision: str = "mixed",
    activations_gb: float = 20.0,
    checkpointing: bool = False,
    kept: float = 0.2,
):
    """Sliders for the model and the setup, and the bytes per rank at every stage."""
    from IPython.display import display

    args = (params, ranks, stage, precision, activations_gb * 1e9, checkpointing, kept)
    if "ipympl" not in matplotlib.get_backend() and "widget" not in matplotlib.get_backend():
        display(_picture(*args))
        return None
    import ipywidgets as w

    controls = {
        # a step of 0.001 in the exponent: 7e9 stays 7.00e9 (the default 0.2 snaps it to 6.31e9)
        "params": w.FloatLogSlider(
            value=params,
            base=10,
            min=6,
            max=12,
            step=0.001,
            readout_format=".3g",
            description="parameters",
        ),  # fmt: skip
        "ranks": w.IntSlider(value=ranks, min=1, max=1024, description="ranks"),
        "stage": w.IntSlider(value=stage, min=0, max=3, description="ZeRO stage"),
        "precision": w.Dropdown(options=list(PRECISIONS), value=precision, description="precision"),
        "activations": w.FloatSlider(value=activations_gb, min=0, max=200, description="act. GB"),
        "checkpointing": w.Checkbox(value=checkpointing, description="checkpointing"),
    }
    with plt.ioff():
        fig = plt.figure(figsize=(6.0, 3.8))
    fig.canvas.header_visible = False
    Gcf.figs.pop(fig.number, None)  # ours alone: a later inline cell must not show it again

    def redraw(*_):
        fig.clear()
        c = {k: v.value for k, v in controls.items()}
        _picture(
            c["params"], c["ranks"], c["stage"], c["precision"],
            c["activations"] * 1e9, c["checkpointing"], kept, ax=fig.add_subplot(),
        )  # fmt: skip
        draw(fig)

    return show_controls(controls, fig, redraw)
