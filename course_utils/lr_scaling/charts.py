"""Charts for notebook 03: the linear scaling rule, gradual warmup, and where the rule stops."""

from __future__ import annotations

import math
import textwrap

from ..core.style import PALETTE, finished, new_figure

_CAP = 10.0  # losses above this (or not finite) are drawn at it: a diverged run stays visible


def _capped(curve):
    return [_CAP if not math.isfinite(v) else min(v, _CAP) for v in curve]


def _epochs(curve):
    return list(range(1, len(curve) + 1))


def curves_by_rule(curves: dict, titles: dict):
    """Each epoch's mean mini-batch loss, one panel per lr rule, one line per batch size.

    `curves` maps a rule to {batch size: per-epoch loss}; `titles` maps the same
    rules to each panel's title. Where the lines lie on top of each other, the rule works.
    """
    fig, axes = new_figure(ncols=len(curves), width=4.2, height=3.6)
    for ax, (rule, by_batch) in zip(axes, curves.items(), strict=True):
        for k, (batch, curve) in enumerate(sorted(by_batch.items())):
            ax.plot(
                _epochs(curve),
                _capped(curve),
                "o-",
                ms=3,
                lw=1.6,
                color=PALETTE[k % len(PALETTE)],
                label=f"batch {batch}",
            )
        ax.set_yscale("log")
        ax.set_xlabel("epoch")
        ax.set_title(textwrap.fill(titles.get(rule, rule), 44), fontsize=10)
    axes[0].set_ylabel("mean mini-batch loss of the epoch (log)")
    axes[-1].legend(fontsize=8)
    return finished(fig)


def warmup_rescue(scaled: dict, warmup: dict, base_curve, title: str = ""):
    """The largest batches at the scaled lr, without (dashed) and with (solid) warmup.

    `scaled` and `warmup` map a batch size to its per-epoch training loss; the base batch's
    curve is the target, in black.
    """
    fig, (ax,) = new_figure(width=8.0, height=3.8)
    ax.plot(_epochs(base_curve), _capped(base_curve), color=PALETTE[7], lw=2.2, label="base batch")
    for k, batch in enumerate(sorted(scaled)):
        color = PALETTE[(k + 1) % len(PALETTE)]
        for runs, ls, lw, what in ((scaled, "--", 1.5, "no warmup"), (warmup, "-", 1.8, "warmup")):
            curve = runs[batch]
            label = f"batch {batch}, {what}"
            ax.plot(_epochs(curve), _capped(curve), ls, color=color, lw=lw, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("mean mini-batch loss of the epoch (log)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return finished(fig)


def accuracy_vs_batch(batch_sizes, accuracy: dict, labels: dict, limit=None, title: str = ""):
    """Test accuracy against batch size (log axis) for each lr rule; beyond `limit` shaded.

    `accuracy` maps a rule to one accuracy per batch size; `labels` names each rule; the
    accuracy axis starts at 0, so a gap is drawn at its true size.
    """
    fig, (ax,) = new_figure(width=6.4, height=3.8)
    markers = "osD^v"
    for k, (rule, accs) in enumerate(accuracy.items()):
        ax.plot(
            batch_sizes,
            [100 * a for a in accs],
            marker=markers[k % len(markers)],
            lw=1.8,
            color=PALETTE[k % len(PALETTE)],
            label=labels.get(rule, rule),
        )
    if limit is not None and limit < max(batch_sizes):
        ax.axvspan(
            limit * 1.4,
            max(batch_sizes) * 1.5,
            color="#BBBBBB",
            alpha=0.3,
            label="beyond the limit",
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(batch_sizes), [str(b) for b in batch_sizes])
    ax.set_xlabel("batch size (samples, log)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_ylim(0, 100)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    return finished(fig)
