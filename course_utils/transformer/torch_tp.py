"""The same tensor and sequence parallel with PyTorch's own tools (`torch.distributed.tensor`).

A plan names each submodule's style: q, k, v and fc1 `ColwiseParallel`, out and fc2
`RowwiseParallel`, and with sequence parallel the LayerNorms `SequenceParallel`, the
row-parallel outputs left sharded along the sequence (`output_layouts=Shard(1)`) and the
attention's and MLP's inputs gathered back (`PrepareModuleInput`). `parallelize_module`
turns the weights into DTensors and puts the collectives in the module hooks; they go
through `torch.distributed`, not the chapter's `comm`, so they are not in its logs
(`torch.distributed.tensor.debug.CommDebugMode` counts them instead).

On gloo at torch 2.14 all of this runs on the CPU. Parameters keep their names, so the
local shards compare one for one with `tensor_parallel_model`'s.
"""

from __future__ import annotations

import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    PrepareModuleOutput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

from ..ranks.bootstrap import device
from .model import Transformer


def plan(blocks: int, sequence_parallel: bool) -> dict:
    """The parallelize plan for `Transformer`: module name -> style."""
    seq = Shard(1)  # (batch, seq, width)
    styles = {}
    for i in range(blocks):
        b = f"blocks.{i}"
        for name in ("attn.q", "attn.k", "attn.v", "mlp.fc1"):
            styles[f"{b}.{name}"] = ColwiseParallel()
        for name in ("attn.out", "mlp.fc2"):
            styles[f"{b}.{name}"] = RowwiseParallel(output_layouts=seq if sequence_parallel
                                                    else Replicate())  # fmt: skip
        if sequence_parallel:
            for part, norm in (("attn", "ln1"), ("mlp", "ln2")):
                styles[f"{b}.{norm}"] = SequenceParallel()
                styles[f"{b}.{part}"] = PrepareModuleInput(
                    input_layouts=(seq,), desired_input_layouts=(Replicate(),)
                )
    if sequence_parallel:
        styles["split_sequence"] = PrepareModuleOutput(
            output_layouts=Replicate(), desired_output_layouts=seq
        )
        styles["norm"] = SequenceParallel()
        styles["join_sequence"] = PrepareModuleInput(
            input_layouts=(seq,), desired_input_layouts=(Replicate(),), use_local_output=True
        )
    return styles


def torch_parallel_model(model: Transformer, sequence_parallel: bool = False) -> Transformer:
    """`model` (changed in place and returned) split over the launched ranks by
    `parallelize_module`, on a one-dimensional mesh of every rank."""
    mesh = init_device_mesh(device().type, (dist.get_world_size(),))
    return parallelize_module(model, mesh, plan(len(model.blocks), sequence_parallel))
