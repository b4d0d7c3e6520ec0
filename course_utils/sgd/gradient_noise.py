"""How noisy a mini-batch gradient is, measured, against the 1/B law.

A mini-batch gradient is the mean of B per-sample gradients. Drawn with replacement, its
expected squared distance from the full gradient is exactly sigma^2 / B, where sigma^2 is
the mean squared distance of one sample's gradient from the full gradient. We compute
sigma^2 exactly (per-sample gradients with torch.func, in chunks) and measure the
mini-batch variance by drawing batches, so the law is checked, not assumed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from ..core.checks import Verdict, verdict
from ..core.training import as_tensors, torch_threads


@dataclass
class GradientNoise:
    batch_sizes: list[int]
    variance: list[float]  # measured E||g_B - g||^2 for each batch size
    per_sample_variance: float  # sigma^2, so the law predicts sigma^2 / B
    full_gradient_norm_sq: float

    @property
    def predicted(self) -> list[float]:
        return [self.per_sample_variance / b for b in self.batch_sizes]

    @property
    def noise_scale(self) -> float:
        """B_noise = tr(Sigma) / |G|^2: the batch whose gradient noise equals the signal."""
        return self.per_sample_variance / self.full_gradient_norm_sq

    @property
    def ratio_to_law(self) -> list[float]:
        return [m / p for m, p in zip(self.variance, self.predicted, strict=True)]

    @property
    def log_log_slope(self) -> float:
        """The slope of log variance against log B, fitted: -1 where the law holds."""
        return float(np.polyfit(np.log(self.batch_sizes), np.log(self.variance), 1)[0])


def draw_batch(samples: int, batch_size: int, generator: torch.Generator) -> torch.Tensor:
    """The indices of one mini-batch, drawn independently, with replacement: the law's
    assumption (drawn without replacement, a batch near the whole set varies far less)."""
    return torch.randint(samples, (batch_size,), generator=generator)  # cpu: indices


def _flat_grad(model: nn.Module, loss_fn, x, y) -> torch.Tensor:
    model.zero_grad(set_to_none=True)
    loss_fn(model(x), y).backward()
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def per_sample_variance(model: nn.Module, x, y, loss_fn, full: torch.Tensor, chunk=512) -> float:
    """sigma^2 = mean_i ||g_i - g||^2 = mean_i ||g_i||^2 - ||g||^2, from per-sample gradients."""
    params = {k: v.detach() for k, v in model.named_parameters()}

    def sample_loss(p, xi, yi):
        return loss_fn(functional_call(model, p, (xi.unsqueeze(0),)), yi.unsqueeze(0))

    per_sample = vmap(grad(sample_loss), in_dims=(None, 0, 0))
    total = 0.0
    for start in range(0, len(x), chunk):
        grads = per_sample(params, x[start : start + chunk], y[start : start + chunk])
        total += sum(float(g.pow(2).sum()) for g in grads.values())
    return total / len(x) - float(full.pow(2).sum())


def noise_scale(model: nn.Module, dataset, loss_fn=None, threads: int | None = None) -> float:
    """The gradient noise scale B_noise = tr(Sigma) / |G|^2 (McCandlish et al. 2018).

    The batch at which a mini-batch gradient's noise, tr(Sigma)/B, equals the squared
    length of the true gradient: well below it, doubling the batch nearly halves the
    updates needed; well above it, a larger batch barely saves any.
    """
    return measure(model, dataset, (), loss_fn=loss_fn, threads=threads).noise_scale


def measure(
    model: nn.Module,
    dataset,
    batch_sizes: tuple[int, ...],
    draws: int = 64,
    seed: int = 0,
    loss_fn=None,
    threads: int | None = None,
) -> GradientNoise:
    """Mini-batch gradient variance at the model's current weights, for each batch size.

    `threads` caps torch's threads for the call, as in `training.train`.
    """
    if draws < 2:
        raise ValueError(f"draws must be >= 2 to estimate a variance, got {draws}.")
    with torch_threads(threads):
        return _measure(model, dataset, batch_sizes, draws, seed, loss_fn or nn.CrossEntropyLoss())


def _measure(model, dataset, batch_sizes, draws, seed, loss_fn) -> GradientNoise:
    x, y = as_tensors(dataset).tensors
    device = next(model.parameters()).device
    x, y = x.to(device), y.to(device)
    was_training = model.training
    model.eval()  # no dropout noise mixed into the sampling noise
    full = _flat_grad(model, loss_fn, x, y)
    sigma2 = per_sample_variance(model, x, y, loss_fn, full)
    generator = torch.Generator().manual_seed(seed)
    variances = []
    for b in batch_sizes:
        total = 0.0
        for _ in range(draws):
            index = draw_batch(len(x), b, generator).to(device)
            total += float((_flat_grad(model, loss_fn, x[index], y[index]) - full).pow(2).sum())
        variances.append(total / draws)
    model.zero_grad(set_to_none=True)
    model.train(was_training)
    return GradientNoise(
        batch_sizes=list(batch_sizes),
        variance=variances,
        per_sample_variance=sigma2,
        full_gradient_norm_sq=float(full.pow(2).sum()),
    )


def at_minibatch_run(profile, device=None) -> float:
    """B_simple where notebook 01 measures it: after that notebook's mini-batch run (batch
    `minibatch_size`, `minibatch_epochs` passes at `compare_lr`, seed 0, on its
    `compare_samples`), recomputed so that notebook 03 can print it beside its own.

    Notebook 01 also evaluates the loss along that run; evaluating draws no random numbers
    and moves no weight, so these are the weights it measures at.
    """
    from ..core import data, models, training

    S = profile.sgd
    ds = data.load(profile.dataset)
    train_set, _ = data.train_val_split(ds.train, S.val_fraction, seed=0)
    compare = as_tensors(data.first_samples(train_set, S.compare_samples))
    net = models.build(profile.model, ds.input_shape, ds.num_classes, S.hidden, seed=0)
    training.train(
        net,
        training.tensor_loader(compare, S.minibatch_size, seed=0),
        training.Recipe(
            epochs=S.minibatch_epochs, lr=S.compare_lr, seed=0, threads=S.threads, device=device
        ),
    )
    return noise_scale(net, compare, threads=S.threads)


# The measured variance is a mean over `draws` random batches, so it scatters around the law
# by the luck of the draws; 1.5 either way and 0.1 of slope leave room for that, and a
# loader that forgot to shuffle (contiguous batches of a set sorted by label, the test's
# wrong world) misses by far more: 2x at B = 4, 178x at B = 1024, slope -0.19.
LAW_FACTOR = 1.5
SLOPE_SLACK = 0.1


def variance_follows_the_law(noise: GradientNoise) -> Verdict:
    return verdict(
        all(1 / LAW_FACTOR < r < LAW_FACTOR for r in noise.ratio_to_law),
        f"at every batch size the measured variance is within a factor {LAW_FACTOR:g} of sigma^2/B",
    )


def variance_falls_with_slope_minus_one(noise: GradientNoise) -> Verdict:
    return verdict(
        abs(noise.log_log_slope + 1) < SLOPE_SLACK,
        "on log-log axes the variance falls with slope -1",
    )
