"""Notebook 11's picture of the mesh: who talks to whom, over which dimension, how much.

The ranks are drawn at their mesh coordinates in an oblique projection of a box: tp to the
right, pp upwards, dp into the page (any sizes, up to three dimensions). An edge joins
two ranks that are neighbours along one dimension (next to each other in one of its groups,
`groups.mesh_groups`), coloured by it and labelled with the bytes each end sends over that
dimension per step, from the run's logs.
"""

from __future__ import annotations

import itertools

from ..core.style import PALETTE, finished, new_figure
from .groups import coords_of, mesh_groups

DIRECTIONS = {"tp": (2.0, 0.0), "pp": (0.0, 2.0), "dp": (1.0, 0.75)}
ALONG = {"tp": 0.3, "pp": 0.25, "dp": 0.5}
COLOURS = {"tp": PALETTE[0], "pp": PALETTE[1], "dp": PALETTE[2]}


def _kb(n: int) -> str:
    return f"{n / 1e3:.1f} kB"


def _place(rank: int, shape, dims) -> tuple[float, float]:
    x = y = 0.0
    for c, name in zip(coords_of(rank, shape), dims, strict=True):
        dx, dy = DIRECTIONS.get(name, (0.6, -0.6))
        x, y = x + c * dx, y + c * dy
    return x, y


def mesh_picture(sent: dict[int, dict[str, int]], shape, dims):
    """`sent`: per rank, bytes sent per step over each dimension (`MeshRun.bytes`).

    The title sums each dimension over every rank, so it says where the traffic goes."""
    fig, (ax,) = new_figure(width=7.0, height=5.2)
    world = len(sent)
    edges = [  # neighbours along `name`: next to each other in one of its groups
        (name, rank, other)
        for name, lines in mesh_groups(shape, dims).items()
        for line in lines
        for rank, other in itertools.pairwise(line)
    ]
    for name, rank, other in edges:
        (x0, y0), (x1, y1) = _place(rank, shape, dims), _place(other, shape, dims)
        ax.plot([x0, x1], [y0, y1], color=COLOURS.get(name, PALETTE[4]), lw=2.5, zorder=1)
        a, b = sent[rank][name], sent[other][name]
        text = _kb(a) if a == b else f"{_kb(a)} / {_kb(b)}"
        along = ALONG.get(name, 0.5)  # off the crossings of front and back edges
        ax.annotate(
            text,
            (x0 + along * (x1 - x0), y0 + along * (y1 - y0)),
            fontsize=7,
            ha="center",
            va="center",
            color=COLOURS.get(name, PALETTE[4]),
            zorder=3,
            bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"},
        )
    for rank in range(world):
        x, y = _place(rank, shape, dims)
        ax.scatter([x], [y], s=520, color="white", edgecolor="black", zorder=2)
        ax.annotate(str(rank), (x, y), ha="center", va="center", fontsize=10, zorder=4)
    totals = {name: sum(s[name] for s in sent.values()) for name in dims}
    for name in dims:
        label = f"{name}: {_kb(totals[name])} per step, all ranks"
        ax.plot([], [], color=COLOURS.get(name, PALETTE[4]), lw=2.5, label=label)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncols=len(dims))
    ax.set_axis_off()
    ax.set_aspect("equal")
    ax.margins(0.15)
    busiest = max(totals, key=totals.get)
    layout = " x ".join(f"{n} {d}" for n, d in zip(shape, dims, strict=True))
    ax.set_title(
        f"{world} ranks as {layout}: {busiest} carries the most, {_kb(totals[busiest])} of "
        f"{_kb(sum(totals.values()))} per step",
        fontsize=9,
    )
    return finished(fig)
