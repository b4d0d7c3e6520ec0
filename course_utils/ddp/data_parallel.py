"""`nn.DataParallel` (one process driving every GPU) against one GPU: why the course uses DDP."""

from __future__ import annotations

import torch
from torch import nn

from ..core.gpus import visible_gpus
from ..core.training import Recipe, train
from ..ranks.launch import launch
from .equivalence import Setup, build_model, load_data


def data_parallel_vs_one_device(setup: Setup | None = None, batch: int = 512, steps: int = 50):
    """`nn.DataParallel` over every visible GPU against one GPU; None with fewer than two.

    One process drives all GPUs: each step scatters the batch, copies the model to every
    GPU and gathers the results on the first, which DDP's one process per GPU avoids.
    """
    if visible_gpus().count < 2:  # counted without starting CUDA in the notebook's kernel
        return None
    setup = setup or Setup()
    load_data(setup)
    return launch(_data_parallel_vs_one_device, 1, backend="gloo", args=(setup, batch, steps))[0]


def _data_parallel_vs_one_device(setup: Setup, batch: int, steps: int) -> dict:
    """In a rank of its own, so that CUDA starts there and never in the kernel."""
    d = load_data(setup)
    x, y = (t[:batch].to("cuda:0") for t in d.train.tensors)

    def ms_per_step(model) -> float:
        history = train(model, [(x, y)], Recipe(max_steps=steps + 5, lr=0.01), clock_after=5)
        return 1000 * history.phases.seconds / steps

    one = ms_per_step(build_model(setup, d, "cuda:0"))
    many = ms_per_step(nn.DataParallel(build_model(setup, d, "cuda:0")))
    return {"gpus": torch.cuda.device_count(), "one_device_ms": one, "data_parallel_ms": many}
