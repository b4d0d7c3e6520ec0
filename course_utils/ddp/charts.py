"""Charts for the data-parallel notebook."""

from __future__ import annotations

from ..core.style import PALETTE, finished, new_figure
from ..lr_scaling.experiments import curve_distance


def step_losses(single: list[float], ranks: list[list[float]], title: str):
    """Per-step loss of the one-process twin over each rank's own and their mean."""
    fig, (ax,) = new_figure(width=6.5)
    for r, losses in enumerate(ranks):
        ax.plot(
            losses,
            color=PALETTE[5],
            alpha=0.5,
            lw=1,
            label="each rank, its own shard" if r == 0 else None,
        )
    mean = [sum(step) / len(step) for step in zip(*ranks, strict=True)]
    ax.plot(single, color=PALETTE[0], lw=3, label="one process, batch N x b")
    ax.plot(mean, color=PALETTE[1], lw=1.5, ls="--", label="mean over the ranks")
    ax.set(xlabel="update", ylabel="training loss (cross-entropy)", title=title)
    ax.legend()
    return finished(fig)


def curves_overlaid(curves: dict[str, list[float]], ylabel: str, title: str):
    """Per-epoch curves of several runs on one axis (the report's DDP-vs-one-process chart)."""
    fig, (ax,) = new_figure(width=6.5)
    styles = ["-", "--", ":", "-."]
    for i, (label, ys) in enumerate(curves.items()):
        ax.plot(
            range(1, len(ys) + 1),
            ys,
            styles[i % 4],
            marker="o",
            lw=2,
            label=label,
            color=PALETTE[i],
        )
    ax.set(xlabel="epoch", ylabel=ylabel, title=title)
    ax.legend()
    return finished(fig)


def accuracy_vs_effective_batch(rows, title: str):
    """Test accuracy against the effective batch, with the lr fixed and scaled linearly."""
    fig, (ax,) = new_figure(width=6.5)
    for scaled, label, color, marker in (
        (False, "lr fixed", PALETTE[3], "s"),
        (True, "lr scaled with the batch", PALETTE[0], "o"),
    ):
        pts = sorted((r.effective_batch, r.test_acc) for r in rows if r.scaled == scaled)
        ax.plot(*zip(*pts, strict=True), marker=marker, lw=2, label=label, color=color)
    ax.set_xscale("log", base=2)
    ax.set(xlabel="effective batch (ranks x per-rank batch)", ylabel="test accuracy", title=title)
    ax.legend()
    return finished(fig)


def step_breakdown(times, title: str):
    """Seconds per 1000 samples, split into compute and waiting for the all-reduce."""
    fig, (ax,) = new_figure(width=7.5)
    names = [t.name for t in times]
    total = [t.seconds_per_1000_samples for t in times]
    comm_share = [t.communication / t.seconds if t.seconds else 0.0 for t in times]
    comm = [s * c for s, c in zip(total, comm_share, strict=True)]
    rest = [s - c for s, c in zip(total, comm, strict=True)]
    ax.barh(names, rest, color=PALETTE[0], label="compute (forward, backward, optimizer)")
    ax.barh(
        names, comm, left=rest, color=PALETTE[1], label="all-reduce (measured in the comm hook)"
    )
    ax.invert_yaxis()
    ax.set(xlabel="seconds per 1000 samples (all ranks together)", title=title)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)
    return finished(fig)


def compute_vs_communication(rows, title: str):
    """Per step: compute and all-reduce time as one global batch is split over more ranks."""
    fig, (ax,) = new_figure(width=6.5)
    n = [r.world_size for r in rows]
    compute = [1000 * r.compute_per_step for r in rows]
    comm = [1000 * r.communication_per_step for r in rows]
    ax.plot(n, compute, "o-", color=PALETTE[0], lw=2, label="compute per step")
    ax.plot(n, comm, "s--", color=PALETTE[1], lw=2, label="all-reduce per step")
    ax.set_xscale("log", base=2)
    ax.set_xticks(n, [f"{r.world_size} x {r.per_rank_batch}" for r in rows])
    ax.set(
        xlabel="ranks x per-rank batch (same global batch)",
        ylabel="milliseconds per step",
        title=title,
    )
    ax.legend()
    return finished(fig)


def backward_overlap(timeline: dict, title: str):
    """Backward pass of rank 0: when each layer's gradient is ready, when each bucket is reduced."""
    fig, (ax,) = new_figure(width=7.5, height=3.4)
    ms = 1000
    layers = timeline["layers"]
    for name, t in layers:
        ax.plot([t * ms], [1], "v", color=PALETTE[0], ms=9)
        ax.annotate(
            name, (t * ms, 1), textcoords="offset points", xytext=(0, 8), ha="center", fontsize=8
        )
    for start, end, index, _ in timeline["allreduces"]:
        ax.barh(
            0,
            (end - start) * ms,
            left=start * ms,
            height=0.5,
            color=PALETTE[1],
            alpha=0.6,
            edgecolor=PALETTE[3],
        )
        ax.text(start * ms, -0.38, f"bucket {index}", fontsize=7)
    ax.axvline(timeline["backward_seconds"] * ms, color="grey", ls=":", label="backward() returns")
    ax.set_yticks([0, 1], ["all-reduce of a bucket", "gradient of a layer ready"])
    ax.set_ylim(-0.6, 1.6)
    ax.set(xlabel="milliseconds since backward() started", title=title)
    ax.legend(loc="upper right")
    return finished(fig)


def overlap_saving_bars(result: dict):
    """Backward then communication, against DDP's overlapped step (from `overlap_saving`)."""
    fig, (ax,) = new_figure(width=7.0, height=2.6)
    ms = {k: 1000 * result[k] for k in ("compute", "communication", "overlapped", "saving")}
    ax.barh(["sequential"], [ms["compute"]], color=PALETTE[0], label="backward pass")
    ax.barh(
        ["sequential"], [ms["communication"]], left=[ms["compute"]], color=PALETTE[1],
        label="all-reduces of every bucket",
    )  # fmt: skip
    ax.barh(["overlapped (DDP)"], [ms["overlapped"]], color=PALETTE[2], label="DDP's step")
    ax.invert_yaxis()
    ax.set_xlabel("milliseconds per step (slowest rank)")
    ax.set_title(
        f"Overlap saves {ms['saving']:.0f} of {ms['compute'] + ms['communication']:.0f} ms "
        f"per step ({result['buckets']} buckets)\n{result['link']}",
        fontsize=9,
    )
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=3, frameon=False)
    return finished(fig)


def profiled_timeline(traces: dict[str, list[dict]], title: str):
    """Per rank, from torch.profiler: backward ops on one lane, all-reduces on the next, for
    each way of running the step (`trace.profiled_step` results by name)."""
    fig, (ax,) = new_figure(width=8.0, height=0.7 + 0.55 * sum(2 * len(r) for r in traces.values()))
    ms, labels, ticks, y = 1000, [], [], 0
    for name, ranks in traces.items():
        for r in ranks:
            for lane, key, color in (
                ("all-reduce", "allreduce", 1),
                ("backward ops", "backward", 0),
            ):
                spans = [(s * ms, (e - s) * ms) for s, e in r[key]]
                ax.broken_barh(spans, (y - 0.35, 0.7), color=PALETTE[color], alpha=0.8)
                labels.append(f"{name}, rank {r['rank']}: {lane}")
                ticks.append(y)
                y += 1
        y += 0.5
    ax.set_yticks(ticks, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set(xlabel="milliseconds since the profiled step began")
    ax.set_title(title, fontsize=9)
    return finished(fig)


def comparison_title(curves: dict[str, list[float]], reference: str) -> str:
    """Names the curve closest to `reference` (mean absolute gap per epoch)."""
    gaps = {k: curve_distance(v, curves[reference]) for k, v in curves.items() if k != reference}
    closest = min(gaps, key=gaps.get)
    return f"{reference} is closest to {closest} (mean gap {gaps[closest]:.3f})"


def lr_scaling_title(rows) -> str:
    """How often a scaled lr beats a fixed one, and how the largest batch ends."""
    acc = {(r.effective_batch, r.scaled): r.test_acc for r in rows}
    batches = sorted({r.effective_batch for r in rows})
    wins = sum(acc[b, True] > acc[b, False] for b in batches[1:])
    largest = batches[-1]
    return (
        f"Scaled lr beats fixed at {wins} of {len(batches) - 1} larger batches; at {largest} "
        f"it reaches {acc[largest, True]:.2f} against {acc[batches[0], False]:.2f} at {batches[0]}"
    )


def overlap_title(timeline: dict) -> str:
    """How many bucket all-reduces start before the first layer's gradient is ready."""
    first_layer = dict(timeline["layers"])["layer 1"]
    early = sum(start < first_layer for start, *_ in timeline["allreduces"])
    return (
        f"{early} of {len(timeline['allreduces'])} bucket all-reduces start before "
        "layer 1's gradient is ready"
    )


def profiled_title(traces: dict[str, list[dict]], link) -> str:
    """Each variant's mean overlap of all-reduces and backward pass (of the shorter of the
    two), and the link."""
    shares = [
        f"{name} {sum(t['overlap'] for t in ranks) / len(ranks):.0%}"
        for name, ranks in traces.items()
    ]
    return (
        f"All-reduces during the backward pass, share of the shorter: {', '.join(shares)}"
        f"\n{link.label}"
    )
