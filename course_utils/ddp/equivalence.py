"""Data parallelism: one replica per rank, a shard of every batch each, gradients averaged.

The lecture's claim is exact: N ranks that each take b samples and average their
gradients make the same update as one process taking the N*b samples. This module runs
that experiment twice, with the averaging written by hand (`all_reduce` on every
gradient) and with DistributedDataParallel, against a single-process twin that visits the
very same samples in the very same batches (`GlobalOrderSampler`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.nn.utils import parameters_to_vector
from torch.utils.data import Dataset, Sampler

from ..core import data, models
from ..core.own_answers import mark, own_answer
from ..core.training import Recipe, TensorBatches, as_tensors, train
from ..parallel import data_parallel
from ..ranks.bootstrap import device
from ..ranks.launch import launch


@dataclass(frozen=True)
class Setup:
    """One data-parallel run: what to train, on how many samples per rank, for how long."""

    dataset: str = "mnist1d"
    model: str = "mlp"
    hidden: int | None = 64
    per_rank_batch: int = 8
    lr: float = 0.05
    steps: int = 20
    seed: int = 0
    num_samples: int = 10_000


@dataclass
class GlobalOrderSampler(Sampler[int]):
    """The samples N DistributedSampler shards visit, in one stream, batch by batch.

    Rank r takes `perm[r::N]`; its k-th batch of b is `perm[r + N*j]` for j in [k*b, (k+1)*b).
    Concatenating every rank's k-th batch gives the k-th batch of N*b for the single
    process, so both make their updates from exactly the same samples.
    """

    length: int
    world_size: int
    per_rank_batch: int
    seed: int = 0
    epoch: int = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _shards(self) -> list[list[int]]:
        g = torch.Generator().manual_seed(self.seed + self.epoch)  # as DistributedSampler
        per_rank = self.length // self.world_size  # drop_last=True
        perm = torch.randperm(self.length, generator=g).tolist()  # cpu: indices, as the sampler
        perm = perm[: per_rank * self.world_size]
        return [perm[r :: self.world_size] for r in range(self.world_size)]

    def __iter__(self):
        shards, b = self._shards(), self.per_rank_batch
        for k in range(len(shards[0]) // b):
            for shard in shards:
                yield from shard[k * b : (k + 1) * b]

    def __len__(self) -> int:
        per_rank = self.length // self.world_size
        return (per_rank // self.per_rank_batch) * self.per_rank_batch * self.world_size


def twin_loader(dataset: Dataset, world_size: int, per_rank_batch: int, seed: int = 0):
    """The single-process loader whose batches of N*b are the union of the ranks' batches."""
    order = GlobalOrderSampler(len(dataset), world_size, per_rank_batch, seed)
    return TensorBatches(as_tensors(dataset), order, per_rank_batch * world_size, drop_last=True)


def rank_loader(dataset: Dataset, per_rank_batch: int, seed: int = 0):
    """This rank's shard through DistributedSampler, as the report and DDP's docs do it."""
    return data.shard_loader(dataset, per_rank_batch, shuffle=True, seed=seed, drop_last=True)


def load_data(setup: Setup) -> data.Data:
    if setup.dataset == "mnist1d":
        return data.mnist1d(setup.num_samples)
    return data.load(setup.dataset)


def build_model(setup: Setup, dataset: data.Data, where=None) -> nn.Module:
    """Every rank and the twin build the same weights from the same seed."""
    model = models.build(
        setup.model, dataset.input_shape, dataset.num_classes, setup.hidden, setup.seed
    )
    return model.to(where or "cpu")


def wrap(model: nn.Module, **ddp_options) -> DDP:
    """DistributedDataParallel on this rank's device (its own GPU under NCCL)."""
    where = device()
    ids = [where.index] if where.type == "cuda" else None
    return DDP(model.to(where), device_ids=ids, **ddp_options)


# data parallelism by hand (`parallel.data_parallel`): exercise 1's answer, refused there
average_gradients = mark(data_parallel.average_gradients, "average_gradients")


def replica_run(setup: Setup, mode: str, average=None) -> dict:
    """Inside a rank: train a replica on this rank's shard; return its losses and weights.

    `average(model)` replaces `average_gradients` in the by-hand mode (the exercise).
    """
    if mode not in ("by_hand", "ddp"):
        raise ValueError(f"mode must be 'by_hand' or 'ddp', got {mode!r}.")
    d = load_data(setup)
    model = build_model(setup, d, device())
    loader = rank_loader(d.train, setup.per_rank_batch, setup.seed)
    replica, hook = (wrap(model), None) if mode == "ddp" else (model, average or average_gradients)
    history = train(
        replica, loader, Recipe(max_steps=setup.steps, lr=setup.lr), after_backward=hook
    )
    params = parameters_to_vector(model.parameters()).detach().cpu()
    return {"losses": history.step_loss, "params": params}


def single_run(setup: Setup, world_size: int) -> dict:
    """The serial twin: one process, batches of N*b made of the ranks' samples."""
    d = load_data(setup)
    model = build_model(setup, d)
    loader = twin_loader(d.train, world_size, setup.per_rank_batch, setup.seed)
    history = train(model, loader, Recipe(max_steps=setup.steps, lr=setup.lr))
    return {
        "losses": history.step_loss,
        "params": parameters_to_vector(model.parameters()).detach(),
    }


@dataclass
class Equivalence:
    """How far N ranks ended from the one-process twin, and from each other."""

    world_size: int
    steps: int
    mode: str
    max_abs_diff: float  # largest |weight difference| between any rank and the twin
    ranks_identical: bool  # every replica holds bit-identical weights
    single_losses: list[float]
    rank_losses: list[list[float]]  # each rank's loss on its own shard


def equivalence(
    world_size: int = 4,
    mode: str = "ddp",
    setup: Setup | None = None,
    backend: str = "gloo",
    average=None,
    timeout: float = 120.0,
) -> Equivalence:
    """Run N replicas and their one-process twin from the same start on the same samples."""
    setup = setup or Setup()
    load_data(setup)  # make the cache once, before the ranks read it
    replicas = launch(
        replica_run, world_size, backend=backend, args=(setup, mode, average), timeout=timeout
    )
    twin = single_run(setup, world_size)
    diffs = [float((r["params"] - twin["params"]).abs().max()) for r in replicas]
    first = replicas[0]["params"]
    return Equivalence(
        world_size=world_size,
        steps=setup.steps,
        mode=mode,
        max_abs_diff=max(diffs),
        ranks_identical=all(torch.equal(r["params"], first) for r in replicas),
        single_losses=twin["losses"],
        rank_losses=[r["losses"] for r in replicas],
    )


@own_answer("steps_per_epoch")
def steps_per_epoch(samples: int, world_size: int, per_rank_batch: int) -> int:
    return math.floor(samples / world_size) // per_rank_batch
