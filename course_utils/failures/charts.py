"""Charts for the failures notebook, from plain data: a resumed run, Young's curve, the rows
each rank held before and after resharding, a straggler."""

from __future__ import annotations

from ..core.style import PALETTE, finished, new_figure


def resume_timeline(run, title: str | None = None):
    """Rank 0's loss per update: uninterrupted, killed, and resumed from the checkpoint."""
    fig, (ax,) = new_figure(width=7.0)
    full = run.full["losses"]
    ax.plot(range(1, len(full) + 1), full, color="grey", lw=3, alpha=0.5, label="uninterrupted")
    killed = run.killed_losses
    ax.plot(range(1, len(killed) + 1), killed, color=PALETTE[1], label="killed run")
    ax.plot(len(killed), killed[-1], "x", color=PALETTE[1], markersize=12, mew=3)
    start = run.resumed_from
    resumed = run.resumed["losses"]
    steps = range(start + 1, start + len(resumed) + 1)
    ax.plot(steps, resumed, "--", color=PALETTE[0], label="resumed from the checkpoint")
    for k in range(run.every, len(full) + 1, run.every):
        ax.axvline(k, color="grey", lw=0.6, ls=":")
    ax.axvspan(start, run.kill_at, color=PALETTE[1], alpha=0.1, label="updates redone")
    ax.set_xlabel("update (dotted: checkpoints)")
    ax.set_ylabel("training loss, rank 0")
    same = "identical" if run.tail_equal() else "different"
    ax.set_title(
        title
        or f"killed after update {run.kill_at}, resumed from {start}: "
        f"{run.kill_at - start} updates redone, losses {same}"
    )
    ax.legend(fontsize=8)
    return finished(fig)


def checkpoint_interval(young: dict, title: str | None = None):
    """Seconds lost per failure against the checkpoint interval, and Young's optimum."""
    fig, (ax,) = new_figure(width=6.0)
    lost = young["lost"]
    ks = sorted(lost)
    ax.plot(ks, [lost[k] for k in ks], "o-", color=PALETTE[0],
            label="random failures replayed on measured runs (real clock)")  # fmt: skip
    ax.axvline(young["young_steps"], color=PALETTE[1], ls="--",
               label="Young's prediction: √(2·C·M)")  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_xlabel("updates between checkpoints (k)")
    ax.set_ylabel("seconds lost per failure")
    best = min(lost, key=lost.get)
    ax.set_title(
        title or f"least time lost at k = {best}; Young predicts k ≈ {young['young_steps']:.0f}"
    )
    ax.legend(fontsize=8)
    return finished(fig)


def shard_layout(run: dict, title: str | None = None):
    """The rows of each parameter every rank held, left: the ranks that saved the
    checkpoint, right: the ranks that loaded it (`run` is `reshard`'s)."""
    fig, axes = new_figure(ncols=2, width=4.4)
    rows = {}
    for ax, n, role in zip(axes, run["world_sizes"], ("saved", "loaded"), strict=True):
        ranks = run["shards"][n]
        names = list(ranks[0])
        for y, name in enumerate(names):
            rows[n, name] = [shards[name][0] for shards in ranks]
            total, left = sum(rows[n, name]), 0
            for rank, k in enumerate(rows[n, name]):
                ax.barh(y, k / total, left=left / total, color=PALETTE[rank % len(PALETTE)],
                        edgecolor="white", label=f"rank {rank}" if y == 0 else None)  # fmt: skip
                left += k
        ax.set_yticks(range(len(names)), names)
        ax.invert_yaxis()
        ax.set_xlabel("share of the parameter's rows")
        ax.set_title(f"{n} ranks ({role})", fontsize=10)
        ax.legend(fontsize=7, ncol=n, loc="upper center", bbox_to_anchor=(0.5, -0.22))
    (saved, loaded), first = run["world_sizes"], names[0]
    fig.suptitle(
        title
        or f"{first}: {rows[saved, first][0]} of its {sum(rows[saved, first])} rows on rank 0 of "
        f"{saved}, {rows[loaded, first][0]} on rank 0 of {loaded}",
        fontsize=10,
    )
    return finished(fig)


def straggler_table(table: dict, title: str | None = None):
    """Each rank's mean update: its own work, then waiting in the allreduce."""
    fig, (ax,) = new_figure(width=6.0)
    ranks = sorted(table)
    work = [table[r]["work"] * 1e3 for r in ranks]
    wait = [table[r]["wait"] * 1e3 for r in ranks]
    ax.barh(ranks, work, color=PALETTE[0], label="own work")
    ax.barh(ranks, wait, left=work, color=PALETTE[2], label="waiting in the allreduce")
    ax.set_yticks(ranks, [f"rank {r}" for r in ranks])
    ax.invert_yaxis()
    ax.set_xlabel("milliseconds per update")
    slow = max(ranks, key=lambda r: table[r]["work"])
    ax.set_title(title or f"rank {slow} works longest; every other rank waits for it")
    ax.legend(fontsize=8)
    return finished(fig)
