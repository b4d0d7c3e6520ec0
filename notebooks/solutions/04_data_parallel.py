"""Reference solutions for notebook 04's exercises."""

import torch.distributed as dist


def average_gradients(model):
    world = dist.get_world_size()
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= world


def updates_per_epoch(samples, world_size, per_rank_batch):
    return (samples // world_size) // per_rank_batch
