"""The one switch between a laptop-sized course and the full-size experiments.

`COURSE_PROFILE=cpu` (the default without GPUs; what CI and the committed outputs use)
sizes every experiment to run in under 2 minutes on 2 cores with MNIST-1D; `gpu` (the
default with at least 2 GPUs) runs the report's CIFAR-10 experiments at full size over
NCCL. Notebooks read every size from here and never type one in.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from . import backends
from .errors import ProfileError
from .gpus import visible_gpus
from .sizes import (
    CollectivesSizes,
    DataParallelSizes,
    FailuresSizes,
    MemorySizes,
    ParamServerSizes,
    ScalingSizes,
    SgdSizes,
    SharpMinimaSizes,
)
from .sizes_model_parallel import MeshSizes, PipelineSizes, TransformerSizes

ENV_VAR = "COURSE_PROFILE"


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    backend: str  # the torch.distributed backend the notebooks launch with
    world_size: int  # ranks a data-parallel notebook starts
    dataset: str  # "mnist1d" or "cifar10"
    model: str  # the model the training notebooks use by default
    launch_timeout: float  # seconds before a stuck launch is stopped
    # the network the timing lessons run over: "auto" (real where every rank has a core or
    # a GPU, else `simulated_link`), "real", or a simulated one (a preset such as "10gbe",
    # or "100mbit,2ms"); see course_utils.network and `default_link` below
    link: str = "auto"
    simulated_link: str = "100mbit,5ms"  # what "auto" crosses when the ranks outnumber the cores
    sgd: SgdSizes = field(default_factory=SgdSizes)
    collectives: CollectivesSizes = field(default_factory=CollectivesSizes)
    pipeline: PipelineSizes = field(default_factory=PipelineSizes)
    param_server: ParamServerSizes = field(default_factory=ParamServerSizes)
    ddp: DataParallelSizes = field(default_factory=DataParallelSizes)
    sharp: SharpMinimaSizes = field(default_factory=SharpMinimaSizes)
    scaling: ScalingSizes = field(default_factory=ScalingSizes)
    memory: MemorySizes = field(default_factory=MemorySizes)
    failures: FailuresSizes = field(default_factory=FailuresSizes)
    transformer: TransformerSizes = field(default_factory=TransformerSizes)
    mesh: MeshSizes = field(default_factory=MeshSizes)
    gpus: int = 0  # the GPUs its NCCL rank counts were fitted to (`fit_to_gpus`)

    @property
    def device(self) -> str:
        """Where a notebook's own (not a rank's) work runs: 'cuda' for the profile that runs
        over NCCL, which `get` only hands out where NVML counted GPUs, else 'cpu'. Asking
        `torch.cuda.is_available()` instead would start CUDA's driver in the kernel without
        torch knowing, and the sweeps' forked trials would then fail at their first CUDA
        call."""
        return "cuda" if self.backend == "nccl" else "cpu"

    def backend_for_ranks(self, world_size: int) -> str:
        """The profile's backend where `world_size` ranks each get a GPU of their own, else
        gloo on the CPU: 04's two-rank overlap demonstrations still run on a one-GPU box."""
        fits = self.backend != "nccl" or world_size <= self.gpus
        return self.backend if fits else backends.GLOO

    def backend_for(self, chapter: str) -> str:
        """The backend chapter `chapter` ("05") launches its ranks with (`core.backends`)."""
        return backends.chapter_backend(self.backend, chapter)

    def runs_on(self, chapter: str) -> str:
        """The line a notebook prints about where its ranks run, and why."""
        return backends.runs_on(self.backend, chapter)


PROFILES = {
    "cpu": Profile(
        name="cpu",
        description="MNIST-1D on the CPU, gloo ranks on one machine; notebooks < 2 min on 2 cores",
        backend="gloo",
        world_size=4,
        dataset="mnist1d",
        model="mlp",
        launch_timeout=120.0,
        sgd=SgdSizes(
            epochs=10,
            batch_sizes=(8, 32, 128, 512),
            lr=0.01,
            momentum=0.9,
            hidden=128,
            threads=1,
            sweep_jobs=2,
            sweep_seeds=(0, 1),
            compare_lr=0.05,
            gd_steps=200,
            sgd_steps=3000,
        ),
    ),
    "gpu": Profile(
        name="gpu",
        description="CIFAR-10 at full size as in the report: its CNN, 10 epochs, 4 ranks over NCCL",
        backend="nccl",
        world_size=4,
        dataset="cifar10",
        model="report_cnn",
        launch_timeout=3600.0,
        sgd=SgdSizes(
            epochs=10,
            batch_sizes=(8, 32, 128, 512),
            lr=0.001,
            momentum=0.9,
            threads=None,
            sweep_jobs=4,
            compare_samples=10_000,
            compare_lr=0.01,
            gd_steps=300,
            sgd_steps=10_000,
            minibatch_epochs=3,
            noise_batch_sizes=(1, 4, 16, 64, 256, 1024, 4096),
        ),
        collectives=CollectivesSizes(
            world_sizes=(2, 4),
            message_bytes=(1 << 10, 1 << 15, 1 << 20, 1 << 24, 1 << 26),
            pingpong_bytes=(1 << 10, 1 << 15, 1 << 20, 1 << 24, 1 << 26),
            busbw_bytes=tuple(1 << k for k in range(12, 27)),  # every power of 2
            repeats=10,
            check_world_sizes=(1, 2, 3, 4),
            exercise_timeout=30.0,
        ),
        pipeline=PipelineSizes(
            stages=4,
            microbatches=(1, 2, 4, 8, 16, 32),
            picture_slot_seconds=0.05,
            micro_batch_size=32,
            hidden=256,
            tp_ranks=2,
            tp_widths=(40, 1024, 1024, 1024, 10),
            tp_batch=128,
        ),
        param_server=ParamServerSizes(
            hidden=256,
            gradients=3000,
            straggler_delay=0.2,  # a hidden-256 update takes 0.12 s on the link: outlast it
            compare_updates=500,
            averaging_steps=3000,
            average_every=(1, 8, 32, 128),
            eval_samples=4000,
            snapshot_every=50,
            timeout=600.0,
        ),
        ddp=DataParallelSizes(
            hidden=None,
            per_rank_batch=8,
            lr=0.01,
            compare_epochs=10,
            scaling_world_size=4,
            scaling_per_rank_batches=(2, 8, 32, 128),
            scaling_base_lr=0.001,
            scaling_epochs=10,
            overhead_world_size=4,
            overlap_link="real",
        ),
        sharp=SharpMinimaSizes(
            hidden=None,
            small_batch=64,
            large_batch=4096,
            small_lr=0.01,
            large_lr=0.05,
            max_steps=200_000,
            measure_samples=5000,
            sweep_jobs=4,
            threads=None,
        ),
        scaling=ScalingSizes(
            hidden=None,
            base_lr=0.001,  # the report's
            batch_sizes=(8, 32, 128, 512, 2048, 8192),
            epochs=10,
            sweep_jobs=4,
            threads=None,
        ),
        transformer=TransformerSizes(
            vocab=256,
            width=512,
            heads=8,
            blocks=4,
            seq_len=512,
            batch=8,
            experts=8,
            threads=None,
            timeout=600.0,
        ),
    ),
}


def default_name() -> str:
    """`gpu` only where the full-size experiments can run (two GPUs or more), else `cpu`."""
    return "gpu" if visible_gpus().count >= 2 else "cpu"


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
        gpus = visible_gpus().count
        if gpus == 0:
            raise ProfileError(
                f"profile 'gpu' runs its ranks over NCCL and needs a GPU, but none is "
                f"visible. Use {ENV_VAR}=cpu."
            )
        profile = fit_to_gpus(profile, gpus)
    return profile


def fit_to_gpus(profile: Profile, gpus: int) -> Profile:
    """Every rank count the profile runs over NCCL, cut to one rank per visible GPU.

    NCCL cannot put two ranks on one GPU, so a 4-rank experiment on a 2-GPU machine runs on
    2 ranks (its effective batch shrinks with it); the sweeps keep the sizes that fit. On one
    GPU a sweep over rank counts would keep only 1, so 04's sweeps over a simulated link keep
    every size and run as gloo ranks on the CPU (`Profile.backend_for_ranks`).
    """
    ddp = profile.ddp
    fitted_ddp = replace(
        ddp,
        scaling_world_size=min(ddp.scaling_world_size, gpus),
        overhead_world_size=min(ddp.overhead_world_size, gpus),
    )
    if gpus >= 2:
        fitted_ddp = replace(
            fitted_ddp,
            split_world_sizes=tuple(n for n in ddp.split_world_sizes if n <= gpus) or (1,),
            strong_world_sizes=tuple(n for n in ddp.strong_world_sizes if n <= gpus) or (1,),
        )
    fitted_transformer = replace(
        profile.transformer,
        world_sizes=tuple(n for n in profile.transformer.world_sizes if n <= gpus) or (1,),
    )
    return replace(
        profile,
        world_size=min(profile.world_size, gpus),
        gpus=gpus,
        ddp=fitted_ddp,
        transformer=fitted_transformer,
    )


def default_link() -> str:
    """The link the timing lessons use unless told otherwise: the current profile's, 'auto'.

    'auto' is the real link wherever every rank has a core of its own or a GPU: then a time
    is the wall clock's (`network.fabric.resolve`). Where the ranks outnumber the cores it
    is `simulated_link`.
    """
    return current().link


def simulated_link() -> str:
    """What 'auto' crosses where the ranks outnumber the cores: the current profile's.

    100 Mbit/s with 5 ms latency: Fast-Ethernet bandwidth with the latency of a busy
    shared network (a campus LAN through a few switches and a TCP stack, or Wi-Fi). Its
    wire time must dominate what the ranks really cost each other when 8 of them share 2
    cores: a step of a ring there costs a few milliseconds (a woken rank can wait a
    scheduler tick for a core), which the simulator hides behind its wire
    (`network.clock`) only while alpha exceeds it; a 2 MB message's 170 ms is 5x what the
    real loopback needs even on 8 ranks. It is still fast enough that the lessons'
    messages (1 KB to 2 MB) span the latency- and the bandwidth-bound regimes in seconds.
    Every time on it is on the simulated clock, and says so; what a verdict may check
    there is the schedule of the code that sent the messages, never the formula the
    simulator charged (`core.timing_claims`).
    """
    return current().simulated_link


def current() -> Profile:
    """The profile this session runs: what a notebook's first cell calls."""
    return get()
