"""Parameter averaging: workers train alone and meet only to average their weights.

Local SGD averages every H steps, so a run of T steps costs T/H communication rounds
instead of T; H = None averages once, after training (the blog's parallel SGD). The
average goes through a server (`parameter_server_allreduce`), as in the overview article.
Averaging works only while the replicas stay near each other: from one starting point
they do, from different random starts their neurons do not line up and the average fails.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.nn.utils import parameters_to_vector

from ..allreduce.algorithms import parameter_server_allreduce
from ..core.models import build
from ..ranks.launch import launch
from .server import gradient, worker_batches


@dataclass(frozen=True)
class AveragingConfig:
    workers: int = 3
    steps: int = 200  # local updates per worker
    lr: float = 0.1
    batch_size: int = 32
    model: str = "mlp"
    hidden: int = 64
    seed: int = 0
    timeout: float = 60.0


def _average(params: torch.Tensor) -> None:
    parameter_server_allreduce(params)
    params.div_(dist.get_world_size())


def _local_sgd_node(cfg: AveragingConfig, average_every, same_start, train, shape, classes):
    rank = dist.get_rank()
    seed = cfg.seed if same_start else cfg.seed + 1000 * (rank + 1)
    model = build(cfg.model, shape, classes, hidden=cfg.hidden, seed=seed)
    params = parameters_to_vector(model.parameters()).detach().clone()
    batches = worker_batches(train, cfg.batch_size, rank, cfg.workers, cfg.seed)
    rounds = 0
    for step in range(1, cfg.steps + 1):
        grad, _ = gradient(model, params, *next(batches))
        params.add_(grad, alpha=-cfg.lr)
        if average_every and step % average_every == 0:
            _average(params)
            rounds += 1
    own = params.clone()
    if not average_every or cfg.steps % average_every:
        _average(params)  # the final average, when the schedule did not just do it
        rounds += 1
    return {"own": own, "averaged": params, "rounds": rounds}


def local_sgd(cfg: AveragingConfig, data, average_every: int | None, same_start: bool = True):
    """Run `cfg.workers` ranks; returns the averaged parameters, each worker's own, and rounds."""
    args = (cfg, average_every, same_start, data.train, data.input_shape, data.num_classes)
    results = launch(_local_sgd_node, cfg.workers, args=args, backend="gloo", timeout=cfg.timeout)
    return {
        "averaged": results[0]["averaged"],
        "own": [r["own"] for r in results],
        "rounds": results[0]["rounds"],
    }
