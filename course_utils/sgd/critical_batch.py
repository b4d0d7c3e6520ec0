"""Updates to reach a target loss against the batch size (Shallue et al. 2019), and the noise
scale that predicts where that curve bends (McCandlish et al. 2018).

Each batch size trains at the best of a few learning rates until the training loss on the
whole training set falls below a target. McCandlish et al. predict the steps needed as
S(B) = S_min (1 + B_crit / B): perfect scaling (twice the batch, half the steps) well below
B_crit, diminishing returns around it, and a floor of S_min far above it, with B_crit close
to the gradient noise scale B_noise = tr(Sigma)/|G|^2. Since S is linear in 1/B, a least-
squares line through the measured (1/B, S) gives S_min and B_crit.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from ..core.checks import verdict
from .finished import finished_trials


def config(sizes) -> dict:
    """Every batch size at each lr factor (of the linearly scaled lr), once."""
    return {
        "algorithm": "grid",
        "parameters": {
            "batch_size": {"values": list(sizes.critical_batch_sizes)},
            "lr_factor": {"values": list(sizes.critical_lr_factors)},
        },
        "spec": {"metric": "steps", "objective": "minimize"},
    }


def trial_for(sizes):
    """`steps_trial` with these sizes bound, ready for `sweep.run(config, trial=...)`."""
    return functools.partial(steps_trial, sizes=sizes)


def trial_lr(sizes, batch_size: int, lr_factor: float) -> float:
    """The linearly scaled lr from `critical_base` times `lr_factor`, at most `critical_lr_cap`."""
    scaled = sizes.critical_base_lr * batch_size / sizes.critical_batch_sizes[0]
    return min(scaled * lr_factor, sizes.critical_lr_cap)


def steps_trial(batch_size: int, lr_factor: float = 1.0, seed: int = 0, sizes=None) -> dict:
    """Updates until the full-data training loss is at most `critical_target` (inf if never)."""
    from ..core import data, models, profiles, training

    P = profiles.current()
    S = sizes or P.sgd
    ds = data.load(P.dataset)
    train_set, _ = data.train_val_split(ds.train, S.val_fraction, seed=0)
    train_set = training.as_tensors(train_set)
    net = models.build(P.model, ds.input_shape, ds.num_classes, S.hidden, seed=seed)
    lr = trial_lr(S, batch_size, lr_factor)
    opt = training.make_optimizer(net, "sgd", lr, S.momentum, 0.0)
    loader = training.tensor_loader(train_set, batch_size, seed=seed)
    whole = training.tensor_loader(train_set, 4096, shuffle=False)
    chunk = max(1, S.critical_check_samples // batch_size)
    steps, loss = 0, math.inf
    while steps < S.critical_max_steps:
        training.train(net, loader, max_steps=chunk, lr=lr, optimizer=opt, threads=S.threads)
        steps += chunk
        loss = _loss(net, whole)
        if loss <= S.critical_target or not math.isfinite(loss):
            break
    reached = loss <= S.critical_target
    return {"steps": steps if reached else math.inf, "lr": lr, "loss": loss}


steps_trial.metrics = ["steps", "lr", "loss"]


@torch.no_grad()
def _loss(net, loader) -> float:
    total, count = 0.0, 0
    for x, y in loader:
        total += float(torch.nn.functional.cross_entropy(net(x), y, reduction="sum"))
        count += len(y)
    return total / count


@dataclass
class StepsToTarget:
    batch_sizes: list[int]
    steps: list[float]  # the fewest updates over the lrs tried (inf: none reached the target)
    lrs: list[float]  # the lr that got there first
    s_min: float  # fitted: the fewest steps any batch could take
    b_crit: float  # fitted: the batch where returns diminish

    def predicted(self, batch: float) -> float:
        return self.s_min * (1 + self.b_crit / batch)


def best_steps(result) -> StepsToTarget:
    """The fewest steps per batch size over its learning rates, and the fitted S_min, B_crit."""
    finished_trials(result)
    best: dict = {}
    for t in result.trials:
        b, m = t.params["batch_size"], t.metrics
        if b not in best or m["steps"] < best[b]["steps"]:
            best[b] = m
    batches = sorted(best)
    steps = [best[b]["steps"] for b in batches]
    s_min, b_crit = fit_steps(batches, steps)
    return StepsToTarget(batches, steps, [best[b]["lr"] for b in batches], s_min, b_crit)


def fit_steps(batches, steps) -> tuple[float, float]:
    """Least squares of S = S_min + S_min B_crit / B over the batches that reached the target."""
    pts = [(1 / b, s) for b, s in zip(batches, steps, strict=True) if math.isfinite(s)]
    if len(pts) < 2:
        return math.nan, math.nan
    n = len(pts)
    mx, my = sum(x for x, _ in pts) / n, sum(y for _, y in pts) / n
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    slope = sum((x - mx) * (y - my) for x, y in pts) / sxx
    s_min = my - slope * mx
    return s_min, (slope / s_min if s_min > 0 else math.inf)


def scaling_regimes(found: StepsToTarget, perfect: float = 0.7, flat: float = 0.5):
    """Doubling the batch at the small end saves over `perfect` of the ideal halving; at the
    large end, under `flat` of it (a quadrupling counts as two doublings)."""
    b, s = found.batch_sizes, found.steps

    def saving(i):  # the share of the ideal saving from b[i] to b[i+1]
        ideal = 1 - b[i] / b[i + 1]
        return (1 - s[i + 1] / s[i]) / ideal if math.isfinite(s[i] * s[i + 1]) else math.nan

    first, last = saving(0), saving(len(b) - 2)
    verdict(
        first > perfect,
        f"at the smallest batches a larger batch saves over {perfect:.0%} of the ideal "
        "share of steps: nearly perfect scaling",
    )
    return verdict(
        last < flat,
        f"at the largest batches it saves under {flat:.0%} of it: past the bend, more "
        "samples per step barely cut the steps",
    )


def bend_near_noise_scale(found: StepsToTarget, noise_scale: float, factor: float):
    """The fitted B_crit lies within `factor` of the measured noise scale."""
    b = found.b_crit
    ok = math.isfinite(b) and b > 0 and noise_scale / factor <= b <= noise_scale * factor
    return verdict(ok, f"the bend of the fitted curve, B_crit, lies within {factor:g}x of B_noise")
