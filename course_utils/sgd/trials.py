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
    it searches over.
    """
    from ..core import data, models, profiles, training
    from ..ranks.bootstrap import device

    P = profiles.current()
    S = P.sgd
    ds = data.load(P.dataset)
    train_set, val_set = data.train_val_split(ds.train, S.val_fraction, seed=0)
    net = models.build(model or P.model, ds.input_shape, ds.num_classes, hidden or S.hidden, seed)
    dev = torch.device("cuda", 0) if torch.cuda.is_available() else device()
    history = training.train(
        net,
        training.tensor_loader(train_set, batch_size or S.batch_sizes[0], seed=seed),
        epochs=epochs or S.epochs,
        lr=S.lr if lr is None else lr,
        optimizer=optimizer or S.optimizer,
        momentum=S.momentum if momentum is None else momentum,
        val_loader=training.tensor_loader(val_set, 1024, shuffle=False),
        test_loader=training.tensor_loader(ds.test, 1024, shuffle=False),
        device=dev,
        seed=seed,
        threads=S.threads,
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
