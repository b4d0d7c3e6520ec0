"""The planner with controls: the fastest layouts' step times by part, and their memory.

With ipympl (`%matplotlib widget`) the picture redraws as the controls move and the
stored output keeps a PNG of the first view; without it, that first view alone is shown
as a plain picture (as `memory.calculator` and `allreduce.dial` do).
"""

from __future__ import annotations

from ..core.style import PALETTE, pyplot
from ..core.widgets import draw, live_figure, show_controls
from .plan_model import MODEL_PRESETS, cluster, model
from .planner import Plan, layouts, plan

PARTS = ("compute", "tp", "pp", "bubble", "dp")
LABELS = {"compute": "compute", "tp": "TP collectives", "pp": "PP hand-offs",
          "bubble": "bubble", "dp": "exposed DP/FSDP"}  # fmt: skip


def draw_plan(fig, result: Plan, top: int = 8) -> None:
    """Two panels: the `top` fastest layouts' predicted step time stacked by part, and each
    one's memory per rank against the GPU's; the pick is drawn first and named in bold."""
    fig.clear()
    time_ax, mem_ax = fig.subplots(1, 2, sharey=True, width_ratios=(3, 1.3))
    shown = result.layouts[:top][::-1]
    names = [c.name for c in shown]
    left = [0.0] * len(shown)
    for i, part in enumerate(PARTS):
        widths = [getattr(c.time, part) for c in shown]
        time_ax.barh(names, widths, left=left, color=PALETTE[i], label=LABELS[part])
        left = [a + b for a, b in zip(left, widths, strict=True)]
    mem_ax.barh(names, [c.memory.total / 1e9 for c in shown], color=PALETTE[5])
    mem_ax.axvline(result.cluster.memory_bytes / 1e9, color="grey", ls=":", lw=1)
    for label in time_ax.get_yticklabels():
        if result.pick and label.get_text() == result.pick.name:
            label.set_fontweight("bold")
    time_ax.set_xlabel("predicted step time (s)")
    mem_ax.set_xlabel("GB per rank (line: one GPU)")
    handles, labels = time_ax.get_legend_handles_labels()  # below the panels, off the bars
    fig.legend(handles, labels, loc="lower center", ncols=len(PARTS), fontsize=7, frameon=False)
    m, c = result.model, result.cluster
    if result.pick:
        title = (
            f"{m.name} on {c.name} ({c.gpus} GPUs, {result.precision}): pick "
            f"{result.pick.name}, {result.pick.time.total:.3g} s; "
            f"{len(result.layouts)} fit, {len(result.rejected)} do not"
        )
    else:
        title = f"{m.name} on {c.name}: no layout fits ({len(result.rejected)} tried)"
    fig.suptitle(title, fontsize=9)
    fig.tight_layout(rect=(0, 0.05, 1, 1))


def plannable_nodes(model_name: str, gpus_per_node: int, kind: str, most: int = 128) -> list[int]:
    """The node counts up to `most` on which some DP x TP x PP layout uses every GPU: the
    others (9 nodes of 8 GPUs for Llama-3 8B, whose global batch DP must divide) have no
    layout to plan, so the slider does not offer them."""
    return [
        n
        for n in range(1, most + 1)
        if layouts(model(model_name), cluster(f"{n}x{gpus_per_node}:{kind}"))
    ]


def planner_widget(
    model_name: str = "llama3-8b",
    nodes: int = 8,
    gpus_per_node: int = 8,
    memory_gb: float = 80.0,
    precision: str = "bf16",
    kind: str = "h100",
    top: int = 8,
):
    """Controls for the model, the cluster's size and memory, and the precision, over the
    planner's picture; returns the control box (None without ipympl)."""
    from IPython.display import display

    def planned(name, n, g, mem, prec):
        return plan(model(name), cluster(f"{n}x{g}:{kind}", memory_gb=mem), prec)

    first = planned(model_name, nodes, gpus_per_node, memory_gb, precision)
    fig = live_figure((9.0, 4.2))
    if fig is None:
        plt = pyplot()
        with plt.ioff():
            fig = plt.figure(figsize=(9.0, 4.2))
        draw_plan(fig, first, top)
        plt.close(fig)
        display(fig)
        return None
    import ipywidgets as w

    controls = {
        "model": w.Dropdown(options=list(MODEL_PRESETS), value=model_name, description="model"),
        "nodes": w.SelectionSlider(
            options=plannable_nodes(model_name, gpus_per_node, kind),
            value=nodes,
            description="nodes",
        ),
        "gpus": w.Dropdown(options=[1, 2, 4, 8], value=gpus_per_node, description="GPUs/node"),
        "memory": w.FloatSlider(value=memory_gb, min=8, max=192, step=8, description="GB/GPU"),
        "precision": w.Dropdown(options=["bf16", "fp32"], value=precision, description="precision"),
    }

    offering = []  # set while the node counts change: their own events redraw nothing

    def redraw(change=None):
        if offering:
            return
        if change is not None and change["owner"] in (controls["model"], controls["gpus"]):
            offering.append(True)
            wanted, nodes_control = controls["nodes"].value, controls["nodes"]
            nodes_control.options = plannable_nodes(
                controls["model"].value, controls["gpus"].value, kind
            )  # the nearest count it can plan stays chosen
            nodes_control.value = min(nodes_control.options, key=lambda n: abs(n - wanted))
            offering.clear()
        v = {k: c.value for k, c in controls.items()}
        try:
            result = planned(v["model"], v["nodes"], v["gpus"], v["memory"], v["precision"])
        except ValueError as exc:  # e.g. no DP x TP x PP uses exactly these GPUs
            fig.clear()
            fig.text(0.5, 0.5, str(exc), ha="center", va="center", wrap=True, fontsize=9)
        else:
            draw_plan(fig, result, top)
        draw(fig)

    return show_controls(controls, fig, redraw)
