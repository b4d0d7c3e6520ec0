"""Data, pipeline and tensor parallel at once: notebook 10's transformer on a 3D device mesh.

`init_device_mesh` lays the ranks out as (dp, pp, tp) and hands each rank one process
group per dimension. A rank then holds
- the blocks of its pipeline stage (the embedding on the first, the final LayerNorm and the
  head on the last), cut at block boundaries as notebook 06 cuts its MLP;
- of each of those blocks, its tensor-parallel share (Megatron's heads and MLP neurons,
  notebook 10), whose f and g all-reduce over its `tp` group only;
- and trains on its data-parallel replica's share of every batch, in GPipe's order over M
  micro-batches (all forwards, then all backwards) with notebook 06's engine
  (`parallel.pipeline`), its activations and their gradients crossing to the neighbouring
  stage with sends along `pp`; after the backward its gradients are averaged over its `dp`
  group, in one bucket, before the SGD step.
Each piece is one of the course's earlier chapters; what is new is that every collective
runs on one dimension's group, and that one rank plays all three parts.
"""

from __future__ import annotations

import copy
import functools

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from ..parallel.tensor_parallel import f, g
from ..transformer.model import Transformer
from ..transformer.tensor_parallel import TensorParallelAttention, TensorParallelMLP


def stage_blocks(blocks: int, stage: int, stages: int) -> range:
    """The blocks stage `stage` of `stages` holds: consecutive, as even as possible."""
    if not 1 <= stages <= blocks:
        raise ValueError(f"cannot cut {blocks} blocks into {stages} pipeline stages.")
    return range(round(stage * blocks / stages), round((stage + 1) * blocks / stages))


def stage_model(
    full: Transformer, stage: int, stages: int, tp_rank: int, tp_size: int, group=None
) -> Transformer:
    """A copy of `full` that keeps only stage `stage`'s parts, each block split for place
    `tp_rank` of `tp_size`; its collectives run on `group` (None: the parent's twin, which
    only needs the shapes). Every kept parameter keeps its name in `full`, so the twin of a
    trained shard is this function applied to the one-process model."""
    split = copy.deepcopy(full)
    enter, leave = functools.partial(f, group=group), functools.partial(g, group=group)
    mine = stage_blocks(len(full.blocks), stage, stages)
    for i in range(len(split.blocks)):
        if i not in mine:
            split.blocks[i] = nn.Identity()
            continue
        block, place = split.blocks[i], (tp_rank, tp_size)
        block.attn = TensorParallelAttention(block.attn, enter, leave, place)
        block.mlp = TensorParallelMLP(block.mlp, enter, leave, place)
    if stage > 0:
        split.embed = None
    if stage < stages - 1:
        split.norm = split.head = None
    return split


def next_token_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of every position's prediction of the token after it."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def sync_dp(model: nn.Module, group) -> None:
    """Average this rank's gradients over its data-parallel replicas, in one flat bucket."""
    params = list(model.parameters())
    flat = torch.cat([p.grad.flatten() for p in params])
    dist.all_reduce(flat, group=group)
    flat /= dist.get_world_size(group)
    for p, part in zip(params, flat.split([p.numel() for p in params]), strict=True):
        p.grad.copy_(part.view_as(p))
