"""Resharding: FSDP2's sharded checkpoint of N ranks, loaded by fewer, and the training goes on.

Under FSDP2 (`fully_shard`) every parameter, and the optimizer's momentum beside it, is a
DTensor cut by rows over the ranks, and DCP saves each rank's rows in that rank's own file:
nothing is written twice. Its metadata records which rows of which tensor each file holds,
so a job of another size reads, on each of its ranks, the rows that rank now holds. The
sampler's position is global (the same global batches whatever the number of ranks), so 2
ranks continue exactly where 4 stopped, and one process with the whole global batch is the
serial twin of both. The runs are in float64 and draw no noise (per-rank RNG streams cannot
be split over another number of ranks).
"""

from __future__ import annotations

import math
import re
import tempfile
from dataclasses import replace
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.tensor import DTensor

from ..core import models
from ..core.backends import GLOO
from ..core.training import Recipe, train
from ..memory.fsdp import shard_layers
from ..parallel import checkpoint
from ..ranks.bootstrap import device
from ..ranks.launch import launch
from .batches import GlobalBatches, NoisyLoader
from .resume import RunConfig, training_tensors

_RANK_FILE = re.compile(r"__(\d+)_\d+\.distcp$")  # FileSystemWriter: one file prefix per rank


def sharded_model(cfg: RunConfig, inputs: int) -> nn.Module:
    """The chapter's MLP in float64, each Linear layer and the whole model under `fully_shard`
    over every rank (one process alone keeps it plain: the serial twin)."""
    model = models.build("mlp", (inputs,), 10, hidden=cfg.hidden, seed=cfg.seed)
    model = model.to(device(), torch.float64)
    return shard_layers(model) if dist.get_world_size() > 1 else model


def sharded_training(cfg: RunConfig, parts: tuple[str, ...] = checkpoint.PARTS) -> dict:
    """One rank: (load the latest checkpoint, restoring `parts`,) train to `cfg.steps`,
    saving every `cfg.every` updates; the rows this rank held and the whole final weights."""
    x, y = training_tensors(cfg)
    x, y = x.to(device(), torch.float64), y.to(device())
    model = sharded_model(cfg, x.shape[1])
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum)
    batches = GlobalBatches(len(x), cfg.global_batch, dist.get_rank(), dist.get_world_size(),
                            cfg.seed)  # fmt: skip
    state = checkpoint.TrainingState(model, optimizer, batches, parts=parts)
    start = 0
    if cfg.resume:
        start = checkpoint.load(state, cfg.checkpoint_dir)

    def after_step(steps: int, loss: float) -> None:
        state.step = start + steps
        if cfg.every and state.step % cfg.every == 0:
            checkpoint.save(state, cfg.checkpoint_dir)

    train(
        model,
        NoisyLoader(x, y, batches, 0.0),
        Recipe(max_steps=cfg.steps - start, optimizer=optimizer, threads=cfg.threads),
        after_step=after_step,
    )
    whole = [p.full_tensor() if isinstance(p, DTensor) else p for p in model.parameters()]
    return {
        "rank": dist.get_rank(),
        "start": start,
        "shards": {name: tuple(_local(p).shape) for name, p in model.named_parameters()},
        "params": torch.cat([w.detach().reshape(-1) for w in whole]).cpu(),  # cpu: to compare
    }


def _local(p: torch.Tensor) -> torch.Tensor:
    return p.to_local() if isinstance(p, DTensor) else p


def stored_layout(folder: str | Path, world_size: int) -> dict:
    """Where the DCP checkpoint in `folder` keeps the model, from its metadata: the share
    of the parameters in each rank's file, and in how many files each parameter lies.

    Sharded (FSDP), every parameter lies in N pieces, about 1/N in each file. Replicated
    (DDP), DCP writes each tensor once, whole, in the file of one rank (it spreads the
    tensors over the ranks, so the shares alone can look even): one piece each.
    """
    metadata = dcp.FileSystemReader(str(folder)).read_metadata()
    held = dict.fromkeys(range(world_size), 0)
    pieces: dict[str, int] = {}
    for index, where in metadata.storage_data.items():
        if not index.fqn.startswith("train.model."):
            continue
        chunks = metadata.state_dict_metadata[index.fqn].chunks
        chunk = next(c for c in chunks if tuple(c.offsets) == tuple(index.offset))
        held[int(_RANK_FILE.search(where.relative_path).group(1))] += math.prod(chunk.sizes)
        name = index.fqn.removeprefix("train.model.")
        pieces[name] = pieces.get(name, 0) + 1
    total = sum(held.values())
    return {"shares": {rank: n / total for rank, n in held.items()}, "pieces": pieces}


def reshard(cfg: RunConfig, saved_by: int, loaded_by: int, save_at: int, timeout: float = 60.0,
            parts: tuple[str, ...] = checkpoint.PARTS) -> dict:  # fmt: skip
    """`saved_by` FSDP2 ranks train to `save_at` and save; `loaded_by` ranks load (restoring
    `parts`), train to `cfg.steps` and save; one unsharded process trains all the way.

    Returns where both checkpoints keep the parameters (`stored_layout`), the rows
    of each parameter every rank held in both runs, the step resumed from, and the largest
    difference between the resumed run's final weights and the unsharded process's.
    """
    if not 0 < save_at < cfg.steps:
        raise ValueError(f"save_at={save_at} must lie between 0 and steps={cfg.steps}.")
    if saved_by == loaded_by:
        raise ValueError(f"saved_by and loaded_by are both {saved_by}: nothing to reshard.")
    cfg = replace(cfg, noise=0.0, kill_rank=None, kill_at=None, resume=False, log_dir=None)
    with tempfile.TemporaryDirectory(prefix="course-reshard-") as root:
        twin = launch(
            sharded_training, 1, args=(replace(cfg, every=None),), timeout=timeout, backend=GLOO
        )
        first = replace(cfg, steps=save_at, every=save_at, checkpoint_dir=root)
        saved = launch(sharded_training, saved_by, args=(first,), timeout=timeout, backend=GLOO)
        then = replace(cfg, every=cfg.steps, checkpoint_dir=root, resume=True)
        resumed = launch(
            sharded_training, loaded_by, args=(then, parts), timeout=timeout, backend=GLOO
        )
        stored = {
            saved_by: stored_layout(checkpoint.step_folder(root, save_at), saved_by),
            loaded_by: stored_layout(checkpoint.step_folder(root, cfg.steps), loaded_by),
        }
    return {
        "world_sizes": (saved_by, loaded_by),
        "stored": stored,
        "shards": {
            n: [r["shards"] for r in run] for n, run in ((saved_by, saved), (loaded_by, resumed))
        },
        "start": resumed[0]["start"],
        "gap": (twin[0]["params"] - resumed[0]["params"]).abs().max().item(),
    }
