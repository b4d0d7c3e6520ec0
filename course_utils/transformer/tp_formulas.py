"""What tensor and sequence parallel must put on the wire per block, and what SP saves.

Per block, tensor parallel all-reduces the (batch, seq, width) fp32 activations twice
forward (g after attention and after the MLP) and twice backward (f before them). A ring
all-reduce of n bytes sends 2(N-1)/N n from each rank. Sequence parallel replaces each
all-reduce by a reduce-scatter and an all-gather of the same tensor, each (N-1)/N n:
the same bytes, cut in two.
"""

from __future__ import annotations

from ..core.sizes_model_parallel import TransformerSizes

FP32 = 4


def activation_bytes(sizes: TransformerSizes) -> int:
    """One (batch, seq, width) fp32 activation: what each collective of a block carries."""
    return sizes.batch * sizes.seq_len * sizes.width * FP32


def block_bytes(sizes: TransformerSizes, ranks: int, kind: str) -> dict[str, dict[str, int]]:
    """Bytes one rank sends per block, {direction: {op: bytes}}, for kind "tp" or "sp"."""
    a = activation_bytes(sizes)
    if kind == "tp":
        per_direction = {"all_reduce": 2 * (2 * (ranks - 1) * a // ranks)}
    elif kind == "sp":
        share = (ranks - 1) * a // ranks
        per_direction = {"all_gather": 2 * share, "reduce_scatter": 2 * share}
    else:
        raise ValueError(f"kind={kind!r}: the formulas are for 'tp' and 'sp'.")
    return {"forward": dict(per_direction), "backward": dict(per_direction)}


def sent_per_block(sizes: TransformerSizes, ranks: int, kind: str) -> int:
    """Bytes one rank sends per block, forward and backward together."""
    return sum(sum(ops.values()) for ops in block_bytes(sizes, ranks, kind).values())


def layernorm_bytes_saved(sizes: TransformerSizes, ranks: int) -> int:
    """Activation bytes per rank that sequence parallel no longer keeps: each LayerNorm (two
    per block and the final one) saves its (batch, seq, width) input and its per-position
    mean and 1/std for the backward: whole under TP, 1/N of them under SP."""
    layernorms = 2 * sizes.blocks + 1
    per_layernorm = sizes.batch * sizes.seq_len * (sizes.width + 2) * FP32
    return layernorms * per_layernorm * (ranks - 1) // ranks
