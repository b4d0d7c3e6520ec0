"""How noisy the path of the weights is, seen through the full-data loss along it.

The loss of the mini-batch an update was computed on is noisy even at lr = 0 (it is a
sample). What an update's noise does to training shows instead in the loss on the whole
training set after each update: exact gradient steps lower it at every update, noisy ones
raise it now and then. `loss_path` records it update by update from given weights;
`mean_rise` is how much, on average, an update raised it.

`race` gives each method its own best learning rate from a small grid before they are
compared per second: at one shared lr, the method that lr suits best would win.
"""

from __future__ import annotations

import copy
import math

from ..core.checks import verdict
from ..core.timing_claims import timing_claim


def loss_path(net, dataset, batch_size: int, lr: float, updates: int, seed=0, threads=None):
    """The full-data training loss before and after each of `updates` updates of a copy of
    `net` (the original is untouched): `updates + 1` values."""
    from ..core import training

    model = copy.deepcopy(net)
    whole = training.tensor_loader(dataset, 4096, shuffle=False)
    history = training.train(
        model,
        training.tensor_loader(dataset, batch_size, seed=seed),
        training.Recipe(max_steps=updates, lr=lr, seed=seed, threads=threads),
        training.Evaluation(eval_loader=whole, eval_every=1),
    )
    return history.eval_loss


def mean_rise(path: list[float]) -> float:
    """The mean over updates of how much the loss rose (a fall counts as 0)."""
    moves = [b - a for a, b in zip(path, path[1:], strict=False)]
    return sum(max(m, 0.0) for m in moves) / len(moves) if moves else 0.0


def exact_gradient_ahead_per_update(gd, stochastic):
    """After as many updates as GD made, GD's full-data loss lies below batch-1 SGD's
    (`training.History`s of the two runs, from the same start at the same lr)."""
    return verdict(
        gd.loss_at(gd.steps, "updates") < stochastic.loss_at(gd.steps, "updates"),
        "per update, GD's exact gradient lowers the loss more than batch-1 SGD",
    )


def minibatch_ahead_after_a_pass(minibatch, gd, samples: int):
    """After one pass over the `samples` both train on, mini-batch SGD's full-data loss lies
    below GD's (one update against samples / B of them)."""
    return verdict(
        minibatch.loss_at(samples, "samples") < gd.loss_at(samples, "samples"),
        "after one pass over the data, mini-batch SGD is ahead of GD",
    )


def noisier_with_smaller_batches(rises: dict, sgd: str, minibatch: str, factor=3.0):
    """Batch-1 SGD's path rises over `factor` x mini-batch's."""
    return verdict(
        rises[sgd] > factor * rises[minibatch],
        f"along the path the full-data loss rises over {factor:g}x more per batch-1 update "
        "than per mini-batch update",
    )


def exact_steps_barely_rise(rises: dict, gd: str, minibatch: str, at_most=1e-4, factor=3.0):
    """GD's exact steps raise the loss by under `at_most` nats per update on average, and
    mini-batch's noisy ones by over `factor` x that.

    GD at a stable lr does not raise the full-data loss at all, so its mean rise is 0 up to
    rounding: "mini-batch rises 3x more than GD" would compare with 0 and could not fail.
    The bound is what an exact step may rise by, well above rounding (1e-7) and well below
    what a batch of 32 does (1e-3 here).
    """
    return verdict(
        rises[gd] < at_most < rises[minibatch] / factor,
        f"GD's exact steps raise it by under {at_most:g} nats per update on average, "
        f"mini-batch updates by over {factor:g}x that",
    )


def race(net, dataset, batches: dict, lrs, seconds: float, per_update: dict, seed=0, threads=None):
    """Each method (name -> batch size) at each lr for about `seconds` of training, from `net`'s
    weights; the number of updates comes from its measured seconds `per_update`.

    Returns name -> {"losses": {lr: full-data loss at the end}, "lr": the best lr, "loss":
    its loss, "seconds": the training time that run took}.
    """
    from ..core import progress, training

    whole = training.tensor_loader(dataset, 4096, shuffle=False)
    out = {}
    with progress.bar(len(batches) * len(lrs), "race: each method at each lr", "run") as bar:
        for name, batch in batches.items():
            out[name] = _race_one(net, dataset, batch, lrs, seconds / per_update[name], whole,
                                  seed, threads, bar)  # fmt: skip
    return out


def _race_one(net, dataset, batch: int, lrs, updates: float, whole, seed, threads, bar) -> dict:
    """One method of `race` at every lr, `updates` updates each (at least one)."""
    from ..core import training

    steps = max(1, round(updates))
    runs = {}
    for lr in lrs:
        bar.set_postfix(batch=batch, lr=lr)
        runs[lr] = training.train(
            copy.deepcopy(net),
            training.tensor_loader(dataset, batch, seed=seed),
            training.Recipe(max_steps=steps, lr=lr, seed=seed, threads=threads, progress=False),
            training.Evaluation(eval_loader=whole, eval_every=steps),
        )
        bar.update(1)
    losses = {lr: h.eval_loss[-1] for lr, h in runs.items()}
    best = min(lrs, key=lambda lr: losses[lr] if math.isfinite(losses[lr]) else math.inf)
    return {"losses": losses, "lr": best, "loss": losses[best],
            "seconds": runs[best].seconds, "updates": steps}  # fmt: skip


@timing_claim("real", "measurement", "test_race_fails_where_every_update_costs_alike")
def wins_race(results: dict, winner: str, margin: float = 0.0, machine=None):
    """`winner`, at its best lr, ends with the lowest loss, below each other's by `margin`.
    The race's budget comes from real update times: `machine` is their measurement's share."""
    others = [r["loss"] for name, r in results.items() if name != winner]
    return verdict(
        all(results[winner]["loss"] < loss - margin for loss in others),
        "real clock: in the same training time, each at its own best lr, mini-batch SGD "
        "reaches the lowest loss",
        machine,
    )
