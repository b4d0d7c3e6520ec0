"""The runs every sharded one must agree with: one process in fp64, and torch's own DDP.

Equal parameters between two sharded runs can be a coincidence of arithmetic (on 2 ranks
a + b = b + a); agreement with one process that trains the same MLP on the whole global
batch in fp64 cannot. fp32 training itself drifts from fp64 (Adam divides by small
numbers), so a run is held to the one-process fp32 run's own distance from fp64.
`torch_ddp` is `torch.nn.parallel.DistributedDataParallel`, beside the hand-written DDP.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from ..ranks.bootstrap import device
from ..ranks.launch import launch
from .zero import mlp, rank_share


def _flat(model) -> torch.Tensor:
    """Weight then bias of each layer, flat: the order of ZeRO's buffers."""
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).cpu()


def one_process(widths, x, y, lr: float, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Adam on the whole global batch of every step (x[s], y[s]), in `dtype`."""
    model = mlp(widths).to(dtype)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for s in range(x.shape[0]):
        optimizer.zero_grad()
        F.cross_entropy(model(x[s].to(dtype)), y[s]).backward()
        optimizer.step()
    return _flat(model)


def _ddp_on_rank(widths, x, y, lr: float) -> torch.Tensor:
    model = DistributedDataParallel(mlp(widths).to(device()))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    part = rank_share(x.shape[1])
    for s in range(x.shape[0]):
        optimizer.zero_grad()
        F.cross_entropy(model(x[s, part].to(device())), y[s, part].to(device())).backward()
        optimizer.step()
    return _flat(model.module)


def torch_ddp(widths, world_size: int, x, y, lr: float, timeout: float = 120.0) -> torch.Tensor:
    """Rank 0's parameters after torch's DDP trained on every step's global batch."""
    return launch(_ddp_on_rank, world_size, backend="gloo", args=(widths, x, y, lr),
                  timeout=timeout)[0]  # fmt: skip
