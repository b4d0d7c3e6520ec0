"""A synchronous server's time per update, against workers and shards, over a link.

Every message crosses the emulated link (`ranks.link`): a server's one link takes every
worker's gradient in and sends every reply out, so its time per update grows with the
workers; S shards each carry 1/S of the bytes. Measured over the link, because on a
laptop the ranks share the cores and loopback "traffic" is a memory copy.
"""

from __future__ import annotations

from dataclasses import replace

import matplotlib.pyplot as plt

from ..core.checks import Verdict, verdict
from ..core.style import PALETTE, new_figure
from .runs import run_parameter_server, server_config

__all__ = ["grows_with_workers", "sharding_cuts", "step_seconds", "step_time_chart"]


def step_seconds(sizes, data, workers: tuple, servers: tuple, *, hidden: int, updates: int, link):
    """{(workers, servers): seconds per synchronous update} on the server's clock."""
    table = {}
    for w in workers:
        for s in servers:
            cfg = server_config(sizes, mode="sync", workers=w, updates=updates, hidden=hidden)
            run = run_parameter_server(replace(cfg, servers=s, link=link), data, eval_samples=1)
            table[w, s] = run.seconds / run.updates
    return table


def grows_with_workers(table: dict, factor: float = 1.4) -> Verdict:
    """One server: the most workers take at least `factor` x the time of the fewest."""
    workers = sorted({w for w, _ in table})
    return verdict(
        table[workers[-1], 1] >= factor * table[workers[0], 1],
        f"one synchronous server's time per update grows with its workers (x{factor:g} or more "
        f"from {workers[0]} to {workers[-1]}): its link carries every gradient and reply",
    )


def sharding_cuts(table: dict, factor: float = 1.4) -> Verdict:
    """With the most workers, the most shards cut the time per update at least `factor`-fold."""
    most = max(w for w, _ in table)
    shards = sorted({s for _, s in table})
    return verdict(
        table[most, 1] >= factor * table[most, shards[-1]],
        f"sharding the server over {shards[-1]} ranks cuts its time per update at least "
        f"{factor:g}-fold: each shard's link carries 1/{shards[-1]} of the bytes",
    )


def step_time_chart(table: dict, subtitle: str = ""):
    """Seconds per update against workers, one line per number of shards; computed title."""
    fig, (ax,) = new_figure(width=6.0)
    workers = sorted({w for w, _ in table})
    shards = sorted({s for _, s in table})
    for i, s in enumerate(shards):
        label = "one server" if s == 1 else f"{s} shards"
        ax.plot(workers, [1000 * table[w, s] for w in workers], "o-", color=PALETTE[i], label=label)
    ax.set_xticks(workers)
    ax.set_xlabel("workers")
    ax.set_ylabel("ms per synchronous update")
    grow = table[workers[-1], 1] / table[workers[0], 1]
    cut = table[workers[-1], 1] / table[workers[-1], shards[-1]]
    ax.set_title(
        f"{workers[0]} to {workers[-1]} workers: x{grow:.1f} on one server; "
        f"{shards[-1]} shards: /{cut:.1f}\n{subtitle}",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    plt.close(fig)
    return fig
