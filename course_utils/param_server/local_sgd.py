"""Parameter averaging: workers train alone and meet only to average their weights.

Local SGD averages every H steps, so a run of T steps costs T/H communication rounds
instead of T; H = None averages once, after training (the blog's parallel SGD). The
average goes through a server (`parameter_server_allreduce`), as in the overview article.
Averaging works only while the replicas stay near each other: from one starting point
they do, from different random starts their neurons do not line up and the average fails.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch.distributed as dist
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from ..core import progress
from ..core.models import build
from ..core.training import Recipe, train
from ..parallel.allreduce import parameter_server_allreduce
from ..ranks.launch import launch
from .server import worker_batches


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


def _average(model) -> None:
    """Replace this worker's weights by the mean over all workers, through a server."""
    params = parameter_server_allreduce(parameters_to_vector(model.parameters()).detach())
    vector_to_parameters(params.div_(dist.get_world_size()), model.parameters())


def _local_sgd_node(cfg: AveragingConfig, average_every, same_start, train_set, shape, classes):
    rank = dist.get_rank()
    seed = cfg.seed if same_start else cfg.seed + 1000 * (rank + 1)
    model = build(cfg.model, shape, classes, hidden=cfg.hidden, seed=seed)
    batches = worker_batches(train_set, cfg.batch_size, rank, cfg.workers, cfg.seed)
    rounds, done = 0, 0
    while done < cfg.steps:  # the course's loop, `average_every` updates at a time
        updates = min(average_every or cfg.steps, cfg.steps - done)
        train(model, itertools.islice(batches, updates), Recipe(lr=cfg.lr))
        done += updates
        if average_every and done % average_every == 0:
            _average(model)
            rounds += 1
    own = parameters_to_vector(model.parameters()).detach().clone()
    if not average_every or cfg.steps % average_every:
        _average(model)  # the final average, when the schedule did not just do it
        rounds += 1
    averaged = parameters_to_vector(model.parameters()).detach()
    return {"own": own, "averaged": averaged, "rounds": rounds}


def local_sgd(cfg: AveragingConfig, data, average_every: int | None, same_start: bool = True):
    """Run `cfg.workers` ranks; returns the averaged parameters, each worker's own, and rounds."""
    args = (cfg, average_every, same_start, data.train, data.input_shape, data.num_classes)
    results = launch(_local_sgd_node, cfg.workers, args=args, backend="gloo", timeout=cfg.timeout)
    return {**results[0], "own": [r["own"] for r in results]}  # every rank's own weights


def local_sgd_runs(cfg: AveragingConfig, data, runs: dict) -> dict[str, dict]:
    """`local_sgd` for each `label: (average_every, same_start)` of `runs`, under one bar:
    each run is a launch shorter than a second, too short for its ranks' own bar."""
    results = {}
    with progress.bar(len(runs), "local SGD runs", "run") as bar:
        for label, (average_every, same_start) in runs.items():
            results[label] = local_sgd(cfg, data, average_every, same_start)
            bar.update()
    return results
