"""Notebook 02: fit the training set, then measure where the run ended (Keskar et al. 2017).

A fixed-epoch sweep (notebook 01) mixes two effects: a large batch makes fewer updates,
and it may also end somewhere worse. Training every arm (`arms`: a batch, an lr, a warmup)
until it fits the training set removes the first: what is left is where each ended. Each
run is a sweep trial (`fit_trial`) that trains to the fit target and measures the solution -
test accuracy, Keskar's epsilon-sharpness and the top Hessian eigenvalue on a fixed
training subset - and returns its weights as a flat array, so the notebook can walk the
line between two solutions.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from ..core.models import evaluate
from . import arms, landscape


def trial_for(sizes):
    """`fit_run` with these sizes bound, ready for `sweep.run(config, trial=...)`."""
    return functools.partial(fit_run, sizes=sizes)


def fit_run(run: str | None = None, arm: str | None = None, seed: int = 0, sizes=None) -> dict:
    """`fit_trial` for a trial named by its `run` (`arms.sweep_configs`) or by `arm` and
    `seed` (`arms.sweep_config`)."""
    params = {"run": run} if run is not None else {"arm": arm, "seed": seed}
    name, seed = arms.arm_and_seed(params)
    return fit_trial(name, seed, sizes)


@dataclass
class Problem:
    """The tensors every run and every measure shares."""

    x: torch.Tensor  # the training samples the runs must fit
    y: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    input_shape: tuple
    num_classes: int

    def to(self, device) -> Problem:
        moved = (t.to(device) for t in (self.x, self.y, self.x_test, self.y_test))
        return Problem(*moved, self.input_shape, self.num_classes)

    def measure_set(self, samples: int | None):
        """The fixed training subset the sharpness measures are taken on."""
        n = len(self.x) if samples is None else min(samples, len(self.x))
        return self.x[:n], self.y[:n]


def problem(sizes, dataset: str | None = None) -> Problem:
    """The profile's dataset, its training split cut to `sizes.train_samples`."""
    from ..core import data, profiles, training

    ds = data.load(dataset or profiles.current().dataset)
    train_set, _ = data.train_val_split(ds.train, sizes.val_fraction, seed=0)
    x, y = training.as_tensors(train_set).tensors
    if sizes.train_samples is not None:
        x, y = x[: sizes.train_samples], y[: sizes.train_samples]
    x_test, y_test = ds.test.tensors
    return Problem(x, y, x_test, y_test, tuple(ds.input_shape), ds.num_classes)


def build_model(sizes, prob: Problem, seed: int = 0) -> nn.Module:
    from ..core import models, profiles

    name = sizes.model or profiles.current().model
    return models.build(name, prob.input_shape, prob.num_classes, sizes.hidden, seed=seed)


def fit(
    model, prob: Problem, batch_size: int, lr: float, sizes, seed: int = 0, schedule=None
) -> dict:
    """Train until the training loss falls below `sizes.fit_loss`, checked every few passes.

    Every run stops below the same loss, so none is measured further down its valley than
    the others. The optimizer (and its momentum) lives across the checks; a run that has
    not fit after `sizes.max_steps` updates stops there and says so in `fitted`.
    `schedule(update)` multiplies the lr, counted over the whole run (a warmup).
    """
    from ..core import training

    train_set = torch.utils.data.TensorDataset(prob.x, prob.y)
    loader = training.tensor_loader(train_set, batch_size, seed=seed)
    optimizer = training.make_optimizer(
        model, training.Recipe(lr=lr, optimizer=sizes.optimizer, momentum=sizes.momentum)
    )
    check_every = max(1, math.ceil(sizes.check_every_steps / len(loader)))
    epochs, steps, seconds = 0, 0, 0.0
    train_loss, train_acc = evaluate(model, prob.x, prob.y)
    while steps < sizes.max_steps and train_loss > sizes.fit_loss:
        done = steps
        history = training.train(
            model,
            loader,
            training.Recipe(
                epochs=check_every,
                lr=lr,
                optimizer=optimizer,
                lr_schedule=None if schedule is None else (lambda t, done=done: schedule(t + done)),
                threads=sizes.threads,
            ),
        )
        epochs, steps, seconds = (
            epochs + check_every,
            steps + history.steps,
            seconds + history.seconds,
        )
        train_loss, train_acc = evaluate(model, prob.x, prob.y)
        if not math.isfinite(train_loss):
            break
    return {
        "epochs": epochs,
        "steps": steps,
        "seconds": seconds,
        "train_loss": train_loss,
        "train_acc": train_acc,
        "fitted": train_loss <= sizes.fit_loss,
    }


def measure(model, prob: Problem, sizes, seed: int = 0) -> dict:
    """Test accuracy and both sharpness measures of a trained model."""
    test_loss, test_acc = evaluate(model, prob.x_test, prob.y_test)
    x, y = prob.measure_set(sizes.measure_samples)

    def closure(m):
        return nn.functional.cross_entropy(m(x), y)

    return {
        "test_loss": test_loss,
        "test_acc": test_acc,
        "sharpness": landscape.epsilon_sharpness(
            model, closure, epsilon=sizes.epsilon, steps=sizes.ascent_steps, seed=seed
        ),
        "hessian": landscape.top_hessian_eigenvalue(
            model, closure, iters=sizes.hessian_iters, tol=1e-3, seed=seed
        ),
    }


def fit_trial(arm: str, seed: int = 0, sizes=None) -> dict:
    """One sweep trial: fit the training set with this arm's batch, lr and warmup (`arms`),
    then measure the solution."""
    from ..core import profiles

    S = sizes or profiles.current().sharp
    batch, lr, schedule = arms.batch_of(S, arm), arms.lr_of(S, arm), arms.warmup_of(S, arm)
    device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    prob = problem(S).to(device)
    model = build_model(S, prob, seed).to(device)
    torch.manual_seed(seed)
    run = fit(model, prob, batch, lr, S, seed, schedule)
    return {
        "batch_size": batch,
        "lr": lr,
        **run,
        **measure(model, prob, S, seed),
        "weights": parameters_to_vector(model.parameters()).detach().cpu().numpy(),
    }


fit_trial.metrics = [
    "batch_size",
    "lr",
    "test_acc",
    "test_loss",
    "train_acc",
    "train_loss",
    "sharpness",
    "hessian",
    "epochs",
    "steps",
    "seconds",
    "fitted",
    "weights",
]


def with_weights(model: nn.Module, weights) -> nn.Module:
    """`model` with its parameters replaced by the flat `weights` a trial returned."""
    vector = torch.as_tensor(np.asarray(weights), dtype=torch.float32)
    with torch.no_grad():
        vector_to_parameters(vector, model.parameters())
    return model


def along_line(model_a, model_b, prob: Problem, alphas, samples: int | None = None) -> dict:
    """Loss and accuracy, train and test, at (1 - a) A + a B for each a.

    The losses come from `landscape.loss_along_line`; the accuracies use the same
    interpolation, so every curve is taken at the same points.
    """
    x, y = prob.measure_set(samples)

    def loss_on(xs, ys):
        return lambda m: nn.functional.cross_entropy(m(xs), ys)

    def acc_on(xs, ys):
        return lambda m: (m(xs).argmax(1) == ys).float().mean()

    closures = {
        "train_loss": loss_on(x, y),
        "test_loss": loss_on(prob.x_test, prob.y_test),
        "train_acc": acc_on(x, y),
        "test_acc": acc_on(prob.x_test, prob.y_test),
    }
    return landscape.loss_along_line(model_a, model_b, closures, list(alphas))


def valley_width(alphas, losses, end: float, rise: float) -> float:
    """How far (in units of the A-B distance) the loss stays within `rise` of its value at
    `end` (0 or 1), walking outward from that end, away from the other solution.

    Linear interpolation between the sampled points; the whole sampled stretch if the loss
    never rises that much.
    """
    if end not in (0, 1):
        raise ValueError(f"end must be 0 (solution A) or 1 (solution B), got {end}.")
    pts = sorted(zip(alphas, losses, strict=True))
    outward = [(abs(a - end), v) for a, v in pts if (a <= 0 if end == 0 else a >= 1)]
    outward.sort()
    if not outward or outward[0][0] > 1e-9:
        raise ValueError(f"the line must be sampled at alpha={end} and beyond it.")
    base = outward[0][1]
    for (d0, v0), (d1, v1) in zip(outward, outward[1:], strict=False):
        if not math.isfinite(v1) or v1 - base >= rise:
            if not math.isfinite(v1) or v1 == v0:
                return d1
            return d0 + (d1 - d0) * (base + rise - v0) / (v1 - v0)
    return outward[-1][0]


def line_alphas(sizes) -> list[float]:
    """Evenly spaced points over `sizes.line_range`, rounded so that 0 and 1 land exactly
    where the spacing divides 1 (`valley_width` refuses a line that misses them)."""
    low, high = sizes.line_range
    n = sizes.line_points
    return [round(low + (high - low) * i / (n - 1), 10) for i in range(n)]
