"""Worker functions that run unchanged under `launch` on a laptop and under torchrun on nodes."""

from __future__ import annotations

import os
import socket

import torch
import torch.distributed as dist

from .bootstrap import device


def whoami() -> dict:
    """Where this rank lives: its rank, the group's size, its node (torchrun's GROUP_RANK; 0
    under `launch`), its rank on that node, its host, process, parent process and backend."""
    return {
        "rank": dist.get_rank(),
        "world_size": dist.get_world_size(),
        "node_rank": int(os.environ.get("GROUP_RANK", 0)),
        "local_rank": int(os.environ.get("LOCAL_RANK", dist.get_rank())),
        "parent_pid": os.getppid(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "backend": dist.get_backend(),
    }


def spread_over_nodes(ranks: list[dict], nnodes: int, per_node: int):
    """`whoami` results of a job that really ran on `nnodes` agents of `per_node` ranks each:
    every (node rank, local rank) pair once, and one parent process (an agent) per node."""
    from ..core.checks import verdict

    places = sorted((r["node_rank"], r["local_rank"]) for r in ranks)
    wanted = [(n, k) for n in range(nnodes) for k in range(per_node)]
    agents = {r["node_rank"]: r["parent_pid"] for r in ranks}
    one_agent_per_node = len(set(agents.values())) == nnodes and all(
        agents[r["node_rank"]] == r["parent_pid"] for r in ranks
    )
    return verdict(
        places == wanted and one_agent_per_node,
        f"the job ran on {nnodes} torchrun agents: {per_node} local rank(s) on each of node "
        f"ranks 0 to {nnodes - 1}, and one parent process per node",
    )


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
