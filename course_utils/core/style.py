"""The look shared by every chart: a colour-blind-safe palette and labelled axes."""

from __future__ import annotations

import matplotlib.pyplot as plt

# Okabe & Ito (2008): distinguishable with every common colour-vision deficiency.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")

plt.rcParams.update(
    {
        "axes.prop_cycle": plt.cycler(color=PALETTE),
        "axes.grid": True,
        "grid.alpha": 0.3,
        "figure.dpi": 90,
        "axes.spines.top": False,
        "axes.spines.right": False,
    }
)


def new_figure(ncols: int = 1, nrows: int = 1, width: float = 5.0, height: float = 3.6):
    """A figure and its axes (a flat list), sized for a notebook column."""
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)
    return fig, list(axes.flat)


def finished(fig, rect=None):
    """`fig` laid out (inside `rect`, in figure fractions) and let go of by pyplot: the
    notebook shows the returned figure once, as the cell's result, not a second copy."""
    fig.tight_layout(rect=rect)
    plt.close(fig)
    return fig
