"""The one switch between a laptop-sized course and the full-size experiments.

`COURSE_PROFILE=cpu` (the default without GPUs; what CI and the committed outputs use)
sizes every experiment to run in under 2 minutes on 2 cores with MNIST-1D; `gpu` (the
default with at least 2 GPUs) runs the report's CIFAR-10 experiments at full size over
NCCL. Notebooks read every size from here and never type one in.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

import torch

from .errors import ProfileError

ENV_VAR = "COURSE_PROFILE"


@dataclass(frozen=True)
class SgdSizes:
    """Notebook 01: GD vs SGD vs mini-batch, the batch-size sweep, the parallel search."""

    epochs: int = 10
    batch_sizes: tuple[int, ...] = (8, 32, 128, 512)
    lr: float = 0.001
    sweep_jobs: int = 2


@dataclass(frozen=True)
class CollectivesSizes:
    """Notebook 05: allreduce algorithms and their cost model."""

    world_sizes: tuple[int, ...] = (2, 4, 8)
    message_bytes: tuple[int, ...] = (1 << 10, 1 << 14, 1 << 18, 1 << 22)
    repeats: int = 5


@dataclass(frozen=True)
class PipelineSizes:
    """Notebook 06: pipeline schedules and the bubble."""

    stages: int = 4
    microbatches: tuple[int, ...] = (1, 2, 4, 8, 16)
    slot_seconds: float = 0.02


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    backend: str  # the torch.distributed backend the notebooks launch with
    world_size: int  # ranks a data-parallel notebook starts
    dataset: str  # "mnist1d" or "cifar10"
    model: str  # the model the training notebooks use by default
    launch_timeout: float  # seconds before a stuck launch is stopped
    sgd: SgdSizes = field(default_factory=SgdSizes)
    collectives: CollectivesSizes = field(default_factory=CollectivesSizes)
    pipeline: PipelineSizes = field(default_factory=PipelineSizes)


PROFILES = {
    "cpu": Profile(
        name="cpu",
        description="MNIST-1D on the CPU, gloo ranks on one machine; notebooks < 2 min on 2 cores",
        backend="gloo",
        world_size=4,
        dataset="mnist1d",
        model="mlp",
        launch_timeout=120.0,
        sgd=SgdSizes(epochs=10, batch_sizes=(8, 32, 128, 512), lr=0.01, sweep_jobs=2),
    ),
    "gpu": Profile(
        name="gpu",
        description="CIFAR-10 at full size as in the report: its CNN, 10 epochs, 4 ranks over NCCL",
        backend="nccl",
        world_size=4,
        dataset="cifar10",
        model="report_cnn",
        launch_timeout=3600.0,
        sgd=SgdSizes(epochs=10, batch_sizes=(8, 32, 128, 512), lr=0.001, sweep_jobs=4),
        collectives=CollectivesSizes(
            world_sizes=(2, 4), message_bytes=(1 << 10, 1 << 16, 1 << 20, 1 << 24, 1 << 26)
        ),
        pipeline=PipelineSizes(stages=4, microbatches=(1, 2, 4, 8, 16, 32), slot_seconds=0.01),
    ),
}


def default_name() -> str:
    """`gpu` only where the full-size experiments can run (two GPUs or more), else `cpu`."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return "gpu" if gpus >= 2 else "cpu"


def get(name: str | None = None) -> Profile:
    """The profile called `name`, else the one `COURSE_PROFILE` names, else the default."""
    chosen = name or os.environ.get(ENV_VAR) or default_name()
    key = chosen.strip().lower()
    if key not in PROFILES:
        raise ProfileError(
            f"unknown profile {chosen!r} (from {'the argument' if name else ENV_VAR}); "
            f"valid profiles: {', '.join(sorted(PROFILES))}."
        )
    profile = PROFILES[key]
    if profile.backend == "nccl":
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if gpus == 0:
            raise ProfileError(
                f"profile 'gpu' runs its ranks over NCCL and needs a GPU, but none is "
                f"visible. Use {ENV_VAR}=cpu."
            )
        if gpus < profile.world_size:  # one rank per GPU
            profile = replace(profile, world_size=gpus)
    return profile


def current() -> Profile:
    """The profile this session runs: what a notebook's first cell calls."""
    return get()
