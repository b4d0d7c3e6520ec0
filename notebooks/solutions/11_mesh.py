"""Reference solutions to the exercises of notebook 11 (a 3D mesh and a planner)."""

import torch


def mesh_groups(world_size, shape, dims):
    """Ranks laid out row-major over `shape`; a dimension's groups are the lines along it:
    move that dimension last and cut the rest into rows."""
    layout = torch.arange(world_size).reshape(shape)
    return {name: layout.movedim(d, -1).reshape(-1, shape[d]).tolist()
            for d, name in enumerate(dims)}  # fmt: skip


def memory_per_rank(params, dp, tp, pp, zero_stage, precision):
    """Weights, gradients and Adam's state of a 1/(TP x PP) shard; ZeRO stage 1 also divides
    the optimizer state by DP, stage 2 the gradients, stage 3 the weights."""
    weights, grads, optimizer = {"fp32": (4, 4, 8), "bf16": (2, 2, 12)}[precision]
    shard = params / (tp * pp)
    return shard * (
        weights / (dp if zero_stage >= 3 else 1)
        + grads / (dp if zero_stage >= 2 else 1)
        + optimizer / (dp if zero_stage >= 1 else 1)
    )
