"""Charts for notebook 02: where each arm's training ends, and how sharp it is there."""

from __future__ import annotations

import math

from ..core.style import PALETTE, finished, new_figure

_MEASURES = (
    ("test_acc", "test accuracy (%)", 100.0),
    ("sharpness", "epsilon-sharpness (% loss rise)", 1.0),
    ("hessian", "top Hessian eigenvalue", 1.0),
)


def sharpness_by_arm(sides: dict):
    """Test accuracy and both sharpness measures, one panel each: a dot per seed (coloured
    by batch size where known, hollow for a run that did not fit), the mean as a black tick,
    and a grey line joining the runs of each seed.

    `sides` maps a label (say "batch 32, lr 0.01") to a dict of "test_acc", "sharpness" and
    "hessian", one value per seed, and optionally "seed", "fitted", "lr" and "batch_size";
    with "lr" and "batch_size" the arms are drawn in order of falling lr/B.
    The accuracy axis is zoomed to the data (its gaps are a few points); the sharpness axes
    start at 0. Each panel's title names the arm that ends lowest or highest, and the
    figure's title what separates the arms (`_headline`).
    """
    labels = sorted(sides, key=lambda n: -_lr_over_b(sides[n]) if "lr" in sides[n] else 0)
    xs = list(range(len(labels)))
    fig, axes = new_figure(ncols=3, width=1.2 + 0.75 * len(labels), height=3.8)
    seeds = {
        name: list(side.get("seed", range(len(side["test_acc"])))) for name, side in sides.items()
    }
    batches = sorted({s["batch_size"][0] for s in sides.values() if "batch_size" in s})
    colors = {
        name: PALETTE[batches.index(s["batch_size"][0])] if "batch_size" in s else PALETTE[7]
        for name, s in sides.items()
    }
    for ax, (key, label, scale) in zip(axes, _MEASURES, strict=True):
        at = {name: dict(zip(seeds[name], sides[name][key], strict=True)) for name in labels}
        means = [scale * sum(at[name].values()) / len(at[name]) for name in labels]
        for x, name in zip(xs, labels, strict=True):
            fitted = sides[name].get("fitted", [True] * len(seeds[name]))
            for v, ok in zip(sides[name][key], fitted, strict=True):
                face = colors[name] if ok else "none"
                ax.plot(x, scale * v, "o", ms=6, color=colors[name], mfc=face, zorder=3)
            ax.plot([x - 0.25, x + 0.25], [means[x]] * 2, color="black", lw=2, zorder=4)
        for seed in sorted({s for ss in seeds.values() for s in ss}):  # one grey line per seed
            line = [
                (x, scale * at[n][seed]) for x, n in zip(xs, labels, strict=True) if seed in at[n]
            ]
            ax.plot(*zip(*line, strict=True), color="#999999", lw=1, zorder=2)
        ax.set_xticks(xs, [name.replace(", ", ",\n") for name in labels], fontsize=7)
        ax.set_ylabel(label)
        if key == "test_acc":
            low, high = (
                min(scale * min(s[key]) for s in sides.values()),
                max(scale * max(s[key]) for s in sides.values()),
            )
            pad = max(0.5, 0.15 * (high - low))
            ax.set_ylim(low - pad, high + pad)
            ax.set_title(f"{labels[means.index(min(means))]} tests worst", fontsize=8)
        else:
            ax.set_ylim(0, None)
            ax.set_title(f"{labels[means.index(max(means))]} is sharpest", fontsize=8)
    fig.suptitle(_headline(sides))
    return finished(fig)


def _lr_over_b(side: dict) -> float:
    """lr / B to 6 digits, so that arms scaled to the same ratio compare equal."""
    return float(f"{side['lr'][0] / side['batch_size'][0]:.6g}")


def _headline(sides: dict) -> str:
    """What the data show: whether every run at the lower of two lr/Bs is sharper (both
    measures) and tests worse than every run at the higher, naming the two arms if there are
    only two, and saying so if each lr/B holds both batch sizes."""
    fitted = all(all(s.get("fitted", [True])) for s in sides.values())
    plain = "test accuracy and sharpness of each " + ("fitted run" if fitted else "run")
    if not all("lr" in s and "batch_size" in s for s in sides.values()):
        return plain
    ratio = {n: _lr_over_b(s) for n, s in sides.items()}
    levels = sorted(set(ratio.values()))
    if len(levels) != 2:
        return plain
    low = [n for n in sides if ratio[n] == levels[0]]
    high = [n for n in sides if ratio[n] == levels[1]]

    def apart(key, sign):  # every low-lr/B run beyond every high-lr/B run, in direction sign
        lows = [v for n in low for v in sides[n][key]]
        highs = [v for n in high for v in sides[n][key]]
        return min(lows) > max(highs) if sign > 0 else max(lows) < min(highs)

    if not (fitted and apart("sharpness", 1) and apart("hessian", 1) and apart("test_acc", -1)):
        return plain
    if len(low) == len(high) == 1:
        return f"every run of {low[0]} ends sharper and tests worse than every run of {high[0]}"
    both = all(len({sides[n]["batch_size"][0] for n in group}) > 1 for group in (low, high))
    where = "at either batch size, " if both else ""
    return f"{where}every run at the lower lr/B ends sharper and tests worse"


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
    return finished(fig)
