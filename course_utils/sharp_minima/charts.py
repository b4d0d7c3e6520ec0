"""Charts for notebook 02: where small- and large-batch training end, and how sharp it is there."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt

from ..core.style import PALETTE, new_figure

__all__ = ["sharpness_by_batch", "line_between_solutions"]

_MEASURES = (
    ("test_acc", "test accuracy (%)", 100.0),
    ("sharpness", "epsilon-sharpness (% loss rise)", 1.0),
    ("hessian", "top Hessian eigenvalue", 1.0),
)


def sharpness_by_batch(sides: dict):
    """Test accuracy and both sharpness measures, one panel each: a dot per seed, the mean
    as a bar, and a grey line joining the runs of each seed.

    `sides` maps a label (say "batch 32") to a dict of "test_acc", "sharpness" and
    "hessian", one value per seed (the same seeds, in the same order). The accuracy axis
    starts at 0; each panel's title names the run that ends lowest or highest.
    """
    labels = list(sides)
    xs = list(range(len(labels)))
    fig, axes = new_figure(ncols=3, width=3.9, height=3.6)
    for ax, (key, label, scale) in zip(axes, _MEASURES, strict=True):
        values = [[scale * v for v in sides[name][key]] for name in labels]
        means = [sum(v) / len(v) for v in values]
        ax.bar(xs, means, color=PALETTE[: len(xs)], alpha=0.35, width=0.6)
        for i, seed in enumerate(zip(*values, strict=True)):
            ax.plot(xs, seed, color="#999999", lw=1, zorder=2)
            ax.plot(
                xs, seed, "o", ms=6, color=PALETTE[7], zorder=3,
                label="one seed" if i == 0 else None,
            )  # fmt: skip
        ax.set_xticks(xs, [name.replace(", ", ",\n") for name in labels], fontsize=8)
        ax.set_ylabel(label)
        if key == "test_acc":
            ax.set_ylim(0, 100)
            ax.set_title(f"{labels[means.index(min(means))]} tests worst", fontsize=9)
        else:
            ax.set_title(f"{labels[means.index(max(means))]} is sharpest", fontsize=9)
    axes[0].legend(loc="upper right", fontsize=8)
    fig.suptitle("every run fits the training set: test accuracy and sharpness of each solution")
    fig.tight_layout()
    plt.close(fig)
    return fig


def line_between_solutions(
    alphas, lines: list[dict], labels=("small batch", "large batch"), rise: float = 1.0
):
    """Loss and accuracy along (1 - a) * small + a * large, one thin line per seed.

    Each entry of `lines` maps "train_loss", "test_loss", "train_acc", "test_acc" to one
    value per alpha. The small-batch solution sits at a=0, the large-batch one at a=1.
    The title says at which end the training loss rose by `rise` sooner, at every seed.
    """
    from .experiments import valley_width

    fig, (left, right) = new_figure(ncols=2, width=5.2, height=3.8)
    styles = (("train", "-", PALETTE[0]), ("test", "--", PALETTE[3]))
    for i, line in enumerate(lines):
        for split, ls, color in styles:
            first = i == 0
            loss = [v if math.isfinite(v) else float("nan") for v in line[f"{split}_loss"]]
            left.plot(alphas, loss, ls, color=color, lw=1.4, label=f"{split}" if first else None)
            acc = [100 * v for v in line[f"{split}_acc"]]
            right.plot(alphas, acc, ls, color=color, lw=1.4, label=f"{split}" if first else None)
    for ax in (left, right):
        for x, name in zip((0, 1), labels, strict=True):
            ax.axvline(x, color=PALETTE[7], lw=0.8, ls=":")
            ax.annotate(
                name,
                (x, 1.0),
                xycoords=("data", "axes fraction"),
                ha="center",
                va="bottom",
                fontsize=8,
            )
        ax.set_xlabel("alpha: weights (1 - alpha) * small-batch + alpha * large-batch")
        ax.legend(fontsize=8)
    left.set_yscale("log")
    left.set_ylabel("cross-entropy loss (log)")
    right.set_ylabel("accuracy (%)")
    try:
        widths = [[valley_width(alphas, ln["train_loss"], e, rise) for e in (0, 1)] for ln in lines]
    except ValueError:  # the line was not sampled at both solutions
        widths = []
    if widths and all(b < a for a, b in widths):
        title = f"walking outward, the loss rises sooner past the {labels[1]} end"
    elif widths and all(a < b for a, b in widths):
        title = f"walking outward, the loss rises sooner past the {labels[0]} end"
    else:
        title = "the loss along the line between the two solutions"
    fig.suptitle(title, y=1.02)
    fig.tight_layout()
    plt.close(fig)
    return fig
