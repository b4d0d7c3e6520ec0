"""Charts for notebook 10's context and expert parallelism, drawn from plain run data."""

from __future__ import annotations

import numpy as np

from ..core.style import PALETTE, finished, new_figure
from .cp_ep_runs import MoERun
from .cp_ep_verdicts import imbalance


def work_per_rank(work: dict[str, list[int]]):
    """Query-key scores each rank computes (`work_by_layout`), one bar group per rank; the
    title gives each split's busiest over least busy rank."""
    fig, (ax,) = new_figure(width=6.0)
    ranks = len(next(iter(work.values())))
    width = 0.8 / len(work)
    for n, (layout, per_rank) in enumerate(work.items()):
        ax.bar(np.arange(ranks) + (n - (len(work) - 1) / 2) * width, per_rank, width,
               color=PALETTE[n], label=f"{layout} split")  # fmt: skip
    ratios = ", ".join(f"{k} {max(v) / min(v):.2f}x" for k, v in work.items())
    ax.set_xticks(range(ranks), [f"rank {r}" for r in range(ranks)])
    ax.set_ylabel("query-key scores computed\n(per sequence and head)")
    ax.set_title(f"causal ring attention on {ranks} ranks\nbusiest over least busy: {ratios}",
                 fontsize=9)  # fmt: skip
    ax.legend(fontsize=8)
    return finished(fig)


def _load(run: MoERun) -> str:
    return f"busiest rank {imbalance(run.tokens_per_rank):.2f}x the mean, {run.dropped} dropped"


def router_load(runs: dict[str, MoERun]):
    """Per router (`moe_vs_one_process`'s runs): tokens each expert was chosen by and kept,
    against its capacity summed over the groups, and the rows each rank's experts computed."""
    fig, (experts_ax, ranks_ax) = new_figure(ncols=2, width=5.0)
    first = next(iter(runs.values()))
    n_experts, world = len(first.kept_per_expert), first.world
    width = 0.8 / len(runs)
    for n, (name, run) in enumerate(runs.items()):
        shift = (n - (len(runs) - 1) / 2) * width
        at = np.arange(n_experts) + shift
        experts_ax.bar(at, run.wanted_per_expert, width, color=PALETTE[n], alpha=0.35,
                       hatch="//", label=f"{name}: chosen")  # fmt: skip
        experts_ax.bar(at, run.kept_per_expert, width, color=PALETTE[n], label=f"{name}: kept")
        ranks_ax.bar(np.arange(world) + shift, run.tokens_per_rank, width, color=PALETTE[n],
                     label=name)  # fmt: skip
    cap = first.capacity * world
    experts_ax.axhline(cap, color=PALETTE[3], ls="--", label=f"capacity x {world} groups")
    experts_ax.set_xticks(range(n_experts), [f"expert {e}" for e in range(n_experts)])
    experts_ax.set_ylabel("token choices")
    experts_ax.legend(fontsize=7)
    ranks_ax.set_xticks(range(world), [f"rank {r}" for r in range(world)])
    ranks_ax.set_ylabel("rows its experts computed")
    ranks_ax.legend(fontsize=7)
    fig.suptitle(
        f"mixture of experts on {world} ranks, top-{first.top_k} routing, capacity factor "
        f"{first.capacity_factor:g}\n"
        + "; ".join(f"{name}: {_load(run)}" for name, run in runs.items()),
        fontsize=9,
    )
    return finished(fig)
