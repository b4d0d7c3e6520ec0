"""Updates to reach a target loss against the batch size (Shallue et al. 2019), and the noise
scale that predicts where that curve bends (McCandlish et al. 2018).

Each batch size trains at a few learning rates, once per seed, until the training loss on
the whole training set falls below a target, and keeps its fastest lr. McCandlish et al.
predict the steps needed as S(B) = S_min (1 + B_crit / B): perfect scaling (twice the
batch, half the steps) well below B_crit, diminishing returns around it, and a floor of
S_min far above it. Their B_crit comes from fitting that curve (the trade-off between steps
S and samples E = B S, (S/S_min - 1)(E/E_min - 1) = 1) over a whole run to the target; they
predict it from the gradient noise scale measured at one point of training, of which the
course computes their "simple" form B_simple = tr(Sigma)/|G|^2 (`gradient_noise`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ..core.checks import verdict
from ..core.models import evaluate
from .sweep_config import grid_config


def asked_lrs(sizes, batch_size: int) -> list[float]:
    """Each factor times the lr scaled linearly from the smallest batch's, before the cap."""
    scaled = sizes.critical_base_lr * batch_size / sizes.critical_batch_sizes[0]
    return [scaled * f for f in sizes.critical_lr_factors]


def trial_lrs(sizes, batch_size: int) -> list[float]:
    """The lrs a batch tries: those asked for, unless the largest is above the cap; then all
    of them scaled down together until it is the cap. Every batch so tries as many lrs,
    spaced alike, and keeps the fastest of them; clipping each at the cap instead would run
    one lr several times and call it a search."""
    asked = asked_lrs(sizes, batch_size)
    shift = min(1.0, sizes.critical_lr_cap / max(asked))
    return sorted({lr * shift for lr in asked})


def capped_batches(sizes) -> list[int]:
    """The batch sizes whose lrs the cap moved down: measured below the linear scaling rule."""
    return [
        b for b in sizes.critical_batch_sizes if max(asked_lrs(sizes, b)) > sizes.critical_lr_cap
    ]


def config(sizes) -> dict:
    """Every batch size at each of its lrs, once per seed: (batch, lr) pairs, since the lrs
    differ from batch to batch."""
    pairs = [[b, lr] for b in sizes.critical_batch_sizes for lr in trial_lrs(sizes, b)]
    return grid_config({"batch_and_lr": pairs, "seed": sizes.critical_seeds}, "steps", "minimize")


def trial_for(sizes):
    """`steps_trial` with these sizes bound, ready for `sweep.run(config, trial=...)`."""
    return functools.partial(steps_trial, sizes=sizes)


def steps_trial(batch_and_lr, seed: int = 0, sizes=None) -> dict:
    """Updates until the full-data training loss is at most `critical_target` (inf if never
    within `critical_max_samples` samples)."""
    from ..core import data, models, profiles, training

    P = profiles.current()
    S = sizes or P.sgd
    batch_size, lr = batch_and_lr
    ds = data.load(P.dataset)
    train_set, _ = data.train_val_split(ds.train, S.val_fraction, seed=0)
    train_set = training.as_tensors(train_set)
    net = models.build(P.model, ds.input_shape, ds.num_classes, S.hidden, seed=seed)
    opt = training.make_optimizer(net, training.Recipe(lr=lr, momentum=S.momentum))
    loader = training.tensor_loader(train_set, batch_size, seed=seed, drop_last=True)
    chunk = max(1, S.critical_check_samples // batch_size)
    steps, loss = 0, math.inf
    while steps * batch_size < S.critical_max_samples:
        training.train(
            net, loader, training.Recipe(max_steps=chunk, lr=lr, optimizer=opt, threads=S.threads)
        )
        steps += chunk
        loss = full_loss(net, train_set)
        if loss <= S.critical_target or not math.isfinite(loss):
            break
    reached = loss <= S.critical_target
    return {"steps": steps if reached else math.inf, "lr": lr, "loss": loss}


steps_trial.metrics = ["steps", "lr", "loss"]


def full_loss(net, dataset, chunk: int = 8192) -> float:
    """The mean cross-entropy over every sample of a TensorDataset, in eval mode: the training
    loss of the weights as they are, not a mean of mini-batch losses taken while they moved."""
    return evaluate(net, *dataset.tensors, chunk=chunk)[0]


@dataclass
class StepsToTarget:
    batch_sizes: list[int]
    steps: list[float]  # per batch size, the mean over seeds of each seed's fewest updates
    lrs: list[list[float]]  # per batch size, each seed's fastest lr
    s_min: float  # fitted to the mean steps: the fewest steps any batch could take
    b_crit: float  # fitted to the mean steps: the batch where returns diminish
    b_crit_by_seed: list[float]  # the same fit to each seed's steps alone
    by_seed: list[list[float]] | None = None  # per batch size, each seed's fewest updates

    def predicted(self, batch: float) -> float:
        return self.s_min * (1 + self.b_crit / batch)

    @property
    def seed_spread(self) -> float:
        """The largest seed's B_crit over the smallest's (1: the seeds agree)."""
        finite = [b for b in self.b_crit_by_seed if math.isfinite(b) and b > 0]
        return max(finite) / min(finite) if len(finite) == len(self.b_crit_by_seed) else math.inf


def best_steps(result) -> StepsToTarget:
    """The fewest steps per batch size and seed over its lrs, and S_min, B_crit fitted to their
    mean over the seeds and to each seed alone."""
    best: dict = {}
    for t in result.finished():
        (b, _), seed, m = t.params["batch_and_lr"], t.params["seed"], t.metrics
        if (b, seed) not in best or m["steps"] < best[b, seed]["steps"]:
            best[b, seed] = m
    batches = sorted({b for b, _ in best})
    seeds = sorted({s for _, s in best})
    by_seed = {s: [best[b, s]["steps"] for b in batches] for s in seeds}
    steps = [sum(by_seed[s][i] for s in seeds) / len(seeds) for i in range(len(batches))]
    s_min, b_crit = fit_steps(batches, steps)
    lrs = [[best[b, s]["lr"] for s in seeds] for b in batches]
    per_seed = [fit_steps(batches, by_seed[s])[1] for s in seeds]
    each = [[by_seed[s][i] for s in seeds] for i in range(len(batches))]
    return StepsToTarget(batches, steps, lrs, s_min, b_crit, per_seed, each)


def fit_steps(batches, steps) -> tuple[float, float]:
    """S = S_min + S_min B_crit / B, fitted to the batches that reached the target by least
    squares of the relative error, sum of (1 - fit/S)^2: every batch size weighs alike. Plain
    least squares would let the smallest batch's thousands of steps decide the fit."""
    pts = [(1 / b, s) for b, s in zip(batches, steps, strict=True) if math.isfinite(s)]
    if len(pts) < 2:
        return math.nan, math.nan
    x, s = np.array(pts).T
    slope, s_min = (float(v) for v in np.polyfit(x, s, 1, w=1 / s))  # weighs (s - fit) / s
    return s_min, (slope / s_min if s_min > 0 else math.inf)


def saving_share(found: StepsToTarget, i: int) -> float:
    """The share of the ideal saving in steps from batch i to batch i + 1 (1: doubling the
    batch halves the steps; 0: it saves none); a quadrupling counts as two doublings."""
    b, s = found.batch_sizes, found.steps
    ideal = 1 - b[i] / b[i + 1]
    return (1 - s[i + 1] / s[i]) / ideal if math.isfinite(s[i] * s[i + 1]) else math.nan


def nearly_perfect_at_the_small_end(found: StepsToTarget, perfect: float = 0.7):
    """Doubling the batch at the small end saves over `perfect` of the ideal halving."""
    return verdict(
        saving_share(found, 0) > perfect,
        f"at the smallest batches a larger batch saves over {perfect:.0%} of the ideal "
        "share of steps: nearly perfect scaling",
    )


def diminishing_at_the_large_end(found: StepsToTarget, diminished: float = 0.65):
    """At the large end it saves under `diminished` of the ideal halving.

    McCandlish's curve itself, from batch 512 to 2048, saves 52% of the ideal when B_crit is
    550 and 66% when it is 1000: past the bend returns diminish; the floor is further out.
    """
    return verdict(
        saving_share(found, len(found.batch_sizes) - 2) < diminished,
        f"at the largest batches it saves under {diminished:.0%} of it: past the bend, "
        "returns diminish",
    )


def seeds_agree(found: StepsToTarget, factor: float):
    """Each seed's own fit of B_crit lies within `factor` of every other's: the window the
    next verdict gives B_crit around B_simple is no narrower than the seeds' disagreement."""
    return verdict(
        found.seed_spread <= factor,
        f"the seeds' fitted B_crit agree within {factor:g}x of each other",
    )


def bend_near_noise_scale(found: StepsToTarget, noise_scale: float, factor: float):
    """The fitted B_crit (over the seeds' mean steps) lies within `factor` of B_simple, the
    noise scale measured at one point of training."""
    b = found.b_crit
    ok = math.isfinite(b) and b > 0 and noise_scale / factor <= b <= noise_scale * factor
    return verdict(
        ok,
        f"the bend of the fitted curve, B_crit, lies within {factor:g}x of B_simple, measured "
        "at one point",
    )
