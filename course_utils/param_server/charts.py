"""Charts for the parameter-server notebook: traffic, staleness, loss curves, averaging."""

from __future__ import annotations

import matplotlib.pyplot as plt

from ..core.style import PALETTE, new_figure

__all__ = [
    "averaging_accuracy",
    "lr_sensitivity",
    "ps_loss_curves",
    "ps_traffic",
    "staleness_histogram",
    "updates_by_worker",
]


def ps_traffic(workers: list[int], series: dict[str, list[float]], title: str | None = None):
    """Bytes per update on each kind of link, against the number of workers."""
    fig, (ax,) = new_figure()
    for (label, values), color in zip(series.items(), PALETTE, strict=False):
        ax.plot(workers, [v / 1e3 for v in values], "o-", color=color, label=label)
    ax.set_xticks(workers)
    ax.set_xlabel("workers")
    ax.set_ylabel("kB sent + received per update")
    ax.set_ylim(bottom=0)
    ax.set_title(title or "the server's link carries traffic that grows with the workers")
    ax.legend(fontsize=8)
    plt.close(fig)  # shown once, as the cell's result
    return fig


def staleness_histogram(groups: dict[str, list[int]], title: str | None = None):
    """How many updates happened between a worker's pull and its gradient being applied."""
    fig, (ax,) = new_figure(width=6.0)
    top = max((max(v) for v in groups.values() if v), default=0)
    bins = [b - 0.5 for b in range(top + 2)]
    for (label, values), color in zip(groups.items(), PALETTE, strict=False):
        if values:
            weights = [1 / len(values)] * len(values)
            ax.hist(values, bins=bins, weights=weights, alpha=0.6, color=color, label=label)
    ax.set_xlabel("staleness (updates applied since the worker pulled)")
    ax.set_ylabel("share of that worker's gradients")
    ax.set_title(title or "asynchronous gradients arrive stale; a straggler's most of all")
    ax.legend(fontsize=8)
    plt.close(fig)  # shown once, as the cell's result
    return fig


def ps_loss_curves(runs: dict, title: str | None = None):
    """Test loss against updates applied (left) and against training seconds (right)."""
    fig, (by_update, by_time) = new_figure(ncols=2)
    for i, (label, run) in enumerate(runs.items()):
        style = "-" if run.mode == "async" else "--"
        color = PALETTE[i % len(PALETTE)]
        by_update.plot(run.snapshot_updates, run.loss, style, color=color, label=label)
        by_time.plot(run.snapshot_seconds, run.loss, style, color=color, label=label)
    by_update.set_xlabel("updates applied by the server")
    by_time.set_xscale("log")  # a straggler's run is many times longer: keep the others readable
    by_time.set_xlabel("training time (s, log scale)")
    for ax in (by_update, by_time):
        ax.set_ylabel("test loss")
    by_time.legend(fontsize=8)
    fig.suptitle(title or _loss_curves_title(runs))
    fig.tight_layout()
    plt.close(fig)  # shown once, as the cell's result
    return fig


def _loss_curves_title(runs: dict) -> str:
    """Which run ends lowest and which finishes first, from the runs themselves."""
    lowest = min(runs, key=lambda k: runs[k].loss[-1])
    first = min(runs, key=lambda k: runs[k].snapshot_seconds[-1])
    last = max(runs, key=lambda k: runs[k].snapshot_seconds[-1])
    seconds = runs[first].snapshot_seconds[-1], runs[last].snapshot_seconds[-1]
    return (
        f"lowest final loss: {lowest}; first to finish: {first} ({seconds[0]:.1f} s, "
        f"against {seconds[1]:.1f} s for {last})"
    )


def lr_sensitivity(lrs: list[float], losses: dict[str, list[float]], title: str | None = None):
    """Final test loss against the learning rate, one line per way of training."""
    fig, (ax,) = new_figure(width=6.0)
    for (label, values), color in zip(losses.items(), PALETTE, strict=False):
        ax.plot(lrs, values, "o-", color=color, label=label)
    ax.set_xscale("log")
    ax.set_xlabel("learning rate")
    ax.set_ylabel("test loss after the run")
    ax.set_title(title or "stale gradients make the learning rate harder to choose")
    ax.legend(fontsize=8)
    plt.close(fig)  # shown once, as the cell's result
    return fig


def averaging_accuracy(points: list[dict], baseline: float, title: str | None = None):
    """Test accuracy against communication rounds; each point a label, rounds and accuracy."""
    fig, (ax,) = new_figure(width=6.0)
    for point, color in zip(points, PALETTE, strict=False):
        ax.plot(point["rounds"], point["accuracy"], "o", color=color, markersize=8)
        ax.annotate(
            point["label"],
            (point["rounds"], point["accuracy"]),
            fontsize=8,
            xytext=(5, 4),
            textcoords="offset points",
        )
    ax.axhline(baseline, color="grey", linestyle=":", label="a worker alone (mean)")
    ax.set_xscale("log")
    ax.set_xlabel("communication rounds (averages of the weights)")
    ax.set_ylabel("test accuracy of the averaged model")
    ax.set_ylim(0, 1)
    ax.set_title(title or "averaging rarely costs little; averaging unrelated models fails")
    ax.legend(fontsize=8, loc="lower right")
    plt.close(fig)  # shown once, as the cell's result
    return fig


def updates_by_worker(run, title: str | None = None):
    """Which worker's gradient each update applied, over time: a lost worker's line stops."""
    fig, (ax,) = new_figure(width=6.5)
    for w in range(1, run.workers + 1):
        times = [t for t, who in zip(run.update_seconds, run.senders, strict=True) if w in who]
        count = list(range(1, len(times) + 1))
        label = f"worker {w}" + (" (killed)" if w in run.died else "")
        ax.step(times, count, where="post", color=PALETTE[(w - 1) % len(PALETTE)], label=label)
    ax.set_xlabel("training time (s)")
    ax.set_ylabel("gradients applied so far")
    ax.set_title(title or "a killed worker stops; the others carry the training to the end")
    ax.legend(fontsize=8)
    plt.close(fig)  # shown once, as the cell's result
    return fig
