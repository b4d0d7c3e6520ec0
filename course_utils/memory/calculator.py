"""A memory calculator: bytes per rank for a model size, ranks, ZeRO stage, precision, recompute.

`per_rank_bytes` is the formula (`formulas.model_state_bytes`) plus the activations,
which checkpointing shrinks by the share the notebook measured. `memory_calculator` shows it
for a transformer with sliders, its activations from the batch, sequence, width and layers
(`formulas.block_activation_bytes`), against one GPU's memory: with ipympl the picture
redraws as they move, and the stored output keeps a PNG of the first view for the web and
nbval; without ipympl it shows that picture alone.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..core.widgets import draw, live_figure, show_controls
from . import charts
from .formulas import (
    PRECISIONS,
    block_activation_bytes,
    model_state_bytes,
    per_parameter,
    working_set_bytes,
)
from .zero import STAGES


def per_rank_bytes(
    params: float,
    ranks: int,
    stage: int,
    precision: str = "mixed",
    activations: float = 0.0,
    checkpointing: bool = False,
    kept: float = 1.0,
    largest_layer: float = 0.0,
) -> dict:
    """Bytes one rank holds at a step's peak, by kind: the model state, the activations
    (per rank; times `kept` when checkpointing, the share of the peak's activation bytes
    that checkpointing every block left), and, given the parameters of the largest layer,
    the working set of gathered layers, full gradients and Adam's temporaries
    (`formulas.working_set_bytes`). Without `largest_layer`: what it holds between steps
    plus the activations."""
    parts = model_state_bytes(params, ranks, stage, precision, parts=True)
    parts["activations"] = activations * (kept if checkpointing else 1.0)
    grad_bytes = per_parameter(precision)[1]
    parts["working set"] = (
        working_set_bytes(ranks, stage, largest_layer, parts["activations"], grad_bytes=grad_bytes)
        if largest_layer
        else 0.0
    )
    return parts


@dataclass(frozen=True)
class Transformer:
    """What the calculator asks of a model: its size, and the shape its activations follow.
    The defaults are a Llama-2-7B-like model (32 blocks of width 4096, 32 heads) on one
    sequence of 2,048 tokens per rank."""

    params: float = 7e9
    layers: int = 32
    hidden: int = 4096
    heads: int = 32
    seq: int = 2048
    batch: int = 1

    def activation_bytes(self, checkpointing: bool) -> float:
        """One rank's activations, every block by Korthikanti et al.'s count (16-bit);
        checkpointing every block keeps only its input."""
        recompute = "full" if checkpointing else "none"
        args = (self.seq, self.batch, self.hidden, self.heads, recompute)
        return self.layers * block_activation_bytes(*args)


def _picture(model: Transformer, ranks, stage, precision, checkpointing, gpu_gb, ax=None):
    activations = model.activation_bytes(checkpointing)
    by_stage = {s: per_rank_bytes(model.params, ranks, s, precision, activations) for s in STAGES}
    total = sum(by_stage[stage].values()) / 1e9
    title = (
        f"{model.params:.3g} parameters, {ranks} ranks, {precision}, {model.batch} x "
        f"{model.seq} tokens: {total:.3g} GB per rank"
    )
    return charts.state_by_stage(by_stage, chosen=stage, ax=ax, title=title, limit_gb=gpu_gb)


def memory_calculator(
    model: Transformer | None = None,
    ranks: int = 8,
    stage: int = 3,
    precision: str = "mixed",
    checkpointing: bool = False,
    gpu_gb: float = 80.0,
):
    """Sliders for the model, its batch and the setup; the bytes per rank at every stage
    against one GPU's memory (`gpu_gb`, drawn as a line)."""
    from IPython.display import display

    model = model or Transformer()
    fig = live_figure((6.5, 3.8))
    if fig is None:
        display(_picture(model, ranks, stage, precision, checkpointing, gpu_gb))
        return None
    import ipywidgets as w

    controls = {
        # a step of 0.001 in the exponent: 7e9 stays 7.00e9 (the default 0.2 snaps it to 6.31e9)
        "params": w.FloatLogSlider(
            value=model.params,
            base=10,
            min=6,
            max=12,
            step=0.001,
            readout_format=".3g",
            description="parameters",
        ),  # fmt: skip
        "ranks": w.IntSlider(value=ranks, min=1, max=1024, description="ranks"),
        "stage": w.IntSlider(value=stage, min=0, max=3, description="ZeRO stage"),
        "precision": w.Dropdown(options=list(PRECISIONS), value=precision, description="precision"),
        "batch": w.IntSlider(value=model.batch, min=1, max=64, description="batch/rank"),
        "seq": w.Dropdown(
            options=[512, 1024, 2048, 4096, 8192], value=model.seq, description="sequence"
        ),
        "layers": w.IntSlider(value=model.layers, min=1, max=128, description="layers"),
        "hidden": w.Dropdown(
            options=[1024, 2048, 4096, 8192, 16384], value=model.hidden, description="width"
        ),
        "checkpointing": w.Checkbox(value=checkpointing, description="checkpointing"),
    }

    def redraw(*_):
        fig.clear()
        c = {k: v.value for k, v in controls.items()}
        shape = {k: c[k] for k in ("params", "layers", "hidden", "batch", "seq")}
        chosen = replace(model, **shape)
        _picture(
            chosen, c["ranks"], c["stage"], c["precision"], c["checkpointing"], gpu_gb,
            ax=fig.add_subplot(),
        )  # fmt: skip
        draw(fig)

    return show_controls(controls, fig, redraw)
