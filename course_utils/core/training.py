"""One training loop for the whole course: single process, or inside each rank of a launch.

`train(model, loader, ...)` runs plain SGD or Adam with an optional lr schedule (a
callable step -> factor, so linear warmup is one lambda) and returns a `History` of plain
lists that can be sent back from a rank and plotted. It works unchanged on a model wrapped
in DistributedDataParallel with a loader from `data.shard_loader` (the sampler is told
the epoch, so each epoch reshuffles the same way on every rank), and then averages its
evaluation metrics over the ranks. The clock counts training only, never evaluation, so
seconds are comparable between runs that evaluate more or less often.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    RandomSampler,
    SequentialSampler,
    TensorDataset,
)

OPTIMIZERS = ("sgd", "adam")


@dataclass
class History:
    """What a run did, as plain lists: per step, per epoch, at evaluation points, and totals."""

    step_loss: list[float] = field(default_factory=list)  # mini-batch loss before each update
    step_seconds: list[float] = field(default_factory=list)  # training clock after each update
    epoch_train_loss: list[float] = field(default_factory=list)  # mean over the epoch's batches
    epoch_train_acc: list[float] = field(default_factory=list)
    epoch_val_loss: list[float] = field(default_factory=list)
    epoch_val_acc: list[float] = field(default_factory=list)
    epoch_seconds: list[float] = field(default_factory=list)  # training clock at each epoch's end
    eval_step: list[int] = field(default_factory=list)  # every `eval_every` updates, and at 0
    eval_samples: list[int] = field(default_factory=list)
    eval_seconds: list[float] = field(default_factory=list)
    eval_loss: list[float] = field(default_factory=list)
    test_loss: float | None = None
    test_acc: float | None = None
    steps: int = 0
    samples: int = 0
    seconds: float = 0.0
    epochs: int = 0  # completed passes over the loader
    config: dict = field(default_factory=dict)

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds else 0.0

    @property
    def samples_per_second(self) -> float:
        return self.samples / self.seconds if self.seconds else 0.0

    @property
    def seconds_per_epoch(self) -> float:
        """Mean training time of a full pass (the sweep chart's runtime)."""
        return self.epoch_seconds[-1] / len(self.epoch_seconds) if self.epoch_seconds else 0.0

    @property
    def step_loss_jitter(self) -> float:
        """Mean change of the mini-batch loss from one update to the next: the noise one sees."""
        pairs = list(zip(self.step_loss, self.step_loss[1:], strict=False))
        return sum(abs(b - a) for a, b in pairs) / len(pairs) if pairs else 0.0

    def loss_at(self, x: float, axis: str = "seconds") -> float:
        """The evaluated loss after `x` updates, samples or seconds (interpolated; held after)."""
        axes = {"updates": self.eval_step, "samples": self.eval_samples}
        xs = axes.get(axis, self.eval_seconds)
        if axis not in (*axes, "seconds") or not xs:
            raise ValueError("loss_at needs eval_every and axis in updates/samples/seconds.")
        return float(np.interp(x, xs, self.eval_loss))

    def as_dict(self) -> dict:
        return {
            **asdict(self),
            "steps_per_second": self.steps_per_second,
            "samples_per_second": self.samples_per_second,
        }


def tensor_loader(
    dataset: Dataset,
    batch_size: int,
    shuffle: bool = True,
    seed: int | None = None,
    drop_last: bool = False,
) -> DataLoader:
    """A loader that slices whole batches out of in-memory tensors.

    The default DataLoader fetches and stacks samples one by one, which for MNIST-1D costs
    more than the model; slicing keeps the time per update about the model's work.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
    dataset = as_tensors(dataset)
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    order = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
    batches = BatchSampler(order, batch_size, drop_last)
    return DataLoader(dataset, sampler=batches, batch_size=None)


def as_tensors(dataset: Dataset) -> TensorDataset:
    """A TensorDataset for a TensorDataset or a (nested) Subset of one, e.g. a random_split."""
    if isinstance(dataset, TensorDataset):
        return dataset
    indices = getattr(dataset, "indices", None)
    if indices is not None and hasattr(dataset, "dataset"):
        base = as_tensors(dataset.dataset)
        index = torch.as_tensor(list(indices), dtype=torch.long)
        return TensorDataset(*(t[index] for t in base.tensors))
    raise TypeError(f"expected a TensorDataset or a Subset of one, got {type(dataset).__name__}.")


def make_optimizer(model: nn.Module, optimizer, lr: float, momentum: float, weight_decay: float):
    if isinstance(optimizer, torch.optim.Optimizer):
        return optimizer
    if optimizer == "sgd":
        return torch.optim.SGD(
            model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay
        )
    if optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    raise ValueError(f"optimizer must be one of {OPTIMIZERS} or an Optimizer, got {optimizer!r}.")


def train(
    model: nn.Module,
    train_loader: Iterable,
    *,
    epochs: int = 1,
    lr: float = 0.01,
    optimizer: str | torch.optim.Optimizer = "sgd",
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    lr_schedule: Callable[[int], float] | None = None,
    val_loader: Iterable | None = None,
    test_loader: Iterable | None = None,
    eval_loader: Iterable | None = None,
    eval_every: int | None = None,
    max_steps: int | None = None,
    device: torch.device | str | None = None,
    seed: int | None = None,
    loss_fn: Callable | None = None,
    sync_metrics: bool | None = None,
    threads: int | None = None,
    progress: bool = False,
) -> History:
    """Train `model` in place for `epochs` passes (or `max_steps` updates) and return its History.

    `lr_schedule(step)` multiplies `lr` at every update. `eval_loader` is evaluated every
    `eval_every` updates (the loss curve against updates, samples and seconds); the
    validation and test loaders once per epoch and once at the end. `sync_metrics`
    (default: when the model is DDP-wrapped) averages evaluation metrics over the ranks.
    `threads` caps torch's threads for this call only: a small model runs no faster on
    two, and a second thread spinning against other processes can slow it tenfold.
    """
    with torch_threads(threads):
        if epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {epochs}.")
        if eval_every is not None and (eval_loader is None or eval_every < 1):
            raise ValueError("eval_every needs an eval_loader and a positive number of updates.")
        if seed is not None:
            torch.manual_seed(seed)
        device = torch.device(device) if device is not None else _model_device(model)
        model.to(device)
        loss_fn = loss_fn or nn.CrossEntropyLoss()
        opt = make_optimizer(model, optimizer, lr, momentum, weight_decay)
        scheduler = torch.optim.lr_scheduler.LambdaLR(opt, lr_schedule) if lr_schedule else None
        if sync_metrics is None:
            sync_metrics = isinstance(model, nn.parallel.DistributedDataParallel)
        history = History(
            config={"lr": lr, "optimizer": str(optimizer), "momentum": momentum, "epochs": epochs}
        )

        def evaluate(loader):
            return _evaluate(model, loader, loss_fn, device, sync_metrics)

        def checkpoint():
            history.eval_step.append(history.steps)
            history.eval_samples.append(history.samples)
            history.eval_seconds.append(history.seconds)
            history.eval_loss.append(evaluate(eval_loader)[0])

        if eval_every:
            checkpoint()
        bar = _progress_bar(epochs, progress)
        for epoch in range(epochs):
            _set_epoch(train_loader, epoch)
            model.train()
            loss_sum, correct, seen, stopped = 0.0, 0, 0, False
            started = time.perf_counter()
            for x, y in train_loader:
                if max_steps is not None and history.steps >= max_steps:
                    stopped = True  # checked before a batch, so a pass ending at max_steps counts
                    break
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                opt.zero_grad(set_to_none=True)
                logits = model(x)
                loss = loss_fn(logits, y)
                loss.backward()
                opt.step()
                if scheduler is not None:
                    scheduler.step()
                value = loss.item()
                history.step_loss.append(value)
                history.steps += 1
                history.samples += len(y)
                loss_sum += value * len(y)
                correct += int((logits.argmax(1) == y).sum())
                seen += len(y)
                history.step_seconds.append(history.seconds + time.perf_counter() - started)
                if eval_every and history.steps % eval_every == 0:
                    history.seconds += time.perf_counter() - started
                    checkpoint()
                    model.train()
                    started = time.perf_counter()
            history.seconds += time.perf_counter() - started
            if stopped:
                break
            history.epochs = epoch + 1
            history.epoch_seconds.append(history.seconds)
            history.epoch_train_loss.append(loss_sum / max(seen, 1))
            history.epoch_train_acc.append(correct / max(seen, 1))
            if val_loader is not None:
                val_loss, val_acc = evaluate(val_loader)
                history.epoch_val_loss.append(val_loss)
                history.epoch_val_acc.append(val_acc)
            if bar is not None:
                bar.set_postfix(loss=f"{history.epoch_train_loss[-1]:.3f}")
                bar.update(1)
        if bar is not None:
            bar.close()
        if eval_every and history.eval_step[-1] != history.steps:
            checkpoint()
        if test_loader is not None:
            history.test_loss, history.test_acc = evaluate(test_loader)
        return history


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


def _set_epoch(loader, epoch: int) -> None:
    """Tell a DistributedSampler (directly, or under a BatchSampler) which epoch this is."""
    candidates = [getattr(loader, "sampler", None), getattr(loader, "batch_sampler", None)]
    candidates += [getattr(c, "sampler", None) for c in list(candidates)]
    told = set()
    for sampler in candidates:
        if hasattr(sampler, "set_epoch") and id(sampler) not in told:
            told.add(id(sampler))
            sampler.set_epoch(epoch)


def _progress_bar(epochs: int, progress: bool):
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=epochs, desc="epochs", unit="epoch", leave=False)
