"""Notebook 10's sequence parallel: tensor parallel with the LayerNorm regions sharded along
the sequence (`parallel.sequence_parallel` holds the operators and says why)."""

from __future__ import annotations

from torch import nn

from ..parallel import sequence_parallel as sp
from ..parallel.tensor_parallel import RowParallelLinear
from .model import Transformer
from .tensor_parallel import tensor_parallel_model


class _Apply(nn.Module):
    """An operator as a module: the model calls it where it cuts or joins the sequence, and
    a hook (`network.labels`) can name what it sends."""

    def __init__(self, op):
        super().__init__()
        self.op = op

    def forward(self, x):
        return self.op(x)


def sequence_parallel_model(model: Transformer) -> Transformer:
    """Tensor parallel with the LayerNorm regions sharded along the sequence (inside a
    launched rank). The embedding and the head stay replicated: the sequence is cut after
    the one (`split_sequence`) and joined before the other (`join_sequence`)."""
    split = tensor_parallel_model(model, enter=sp.enter, leave=sp.leave)
    split.split_sequence = _Apply(sp.split)
    split.join_sequence = _Apply(sp.join)
    return split


def sync_sequence_parallel_grads(model: Transformer) -> None:
    """Sum over the ranks, in one message, the gradients of the parameters that act on this
    rank's positions only: every LayerNorm's and the row-parallel layers' biases (added
    after the reduce-scatter)."""
    params = []
    for m in model.modules():
        if isinstance(m, nn.LayerNorm):
            params += [m.weight, m.bias]
        elif isinstance(m, RowParallelLinear):
            params.append(m.bias)
    sp.sum_gradients(params)
