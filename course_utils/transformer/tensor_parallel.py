"""Megatron-LM's tensor parallel (Shoeybi et al. 2019) on notebook 10's transformer.

In each block the attention's heads and the MLP's hidden neurons are split over the N
ranks. The column-parallel layers (q, k, v; fc1) hold some output neurons, so their
output is a slice that the head-wise attention or the element-wise GELU can use as it is;
the row-parallel layer after them (out; fc2) holds the matching inputs and produces a
partial sum. f at each region's entry and g at its exit (`parallel.tensor_parallel`) make
a block cost two all-reduces of the (batch, seq, width) activations forward and two
backward; everything outside the regions (LayerNorms, residuals, embeddings, head) runs
replicated, identical on every rank.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
import torch.distributed as dist
from torch import nn

from ..parallel.tensor_parallel import ColumnParallelLinear, RowParallelLinear, f, g, share
from .model import MLP, Attention, Transformer

Op = Callable[[torch.Tensor], torch.Tensor]


class TensorParallelAttention(Attention):
    """Heads split over the ranks: q, k, v column-parallel (whole heads each), `out`
    row-parallel over the same heads; `enter`/`leave` are f/g or their SP twins. `place`:
    this rank's index among the ranks the heads are split over, and how many they are."""

    def __init__(self, full: Attention, enter: Op, leave: Op, place: tuple[int, int]):
        nn.Module.__init__(self)
        self.head_dim = full.head_dim
        heads = share(full.q.out_features // full.head_dim, "attention heads", place)
        mine = slice(heads.start * self.head_dim, heads.stop * self.head_dim)
        self.q, self.k, self.v = (ColumnParallelLinear(p, mine) for p in (full.q, full.k, full.v))
        self.out = RowParallelLinear(full.out, mine, leave)
        self.enter = enter

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(self.enter(x))


class TensorParallelMLP(MLP):
    """fc1 column-parallel, GELU on this rank's hidden neurons, fc2 row-parallel."""

    def __init__(self, full: MLP, enter: Op, leave: Op, place: tuple[int, int]):
        nn.Module.__init__(self)
        mine = share(full.fc1.out_features, "MLP hidden neurons", place)
        self.fc1 = ColumnParallelLinear(full.fc1, mine)
        self.fc2 = RowParallelLinear(full.fc2, mine, leave)
        self.enter = enter

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(self.enter(x))


def tensor_parallel_model(model: Transformer, enter: Op = f, leave: Op = g) -> Transformer:
    """A copy of `model` in which every block's attention and MLP hold this rank's share
    of the weights (run inside a launched rank). Parameters keep their names, so a
    one-process model passed through this function again gives the shards to compare with.

    `enter`/`leave` are the operators at each region's ends: f and g here, sequence
    parallel's all-gather and reduce-scatter there."""
    split = copy.deepcopy(model)
    place = (dist.get_rank(), dist.get_world_size())
    for block in split.blocks:
        block.attn = TensorParallelAttention(block.attn, enter, leave, place)
        block.mlp = TensorParallelMLP(block.mlp, enter, leave, place)
    return split
