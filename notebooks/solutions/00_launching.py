"""Reference solution for notebook 00's exercise."""

import torch
import torch.distributed as dist


def largest_square():
    t = torch.tensor([(dist.get_rank() + 1) ** 2])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())
