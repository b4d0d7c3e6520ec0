"""Worker functions that run unchanged under `launch` on a laptop and under torchrun on nodes."""

from __future__ import annotations

import os
import socket

import torch
import torch.distributed as dist

from .bootstrap import device


def whoami() -> dict:
    """Where this rank lives: its rank, the group's size, its host, process and backend."""
    return {
        "rank": dist.get_rank(),
        "world_size": dist.get_world_size(),
        "local_rank": int(os.environ.get("LOCAL_RANK", dist.get_rank())),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "backend": dist.get_backend(),
    }


def sum_of_ranks() -> int:
    """Every rank contributes its rank; after all_reduce each holds 0 + 1 + ... + (N-1)."""
    t = torch.tensor([dist.get_rank()], device=device())
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return int(t.item())


def cuda_all_reduce() -> dict:
    """A one on this rank's own GPU, summed over the group: NCCL and CUDA working together."""
    t = torch.ones(1, device=device())
    dist.all_reduce(t)
    torch.cuda.synchronize()
    return {"value": float(t.item()), "device": str(t.device), "name": torch.cuda.get_device_name()}
