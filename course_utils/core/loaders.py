"""Loaders for in-memory data, and the one place that tells a sampler which epoch it is."""

from __future__ import annotations

import torch
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    RandomSampler,
    SequentialSampler,
    TensorDataset,
)


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


def set_epoch(loader, epoch: int) -> None:
    """Tell a DistributedSampler (directly, or under a BatchSampler) which epoch this is."""
    candidates = [getattr(loader, "sampler", None), getattr(loader, "batch_sampler", None)]
    candidates += [getattr(c, "sampler", None) for c in list(candidates)]
    told = set()
    for sampler in candidates:
        if hasattr(sampler, "set_epoch") and id(sampler) not in told:
            told.add(id(sampler))
            sampler.set_epoch(epoch)
