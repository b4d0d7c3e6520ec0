"""Charts for notebook 01: GD vs SGD vs mini-batch, gradient noise, the batch-size sweep."""

from __future__ import annotations

from ..core.style import PALETTE, finished, new_figure, pyplot


def gd_sgd_minibatch(runs: dict, train_size: int):
    """Loss against updates, passes over the data and seconds, one panel each.

    `runs` maps a label to a History evaluated along the way (`eval_*` lists); the three
    x-axes are what each method is cheap or expensive in.
    """
    fig, axes = new_figure(ncols=3, width=4.4, height=3.4)
    axes_by = (
        ("updates", lambda h: [max(s, 0.5) for s in h.eval_step], "updates (log)"),
        ("passes", lambda h: [max(n / train_size, 1e-3) for n in h.eval_samples], "epochs (log)"),
        ("seconds", lambda h: [max(s, 1e-3) for s in h.eval_seconds], "training time, s (log)"),
    )
    for ax, (unit, xs, label) in zip(axes, axes_by, strict=True):
        for color, (name, history) in zip(PALETTE, runs.items(), strict=False):
            ax.plot(xs(history), history.eval_loss, color=color, label=name, lw=1.8)
        ax.set_xscale("log")
        ax.set_xlabel(label)
        ax.set_title(_leader(unit, {n: (xs(h), h.eval_loss) for n, h in runs.items()}), fontsize=9)
    axes[0].set_ylabel("training loss (cross-entropy)")
    axes[0].legend()
    return finished(fig)


def _leader(unit: str, curves: dict, level: float = 0.02) -> str:
    """Which curve is lowest where all of them have data (the shortest one's end), or which
    ones are level there (within `level` of the lowest, relatively)."""
    import numpy as np

    end = min(max(x) for x, _ in curves.values())
    at = {name: float(np.interp(end, x, y)) for name, (x, y) in curves.items()}
    best = min(at.values())
    close = [name.split(" (")[0] for name, v in at.items() if v <= best * (1 + level)]
    where = f"after {end:.3g} {unit}"
    if len(close) > 1:
        return " and ".join(close) + f" level {where}"
    return f"lowest {where}: {close[0]}"


def noise_vs_batch(batch_sizes, variance, predicted):
    """Measured mini-batch gradient variance on log-log axes, with the sigma^2/B line."""
    fig, (ax,) = new_figure(width=5.5, height=3.8)
    ax.loglog(batch_sizes, predicted, "--", color=PALETTE[7], label=r"law: $\sigma^2 / B$")
    ax.loglog(batch_sizes, variance, "o", color=PALETTE[3], ms=7, label="measured")
    ax.set_xlabel("batch size B (samples, log)")
    ax.set_ylabel(r"$E\,\|g_B - g\|^2$ (log)")
    import numpy as np

    slope = np.polyfit(np.log(batch_sizes), np.log(variance), 1)[0]
    ax.set_title(f"gradient noise against the batch: log-log slope {slope:.2f} (1/B: -1)")
    ax.legend()
    return finished(fig)


def runtime_and_accuracy(batch_sizes, seconds_per_epoch, test_acc, lr=None):
    """The report's two panels: time per epoch and test accuracy for each batch size."""
    fig, (left, right) = new_figure(ncols=2, width=4.8, height=3.6)
    labels = [str(b) for b in batch_sizes]
    colors = [PALETTE[i % len(PALETTE)] for i in range(len(labels))]
    left.bar(labels, seconds_per_epoch, color=colors)
    left.set_xlabel("batch size (samples)")
    left.set_ylabel("training time per epoch (s)")
    faster = all(b < a for a, b in zip(seconds_per_epoch, seconds_per_epoch[1:], strict=False))
    left.set_title("larger batches finish an epoch faster" if faster else "time per epoch")
    right.bar(labels, [100 * a for a in test_acc], color=colors)
    right.set_xlabel("batch size (samples)")
    right.set_ylabel("test accuracy (%)")
    at = f" of {lr:g}" if lr is not None else ""
    worse = all(b < a for a, b in zip(test_acc, test_acc[1:], strict=False))
    right.set_title(f"...but learn less at a fixed lr{at}" if worse else f"test accuracy, lr{at}")
    return finished(fig)


def sweep_timeline(results: dict):
    """Each trial as a bar on its lane, one panel per sweep: what ran when, and the makespan.

    `results` maps a label (e.g. 'jobs=1') to a SweepResult; the x-axes are shared, so
    the shorter panel is the faster search. Bars are labelled with their parameter values.
    """
    heights = [0.9 + 0.45 * r.jobs for r in results.values()]
    fig, axes = pyplot().subplots(
        len(results),
        1,
        figsize=(9.0, sum(heights) + 0.6),
        sharex=True,
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
    )
    axes = list(axes.flat)
    end = max(r.seconds for r in results.values())
    first_values = []  # trials sharing their first parameter's value share a colour
    for result in results.values():
        for t in result.trials:
            value = next(iter(t.params.values()), None)
            if value not in first_values:
                first_values.append(value)
    for ax, (label, result) in zip(axes, results.items(), strict=True):
        for t in result.trials:
            k = first_values.index(next(iter(t.params.values()), None)) % len(PALETTE)
            color = PALETTE[k] if t.ok else "#BBBBBB"
            ax.barh(t.slot, t.seconds, left=t.start, color=color, edgecolor="white", height=0.7)
            if t.seconds > 0.05 * end:
                name = "/".join(f"{v:g}" if _number(v) else str(v) for v in t.params.values())
                dark = t.ok and k in (0, 2, 3, 4, 7)
                ax.text(
                    t.start + t.seconds / 2,
                    t.slot,
                    name,
                    ha="center",
                    va="center",
                    fontsize=9,
                    color="white" if dark else "black",
                )
        ax.axvline(result.seconds, color=PALETTE[7], ls="--", lw=1)
        ax.set_yticks(range(result.jobs), [f"lane {s}" for s in range(result.jobs)])
        ax.set_ylim(result.jobs - 0.5, -0.5)
        ax.set_xlim(0, end * 1.02)
        ax.set_title(f"{label}: done after {result.seconds:.1f} s (dashed)", fontsize=10)
        ax.grid(axis="y", visible=False)
    names = ", ".join(next(iter(results.values())).trials[0].params) if results else ""
    axes[-1].set_xlabel(f"wall-clock time since the search started (s); bars labelled by {names}")
    fig.suptitle("side by side, the search ends with its busiest lane, not the sum of its trials")
    return finished(fig)


def steps_to_target(found, noise_scale: float, target: float):
    """Updates to reach `target` against the batch size (log-log): measured (the seeds' mean),
    perfect scaling through the smallest batch, McCandlish's fitted S_min (1 + B_crit/B), and
    B_simple, the noise scale measured at one point."""
    import numpy as np

    fig, (ax,) = new_figure(width=6.4, height=3.8)
    b = np.array(found.batch_sizes, dtype=float)
    grid = np.geomspace(b[0], b[-1], 100)
    ax.plot(grid, found.steps[0] * b[0] / grid, ":", color=PALETTE[7], label="perfect scaling")
    ax.plot(grid, [found.predicted(x) for x in grid], "-", color=PALETTE[1], lw=1.5,
            label=f"fit S_min (1 + B_crit/B), B_crit = {found.b_crit:.0f}")  # fmt: skip
    seeds = len(found.b_crit_by_seed)
    ax.plot(
        b,
        found.steps,
        "o",
        color=PALETTE[0],
        ms=7,
        label=f"measured (fastest lr), {seeds} seeds' mean",
    )
    ax.axvline(
        noise_scale, color=PALETTE[3], ls="--", lw=1.2, label=f"B_simple = {noise_scale:.0f}"
    )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(list(found.batch_sizes), [str(x) for x in found.batch_sizes])
    ax.set_xlabel("batch size (log)")
    ax.set_ylabel(f"updates to training loss {target:g} (log)")
    ax.set_title(steps_title(found), fontsize=10)
    ax.legend(fontsize=8)
    return finished(fig)


def steps_title(found) -> str:
    """What the fit says, as the fit: its bend, and the floor it approaches far beyond it; or
    that the measured batches show no bend."""
    import math

    bend, largest = found.b_crit, max(found.batch_sizes)
    if not math.isfinite(bend) or bend > largest or found.s_min <= 0:
        return f"steps fall as 1/B up to batch {largest}: no bend within the batches measured"
    if bend < min(found.batch_sizes):
        return "steps barely fall with the batch: the bend lies below the batches measured"
    return (
        f"fitted: steps fall as 1/B well below batch {bend:.0f} and approach "
        f"{found.s_min:.0f} far above it"
    )


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)
