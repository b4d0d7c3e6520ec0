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


def stage_boundaries(layer_seconds, stages):
    """Dynamic programming over prefixes: the best slowest stage for the first i layers in
    s stages is the least, over where the last stage starts, of the worse of the best for
    the layers before it in s - 1 stages and that last stage's own seconds."""
    n = len(layer_seconds)
    prefix = [0.0]
    for seconds in layer_seconds:
        prefix.append(prefix[-1] + seconds)
    best = {(0, 0): (0.0, None)}  # (layers, stages) -> (slowest stage, where the last began)
    for s in range(1, stages + 1):
        for i in range(s, n + 1):
            best[i, s] = min(
                (max(best[j, s - 1][0], prefix[i] - prefix[j]), j)
                for j in range(s - 1, i)
                if (j, s - 1) in best
            )
    cuts, i = [], n
    for s in range(stages, 1, -1):
        i = best[i, s][1]
        cuts.append(i)
    return cuts[::-1]
