"""Notebook 03: the linear scaling rule (Goyal et al. 2017), gradual warmup, and its limit.

The rule: when the batch grows k-fold, multiply the learning rate by k. One step of
batch kB at lr k*eta is then close to k steps of batch B at lr eta, as long as the
gradient barely changes over those k small steps, so the training-loss curves against
epochs coincide. Early in training the weights change fast and the approximation fails;
gradual warmup (start at eta, reach k*eta over a few epochs) bridges that. Past some
batch size even warmup cannot make up for the updates a pass no longer makes.

Each run is a sweep trial (`scaling_trial`, bound to the profile's sizes by `trial_for`);
`limits.summarize` turns the finished sweeps into curves, distances and the batch size
where the rule stops working, and `limits` holds the verdicts on them.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from ..core.own_answers import own_answer
from ..sgd.sweep_config import grid_config

RULES = ("unscaled", "scaled", "warmup", "sqrt")  # the rules every batch size runs under
CONTROLS = ("capped",)  # beyond the limit: the lr capped, for the epoch budget or more updates
RULE_LABELS = {
    "unscaled": "lr fixed",
    "scaled": "lr scaled",
    "warmup": "lr scaled + warmup",
    "sqrt": "lr x sqrt(k) + warmup",
    "capped": "lr capped + warmup",
}
WARMED = ("warmup", "sqrt", "capped")  # the rules that warm up


@dataclass(frozen=True)
class LinearWarmup:
    """An lr factor for `training.Recipe(lr_schedule=...)`: `start` at step 0, 1 from `steps` on.

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


def rule_lr(rule: str, sizes, batch_size: int, lr_cap: float | None = None) -> float:
    """The lr a rule gives this batch: fixed, x k, x sqrt(k), or x k but at most `lr_cap`."""
    if rule not in RULES + CONTROLS:
        raise ValueError(f"rule must be one of {', '.join(RULES + CONTROLS)}, got {rule!r}.")
    if rule == "unscaled":
        return sizes.base_lr
    if rule == "sqrt":
        return sizes.base_lr * math.sqrt(batch_size / sizes.base_batch)
    lr = scaled_lr(sizes.base_lr, sizes.base_batch, batch_size)
    if rule in CONTROLS:
        if lr_cap is None or lr_cap <= 0:
            raise ValueError(f"the {rule} control needs a positive lr_cap.")
        return min(lr, lr_cap)
    return lr


def warmup_for(lr: float, base_lr: float, updates: int) -> LinearWarmup:
    """Goyal's gradual warmup, counted in updates: from the base lr up to `lr`, then held."""
    return LinearWarmup(updates, start=min(1.0, base_lr / lr))


def base_config(sizes) -> dict:
    """The base batch, once per seed: every rule gives it the base lr, so one run stands for all."""
    return grid_config(
        {"batch_size": [sizes.base_batch], "rule": ["unscaled"], "seed": sizes.seeds}
    )


def sweep_config(sizes) -> dict:
    """The search the notebook runs: every larger batch under every rule, once per seed."""
    larger = [b for b in sizes.batch_sizes if b > sizes.base_batch]
    return grid_config({"batch_size": larger, "rule": RULES, "seed": sizes.seeds})


def controls_config(sizes, batches, lr_cap: float, updates: int) -> dict:
    """Beyond the limit: the lr capped at `lr_cap`, for the epoch budget and for `updates`."""
    rules = {"rule": ["capped"], "lr_cap": [lr_cap]}
    return grid_config(
        {"batch_size": batches, **rules, "seed": sizes.seeds, "updates": [0, updates]}
    )


def trial_for(sizes):
    """`scaling_trial` with these sizes bound, ready for `sweep.run(config, trial=...)`."""
    return functools.partial(scaling_trial, sizes=sizes)


def scaling_trial(
    batch_size: int,
    rule: str,
    seed: int = 0,
    sizes=None,
    updates: int | None = None,
    lr_cap: float | None = None,
) -> dict:
    """Train the profile's model once with this batch size and lr rule; curves and accuracy.

    `S.epochs` passes, or `updates` updates where given (the "long" control needs them);
    the warmed-up rules start at the base lr and reach theirs after `S.warmup_updates`.
    Every update takes a full batch (`drop_last`): a last short batch at the full lr would
    be a smaller batch than the one being compared. `train_loss` is the loss on the whole
    training set at the end; `curve` is each epoch's mean mini-batch loss, taken while the
    weights moved.
    """
    from ..core import data, models, profiles, training
    from ..sgd.critical_batch import full_loss

    P = profiles.current()
    S = sizes or P.scaling
    lr = rule_lr(rule, S, batch_size, lr_cap)
    if batch_size < S.base_batch:
        raise ValueError(f"batch {batch_size} is below the base batch {S.base_batch}.")
    ds = data.load(P.dataset)
    train_set, _ = data.train_val_split(ds.train, S.val_fraction, seed=0)
    train_set = training.as_tensors(train_set)
    schedule = None
    if rule in WARMED and lr > S.base_lr:
        schedule = warmup_for(lr, S.base_lr, S.warmup_updates)
    net = models.build(S.model or P.model, ds.input_shape, ds.num_classes, S.hidden, seed=seed)
    device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    history = training.train(
        net,
        training.tensor_loader(train_set, batch_size, seed=seed, drop_last=True),
        training.Recipe(
            epochs=None if updates else S.epochs,
            max_steps=updates or None,
            lr=lr,
            momentum=S.momentum,
            lr_schedule=schedule,
            seed=seed,
            threads=S.threads,
            device=device,
        ),
        training.Evaluation(test_loader=training.tensor_loader(ds.test, 1024, shuffle=False)),
    )
    noise_scale = None
    if batch_size == S.base_batch and S.noise_scale:
        from ..sgd.gradient_noise import noise_scale as measure_noise_scale

        noise_scale = measure_noise_scale(net, train_set, threads=S.threads)
    return {
        "test_acc": history.test_acc,
        "noise_scale": noise_scale,
        "train_loss": full_loss(net, train_set),
        "curve": history.epoch_train_loss,
        "lr": lr,
        "steps": history.steps,
        "seconds": history.seconds,
    }


scaling_trial.metrics = [
    "test_acc",
    "noise_scale",
    "train_loss",
    "curve",
    "lr",
    "steps",
    "seconds",
]


@own_answer("curve_distance")
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
