"""Reference solutions for notebook 01's exercises (the tests run the checkers on them)."""

from __future__ import annotations

import math


def updates_per_epoch(num_samples: int, batch_size: int, drop_last: bool = False) -> int:
    if drop_last:
        return num_samples // batch_size
    return math.ceil(num_samples / batch_size)


def sgd_epoch(w, X, y, lr, batch_size, order):
    w = w.clone()
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        gradient = X[batch].T @ (X[batch] @ w - y[batch]) / len(batch)
        w = w - lr * gradient
    return w


SWEEP_CONFIG = {
    "algorithm": "random",
    "parameters": {
        "lr": {"min": 0.001, "max": 0.1, "distribution": "log_uniform"},
        "batch_size": {"values": [16, 64]},
    },
    "spec": {"metric": "val_acc", "objective": "maximize"},
    "budget": 6,
    "seed": 0,
}

my_config = SWEEP_CONFIG  # the notebook's name for it (`grade --with-solutions` uses it)
