"""Charts of how a DDP step scales with ranks: the lecture's layouts and strong scaling.

Each title is chosen from the numbers it plots; the subtitle names the link and how
compute and communication were measured.
"""

from __future__ import annotations

from ..core.style import PALETTE, finished, new_figure
from .scaling import speedup


def strong_scaling_title(runs: dict, tie: float = 0.02) -> str:
    """Which global batch scales best, to how many ranks, and how far. Rank counts whose
    speedups lie within `tie` (relative) of the best are a tie, and the title says so:
    1.33x against 1.32x does not make either the fastest."""
    best = {b: max(speedup(points).items(), key=lambda kv: kv[1]) for b, points in runs.items()}
    batch, (ranks, gain) = max(best.items(), key=lambda kv: kv[1][1])
    losers = [b for b, (n, s) in best.items() if n == 1]
    tail = f"; one process stays fastest at {', '.join(map(str, losers))}" if losers else ""
    tied = sorted(n for n, s in speedup(runs[batch]).items() if s >= (1 - tie) * gain)
    if len(tied) > 1:
        who = f"{', '.join(map(str, tied[:-1]))} and {tied[-1]}"
        return (
            f"Global batch {batch}: {who} ranks tie within {tie:.0%}, up to {gain:.2f}x one "
            f"process{tail}"
        )
    return f"Global batch {batch}: {ranks} ranks are fastest, {gain:.2f}x one process{tail}"


def strong_scaling_chart(runs: dict, link_label: str):
    """Speedup and efficiency against ranks, one line per global batch (`strong_scaling`)."""
    fig, (left, right) = new_figure(ncols=2, width=4.2, height=3.4)
    for i, (batch, points) in enumerate(sorted(runs.items())):
        gains = speedup(points)
        n = sorted(gains)
        style = dict(marker="o", lw=2, color=PALETTE[i], label=f"global batch {batch}")
        left.plot(n, [gains[k] for k in n], **style)
        right.plot(n, [gains[k] / k for k in n], **style)
    n = sorted({p.world_size for points in runs.values() for p in points})
    left.plot(n, n, ":", color="grey", label="ideal")
    left.axhline(1, color="grey", lw=0.8)
    for ax, label in ((left, "speedup over one process"), (right, "efficiency (speedup / ranks)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(n, [str(k) for k in n])
        ax.set(xlabel="ranks (same global batch)", ylabel=label)
    left.set_yscale("log", base=2)
    left.legend(fontsize=7)
    fig.suptitle(
        f"{strong_scaling_title(runs)}\n{link_label}; compute: each rank's CPU time, "
        "communication: wall time on the link",
        fontsize=9,
    )
    return finished(fig)


def layout_prediction(measured: dict, predicted: dict, lecture: dict, link_label: str):
    """Left: measured against predicted step time of the layouts run here; right: the
    lecture's layouts priced by the same model, split into compute and all-reduce."""
    fig, (left, right) = new_figure(ncols=2, width=4.2, height=3.2)
    names = list(predicted)
    x = range(len(names))
    left.bar([i - 0.2 for i in x], [1000 * predicted[k] for k in names], 0.4, color=PALETTE[5],
             label="predicted (alpha-beta)")  # fmt: skip
    left.bar([i + 0.2 for i in x], [1000 * measured[k] for k in names], 0.4, color=PALETTE[0],
             label="measured")  # fmt: skip
    left.set_xticks(list(x), names)
    left.set(xlabel="ranks x per-rank batch", ylabel="milliseconds per step")
    left.legend(fontsize=7)
    lnames = list(lecture)
    compute = [1000 * lecture[k][0] for k in lnames]
    comm = [1000 * lecture[k][1] for k in lnames]
    right.bar(lnames, compute, color=PALETTE[0], label="compute")
    right.bar(lnames, comm, bottom=compute, color=PALETTE[1], label="all-reduce")
    right.set_yscale("log")
    right.set(xlabel="the lecture's layouts", ylabel="predicted milliseconds per step")
    right.legend(fontsize=7)
    fast = min(lecture, key=lambda k: sum(lecture[k]))
    slow = max(lecture, key=lambda k: sum(lecture[k]))
    worst = max(abs(measured[k] / predicted[k] - 1) for k in predicted)
    fig.suptitle(
        f"Measured within {worst:.0%} of predicted; {fast} would step "
        f"{sum(lecture[slow]) / sum(lecture[fast]):.0f}x faster than {slow}\n{link_label}",
        fontsize=9,
    )
    return finished(fig)
