"""Where a DDP step's time goes, and what cuts the communication.

The report's DDP run was about 6x slower than one process at the same effective batch,
because every backward ends in an all-reduce of every gradient. Here each step is cut
into measured pieces (forward, backward compute, waiting for the all-reduce, optimizer)
from timestamps, and the usual fixes are timed on the same samples: larger per-rank
batches, accumulating gradients under `no_sync`, the bucket size, and an fp16
compression hook.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from dataclasses import asdict, dataclass, field

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

from ..core.training import tensor_loader, torch_threads
from ..ranks.launch import launch
from .equivalence import Setup, build_model, load_data, rank_loader, wrap

HOOKS = {"allreduce": default_hooks.allreduce_hook, "fp16": default_hooks.fp16_compress_hook}


@dataclass(frozen=True)
class Variant:
    """One way of running the same training: batch per rank, syncs, buckets, compression."""

    name: str
    per_rank_batch: int
    accumulate: int = 1  # micro-batches per all-reduce (no_sync on the others)
    bucket_cap_mb: float = 25.0
    hook: str = "allreduce"


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
    syncs: int
    buckets: int = 0

    @property
    def compute(self) -> float:
        return max(self.forward + self.backward - self.communication, 0.0) + self.optimizer

    @property
    def seconds_per_1000_samples(self) -> float:
        """Wall time for 1000 samples of the *global* batch stream (all ranks together)."""
        return 1000 * self.seconds / (self.samples * self.world_size)

    def as_dict(self) -> dict:
        return {**asdict(self), "compute": self.compute}


@dataclass
class _Recorder:
    """The comm hook's state: the real hook, and (start, end, bucket, bytes) per all-reduce."""

    inner: object
    events: list = field(default_factory=list)


def recording_hook(recorder: _Recorder, bucket):
    """Run the real hook (default group) and note when its all-reduce starts and completes."""
    start = time.perf_counter()
    future = recorder.inner(None, bucket)
    nbytes = bucket.buffer().numel() * bucket.buffer().element_size()
    index = bucket.index()

    def finished(fut):
        recorder.events.append((start, time.perf_counter(), index, nbytes))
        return fut.value()

    return future.then(finished)


def _timed_steps(model, loader, variant: Variant, samples: int, recorder=None, warmup: int = 3):
    """Run micro-batches until `samples` have been timed; split each into its phases."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    phases = {"forward": 0.0, "backward": 0.0, "optimizer": 0.0, "communication": 0.0}
    seen, micro, syncs, start = 0, 0, 0, None
    batches = _forever(loader)
    where = next(model.parameters()).device
    while seen < samples:
        x, y = next(batches)
        x, y = x.to(where), y.to(where)
        timing = micro >= warmup * variant.accumulate
        if timing and start is None:
            start = time.perf_counter()
        sync = (micro + 1) % variant.accumulate == 0
        quiet = model.no_sync() if isinstance(model, DDP) and not sync else contextlib.nullcontext()
        if recorder is not None:
            recorder.events.clear()
        t0 = time.perf_counter()
        with quiet:
            loss = nn.functional.cross_entropy(model(x), y)
            t1 = time.perf_counter()
            loss.backward()
        t2 = time.perf_counter()
        if sync:
            opt.step()
            opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        micro += 1
        if not timing:
            continue
        seen += len(y)
        syncs += int(sync)
        phases["forward"] += t1 - t0
        phases["backward"] += t2 - t1
        phases["optimizer"] += t3 - t2
        if recorder is not None and recorder.events:
            phases["communication"] += max(e[1] for e in recorder.events) - min(
                e[0] for e in recorder.events
            )
    return seen, time.perf_counter() - start, syncs, phases


def _forever(loader):
    epoch = 0
    while True:
        sampler = getattr(loader.sampler, "sampler", loader.sampler)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        yield from loader
        epoch += 1


def time_replica(setup: Setup, variant: Variant, samples: int) -> StepTimes:
    """Inside a rank: time `samples` of DDP training under `variant`."""
    d = load_data(setup)
    model = wrap(build_model(setup, d), bucket_cap_mb=variant.bucket_cap_mb)
    recorder = _Recorder(HOOKS[variant.hook])
    model.register_comm_hook(recorder, recording_hook)
    loader = rank_loader(d.train, variant.per_rank_batch, setup.seed)
    seen, seconds, syncs, phases = _timed_steps(model, loader, variant, samples, recorder)
    buckets = len({e[2] for e in recorder.events}) if recorder.events else 0
    return StepTimes(
        variant.name, dist.get_world_size(), variant.per_rank_batch, variant.accumulate,
        seen, seconds, phases["forward"], phases["backward"], phases["communication"],
        phases["optimizer"], syncs, buckets,
    )  # fmt: skip


def time_single(setup: Setup, batch: int, samples: int, name: str = "one process") -> StepTimes:
    """The one-process baseline at the same effective batch.

    One thread, like each rank: a model this small runs no faster on two, and a second
    thread competing for a busy core can make it several times slower.
    """
    d = load_data(setup)
    model = build_model(setup, d)
    loader = tensor_loader(d.train, batch, shuffle=True, seed=setup.seed)
    variant = Variant(name, batch)
    with torch_threads(1):
        seen, seconds, syncs, phases = _timed_steps(model, loader, variant, samples)
    return StepTimes(
        name, 1, batch, 1, seen, seconds, phases["forward"], phases["backward"], 0.0,
        phases["optimizer"], syncs,
    )  # fmt: skip


def _slowest(times: list[StepTimes]) -> StepTimes:
    """A synchronous step is as slow as its slowest rank."""
    return max(times, key=lambda t: t.seconds)


def measure(
    variants: list[Variant], world_size: int, samples_per_rank: int, setup: Setup | None = None,
    repeats: int = 1,
) -> list[StepTimes]:  # fmt: skip
    """Time each variant on `world_size` gloo ranks (median of `repeats` launches)."""
    setup = setup or Setup()
    load_data(setup)
    results = []
    for variant in variants:
        runs = [
            _slowest(
                launch(
                    time_replica,
                    world_size,
                    backend="gloo",
                    args=(setup, variant, samples_per_rank),
                )
            )
            for _ in range(repeats)
        ]
        results.append(sorted(runs, key=lambda t: t.seconds)[len(runs) // 2])
    return results


def measure_single(batch: int, samples: int, setup: Setup | None = None, repeats: int = 1):
    setup = setup or Setup()
    runs = [time_single(setup, batch, samples) for _ in range(repeats)]
    return sorted(runs, key=lambda t: t.seconds)[len(runs) // 2]


def standard_variants(per_rank_batch: int, accumulate: int = 8) -> list[Variant]:
    """Naive DDP and the four fixes the notebook compares, all from the same per-rank batch."""
    return [
        Variant("naive DDP", per_rank_batch),
        Variant(f"{accumulate}x larger batch", per_rank_batch * accumulate),
        Variant(f"no_sync x{accumulate}", per_rank_batch, accumulate=accumulate),
        Variant("tiny buckets", per_rank_batch, bucket_cap_mb=0.001),
        Variant("fp16 hook", per_rank_batch, hook="fp16"),
    ]


def overlap_timeline(
    world_size: int = 2, layers: int = 6, width: int = 512, batch: int = 256,
    bucket_cap_mb: float = 1.0, steps: int = 4,
) -> dict:  # fmt: skip
    """When each layer's gradient is ready and when each bucket's all-reduce runs (rank 0).

    Gradients are ready from the last layer back to the first; DDP starts a bucket's
    all-reduce as soon as the bucket is full, while earlier layers still back-propagate.
    """
    return launch(
        _overlap_rank, world_size, backend="gloo", args=(layers, width, batch, bucket_cap_mb, steps)
    )[0]


def _overlap_rank(layers: int, width: int, batch: int, bucket_cap_mb: float, steps: int) -> dict:
    torch.manual_seed(0)
    blocks = []
    for i in range(layers):
        blocks += [nn.Linear(width, width), nn.ReLU()] if i < layers - 1 else [nn.Linear(width, 10)]
    net = nn.Sequential(*blocks)
    model = DDP(net, bucket_cap_mb=bucket_cap_mb)
    recorder = _Recorder(HOOKS["allreduce"])
    model.register_comm_hook(recorder, recording_hook)
    ready: dict[str, float] = {}
    linears = [
        (f"layer {i + 1}", m) for i, m in enumerate(m for m in net if isinstance(m, nn.Linear))
    ]
    for name, layer in linears:
        layer.weight.register_post_accumulate_grad_hook(
            lambda p, name=name: ready.__setitem__(name, time.perf_counter())
        )
    x, y = torch.randn(batch, width), torch.randint(0, 10, (batch,))
    for _ in range(steps):  # the last step is recorded; the first ones build the buckets
        recorder.events.clear()
        ready.clear()
        loss = nn.functional.cross_entropy(model(x), y)
        start = time.perf_counter()
        loss.backward()
        end = time.perf_counter()
    return {
        "layers": [(name, ready[name] - start) for name, _ in linears],
        "allreduces": sorted(
            (s - start, e - start, idx, nbytes) for s, e, idx, nbytes in recorder.events
        ),
        "backward_seconds": end - start,
    }


def median(values: list[float]) -> float:
    return statistics.median(values)


def data_parallel_vs_one_device(setup: Setup | None = None, batch: int = 512, steps: int = 50):
    """`nn.DataParallel` over every visible GPU against one GPU; None with fewer than two.

    One process drives all GPUs: each step scatters the batch, copies the model to every
    GPU and gathers the results on the first, which DDP's one process per GPU avoids.
    """
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        return None
    setup = setup or Setup()
    d = load_data(setup)
    x, y = (t[:batch].to("cuda:0") for t in d.train.tensors)

    def ms_per_step(model) -> float:
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for i in range(steps + 5):
            if i == 5:
                torch.cuda.synchronize()
                start = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        torch.cuda.synchronize()
        return 1000 * (time.perf_counter() - start) / steps

    one = ms_per_step(build_model(setup, d, "cuda:0"))
    many = ms_per_step(nn.DataParallel(build_model(setup, d, "cuda:0")))
    return {"gpus": torch.cuda.device_count(), "one_device_ms": one, "data_parallel_ms": many}
