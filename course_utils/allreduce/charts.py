"""Charts for the collectives notebook: rounds of an allreduce, ping-pong, bytes, timings."""

from __future__ import annotations

import math

from ..core.style import PALETTE, finished, new_figure, pyplot
from .algorithms import ALGORITHMS, POWER_OF_TWO

_OURS = [*ALGORITHMS, *POWER_OF_TWO]
_NAMES = {**{name: name.replace("_", " ") for name in _OURS}, "builtin": "dist.all_reduce"}
# dist.all_reduce is the yardstick: drawn grey and dotted, beneath the algorithms, so that the
# ring it runs close to stays visible on top; a model is a pale band under its data
BUILTIN = {"color": "0.45", "ls": ":", "marker": "x", "lw": 1.5, "zorder": 1}
MODEL_BAND = {"ls": "-", "lw": 5, "alpha": 0.25, "zorder": 0}


def _style(name: str, colour) -> dict:
    """How one algorithm's measured line is drawn: on top, or the built-in's yardstick."""
    if name == "builtin":
        return BUILTIN
    return {"color": colour, "ls": "-", "marker": "o", "lw": 1, "zorder": 3}


def _label(name: str) -> str:
    return _NAMES.get(name, name)


def legend_outside(ax, fontsize: float = 7) -> None:
    """The legend right of the axes, where it covers no line; `tight_layout` makes room."""
    ax.legend(fontsize=fontsize, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)


def allreduce_round(traces: list, index: int, ax=None, title: str | None = None):
    """One round of a traced allreduce: each rank's values as a row of cells, arrows for
    the messages of this round, and the cells each message carried outlined.

    `traces` are per-rank `collectives.Trace` objects with values kept; round 0 is the start.
    """
    from matplotlib.patches import FancyArrowPatch, Rectangle  # on the first chart, as pyplot

    own = ax is None
    if own:
        fig, (ax,) = new_figure(width=6.0, height=0.5 * len(traces) + 1.6)
    fig = ax.figure
    world = len(traces)
    values = _values_at(traces, index)
    width = len(values[0])
    total = sum(v[0] for v in _values_at(traces, 0)) or 1
    cmap = pyplot().get_cmap("cividis")
    for rank, row in enumerate(values):
        y = world - 1 - rank
        for col, value in enumerate(row):
            ax.add_patch(Rectangle((col, y), 1, 0.8, color=cmap(0.15 + 0.7 * value / total)))
            shade = "white" if value / total < 0.6 else "black"
            ax.text(col + 0.5, y + 0.4, _number(value), ha="center", va="center", color=shade)
        ax.text(-0.3, y + 0.4, f"rank {rank}", ha="right", va="center")
    for rank, tr in enumerate(traces):
        for k, (peer, start, stop) in enumerate(tr.rounds[index].sends):
            colour = PALETTE[rank % len(PALETTE)]
            y0, y1 = world - 1 - rank + 0.4, world - 1 - peer + 0.4
            ax.add_patch(
                Rectangle((start, y0 - 0.4), stop - start, 0.8, fill=False, lw=2.5, ec=colour)
            )
            bend = -0.3 - 0.1 * k if y1 < y0 else 0.3 + 0.1 * k
            ax.add_patch(
                FancyArrowPatch(
                    (width + 0.1, y0),
                    (width + 0.1, y1),
                    connectionstyle=f"arc3,rad={bend}",
                    arrowstyle="-|>",
                    mutation_scale=12,
                    lw=1.6,
                    color=colour,
                )
            )
    ax.set_xlim(-1.6, width + 0.6 + 0.25 * world)
    ax.set_ylim(-0.3, world)
    ax.set_axis_off()
    ax.set_title(title or f"round {index}: {traces[0].rounds[index].label}", fontsize=9)
    return finished(fig) if own else fig


def _values_at(traces: list, index: int) -> list[list]:
    """Each rank's values after round `index` (0 = before anything was sent)."""
    return [tr.rounds[index].value.tolist() for tr in traces]


def allreduce_rounds(traces: list, name: str, columns: int = 4):
    """Every round of a traced allreduce side by side: the static picture of the step-through."""
    count = len(traces[0].rounds)
    cols = min(columns, count)
    rows = math.ceil(count / cols)
    fig, axes = new_figure(cols, rows, width=3.4, height=0.42 * len(traces) + 1.0)
    for index, ax in enumerate(axes):
        if index < count:
            label = traces[0].rounds[index].label.split(":")[0]
            allreduce_round(traces, index, ax=ax, title=f"round {index}: {label}")
        else:
            ax.set_axis_off()
    start, end = _values_at(traces, 0), _values_at(traces, count - 1)
    total = [sum(column) for column in zip(*start, strict=True)]
    summed = sum(row == total for row in end)
    holds = "every rank holds" if summed == len(traces) else f"{summed} of {len(traces)} hold"
    fig.suptitle(
        f"{_label(name)} on {len(traces)} ranks: {holds} the sum after {count - 1} rounds",
        fontsize=11,
    )
    return finished(fig)


def _number(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def pingpong_fit(nbytes: list, seconds: list, model, subtitle: str = ""):
    """Ping-pong times with the fitted alpha + n * beta line over them."""
    fig, (ax,) = new_figure(width=6.0)
    ax.loglog(nbytes, seconds, "o", color=PALETTE[0], label="measured (one way)")
    grid = [nbytes[0] * (nbytes[-1] / nbytes[0]) ** (i / 50) for i in range(51)]
    ax.loglog(grid, [model.message_seconds(n) for n in grid], "--", color=PALETTE[3])
    ax.axvline(model.alpha / model.beta, color="grey", lw=1, ls=":")
    ax.plot([], [], "--", color=PALETTE[3], label="alpha + n * beta")
    ax.plot([], [], ":", color="grey", label="alpha = n * beta")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("time (s)")
    ax.set_title(
        f"fitted α = {model.alpha * 1e3:.2f} ms, {8e-6 / model.beta:,.0f} Mbit/s: latency and "
        f"bandwidth cost the same at {model.alpha / model.beta:,.0f} bytes\n{subtitle}",
        fontsize=9,
    )
    ax.legend(loc="upper left")  # the curve rises to the right: this corner stays empty
    return finished(fig)


def bytes_per_rank_bars(table: dict, floor: dict):
    """Bytes the busiest rank sends, as multiples of the message, per algorithm and N.

    `table`: {algorithm: {world_size: multiple}}; `floor`: {world_size: 2(N-1)/N}.
    """
    fig, (ax,) = new_figure(width=6.5)
    worlds = sorted(floor)
    width = 0.8 / len(table)
    for i, (name, row) in enumerate(table.items()):
        xs = [k + (i - (len(table) - 1) / 2) * width for k in range(len(worlds))]
        ax.bar(xs, [row[n] for n in worlds], width, color=PALETTE[i], label=_label(name))
    ax.plot(range(len(worlds)), [floor[n] for n in worlds], "k_", ms=40, mew=2)
    ax.plot([], [], "k-", lw=2, label="floor 2(N-1)/N")  # the legend's sample, not 40 pt wide
    ax.set_xticks(range(len(worlds)), [f"N = {n}" for n in worlds])
    ax.set_ylabel("bytes sent by the busiest rank / message size")
    on_floor = [  # uneven chunks put a rank up to one element per chunk over the floor
        _label(name)
        for name, row in table.items()
        if all(row[n] <= floor[n] * 1.01 for n in worlds)
    ]
    if not on_floor:
        title = "Every algorithm's busiest rank sends more than the floor"
    else:
        who = "Only the " + on_floor[0] if len(on_floor) == 1 else ", ".join(on_floor)
        title = f"{who} send{'s' if len(on_floor) == 1 else ''} no more than the floor at every N"
        every = [n for n in worlds if all(row[n] <= floor[n] * 1.01 for row in table.values())]
        if every and len(on_floor) < len(table):
            title += f";\nat N = {', '.join(map(str, every))} every algorithm does"
    ax.set_title(title)
    legend_outside(ax, fontsize=8)
    return finished(fig)


def allreduce_timings(nbytes: list, measured: dict, predicted: dict, subtitle: str = ""):
    """Measured allreduce times (markers) over the alpha-beta predictions (pale bands).

    `measured`: {world_size: {algorithm: [seconds per size]}}, `predicted` likewise; one
    panel per world size given. The title says who wins at each end, from the data.
    """
    worlds = sorted(measured)
    fig, axes = new_figure(len(worlds), width=4.4, height=3.8)
    for ax, world in zip(axes, worlds, strict=True):
        for i, (name, times) in enumerate(measured[world].items()):
            style = _style(name, PALETTE[i])
            ax.loglog(nbytes, times, ms=4, label=_label(name), **style)
            if name in predicted.get(world, {}):
                ax.loglog(nbytes, predicted[world][name], color=style["color"], **MODEL_BAND)
        ax.set_title(f"N = {world} ranks", fontsize=10)
        ax.set_xlabel("message size (bytes)")
    axes[0].set_ylabel("time per allreduce (s)")
    axes[-1].plot([], [], color="0.5", label="model (pale band)", **MODEL_BAND)
    legend_outside(axes[-1])
    ours = {k: v for k, v in measured[worlds[-1]].items() if k in _OURS}
    first, last = (min(ours, key=lambda k, i=i: ours[k][i]) for i in (0, -1))
    fig.suptitle(
        f"On {worlds[-1]} ranks the {_label(first)} is fastest for the smallest message, "
        f"the {_label(last)} for the largest\n{subtitle}",
        fontsize=10,
    )
    return finished(fig)
