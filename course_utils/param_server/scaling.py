"""A synchronous server's time per update, against workers and shards, over a link.

Every message crosses the emulated link (`network.wire`), because on a laptop the ranks
share the cores and loopback "traffic" is a memory copy. S shards each carry 1/S of the
bytes, but sharding does not cut the time S-fold: each update, a shard's link sends its W
replies one after another, and the last worker to get its reply then sends its whole
gradient (S messages, alpha each) over its own link, which sharding does not touch.
`predicted_seconds` is that alpha-beta model; the notebook compares it with the runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..core import progress
from ..core.checks import Verdict, verdict
from ..core.style import PALETTE, finished, new_figure
from ..core.timing_claims import timing_claim
from .runs import run_parameter_server, server_config


@dataclass
class ShardScaling:
    """Measured seconds and bytes per update, keyed by (workers, shards), and the model's size."""

    seconds: dict = field(default_factory=dict)
    shard_bytes: dict = field(default_factory=dict)  # busiest shard's link, per update
    model_bytes: int = 0

    def predicted(self, link) -> dict:
        return {
            key: predicted_seconds(link, self.model_bytes, *key) for key in sorted(self.seconds)
        }


def predicted_seconds(link, model_bytes: float, workers: int, shards: int) -> float:
    """Alpha-beta time per synchronous update: a shard's link sends W replies of M/S bytes,
    then the last worker's own link sends S gradient slices (M bytes in all)."""
    server_link = workers * link.wire_seconds(model_bytes / shards)
    worker_link = shards * link.alpha + model_bytes * link.beta
    return server_link + worker_link


def step_seconds(sizes, data, workers: tuple, servers: tuple, *, hidden: int, updates: int, link):
    """Seconds per synchronous update on the server's clock, and bytes per shard's link."""
    out = ShardScaling()
    with progress.bar(len(workers) * len(servers), "workers x shards", "layout") as bar:
        for w in workers:
            for s in servers:
                bar.set_postfix(workers=w, shards=s)
                cfg = server_config(sizes, mode="sync", workers=w, updates=updates, hidden=hidden)
                run = run_parameter_server(replace(cfg, servers=s, link=link), data, eval_samples=1)
                out.seconds[w, s] = run.seconds / run.updates
                out.shard_bytes[w, s] = max(run.shard_bytes) / run.updates
                out.model_bytes = run.params.numel() * run.params.element_size()
                bar.update(1)
    return out


# the three verdicts below: simulated clock, against the server's schedule (`core.timing_claims`)
_ON_THE_SCHEDULE = timing_claim(
    "simulated",
    "schedule",
    "test_sharding_verdicts_pass_on_the_prediction_and_fail_without_the_effect",
)


@_ON_THE_SCHEDULE
def grows_with_workers(table: dict, factor: float = 1.4) -> Verdict:
    """One server: the most workers take at least `factor` x the time of the fewest."""
    workers = sorted({w for w, _ in table})
    return verdict(
        table[workers[-1], 1] >= factor * table[workers[0], 1],
        f"simulated clock: one synchronous server's time per update grows with its workers "
        f"(x{factor:g} or more "
        f"from {workers[0]} to {workers[-1]}): its link carries every gradient and reply",
    )


@_ON_THE_SCHEDULE
def sharding_cuts(table: dict, factor: float = 1.4) -> Verdict:
    """With the most workers, the most shards cut the time per update at least `factor`-fold."""
    most = max(w for w, _ in table)
    shards = sorted({s for _, s in table})
    return verdict(
        table[most, 1] >= factor * table[most, shards[-1]],
        f"simulated clock: sharding the server over {shards[-1]} ranks cuts its time per "
        f"update at least "
        f"{factor:g}-fold",
    )


@_ON_THE_SCHEDULE
def matches_prediction(measured: dict, predicted: dict, tolerance: float = 0.25) -> Verdict:
    """Every measured time per update within `tolerance` of the alpha-beta prediction (which
    is 0 on the real link: there the model has nothing to say, and the verdict fails)."""
    ok = all(
        predicted[k] > 0 and abs(measured[k] / predicted[k] - 1) <= tolerance for k in measured
    )
    return verdict(
        ok,
        f"simulated clock: every time per update is within {tolerance:.0%} of the alpha-beta "
        "model of the server's schedule (W replies on a shard's link, then one worker's "
        "whole gradient on its own)",
    )


def step_time_chart(scaling: ShardScaling, predicted: dict | None = None, subtitle: str = ""):
    """Seconds per update against shards, one line per number of workers; computed title."""
    fig, (ax,) = new_figure(width=6.0)
    table = scaling.seconds
    predicted = predicted if predicted and min(predicted.values()) > 0 else None  # real link
    workers = sorted({w for w, _ in table})
    shards = sorted({s for _, s in table})
    for i, w in enumerate(workers):
        color = PALETTE[i % len(PALETTE)]
        ax.plot(shards, [1000 * table[w, s] for s in shards], "o-", color=color,
                label=f"{w} workers, measured")  # fmt: skip
        if predicted:
            ax.plot(shards, [1000 * predicted[w, s] for s in shards], ":", color=color,
                    label=f"{w} workers, alpha-beta model")  # fmt: skip
    ax.set_xticks(shards)
    ax.set_xlabel("server shards S")
    ax.set_ylabel("ms per synchronous update")
    ax.set_ylim(bottom=0)
    most = workers[-1]
    cut = table[most, shards[0]] / table[most, shards[-1]]
    title = f"{most} workers, {shards[0]} to {shards[-1]} shards: time /{cut:.1f}"
    if predicted:
        title += f" (model: /{predicted[most, shards[0]] / predicted[most, shards[-1]]:.1f})"
    fewer = scaling.shard_bytes[most, shards[0]] / scaling.shard_bytes[most, shards[-1]]
    ax.set_title(f"{title}; bytes per shard's link /{fewer:.1f}\n{subtitle}", fontsize=9)
    ax.legend(fontsize=8)
    return finished(fig)
