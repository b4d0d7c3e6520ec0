"""Charts for the parameter-server notebook: traffic, staleness, loss curves, averaging."""

from __future__ import annotations

from ..core.style import PALETTE, finished, new_figure
from .runs import one_clock
from .tuning import lowest


def ps_traffic(workers: list[int], series: dict[str, list[float]]):
    """Bytes per update on each kind of link, against the number of workers."""
    fig, (ax,) = new_figure()
    for (label, values), color in zip(series.items(), PALETTE, strict=False):
        ax.plot(workers, [v / 1e3 for v in values], "o-", color=color, label=label)
    ax.set_xticks(workers)
    ax.set_xlabel("workers")
    ax.set_ylabel("kB sent + received per update")
    ax.set_ylim(bottom=0)
    grew = ", ".join(f"{label} x{v[-1] / v[0]:.1f}" for label, v in series.items())
    ax.set_title(
        f"bytes per update from {workers[0]} to {workers[-1]} workers:\n{grew}", fontsize=9
    )
    ax.legend(fontsize=8)
    return finished(fig)


def staleness_histogram(groups: dict[str, list[int]], subtitle=""):
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
    ax.set_title(_staleness_title(groups) + (f"\n{subtitle}" if subtitle else ""), fontsize=9)
    ax.legend(fontsize=8)
    return finished(fig)


def _staleness_title(groups: dict[str, list[int]]) -> str:
    """Which group's gradients were stalest and which freshest, by their means."""
    means = {label: sum(v) / len(v) for label, v in groups.items() if v}
    stalest, freshest = max(means, key=means.get), min(means, key=means.get)
    return (
        f"stalest: {stalest} (mean {means[stalest]:.1f} updates);\n"
        f"freshest: {freshest} (mean {means[freshest]:.1f})"
    )


def ps_loss_curves(runs: dict, subtitle: str = ""):
    """Test loss against gradients computed (left: an equal budget of work) and against
    training seconds (right). A synchronous update costs one gradient per worker."""
    fig, (by_update, by_time) = new_figure(ncols=2)
    for i, (label, run) in enumerate(runs.items()):
        style = "-" if run.mode == "async" else "--"
        color = PALETTE[i % len(PALETTE)]
        by_update.plot(run.snapshot_gradients, run.loss, style, color=color, label=label)
        by_time.plot(run.snapshot_seconds, run.loss, style, color=color, label=label)
    by_update.set_xlabel("gradients computed by the workers")
    by_time.set_xscale("log")  # a straggler's run is many times longer: keep the others readable
    by_time.set_xlabel(f"training time ({one_clock(runs.values())} clock, s, log scale)")
    for ax in (by_update, by_time):
        ax.set_ylabel("test loss")
    by_time.legend(fontsize=8)
    fig.suptitle(_loss_curves_title(runs) + (f"\n{subtitle}" if subtitle else ""))
    return finished(fig)


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


def lr_sensitivity(lrs: list[float], losses: dict[str, list[float]]):
    """Mean final validation loss against the learning rate, one line per way of training;
    a run that diverged (nan) leaves a gap."""
    fig, (ax,) = new_figure(width=6.0)
    for (label, values), color in zip(losses.items(), PALETTE, strict=False):
        ax.plot(lrs, values, "o-", color=color, label=label)
    ax.set_xscale("log")
    ax.set_xlabel("learning rate")
    ax.set_ylabel("validation loss (mean over seeds)")
    best = ", ".join(f"{lowest(lrs, values):g} ({label})" for label, values in losses.items())
    ax.set_title(f"lowest mean validation loss at lr\n{best}", fontsize=9)
    ax.legend(fontsize=8)
    return finished(fig)


def averaging_accuracy(points: list[dict], baseline: float):
    """Test accuracy against communication rounds; each point a label, rounds and accuracy."""
    fig, (ax,) = new_figure(width=6.0)
    for point, color in zip(points, PALETTE, strict=False):
        xy = (point["rounds"], point["accuracy"])
        ax.plot(*xy, "o", color=color, markersize=8)
        ax.annotate(point["label"], xy, fontsize=8, xytext=(5, 4), textcoords="offset points")
    ax.axhline(baseline, color="grey", linestyle=":", label="a worker alone (mean)")
    ax.set_xscale("log")
    ax.set_xlabel("communication rounds (averages of the weights)")
    ax.set_ylabel("test accuracy of the averaged model")
    ax.set_ylim(0, 1)
    top = max(points, key=lambda p: p["accuracy"])
    low = min(points, key=lambda p: p["accuracy"])
    ax.set_title(
        f"most accurate: {top['label']} ({top['accuracy']:.2f}); "
        f"least: {low['label']} ({low['accuracy']:.2f})",
        fontsize=9,
    )
    ax.legend(fontsize=8, loc="lower right")
    return finished(fig)


def updates_by_worker(run):
    """Which worker's gradient each update applied, over time: a lost worker's line stops."""
    fig, (ax,) = new_figure(width=6.5)
    for w in range(1, run.workers + 1):
        times = [t for t, who in zip(run.update_seconds, run.senders, strict=True) if w in who]
        count = list(range(1, len(times) + 1))
        label = f"worker {w}" + (" (killed)" if w in run.died else "")
        ax.step(times, count, where="post", color=PALETTE[(w - 1) % len(PALETTE)], label=label)
    ax.set_xlabel("training time (s)")
    ax.set_ylabel("gradients applied so far")
    applied = {w: sum(w in who for who in run.senders) for w in range(1, run.workers + 1)}
    counts = ", ".join(
        f"worker {w}{' (killed)' if w in run.died else ''} {n}" for w, n in applied.items()
    )
    ax.set_title(f"gradients applied: {counts}", fontsize=9)
    ax.legend(fontsize=8)
    return finished(fig)


def loss_by_epochs(curves: dict, target: float, epochs_to: dict):
    """Mean validation loss against epochs of gradients computed, with the target loss;
    `epochs_to` holds each curve's first epoch at or below it (inf: never)."""
    fig, (ax,) = new_figure(width=6.0)
    for (label, (epochs, loss)), color in zip(curves.items(), PALETTE, strict=False):
        ax.plot(epochs, loss, "-", color=color, label=label)
    ax.axhline(target, color="grey", linestyle=":", label=f"target {target:g}")
    ax.set_xlabel("epochs (gradients computed x batch / training samples)")
    ax.set_ylabel("validation loss (mean over seeds)")
    reached = ", ".join(f"{label} {e:.2f}" for label, e in epochs_to.items())
    ax.set_title(f"epochs to validation loss {target:g}: {reached}", fontsize=9)
    ax.legend(fontsize=8)
    return finished(fig)
