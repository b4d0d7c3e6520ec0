"""Every figure of notebook 08, from plain data: bytes per rank, traffic, timelines, curves."""

from __future__ import annotations

from ..core.style import PALETTE, finished, new_figure
from .formulas import comm_multiple
from .runs import stage_row
from .zero import stage_name

KINDS = ("params", "grads", "optimizer", "activations", "working set")
_COLOURS = dict(zip(KINDS, PALETTE, strict=False))
_LABELS = {
    "params": "weights",
    "grads": "gradients",
    "optimizer": "Adam state",
    "activations": "activations",
    "working set": "working set (gathered layer, full gradient, Adam's temporaries)",
}
MB = 1e6


def _stack(ax, x, parts: dict, width: float = 0.7, labels: bool = True) -> None:
    bottom = 0.0
    for kind in KINDS:
        if kind in parts:
            label = _LABELS[kind] if labels else None
            ax.bar(x, parts[kind] / MB, width, bottom=bottom, color=_COLOURS[kind], label=label)
            bottom += parts[kind] / MB


def anatomy_bars(rows: list[dict]):
    """One stacked bar per rank: weights, gradients, Adam state and activations, in MB."""
    fig, (ax,) = new_figure(width=5.5)
    for i, row in enumerate(rows):
        _stack(ax, i, row, labels=i == 0)
    state = sum(rows[0][k] for k in KINDS[:3])
    ax.set_xticks(range(len(rows)), [f"rank {r['rank']}" for r in rows])
    ax.set_ylabel("MB held during the step")
    ax.set_title(
        f"{state / rows[0]['numel']:.0f} bytes per parameter on every rank; "
        f"Adam's state is {rows[0]['optimizer'] / state:.0%} of it",
        fontsize=10,
    )
    ax.legend(fontsize=8)
    return finished(fig)


def zero_bytes(rows: list[dict]):
    """Measured bytes per rank by stage (stacked) for each N, the formula as a black tick."""
    worlds = sorted({r["world_size"] for r in rows})
    stages = sorted({r["stage"] for r in rows})
    fig, axes = new_figure(len(worlds), width=3.6, height=3.8)
    for ax, world in zip(axes, worlds, strict=True):
        for s in stages:
            row = stage_row(rows, world, s)
            _stack(ax, s, row["held"], labels=s == 0 and world == worlds[0])
            ax.plot(s, row["predicted"] / MB, "k_", ms=22, mew=2)
        ax.set_xticks(stages, [stage_name(s) for s in stages], fontsize=8)
        ax.set_title(f"N = {world}", fontsize=10)
    axes[0].set_ylabel("MB each rank keeps between steps")
    axes[0].plot([], [], "k_", ms=12, mew=2, label="formula")
    axes[-1].legend(*axes[0].get_legend_handles_labels(), fontsize=7)  # where the bars are low
    ddp, last = (stage_row(rows, worlds[-1], s)["measured"] for s in (stages[0], stages[-1]))
    fig.suptitle(
        f"On {worlds[-1]} ranks ZeRO-{stages[-1]} keeps {ddp / last:.1f}x less per rank than DDP"
    )
    return finished(fig)


def zero_peaks(rows: list[dict]):
    """Rank 0's bytes between steps (light) and at the step's peak (dark) by stage, for each
    N, with the peak formula as a black tick; the title names the least at the peak."""
    worlds = sorted({r["world_size"] for r in rows})
    stages = sorted({r["stage"] for r in rows})
    fig, axes = new_figure(len(worlds), width=3.6, height=3.6)
    for ax, world in zip(axes, worlds, strict=True):
        mine = [stage_row(rows, world, s) for s in stages]
        ax.bar(stages, [r["peak"] / MB for r in mine], 0.7, color=PALETTE[0], label="at the peak")
        ax.bar(stages, [r["measured"] / MB for r in mine], 0.7, color=PALETTE[5],
               label="between steps")  # fmt: skip
        ax.plot(stages, [r["predicted_peak"] / MB for r in mine], "k_", ms=22, mew=2)
        ax.set_xticks(stages, [stage_name(s) for s in stages], fontsize=8)
        ax.set_title(f"N = {world}", fontsize=10)
    axes[0].set_ylabel("MB rank 0 holds")
    axes[0].plot([], [], "k_", ms=12, mew=2, label="peak formula")
    axes[-1].legend(*axes[0].get_legend_handles_labels(), fontsize=7)
    least = min((stage_row(rows, worlds[-1], s) for s in stages), key=lambda r: r["peak"])
    held = min((stage_row(rows, worlds[-1], s) for s in stages), key=lambda r: r["measured"])
    fig.suptitle(
        f"On {worlds[-1]} ranks: least between steps {stage_name(held['stage'])}, least at "
        f"the peak {stage_name(least['stage'])} ({least['peak'] / MB:.2f} MB)"
    )
    return finished(fig)


def zero_traffic(rows: list[dict]):
    """Bytes each rank sends per step, in units of the model, against 2(N-1)/N and 3(N-1)/N."""
    worlds = sorted({r["world_size"] for r in rows})
    stages = sorted({r["stage"] for r in rows})
    fig, axes = new_figure(2, width=4.6)
    width = 0.8 / len(stages)
    for i, s in enumerate(stages):
        mine = [stage_row(rows, n, s) for n in worlds]
        xs = [k + (i - (len(stages) - 1) / 2) * width for k in range(len(worlds))]
        label = stage_name(s)
        axes[0].bar(xs, [r["bytes_sent"] / (4 * r["numel"]) for r in mine], width, label=label)
        axes[0].plot(xs, [comm_multiple(s, n) for n in worlds], "k_", ms=8, mew=2)
        axes[1].bar(xs, [r["step_seconds"] * 1e3 for r in mine], width, label=label)
    for ax in axes:
        ax.set_xticks(range(len(worlds)), [f"N = {n}" for n in worlds])
    axes[0].set_ylabel("bytes sent per step / model bytes")
    axes[1].set_ylabel("median step time (ms)")
    axes[0].legend(fontsize=7)
    axes[0].set_title("traffic per rank (ticks: formula)", fontsize=10)
    axes[1].set_title("step time (real loopback, shared cores)", fontsize=10)
    return finished(fig)


def fsdp_timeline(events: list, title: str | None = None):
    """One FSDP2 step on one rank: its hooks and collectives, one row per kind of event."""
    kinds = ["forward", "all-gather", "backward", "prefetch", "reduce-scatter"]
    fig, (ax,) = new_figure(width=8.0, height=2.8)
    for row, kind in enumerate(kinds):
        for k, layer, start, stop in events:
            if k == kind:
                ax.barh(row, (stop - start) * 1e3, left=start * 1e3, color=PALETTE[row], height=0.6)
                ax.text(
                    (start + stop) / 2 * 1e3, row, str(layer), ha="center", va="center", fontsize=7
                )
    ax.set_yticks(range(len(kinds)), kinds)
    ax.invert_yaxis()
    ax.set_xlabel("ms since the step began (numbers: the layer)")
    early = len({layer for k, layer, *_ in events if k == "prefetch"})
    ax.set_title(title or f"FSDP2 issued {early} of its backward all-gathers early (prefetch)")
    return finished(fig)


def precision_panels(under: dict, sums: dict):
    """Left: gradients lost to fp16 without and with loss scaling. Right: small additions."""
    fig, axes = new_figure(2, width=4.6)
    shares = [under["fp16_lost"], under["scaled_lost"]]
    axes[0].bar(["fp16", "fp16 + GradScaler"], [100 * s for s in shares], color=PALETTE[3:5])
    axes[0].set_ylabel("% of gradients flushed to zero")
    axes[0].set_title(f"loss scaling keeps {1 - under['scaled_lost']:.1%} of them", fontsize=10)
    names = ["fp16", "bf16", "fp32"]
    axes[1].bar(names, [sums[f"{n}_sum"] for n in names], color=PALETTE[:3])
    axes[1].axhline(sums["exact_sum"], color="k", ls="--", lw=1, label="exact")
    axes[1].set_ylabel("sum of the small values")
    axes[1].set_title(f"fp16 stops at {sums['fp16_sum']:g} of {sums['exact_sum']:g}", fontsize=10)
    axes[1].legend(fontsize=8)
    return finished(fig)


def checkpoint_curve(rows: list[dict]):
    """Step time against activation bytes, one point per checkpointing setting: the bytes
    saved for backward (open) and the step's peak (filled)."""
    fig, (ax,) = new_figure(width=5.5)
    ys = [r["step_seconds"] * 1e3 for r in rows]
    for key, style, label in (
        ("saved", "o--", "saved for backward"),
        ("peak", "o-", "step's peak"),
    ):
        xs = [r[key] / MB for r in rows]
        fill = "none" if key == "saved" else PALETTE[0]
        ax.plot(xs, ys, style, color=PALETTE[0], mfc=fill, label=label)
    for r, y in zip(rows, ys, strict=True):
        label = "none" if not r["every"] else f"every {r['every']}"
        ax.annotate(label, (r["peak"] / MB, y), textcoords="offset points", xytext=(5, 5),
                    fontsize=8)  # fmt: skip
    ax.set_xlabel("activation bytes (MB)")
    ax.set_ylabel("CPU time per step (ms)")
    ax.legend(fontsize=8)
    most, least = max(rows, key=lambda r: r["saved"]), min(rows, key=lambda r: r["saved"])
    lower = most["peak"] / least["peak"]
    ax.set_title(
        f"{most['saved'] / least['saved']:.0f}x fewer saved bytes, a {lower:.1f}x lower peak, for"
        f" {least['step_seconds'] / most['step_seconds'] - 1:.0%} more time",
        fontsize=10,
    )
    return finished(fig)


def state_by_stage(
    parts_by_stage: dict, chosen: int | None = None, ax=None, title: str = "", limit_gb=None
):
    """The calculator's picture: bytes per rank at each ZeRO stage, stacked, in GB, under
    one GPU's memory (`limit_gb`, a line) when given; the legend names only what is drawn."""
    own = ax is None
    if own:
        fig, (ax,) = new_figure(width=6.0)
    drawn = {k: v for k, v in next(iter(parts_by_stage.values())).items() if v}
    for stage, parts in parts_by_stage.items():
        _stack(ax, stage, {k: v / 1e3 for k, v in parts.items() if k in drawn}, labels=stage == 0)
        if stage == chosen:
            total = sum(parts.values()) / 1e9
            ax.annotate("chosen", (stage, total), ha="center", va="bottom", fontsize=8)
    tallest = max(sum(p.values()) for p in parts_by_stage.values()) / 1e9
    if limit_gb:
        ax.axhline(limit_gb, color="black", ls="--", lw=1, label=f"one GPU ({limit_gb:g} GB)")
    ax.set_ylim(0, 1.12 * max(tallest, limit_gb or 0))  # the tallest bar and its label fit
    ax.set_xticks(list(parts_by_stage), [stage_name(s) for s in parts_by_stage])
    ax.set_ylabel("GB per rank")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    # laid out, so that the legend beside the bars stays inside the figure
    return finished(ax.figure) if own else ax.figure
