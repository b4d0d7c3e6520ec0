"""The bytes each rank holds and sends, from the ZeRO paper's formulas (notebook 08).

Rajbhandari et al. (2020): with Ψ parameters, p bytes per parameter, g per gradient and
k of optimizer state, one data-parallel rank holds (p + g + k)Ψ. ZeRO-1 divides the
k part by the N ranks, ZeRO-2 the g part too, ZeRO-3 all three. Mixed-precision Adam
(Micikevicius et al. 2018) has p = g = 2 (bf16 or fp16) and k = 12 (an fp32 master copy
and two fp32 moments): 16 bytes per parameter. Plain fp32 Adam has p = g = 4 and k = 8.
"""

from __future__ import annotations

__all__ = ["PRECISIONS", "comm_multiple", "model_state_bytes", "per_parameter"]

# bytes per parameter: (weights, gradients, optimizer state)
PRECISIONS = {"fp32": (4, 4, 8), "mixed": (2, 2, 12)}


def per_parameter(precision: str = "fp32") -> tuple[int, int, int]:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}.")
    return PRECISIONS[precision]


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
