"""Where a DDP step's time goes, and what cuts the communication.

The report's DDP run was about 6x slower than one process at the same effective batch,
because every backward ends in an all-reduce of every gradient. Here each step is cut
into measured pieces (forward, backward compute, waiting for the all-reduce, optimizer)
from timestamps, and the usual fixes are timed on the same samples: larger per-rank
batches, accumulating gradients under `no_sync` (and, as its control, without it), the
bucket size, and an fp16 compression hook.
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

from ..core import progress
from ..core.history import History
from ..core.training import Recipe, tensor_loader, train
from ..network import wire
from ..network.wire import REAL
from ..ranks.bootstrap import device, synchronize
from ..ranks.launch import launch
from .equivalence import Setup, build_model, load_data, rank_loader, wrap
from .overlap import stacked_mlp
from .recorder import Recorder, recording_hook
from .wire import OnLink, on_link_hook, powersgd_state

WARMUP_UPDATES = 3  # untimed: the first updates allocate memory and build DDP's buckets


@dataclass(frozen=True)
class Variant:
    """One way of running the same training: batch per rank, syncs, buckets, compression."""

    name: str
    per_rank_batch: int
    accumulate: int = 1  # micro-batches per update
    bucket_cap_mb: float = 25.0
    hook: str = "allreduce"
    no_sync: bool = True  # False: every micro-batch's backward all-reduces, not only the last


@dataclass
class StepTimes:
    """Measured seconds over the timed samples of one rank (or the single process)."""

    name: str
    world_size: int
    per_rank_batch: int
    accumulate: int
    samples: int  # samples this rank processed while timed
    seconds: float
    forward: float
    backward: float  # includes waiting for the all-reduce to finish
    communication: float  # time from the first bucket's all-reduce start to the last one's end
    optimizer: float
    syncs: int  # backward passes that all-reduced (one process: its updates)
    buckets: int = 0

    @property
    def compute(self) -> float:
        return max(self.forward + self.backward - self.communication, 0.0) + self.optimizer

    @property
    def effective_batch(self) -> int:
        """Samples per update, all ranks together."""
        return self.world_size * self.per_rank_batch * self.accumulate

    @property
    def seconds_per_1000_samples(self) -> float:
        """Wall time for 1000 samples of the *global* batch stream (all ranks together)."""
        return 1000 * self.seconds / (self.samples * self.world_size)


def _timed_training(model, loader, variant: Variant, samples: int, threads=None, hook=None):
    """Enough updates of `variant` for `samples` timed samples, after the warm-up updates;
    `hook` runs after each update's backward."""
    updates = math.ceil(samples / (variant.per_rank_batch * variant.accumulate))
    steps = WARMUP_UPDATES + updates
    recipe = Recipe(lr=0.01, max_steps=steps, accumulate=variant.accumulate, threads=threads)
    return train(model, loader, recipe, clock_after=WARMUP_UPDATES, after_backward=hook)


def _step_times(variant: Variant, world_size: int, history: History, recorder=None) -> StepTimes:
    p = history.phases
    communication = sum(recorder.spans[WARMUP_UPDATES:]) if recorder else 0.0
    syncs = sum(recorder.syncs[WARMUP_UPDATES:]) if recorder else p.steps
    return StepTimes(
        variant.name, world_size, variant.per_rank_batch, variant.accumulate, p.samples,
        p.seconds, p.forward, p.backward, communication, p.optimizer, syncs,
        recorder.buckets if recorder else 0,
    )  # fmt: skip


def time_replica(setup: Setup, variant: Variant, samples: int, link=REAL) -> StepTimes:
    """Inside a rank: time `samples` of DDP training under `variant`, over `link`."""
    d = load_data(setup)
    model = wrap(build_model(setup, d), bucket_cap_mb=variant.bucket_cap_mb)
    if not variant.no_sync:  # the training loop calls model.no_sync(): make it do nothing
        model.no_sync = contextlib.nullcontext
    state = powersgd_state() if variant.hook == "powersgd" else None
    on = OnLink(variant.hook, wire.parse(link), state)
    recorder = Recorder(lambda _, bucket: on_link_hook(on, bucket))
    model.register_comm_hook(recorder, recording_hook)
    loader = rank_loader(d.train, variant.per_rank_batch, setup.seed)
    with wire.active(on.link):
        history = _timed_training(model, loader, variant, samples, hook=recorder.close_update)
    return _step_times(variant, dist.get_world_size(), history, recorder)


def time_single(setup: Setup, batch: int, samples: int, name: str = "one process") -> StepTimes:
    """The one-process baseline at the same effective batch, on this rank's device.

    One thread, like each rank: a model this small runs no faster on two, and a second
    thread competing for a busy core can make it several times slower.
    """
    d = load_data(setup)
    loader = tensor_loader(d.train, batch, shuffle=True, seed=setup.seed)
    variant = Variant(name, batch)
    model = build_model(setup, d, device())
    history = _timed_training(model, loader, variant, samples, threads=1)
    return _step_times(variant, 1, history)


def _bare_allreduce(setup: Setup, repeats: int) -> tuple[int, float]:
    """Inside a rank: the model's gradient bytes, and the median seconds of one
    `dist.all_reduce` of that many floats with the ranks lined up first (no DDP, no hook)."""
    d = load_data(setup)
    grad = torch.ones(sum(p.numel() for p in build_model(setup, d).parameters()), device=device())
    seconds = []
    for _ in range(WARMUP_UPDATES + repeats):
        dist.barrier()  # so that no rank's wait for a late one is counted
        start = time.perf_counter()
        dist.all_reduce(grad)
        synchronize()
        seconds.append(time.perf_counter() - start)
    return grad.numel() * grad.element_size(), sorted(seconds[WARMUP_UPDATES:])[repeats // 2]


def bare_allreduce(
    setup: Setup | None = None, world_size: int = 2, backend: str = "gloo", repeats: int = 50
) -> tuple[int, float]:
    """The gradient's bytes and what one bare all-reduce of them costs on this machine, to
    set beside naive DDP's all-reduce share per update: the difference is per-step overhead
    (DDP's reducer and hook, ranks waiting for each other), not bytes on a link."""
    setup = setup or Setup()
    load_data(setup)
    timed = launch(_bare_allreduce, world_size, backend=backend, args=(setup, repeats))
    return timed[0][0], max(seconds for _, seconds in timed)


def _slowest(times: list[StepTimes]) -> StepTimes:
    """A synchronous step is as slow as its slowest rank."""
    return max(times, key=lambda t: t.seconds)


def _median(runs: list[StepTimes]) -> StepTimes:
    return sorted(runs, key=lambda t: t.seconds)[len(runs) // 2]


def time_rounds(time_one, runs: list, repeats: int, desc: str) -> list[list[StepTimes]]:
    """Inside a rank: `repeats` rounds of `time_one(run)` for every run in turn, all in one
    launch: starting ranks can cost more than a run (about 13 s a spawned NCCL rank on an
    H200), and a busy spell of the machine falls on a whole round rather than on one run."""
    rounds = [[] for _ in range(repeats)]
    with progress.bar(len(runs) * repeats, desc, "run") as bar:
        for row in rounds:
            for run in runs:
                bar.set_postfix(run=getattr(run, "name", run))
                row.append(time_one(run))
                bar.update(1)
    return rounds


def measure(
    variants: list[Variant], world_size: int, samples_per_rank: int, setup: Setup | None = None,
    repeats: int = 1, backend: str = "gloo", link=REAL,
) -> list[StepTimes]:  # fmt: skip
    """Time each variant on `world_size` ranks (median of `repeats` rounds), over `link`
    (None: the profile's; the cpu profile's is emulated, so the wire, not the shared
    cores, sets the communication time). The backend puts the ranks on its devices."""
    setup = setup or Setup()
    load_data(setup)
    on = wire.resolve(link, world_size, backend)
    time_one = functools.partial(time_replica, setup, samples=samples_per_rank, link=on)
    args = (time_one, variants, repeats, f"DDP on {world_size} ranks")
    by_rank = launch(time_rounds, world_size, backend=backend, args=args)
    return [
        _median([_slowest([rounds[k][i] for rounds in by_rank]) for k in range(repeats)])
        for i in range(len(variants))
    ]


def measure_single(
    batch: int, samples: int, setup: Setup | None = None, repeats: int = 1, backend: str = "gloo"
) -> StepTimes:
    """The one-process baseline, in rounds on one rank so it lands on the backend's device."""
    setup = setup or Setup()
    load_data(setup)
    time_one = functools.partial(time_single, setup, samples=samples)
    args = (time_one, [batch], repeats, f"one process, batch {batch}")
    (rounds,) = launch(time_rounds, 1, backend=backend, args=args)
    return _median([row[0] for row in rounds])


def standard_variants(
    per_rank_batch: int, accumulate: int = 4, bucket_caps: tuple = (0.001, 0.01)
) -> list[Variant]:
    """Naive DDP and its fixes, every one at naive DDP's effective batch (ranks x batch).

    `no_sync` accumulates `accumulate` micro-batches of batch / accumulate per sync, so it
    syncs as often per sample as naive DDP: at an equal effective batch it saves memory,
    not communication. What it saves shows against its control, the same micro-batches
    accumulated without `no_sync`, which all-reduces after every one of them: `accumulate`
    times the syncs for the same update. The others change how the same gradient crosses
    the link.
    """
    micro = per_rank_batch // accumulate
    if micro * accumulate != per_rank_batch:
        raise ValueError(f"per_rank_batch={per_rank_batch} is not a multiple of {accumulate}.")
    return [
        Variant("naive DDP", per_rank_batch),
        Variant(f"no_sync {accumulate} x {micro}", micro, accumulate=accumulate),
        Variant(f"{accumulate} x {micro} without no_sync", micro, accumulate, no_sync=False),
        *[Variant(f"{cap:g} MB buckets", per_rank_batch, bucket_cap_mb=cap) for cap in bucket_caps],
        Variant("fp16 hook", per_rank_batch, hook="fp16"),
        Variant("PowerSGD hook", per_rank_batch, hook="powersgd"),
    ]


def overlap_timeline(
    world_size: int = 2, layers: int = 6, width: int = 512, batch: int = 256,
    bucket_cap_mb: float = 1.0, steps: int = 4, backend: str = "gloo",
) -> dict:  # fmt: skip
    """When each layer's gradient is ready and when each bucket's all-reduce runs (rank 0).

    Gradients are ready from the last layer back to the first; DDP starts a bucket's
    all-reduce as soon as the bucket is full, while earlier layers still back-propagate.
    """
    return launch(
        _overlap_rank,
        world_size,
        backend=backend,
        args=(layers, width, batch, bucket_cap_mb, steps),
    )[0]


def _overlap_rank(layers: int, width: int, batch: int, bucket_cap_mb: float, steps: int) -> dict:
    torch.manual_seed(0)
    net = stacked_mlp(layers, width)
    model = wrap(net, bucket_cap_mb=bucket_cap_mb)
    recorder = Recorder(default_hooks.allreduce_hook)
    model.register_comm_hook(recorder, recording_hook)
    ready: dict[str, float] = {}
    linears = [
        (f"layer {i + 1}", m) for i, m in enumerate(m for m in net if isinstance(m, nn.Linear))
    ]
    for name, layer in linears:
        layer.weight.register_post_accumulate_grad_hook(
            lambda p, name=name: ready.__setitem__(name, time.perf_counter())
        )
    where = device()
    x, y = torch.randn(batch, width, device=where), torch.randint(0, 10, (batch,), device=where)
    for _ in range(steps):  # the last step is recorded; the first ones build the buckets
        recorder.events.clear()
        ready.clear()
        loss = nn.functional.cross_entropy(model(x), y)
        synchronize(where)
        start = time.perf_counter()
        loss.backward()
        synchronize(where)
        end = time.perf_counter()
    return {
        "layers": [(name, ready[name] - start) for name, _ in linears],
        "allreduces": sorted(
            (s - start, e - start, idx, nbytes) for s, e, idx, nbytes in recorder.events
        ),
        "backward_seconds": end - start,
    }
