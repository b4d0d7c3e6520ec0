"""One training loop for the whole course: single process, or inside each rank of a launch.

`train(model, loader, Recipe(...))` runs plain SGD or Adam with an optional lr schedule (a
callable step -> factor, so linear warmup is one lambda) and returns a `History` of plain
lists that can be sent back from a rank and plotted. It works unchanged on a model wrapped
in DistributedDataParallel with a loader from `data.shard_loader` (the sampler is told
the epoch, so each epoch reshuffles the same way on every rank), and then averages its
evaluation metrics over the ranks. The clock counts training only, never evaluation, so
seconds are comparable between runs that evaluate more or less often. Small hooks let the
chapters use it rather than a loop of their own: gradient accumulation under `no_sync`,
averaging by hand after backward, a call after every update (to save a checkpoint), and a
per-phase clock for the DDP timings.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from . import progress
from .history import History, PhaseClock, Phases
from .loaders import TensorBatches, as_tensors, set_epoch, tensor_loader

__all__ = [
    "Evaluation",
    "History",
    "Phases",
    "as_tensors",
    "Recipe",
    "TensorBatches",
    "make_optimizer",
    "tensor_loader",
    "torch_threads",
    "train",
]

OPTIMIZERS = ("sgd", "adam")


def make_optimizer(model: nn.Module, recipe: Recipe) -> torch.optim.Optimizer:
    """The optimizer `recipe` names, over `model`'s parameters (or the one it holds)."""
    optimizer, lr, decay = recipe.optimizer, recipe.lr, recipe.weight_decay
    if isinstance(optimizer, torch.optim.Optimizer):
        return optimizer
    if optimizer == "sgd":
        return torch.optim.SGD(
            model.parameters(), lr=lr, momentum=recipe.momentum, weight_decay=decay
        )
    if optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=lr, weight_decay=decay)
    raise ValueError(f"optimizer must be one of {OPTIMIZERS} or an Optimizer, got {optimizer!r}.")


@dataclass(frozen=True)
class Recipe:
    """How `train` trains: for how long, in what updates, with which optimizer, where.

    Without `epochs`, one pass, or with `max_steps` as many passes as those updates need.
    Each update takes `accumulate` micro-batches (a DDP model syncs only on the last, under
    `no_sync` on the others). `lr_schedule(step)` multiplies `lr` at every update; a ready
    `torch.optim.Optimizer` may stand in for `optimizer`'s name. `threads` caps torch's
    threads for this call only: a small model runs no faster on two, and a second thread
    spinning against other processes can slow it tenfold. `progress` shows the bar of epochs
    (default: in a notebook only)."""

    epochs: int | None = None
    max_steps: int | None = None
    accumulate: int = 1
    lr: float = 0.01
    optimizer: str | torch.optim.Optimizer = "sgd"
    momentum: float = 0.0
    weight_decay: float = 0.0
    lr_schedule: Callable[[int], float] | None = None
    loss_fn: Callable | None = None  # default: cross-entropy
    seed: int | None = None
    threads: int | None = None
    device: torch.device | str | None = None  # default: where the model's weights are
    progress: bool | None = None


@dataclass(frozen=True)
class Evaluation:
    """What `train` evaluates, never on its clock: `val_loader` and `test_loader` once per
    epoch and once at the end, `eval_loader` every `eval_every` updates. `sync_metrics`
    (default: when the model is DDP-wrapped) averages the metrics over the ranks."""

    val_loader: Iterable | None = None
    test_loader: Iterable | None = None
    eval_loader: Iterable | None = None
    eval_every: int | None = None
    sync_metrics: bool | None = None


def train(
    model: nn.Module,
    train_loader: Iterable,
    recipe: Recipe = Recipe(),
    evaluation: Evaluation = Evaluation(),
    *,
    after_backward: Callable[[nn.Module], None] | None = None,
    after_step: Callable[[int, float], None] | None = None,
    clock_after: int | None = None,
) -> History:
    """Train `model` in place as `recipe` says, evaluating as `evaluation` says; return its
    History.

    After each update's backward, `after_backward(model)` (say, averaging gradients by hand),
    then the optimizer step. `after_step(steps, loss)` runs once each update is applied (say,
    to save a checkpoint that a resumed run continues from exactly). `clock_after=n` times
    forward, backward and optimizer of every update after the first n (the warm-up) into
    `History.phases`.
    """
    max_steps, accumulate = recipe.max_steps, recipe.accumulate
    eval_loader, eval_every = evaluation.eval_loader, evaluation.eval_every
    with torch_threads(recipe.threads):
        epochs = _check(recipe.epochs, max_steps, accumulate, after_backward, clock_after)
        if eval_every is not None and (eval_loader is None or eval_every < 1):
            raise ValueError("eval_every needs an eval_loader and a positive number of updates.")
        if recipe.seed is not None:
            torch.manual_seed(recipe.seed)
        device = torch.device(recipe.device) if recipe.device is not None else _model_device(model)
        model.to(device)
        loss_fn = recipe.loss_fn or nn.CrossEntropyLoss()
        opt = make_optimizer(model, recipe)
        scheduler = (
            torch.optim.lr_scheduler.LambdaLR(opt, recipe.lr_schedule)
            if recipe.lr_schedule
            else None
        )
        sync_metrics = evaluation.sync_metrics
        if sync_metrics is None:
            sync_metrics = isinstance(model, nn.parallel.DistributedDataParallel)
        config = {"lr": recipe.lr, "optimizer": str(recipe.optimizer), "momentum": recipe.momentum}
        history = History(config={**config, "epochs": epochs})
        clock = PhaseClock(clock_after, device)

        def evaluate(loader):
            return _evaluate(model, loader, loss_fn, device, sync_metrics)

        def checkpoint():
            history.eval_step.append(history.steps)
            history.eval_samples.append(history.samples)
            history.eval_seconds.append(history.seconds)
            history.eval_loss.append(evaluate(eval_loader)[0])

        if eval_every:
            checkpoint()
        bar = _progress_bar(epochs, recipe.progress)
        micro, losses = 0, []
        for epoch in range(epochs) if epochs else itertools.count():
            set_epoch(train_loader, epoch)
            model.train()
            loss_sum, correct, seen, stopped = 0.0, 0, 0, False
            started = time.perf_counter()
            for x, y in train_loader:
                if max_steps is not None and history.steps >= max_steps:
                    stopped = True  # checked before a batch, so a pass ending at max_steps counts
                    break
                last = (micro + 1) % accumulate == 0  # an update may span two passes
                if micro % accumulate == 0:
                    opt.zero_grad(set_to_none=True)
                micro += 1
                clock.start(history.steps)
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                with _syncing(model, last):
                    logits = model(x)
                    loss = loss_fn(logits, y)
                    clock.tick("forward")
                    (loss / accumulate if accumulate > 1 else loss).backward()
                if last and after_backward is not None:
                    after_backward(model)
                clock.tick("backward", len(y))
                if last:
                    opt.step()
                    if scheduler is not None:
                        scheduler.step()
                    clock.tick("optimizer")
                value = loss.item()
                losses.append(value)
                loss_sum += value * len(y)
                correct += int((logits.argmax(1) == y).sum())
                seen += len(y)
                history.samples += len(y)
                if not last:
                    continue
                history.step_loss.append(sum(losses) / len(losses))
                losses.clear()
                history.steps += 1
                history.step_seconds.append(history.seconds + time.perf_counter() - started)
                if after_step is not None:
                    after_step(history.steps, history.step_loss[-1])
                if eval_every and history.steps % eval_every == 0:
                    history.seconds += time.perf_counter() - started
                    checkpoint()
                    model.train()
                    started = time.perf_counter()
            history.seconds += time.perf_counter() - started
            if stopped:
                break
            if not seen and epochs is None:
                raise ValueError(
                    f"train_loader gave no batch in pass {epoch + 1} before max_steps={max_steps}:"
                    " pass a loader that can be iterated again (not a generator), or epochs."
                )
            history.epochs = epoch + 1
            history.epoch_seconds.append(history.seconds)
            history.epoch_train_loss.append(loss_sum / max(seen, 1))
            history.epoch_train_acc.append(correct / max(seen, 1))
            if evaluation.val_loader is not None:
                val_loss, val_acc = evaluate(evaluation.val_loader)
                history.epoch_val_loss.append(val_loss)
                history.epoch_val_acc.append(val_acc)
            bar.set_postfix(loss=f"{history.epoch_train_loss[-1]:.3f}")
            bar.update(1)
        bar.close()
        history.phases = clock.result(history.step_seconds)
        if eval_every and history.eval_step[-1] != history.steps:
            checkpoint()
        if evaluation.test_loader is not None:
            history.test_loss, history.test_acc = evaluate(evaluation.test_loader)
        return history


def _check(epochs, max_steps, accumulate, after_backward, clock_after) -> int | None:
    """Refuse arguments the loop cannot honour; the number of passes (None: until max_steps)."""
    if epochs is not None and epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}.")
    if max_steps is not None and max_steps < 1:
        raise ValueError(f"max_steps must be >= 1 update, got {max_steps}.")
    if accumulate < 1:
        raise ValueError(f"accumulate must be >= 1 micro-batch per update, got {accumulate}.")
    if after_backward is not None and not callable(after_backward):
        raise ValueError(f"after_backward must be a function of the model, got {after_backward!r}.")
    if clock_after is not None and clock_after < 0:
        raise ValueError(f"clock_after must be >= 0 warm-up updates, got {clock_after}.")
    return epochs if epochs is not None or max_steps is not None else 1


def _syncing(model: nn.Module, sync: bool):
    """DDP's `no_sync` on a micro-batch that must not all-reduce yet; else nothing."""
    if sync or not isinstance(model, nn.parallel.DistributedDataParallel):
        return contextlib.nullcontext()
    return model.no_sync()


@contextlib.contextmanager
def torch_threads(threads: int | None):
    """Run the block with at most `threads` torch threads (None: leave them), then restore."""
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(max(1, min(threads, before)))
    try:
        yield
    finally:
        torch.set_num_threads(before)


@torch.no_grad()
def _evaluate(model, loader, loss_fn, device, sync: bool) -> tuple[float, float]:
    """Mean loss and accuracy over `loader`; with `sync`, over every rank's share together."""
    model.eval()
    totals = torch.zeros(3, dtype=torch.float64, device=device)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        logits = model(x)
        totals[0] += float(loss_fn(logits, y)) * len(y)
        totals[1] += int((logits.argmax(1) == y).sum())
        totals[2] += len(y)
    if sync and dist.is_available() and dist.is_initialized():
        dist.all_reduce(totals)
    count = max(float(totals[2]), 1.0)
    return float(totals[0]) / count, float(totals[1]) / count


def _model_device(model: nn.Module) -> torch.device:
    first = next(model.parameters(), None)
    return first.device if first is not None else torch.device("cpu")


def _progress_bar(epochs: int | None, show: bool | None):
    """Epochs done; by default in a notebook only (inside a rank, rank 0's goes to the parent)."""
    return progress.bar(epochs, "epochs", "epoch", show=show)
