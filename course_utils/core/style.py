"""The look shared by every chart: a colour-blind-safe palette and labelled axes."""

from __future__ import annotations

import functools

# Okabe & Ito (2008): distinguishable with every common colour-vision deficiency.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")


@functools.cache
def pyplot():
    """matplotlib's pyplot with the course's look, imported when the first chart is drawn:
    every chapter imports its charts, and a rank that starts by importing its chapter
    (spawned, or under torchrun) draws nothing, where pyplot's import took it 0.4 s."""
    import matplotlib.pyplot as plt

    spines = {"axes.spines.top": False, "axes.spines.right": False}
    plt.rcParams.update({"axes.grid": True, "grid.alpha": 0.3, "figure.dpi": 90, **spines})
    plt.rcParams["axes.prop_cycle"] = plt.cycler(color=PALETTE)
    return plt


def new_figure(ncols: int = 1, nrows: int = 1, width: float = 5.0, height: float = 3.6):
    """A figure and its axes (a flat list), sized for a notebook column."""
    size = (width * ncols, height * nrows)
    fig, axes = pyplot().subplots(nrows, ncols, figsize=size, squeeze=False)
    return fig, list(axes.flat)


def finished(fig, rect=None):
    """`fig` laid out (inside `rect`, in figure fractions) and let go of by pyplot: the
    notebook shows the returned figure once, as the cell's result, not a second copy."""
    fig.tight_layout(rect=rect)
    pyplot().close(fig)
    return fig
