"""What a sweep trial runs by default: one training run of the profile's model, as metrics.

A config's parameter names are checked against this function's signature, and its
`spec.metric` against `train_trial.metrics`, before any trial starts. Later notebooks
pass their own trial functions to `sweep.run`; the same rules apply to them.
"""

from __future__ import annotations

import torch


def train_trial(
    batch_size: int | None = None,
    lr: float | None = None,
    epochs: int | None = None,
    optimizer: str | None = None,
    momentum: float | None = None,
    hidden: int | None = None,
    model: str | None = None,
    seed: int = 0,
) -> dict:
    """Train the profile's model on its dataset once; what a default sweep trial runs.

    Anything left out comes from the profile's `sgd` sizes, so a config names only what
    it searches over. Every update takes a full batch (`drop_last`): a sweep compares batch
    sizes, and a last short batch would be a smaller one.
    """
    from ..core import data, models, profiles, training
    from ..ranks.bootstrap import device

    for name, value in (("batch_size", batch_size), ("lr", lr), ("epochs", epochs)):
        problem = None if value is None else check_value(name, value)
        if problem:
            raise ValueError(f"{name}: {problem}")
    P = profiles.current()
    S = P.sgd
    ds = data.load(P.dataset)
    train_set, val_set = data.train_val_split(ds.train, S.val_fraction, seed=0)
    net = models.build(
        model or P.model, ds.input_shape, ds.num_classes, _given(hidden, S.hidden), seed
    )
    dev = torch.device("cuda", 0) if torch.cuda.is_available() else device()
    history = training.train(
        net,
        training.tensor_loader(
            train_set, _given(batch_size, S.batch_sizes[0]), seed=seed, drop_last=True
        ),
        training.Recipe(
            epochs=_given(epochs, S.epochs),
            lr=_given(lr, S.lr),
            optimizer=optimizer or S.optimizer,
            momentum=_given(momentum, S.momentum),
            seed=seed,
            threads=S.threads,
            device=dev,
        ),
        training.Evaluation(
            val_loader=training.tensor_loader(val_set, 1024, shuffle=False),
            test_loader=training.tensor_loader(ds.test, 1024, shuffle=False),
        ),
    )
    return {
        "train_loss": history.epoch_train_loss[-1],
        "train_acc": history.epoch_train_acc[-1],
        "val_loss": history.epoch_val_loss[-1],
        "val_acc": history.epoch_val_acc[-1],
        "test_loss": history.test_loss,
        "test_acc": history.test_acc,
        "seconds": history.seconds,
        "seconds_per_epoch": history.seconds_per_epoch,
        "samples_per_second": history.samples_per_second,
        "steps": history.steps,
    }


train_trial.metrics = [
    "train_loss",
    "train_acc",
    "val_loss",
    "val_acc",
    "test_loss",
    "test_acc",
    "seconds",
    "seconds_per_epoch",
    "samples_per_second",
    "steps",
]


def _given(value, default):
    """`value` unless it was left out: a 0 is never silently replaced by the default."""
    return default if value is None else value


# parameter -> (what it must be, test); the sweep checks every value against these
# before a single trial starts.
RULES = {
    "batch_size": ("a whole number >= 1", lambda v: _is_int(v) and v >= 1),
    "epochs": ("a whole number >= 1", lambda v: _is_int(v) and v >= 1),
    "hidden": ("a whole number >= 1", lambda v: _is_int(v) and v >= 1),
    "seed": ("a whole number", lambda v: _is_int(v)),
    "lr": ("a number > 0", lambda v: _is_number(v) and v > 0),
    "momentum": ("a number from 0 to 1", lambda v: _is_number(v) and 0 <= v < 1),
    "optimizer": ("a name such as 'sgd' or 'adam'", lambda v: isinstance(v, str) and v),
    "model": ("a model name", lambda v: isinstance(v, str) and v),
}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def check_value(name: str, value) -> str | None:
    """What is wrong with `value` for parameter `name` of `train_trial`, or None."""
    if name not in RULES:
        return None
    wanted, ok = RULES[name]
    return None if ok(value) else f"expected {wanted}, got {value!r}"


train_trial.check_value = check_value
