"""DDP runs that train for epochs: the report's comparisons, with the course's one training loop.

- The report ran DDP on 4 ranks with batch 8 each, over DistributedSampler shards of an
  80/20 `random_split`, and saw it behave like one process with batch 32.
- It scaled the learning rate with the effective batch and found it helped only to a point.
- The lecture asked whether a global batch is better split over many ranks with small
  batches or few ranks with large ones: a question of computation against communication.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..core import data, progress
from ..core.training import Evaluation, History, Recipe, tensor_loader, train
from ..lr_scaling.experiments import curve_distance, scaled_lr
from ..network import wire
from ..ranks.bootstrap import device
from ..ranks.launch import launch
from .cost import Variant, measure, measure_single
from .equivalence import Setup, build_model, load_data, wrap


def _splits(setup: Setup):
    d = load_data(setup)
    train_set, val_set = data.train_val_split(d.train, 0.2, seed=setup.seed)
    return d, train_set, val_set


def ddp_training(setup: Setup, epochs: int) -> History:
    """Inside a rank: DDP over this rank's shard of the 80/20 split, evaluated over all ranks."""
    d, train_set, val_set = _splits(setup)
    model = wrap(build_model(setup, d, device()))
    return train(
        model,
        data.shard_loader(train_set, setup.per_rank_batch, seed=setup.seed, drop_last=True),
        Recipe(epochs=epochs, lr=setup.lr, seed=setup.seed),
        Evaluation(
            val_loader=data.shard_loader(val_set, 500, shuffle=False),
            test_loader=data.shard_loader(d.test, 500, shuffle=False),
        ),
    )


def single_training(setup: Setup, batch: int, epochs: int) -> History:
    """One process on the same split with batch `batch`, at the same learning rate."""
    d, train_set, val_set = _splits(setup)
    return train(
        build_model(setup, d),
        tensor_loader(train_set, batch, seed=setup.seed),
        Recipe(epochs=epochs, lr=setup.lr, seed=setup.seed, threads=1),
        Evaluation(
            val_loader=tensor_loader(val_set, 500, shuffle=False),
            test_loader=tensor_loader(d.test, 500, shuffle=False),
        ),
    )


@dataclass
class Comparison:
    """The report's comparison: DDP N x b against one process with N*b and with b."""

    world_size: int
    ddp: History
    single_effective: History  # batch N*b: what DDP should look like
    single_per_rank: History  # batch b: what DDP should not look like

    @property
    def gap_to_effective(self) -> float:
        return curve_distance(self.ddp.epoch_val_loss, self.single_effective.epoch_val_loss)

    @property
    def gap_to_per_rank(self) -> float:
        return curve_distance(self.ddp.epoch_val_loss, self.single_per_rank.epoch_val_loss)


def compare_with_single(
    world_size: int, setup: Setup, epochs: int, backend: str = "gloo"
) -> Comparison:
    load_data(setup)
    ddp = launch(ddp_training, world_size, backend=backend, args=(setup, epochs))[0]
    n_b = world_size * setup.per_rank_batch
    return Comparison(
        world_size,
        ddp,
        single_training(setup, n_b, epochs),
        single_training(setup, setup.per_rank_batch, epochs),
    )


@dataclass
class ScalingRow:
    effective_batch: int
    lr: float
    scaled: bool
    test_acc: float
    final_train_loss: float


def ddp_trainings(runs: list[Setup], epochs: int) -> list[History]:
    """Inside a rank: each run's DDP training in turn, one launch (spawned ranks start slowly)."""
    return [ddp_training(run, epochs) for run in runs]


def lr_scaling(
    world_size: int,
    per_rank_batches: tuple[int, ...],
    setup: Setup,
    base_lr: float,
    epochs: int,
    backend: str = "gloo",
) -> list[ScalingRow]:
    """Test accuracy of DDP at each effective batch, with the lr fixed and with it scaled
    from the smallest (the base, where the two runs are one)."""
    load_data(setup)
    base = min(per_rank_batches)
    asked = [(b, s) for b in sorted(per_rank_batches) for s in (False, True)]
    lrs = {(b, s): scaled_lr(base_lr, base, b) if s and b != base else base_lr for b, s in asked}
    runs = list(dict.fromkeys((b, lrs[b, s]) for b, s in asked))
    setups = [replace(setup, per_rank_batch=b, lr=lr) for b, lr in runs]
    trained = launch(ddp_trainings, world_size, backend=backend, args=(setups, epochs))[0]
    by_run = dict(zip(runs, trained, strict=True))
    return [
        ScalingRow(world_size * b, lrs[b, s], s, h.test_acc, h.epoch_train_loss[-1])
        for b, s in asked
        for h in [by_run[b, lrs[b, s]]]
    ]


@dataclass
class SplitRow:
    world_size: int
    per_rank_batch: int
    compute_per_step: float
    communication_per_step: float

    @property
    def ratio(self) -> float:
        """Compute over communication per step; infinite on one rank, which sends nothing."""
        if self.communication_per_step <= 0:
            return math.inf
        return self.compute_per_step / self.communication_per_step


def split_global_batch(
    global_batch: int,
    world_sizes: tuple[int, ...],
    setup: Setup,
    samples_per_rank: int,
    backend: str = "gloo",
    link=None,
) -> list[SplitRow]:
    """One global batch over 1, 2, 4 ... ranks: seconds of compute and of all-reduce per step.

    The all-reduce crosses `link` (None: the profile's, decided once for the largest world
    size, so that the curve stays on one clock), and a rank's compute is timed in one
    process at its per-rank batch: on a cluster each rank has its own cores, while here 8
    ranks would take turns on 2.
    """
    link = wire.resolve(link, max(world_sizes), backend)
    rows = []
    with progress.bar(len(world_sizes), f"batch {global_batch} over N ranks", "N") as bar:
        for n in world_sizes:  # launches of a second or two each: too short for a rank's bar
            b = global_batch // n
            samples = max(samples_per_rank // n, b * 4)
            alone = measure_single(b, samples, setup, backend=backend)
            row = SplitRow(n, b, alone.compute / (alone.samples / b), 0.0)
            if n > 1:
                variant = [Variant(f"{n} x {b}", b)]
                (t,) = measure(variant, n, samples, setup, backend=backend, link=link)
                row = replace(row, communication_per_step=t.communication / (t.samples / b))
            rows.append(row)
            bar.update()
    return rows
