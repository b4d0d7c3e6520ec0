"""Choosing the learning rate honestly, and how many epochs each way of training needs.

The learning rate is chosen on a validation set split off the training data, by the mean
over several seeds, and the test set is looked at only at the chosen rate: choosing on
the test loss would make the test loss an optimistic estimate. Epochs count the gradients
the workers computed (a synchronous update costs one per worker), so synchronous and
asynchronous training are compared at an equal budget of work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from torch.utils.data import TensorDataset

from ..core import progress
from ..core.checks import Verdict, verdict
from ..core.data import Data, train_val_split
from .runs import PSRun, evaluate, run_parameter_server, serial_twin, server_config

METHODS = {  # label: (mode, workers; None for the profile's)
    "synchronous": ("sync", None),
    "asynchronous": ("async", None),
    "one worker alone": ("async", 1),
}


END = 0.25  # the share of a run's snapshots that its end-of-training loss averages


def end_loss(run: PSRun) -> float:
    """The mean loss over the last `END` of the run's snapshots (at least the last one)."""
    tail = run.loss[-max(1, round(END * (len(run.loss) - 1))) :]
    return sum(tail) / len(tail)


def lowest(lrs, losses: list[float]) -> float:
    """The rate of `lrs` with the lowest of `losses`; a diverged one (nan) never wins."""
    return lrs[min(range(len(lrs)), key=lambda i: math.inf if math.isnan(losses[i]) else losses[i])]


def validation_split(data: Data, fraction: float, seed: int = 0) -> Data:
    """`data` with its training set split: runs train on the rest and evaluate on the held-out
    part (its `test`), so nothing chosen on it has seen the real test set."""
    fit, held = train_val_split(data.train, fraction, seed)
    x, y = data.train.tensors
    return Data(
        f"{data.name} (validation split)",
        TensorDataset(x[fit.indices], y[fit.indices]),
        TensorDataset(x[held.indices], y[held.indices]),
        data.num_classes,
        data.input_shape,
    )


@dataclass
class LrSweep:
    """Runs keyed by (method, lr, seed); their `loss` is the validation loss."""

    lrs: tuple
    seeds: tuple
    runs: dict = field(default_factory=dict)
    configs: dict = field(default_factory=dict)

    def val_loss(self, method: str) -> list[float]:
        """Validation loss at the end of training, one per learning rate: over each run's last
        `END` of snapshots (a single SGD iterate jumps about), then over the seeds."""
        return [
            sum(end_loss(self.runs[method, lr, s]) for s in self.seeds) / len(self.seeds)
            for lr in self.lrs
        ]

    def chosen(self, method: str) -> float:
        """The rate with the lowest mean validation loss."""
        return lowest(self.lrs, self.val_loss(method))

    def runs_at_chosen(self, method: str) -> list[PSRun]:
        return [self.runs[method, self.chosen(method), s] for s in self.seeds]

    def test_loss(self, method: str, data: Data, samples: int | None = None) -> float:
        """Mean test loss over the seeds, at the rate chosen on validation only."""
        lr = self.chosen(method)
        losses = [
            evaluate(self.runs[method, lr, s].params, self.configs[method, lr, s], data, samples)[0]
            for s in self.seeds
        ]
        return sum(losses) / len(losses)


def lr_sweep(sizes, split: Data, lrs, seeds, gradients: int) -> LrSweep:
    """Every method of `METHODS` at every lr and seed, on `gradients` gradients each."""
    sweep = LrSweep(tuple(lrs), tuple(seeds))
    total = len(METHODS) * len(sweep.lrs) * len(sweep.seeds)
    with progress.bar(total, "lr sweep: each method, lr and seed", "run") as bar:
        for method, (mode, workers) in METHODS.items():
            workers = workers or sizes.workers
            updates = gradients // workers if mode == "sync" else gradients
            bar.set_postfix(method=method)
            for lr in sweep.lrs:
                for seed in sweep.seeds:
                    cfg = server_config(
                        sizes, mode=mode, workers=workers, updates=updates, lr=lr, seed=seed,
                        snapshot_every=max(1, sizes.snapshot_every * updates // gradients),
                    )  # fmt: skip
                    sweep.configs[method, lr, seed] = cfg
                    sweep.runs[method, lr, seed] = _run(cfg, split)
                    bar.update(1)
    return sweep


def _run(cfg, split: Data) -> PSRun:
    """Asynchronous workers on real ranks. Synchronous training, and one asynchronous worker
    (plain SGD), apply exactly the updates of one process (the tests and section 1 check it),
    so they run in this process: the same numbers for a fraction of the cores' time."""
    if cfg.mode == "async" and cfg.workers > 1:
        return run_parameter_server(cfg, split)
    snapshots = []
    run = PSRun(cfg.mode, cfg.workers, params=serial_twin(cfg, split, snapshots))
    for update, params in snapshots:
        run.snapshot_updates.append(update)
        run.loss.append(evaluate(params, cfg, split)[0])
    return run


def mean_curve(runs: list[PSRun], train_samples: int, batch_size: int):
    """(epochs, mean loss) over `runs`: epochs are gradients computed x batch / samples."""
    n = min(len(r.loss) for r in runs)
    epochs = [g * batch_size / train_samples for g in runs[0].snapshot_gradients[:n]]
    return epochs, [sum(r.loss[i] for r in runs) / len(runs) for i in range(n)]


def epochs_to(curve, target: float) -> float:
    """The first epoch at which the loss is at or below `target`; inf if it never is."""
    return next((e for e, loss in zip(*curve, strict=True) if loss <= target), math.inf)


def epochs_within(async_epochs: float, sync_epochs: float, factor: float = 1.5) -> Verdict:
    """Both reach the target, and neither needs more than `factor` x the other's epochs."""
    both = math.isfinite(async_epochs) and math.isfinite(sync_epochs)
    ok = both and max(async_epochs, sync_epochs) <= factor * min(async_epochs, sync_epochs)
    return verdict(
        ok,
        "each at its chosen rate, asynchronous and synchronous SGD reach the target "
        f"validation loss within {factor:g} x each other's epochs",
    )
