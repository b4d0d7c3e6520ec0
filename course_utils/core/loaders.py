"""Loaders for in-memory data, and the one place that tells a sampler which epoch it is."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch.utils.data import Dataset, RandomSampler, SequentialSampler, TensorDataset


class TensorBatches:
    """The batches of in-memory tensors, in the order `sampler` gives their samples.

    A DataLoader, even over a BatchSampler, indexes each tensor with a list of Python ints
    and opens a profiler record for every batch: 70 µs a batch of 32 here, 0.5 ms one of
    512, a tenth to a third of a small model's update. Taking the pass's order as one index
    tensor and slicing it costs 15 µs and 150 µs, so an update's time is the model's work.
    The sampler is told the epoch as a DataLoader's is (`set_epoch` finds it).
    """

    def __init__(
        self, dataset: TensorDataset, sampler: Iterable[int], batch_size: int, drop_last: bool
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
        self.dataset, self.sampler = dataset, sampler
        self.batch_size, self.drop_last = batch_size, drop_last

    def __len__(self) -> int:
        last_partial = 0 if self.drop_last else self.batch_size - 1  # counts as a batch
        return (len(self.sampler) + last_partial) // self.batch_size

    def __iter__(self):
        order = torch.as_tensor(list(self.sampler), dtype=torch.long)  # cpu: indices
        for start in range(0, len(self) * self.batch_size, self.batch_size):
            index = order[start : start + self.batch_size]
            yield tuple(tensor[index] for tensor in self.dataset.tensors)


def tensor_loader(
    dataset: Dataset,
    batch_size: int,
    shuffle: bool = True,
    seed: int | None = None,
    drop_last: bool = False,
) -> TensorBatches:
    """Batches of `dataset` (tensors, or a Subset of them), reshuffled each pass if `shuffle`."""
    dataset = as_tensors(dataset)
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    order = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
    return TensorBatches(dataset, order, batch_size, drop_last)


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


def set_epoch(loader, epoch: int) -> None:
    """Tell a DistributedSampler (directly, or under a BatchSampler) which epoch this is."""
    candidates = [getattr(loader, "sampler", None), getattr(loader, "batch_sampler", None)]
    candidates += [getattr(c, "sampler", None) for c in list(candidates)]
    told = set()
    for sampler in candidates:
        if hasattr(sampler, "set_epoch") and id(sampler) not in told:
            told.add(id(sampler))
            sampler.set_epoch(epoch)
