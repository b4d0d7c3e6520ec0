"""The bytes each rank holds and sends, from the ZeRO paper's formulas (notebook 08).

Rajbhandari et al. (2020): with Ψ parameters, p bytes per parameter, g per gradient and
k of optimizer state, one data-parallel rank holds (p + g + k)Ψ. ZeRO-1 divides the
k part by the N ranks, ZeRO-2 the g part too, ZeRO-3 all three. Mixed-precision Adam
(Micikevicius et al. 2018) has p = g = 2 (bf16 or fp16) and k = 12 (an fp32 master copy
and two fp32 moments): 16 bytes per parameter. Plain fp32 Adam has p = g = 4 and k = 8.
"""

from __future__ import annotations

from ..core.own_answers import own_answer

# bytes per parameter: (weights, gradients, optimizer state)
PRECISIONS = {"fp32": (4, 4, 8), "mixed": (2, 2, 12)}


def per_parameter(precision: str = "fp32") -> tuple[int, int, int]:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}.")
    return PRECISIONS[precision]


@own_answer("model-state formula")
def model_state_bytes(
    numel: int, world: int, stage: int, precision: str = "fp32", parts: bool = False
):
    """Bytes of weights, gradients and Adam state on one rank at a ZeRO stage (0 = DDP)."""
    p, g, k = per_parameter(precision)
    shared = {
        "params": p * numel / (world if stage >= 3 else 1),
        "grads": g * numel / (world if stage >= 2 else 1),
        "optimizer": k * numel / (world if stage >= 1 else 1),
    }
    return shared if parts else sum(shared.values())


def comm_multiple(stage: int, world: int) -> float:
    """Bytes each rank sends per step, in units of the model's bytes Ψ.

    The ring's reduce-scatter and all-gather each send (N-1)/N of the model: DDP's
    all-reduce and ZeRO-1/2's reduce-scatter + all-gather are 2(N-1)/N; ZeRO-3 gathers
    once more for backward, 3(N-1)/N. The paper rounds these to 2Ψ and 3Ψ.
    """
    return (3 if stage == 3 else 2) * (world - 1) / world


# Full-size copies of the largest layer alive at once in backward, beyond the activations,
# read off `zero.py` and confirmed where the allocator's peak fell (`peak.py`): autograd's
# weight-gradient product (every stage); stage 2 also the flat copy it reduce-scatters;
# stage 3 also the layer it gathered to compute with (plus a chunk: `peak_bytes`).
LAYER_COPIES_IN_BACKWARD = {0: 1, 1: 1, 2: 2, 3: 3}


def adam_temporaries(stepped: list[float]) -> float:
    """The most bytes torch.optim.Adam (one tensor at a time, as on a CPU) allocates at
    once, for tensors of these sizes stepped in this order: the square root and the
    denominator of the tensor it steps, while the previous tensor's denominator is still
    referenced. Equal layers make it 3 tensors' worth; a weight after its small bias, 2."""
    return max(
        (2 * size + (stepped[i - 1] if i else 0) for i, size in enumerate(stepped)), default=0
    )


def working_set_bytes(
    world: int,
    stage: int,
    largest_layer: float,
    activations: float,
    stepped: list[float] | None = None,
    grad_bytes: int = 4,
    in_backward: float = 0.0,
) -> float:
    """What a step holds at its worst moment beyond the model state and the activations.

    The worse of two moments. In backward: full-size copies of the largest layer's
    gradient or weights (`LAYER_COPIES_IN_BACKWARD`, `grad_bytes` each per parameter;
    ZeRO-3 also keeps the 1/N chunk it divides) on top of the activations. In the optimizer
    step, after the activations are freed: Adam's temporaries (`adam_temporaries`) of the
    fp32 tensors it steps, in order (`stepped`, bytes; by default the largest: a whole
    layer after a small bias for DDP, equal 1/N chunks when sharded). `in_backward`: other
    bytes held only during the backward (a pipeline stage's hand-off buffers).
    """
    layer = grad_bytes * largest_layer
    backward = LAYER_COPIES_IN_BACKWARD[stage] * layer + (layer / world if stage == 3 else 0)
    backward += in_backward
    if stepped is None:  # DDP steps a weight after its small bias; shards are equal chunks
        stepped = [4 * largest_layer] if stage == 0 else [4 * largest_layer / world] * 2
    return max(backward, adam_temporaries(stepped) - activations)


def peak_bytes(
    numel: int,
    world: int,
    stage: int,
    largest_layer: float,
    activations: float,
    stepped: list[float] | None = None,
) -> float:
    """The most bytes one rank holds during an fp32 Adam step at a ZeRO stage
    (`largest_layer`: the parameters of the largest layer): the paper's model state, the
    activations, and the working set (`working_set_bytes`). The state is what fits between
    steps; the rest is what makes a model that fits run out during one. It counts every
    activation as alive when the largest layer's gradient is made, so it over-states a
    model whose activations are large against that layer (by a fifth for widths 40, 7, 10).
    """
    held = model_state_bytes(numel, world, stage)
    return held + activations + working_set_bytes(world, stage, largest_layer, activations, stepped)


def accounting(pairs: list[tuple[float, float]], tolerance: float, formula: str) -> str:
    """One line for (measured, formula) pairs where the formula is what the same code
    implements: an accounting identity, shown beside its table rather than ticked."""
    near = sum(abs(got / want - 1) <= tolerance for got, want in pairs)
    return f"accounting: {near} of {len(pairs)} rows within {tolerance:.0%} of {formula}"


def layout_pairs(rows: list[dict], precision: str) -> list[tuple[float, float]]:
    """(measured, formula) bytes per parameter of each row's weights, gradients and
    optimizer state, against the layout of `precision`."""
    return [
        (row[key] / row["numel"], want)
        for row in rows
        for key, want in zip(("params", "grads", "optimizer"), PRECISIONS[precision], strict=True)
    ]


def block_activation_bytes(
    seq: int, batch: int, hidden: int, heads: int, recompute: str = "none", tp: int = 1
) -> float:
    """Bytes of 16-bit activations one transformer block keeps for its backward
    (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
    Models", eq. 1-2, Table 2): s·b·h·(34 + 5·a·s/h) without recomputation; selective
    recomputation of attention keeps 34·s·b·h, full recomputation only the block's input,
    2·s·b·h; all divided by t under tensor and sequence parallelism."""
    per_token = {"none": 34 + 5 * heads * seq / hidden, "selective": 34, "full": 2}[recompute]
    return seq * batch * hidden * per_token / tp
