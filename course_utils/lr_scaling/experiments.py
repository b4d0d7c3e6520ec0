"""Notebook 03: the linear scaling rule (Goyal et al. 2017), gradual warmup, and its limit.

The rule: when the batch grows k-fold, multiply the learning rate by k. One step of
batch kB at lr k*eta is then close to k steps of batch B at lr eta, as long as the
gradient barely changes over those k small steps, so the training-loss curves against
epochs coincide. Early in training the weights change fast and the approximation fails;
gradual warmup (start at eta, reach k*eta over a few epochs) bridges that. Past some
batch size even warmup cannot make up for the updates a pass no longer makes.

Each run is a sweep trial (`scaling_trial`, bound to the profile's sizes by `trial_for`),
and `summarize` turns the finished sweep into curves, distances and the batch size
where the rule stops working.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

RULES = ("unscaled", "scaled", "warmup")  # fixed lr; lr x batch/base; the same after warmup
RULE_LABELS = {
    "unscaled": "lr fixed",
    "scaled": "lr scaled",
    "warmup": "lr scaled + warmup",
}


@dataclass(frozen=True)
class LinearWarmup:
    """An lr factor for `training.train(lr_schedule=...)`: `start` at step 0, 1 from `steps` on.

    Goyal et al. start at the base lr (`start = base_batch / batch`) and reach the scaled
    lr after five epochs, rising by the same amount at every update.
    """

    steps: int
    start: float = 0.0

    def __post_init__(self):
        if self.steps < 0:
            raise ValueError(f"warmup steps must be >= 0, got {self.steps}.")
        if not 0 <= self.start <= 1:
            raise ValueError(f"the starting factor must be in [0, 1], got {self.start}.")

    def __call__(self, step: int) -> float:
        if step >= self.steps:
            return 1.0
        return self.start + (1.0 - self.start) * step / self.steps


def scaled_lr(base_lr: float, base_batch: int, batch_size: int) -> float:
    """The linear scaling rule: the lr grows by the factor the batch grows."""
    if base_batch < 1 or batch_size < 1 or base_lr <= 0:
        raise ValueError("base_lr must be positive and both batch sizes at least 1.")
    return base_lr * batch_size / base_batch


def warmup_for(
    batch_size: int, base_batch: int, warmup_epochs: float, samples: int
) -> LinearWarmup:
    """Goyal's gradual warmup: from the base lr to the scaled one over `warmup_epochs` passes."""
    steps_per_epoch = math.ceil(samples / batch_size)
    return LinearWarmup(round(warmup_epochs * steps_per_epoch), start=base_batch / batch_size)


def sweep_config(sizes) -> dict:
    """The search the notebook runs: every batch size under every rule, once per seed.

    At the base batch the three rules are one and the same run (the same lr, a warmup
    from factor 1), which doubles as a check that the trials are repeatable.
    """
    return {
        "algorithm": "grid",
        "parameters": {
            "batch_size": {"values": list(sizes.batch_sizes)},
            "rule": {"values": list(RULES)},
            "seed": {"values": list(sizes.seeds)},
        },
        "spec": {"metric": "test_acc", "objective": "maximize"},
    }


def trial_for(sizes):
    """`scaling_trial` with these sizes bound, ready for `sweep.run(config, trial=...)`."""
    return functools.partial(scaling_trial, sizes=sizes)


def train_split(sizes, dataset: str):
    """The samples every run trains on: the training split, without the validation part."""
    from ..core import data, training

    train_set, _ = data.train_val_split(data.load(dataset).train, sizes.val_fraction, seed=0)
    return training.as_tensors(train_set)


def scaling_trial(batch_size: int, rule: str, seed: int = 0, sizes=None) -> dict:
    """Train the profile's model once with this batch size and lr rule; curves and accuracy."""
    from ..core import data, models, profiles, training

    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}.")
    P = profiles.current()
    S = sizes or P.scaling
    if batch_size < S.base_batch:
        raise ValueError(f"batch {batch_size} is below the base batch {S.base_batch}.")
    ds = data.load(P.dataset)
    train_set = train_split(S, P.dataset)
    lr = S.base_lr if rule == "unscaled" else scaled_lr(S.base_lr, S.base_batch, batch_size)
    schedule = None
    if rule == "warmup" and batch_size > S.base_batch:
        schedule = warmup_for(batch_size, S.base_batch, S.warmup_epochs, len(train_set))
    net = models.build(S.model or P.model, ds.input_shape, ds.num_classes, S.hidden, seed=seed)
    device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    history = training.train(
        net,
        training.tensor_loader(train_set, batch_size, seed=seed),
        epochs=S.epochs,
        lr=lr,
        momentum=S.momentum,
        lr_schedule=schedule,
        test_loader=training.tensor_loader(ds.test, 1024, shuffle=False),
        device=device,
        seed=seed,
        threads=S.threads,
    )
    return {
        "test_acc": history.test_acc,
        "train_loss": history.epoch_train_loss[-1],
        "curve": history.epoch_train_loss,
        "lr": lr,
        "steps": history.steps,
        "seconds": history.seconds,
    }


scaling_trial.metrics = ["test_acc", "train_loss", "curve", "lr", "steps", "seconds"]


def curve_distance(curve, reference, cap: float = 10.0) -> float:
    """Mean absolute gap between two per-epoch loss curves, in nats.

    A diverged run's infinite or NaN losses count as `cap`, so one blow-up reads as far
    away without swamping the mean.
    """
    if len(curve) != len(reference):
        raise ValueError(f"curves of {len(curve)} and {len(reference)} epochs cannot be compared.")
    if not len(curve):
        raise ValueError("empty curves have no distance.")

    def clean(x):
        return cap if not math.isfinite(x) else min(x, cap)

    return sum(abs(clean(a) - clean(b)) for a, b in zip(curve, reference, strict=True)) / len(curve)


@dataclass
class ScalingSummary:
    """Means over seeds of each (rule, batch size): what the notebook prints and plots."""

    batch_sizes: list[int]
    base_batch: int
    accuracy: dict  # rule -> [mean test accuracy per batch size]
    final_loss: dict  # rule -> [mean final training loss per batch size; inf if any diverged]
    curves: dict  # rule -> {batch size: mean per-epoch training loss}
    distance: dict  # rule -> [distance of the mean curve to the base batch's]
    kept: list[bool]  # per batch size: warmup keeps most of what a fixed lr loses
    limit: int | None  # the largest batch up to which `kept` holds at every size

    @property
    def base_accuracy(self) -> float:
        return self.accuracy["unscaled"][self.batch_sizes.index(self.base_batch)]

    def table(self) -> str:
        """Mean test accuracy and final training loss of each rule at each batch size."""
        lines = [f"{'batch':>6} " + " ".join(f"{RULE_LABELS[r]:>22}" for r in RULES)]
        for i, b in enumerate(self.batch_sizes):
            cells = [
                f"{100 * self.accuracy[r][i]:7.1f}% (loss {self.final_loss[r][i]:6.3f})"
                for r in RULES
            ]
            lines.append(f"{b:6d} " + " ".join(f"{c:>22}" for c in cells))
        return "\n".join(lines)

    def failed(self, rule: str, stall_loss: float) -> list[bool]:
        """Per batch size: the run diverged, or stalled with its loss still above `stall_loss`."""
        return [not math.isfinite(v) or v > stall_loss for v in self.final_loss[rule]]


def summarize(result, base_batch: int, most: float = 0.5, tolerance: float = 0.03):
    """Average the sweep's trials over seeds and find where scaling with warmup stops working.

    At each batch size, warmup "keeps" the accuracy when it falls short of the base batch
    by at most `1 - most` of what a fixed lr loses there (or by `tolerance`, where a fixed
    lr loses little). The limit is the largest batch up to which that holds at every size.
    """
    failed = [t for t in result.trials if not t.ok]
    if failed:
        raise RuntimeError(f"{len(failed)} trial(s) failed, first: {failed[0].error}")
    batches = sorted({t.params["batch_size"] for t in result.trials})
    if base_batch not in batches:
        raise ValueError(f"the base batch {base_batch} is not among the batch sizes {batches}.")
    groups: dict = {}
    for t in result.trials:
        groups.setdefault((t.params["rule"], t.params["batch_size"]), []).append(t.metrics)
    accuracy, final_loss, curves = {}, {}, {}
    for rule in RULES:
        runs = [groups[rule, b] for b in batches]
        accuracy[rule] = [_mean([m["test_acc"] for m in ms]) for ms in runs]
        final_loss[rule] = [_mean([m["train_loss"] for m in ms]) for ms in runs]
        curves[rule] = {
            b: _mean_curve([m["curve"] for m in ms]) for b, ms in zip(batches, runs, strict=True)
        }
    reference = curves["unscaled"][base_batch]
    distance = {r: [curve_distance(curves[r][b], reference) for b in batches] for r in RULES}
    base_acc = accuracy["unscaled"][batches.index(base_batch)]
    kept = [
        base_acc - warm <= max(tolerance, (1 - most) * (base_acc - fixed))
        for warm, fixed in zip(accuracy["warmup"], accuracy["unscaled"], strict=True)
    ]
    limit = None
    for b, ok in zip(batches, kept, strict=True):
        if not ok:
            break
        if b > base_batch:
            limit = b
    return ScalingSummary(batches, base_batch, accuracy, final_loss, curves, distance, kept, limit)


def _mean(values: list[float]) -> float:
    """The mean, or inf when any run diverged (a NaN loss must not look like a small one)."""
    if any(not math.isfinite(v) for v in values):
        return math.inf
    return sum(values) / len(values)


def _mean_curve(curves: list[list[float]]) -> list[float]:
    return [_mean(list(values)) for values in zip(*curves, strict=True)]
