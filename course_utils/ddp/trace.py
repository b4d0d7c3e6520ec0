"""A DDP step under `torch.profiler`: when the backward ops run and when buckets all-reduce.

The profiler records every operator with its thread and its start and end. The backward
ops (`...Backward0`) run on the autograd thread; each bucket's all-reduce runs on other
threads: gloo's (`gloo:all_reduce`) and, over the emulated link, the link's wire thread
(`WIRE_EVENT`, recorded because the profiler watches every thread). Where the two overlap
in time, DDP hides communication behind computation (`overlap_fraction`). The same step
with the all-reduces issued only after `backward()` returns (under `no_sync`, then one
all-reduce per layer) is the twin in which nothing can overlap.
"""

from __future__ import annotations

import os
import tempfile

import torch
import torch.distributed as dist
from torch import nn
from torch.profiler import ProfilerActivity, profile

from ..network import wire
from ..network.hook import WIRE_EVENT
from ..ranks.bootstrap import device
from ..ranks.launch import launch
from ..ranks.rank_output import quiet_stderr
from .equivalence import wrap
from .overlap import stacked_mlp
from .wire import OnLink, on_link_hook

TRACE_NAME = "course-ddp-step-rank0.json"
# gloo's and NCCL's operators on the CPU, NCCL's kernels on a GPU, the emulated link's wire
COMM_PREFIXES = ("gloo:", "nccl:", "ncclDevKernel", "ncclKernel", WIRE_EVENT)
BACKWARD_SUFFIX = "Backward0"


def merged(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of `intervals` as sorted, disjoint intervals."""
    out: list[list[float]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(s, e) for s, e in out]


def overlap_fraction(communication: list, backward: list) -> float:
    """Share of the shorter of the two, the communication or the backward pass (its first
    op's start to its last op's end), during which both ran.

    Divided by the communication alone, the share would measure the processor: a fast one
    finishes the backward pass while the link still queues most buckets. Divided by the
    shorter of the two, it is how much of the overlap that could happen did happen; the
    twin that all-reduces after backward() has none.
    """
    if not backward or not communication:
        return 0.0
    comm = merged(communication)
    start, end = min(s for s, _ in backward), max(e for _, e in backward)
    both = sum(max(0.0, min(e, end) - max(s, start)) for s, e in comm)
    shorter = min(sum(e - s for s, e in comm), end - start)
    return both / shorter if shorter else 0.0


def profiled_step(
    overlap: bool = True, world_size: int = 2, layers: int = 6, width: int = 512,
    batch: int = 256, bucket_cap_mb: float = 1.0, link="1gbit,1ms", backend: str = "gloo",
    trace_dir: str | None = None,
) -> list[dict]:  # fmt: skip
    """Each rank's profiled step over `link`: its backward ops and all-reduces, in seconds
    from the step's start, and how much of them overlapped (`overlap_fraction`). With
    `trace_dir` ('' for the system's temp folder), rank 0 also writes the Chrome trace there
    (open it in chrome://tracing or ui.perfetto.dev)."""
    link = wire.resolve(link, world_size, backend)
    args = (overlap, layers, width, batch, bucket_cap_mb, link, trace_dir)
    return launch(_profile_rank, world_size, args=args, backend=backend)


def _every_thread():
    """The profiler's setting that records every thread, not only the one that started it:
    gloo runs each bucket's all-reduce on a thread of its own. Still marked experimental in
    torch (`torch.profiler._ExperimentalConfig`), hence the one place it is asked for."""
    return torch.profiler._ExperimentalConfig(profile_all_threads=True)


def _after_backward(model: nn.Module) -> None:
    """The no-overlap twin: one all-reduce per layer, each issued after backward() returned."""
    world = dist.get_world_size()
    for layer in model.module:
        grads = [p.grad for p in layer.parameters()]
        if grads:
            flat = torch.cat([g.flatten() for g in grads])
            with torch.profiler.record_function(WIRE_EVENT):
                wire.all_reduce(flat)
            torch.nn.utils.vector_to_parameters(flat / world, grads)


def _profile_rank(overlap, layers, width, batch, bucket_cap_mb, link, trace_dir) -> dict:
    torch.manual_seed(0)
    model = wrap(stacked_mlp(layers, width), bucket_cap_mb=bucket_cap_mb)
    model.register_comm_hook(OnLink("allreduce", link), on_link_hook)
    where = device()
    x, y = torch.randn(batch, width, device=where), torch.randint(0, 10, (batch,), device=where)

    def step():
        if overlap:
            nn.functional.cross_entropy(model(x), y).backward()
        else:
            with model.no_sync():
                nn.functional.cross_entropy(model(x), y).backward()
            _after_backward(model)

    activities = [ProfilerActivity.CPU]
    if where.type == "cuda":  # the GPU's own timeline: when its kernels and NCCL's really ran
        activities.append(ProfilerActivity.CUDA)
    with wire.active(link):
        for _ in range(2):  # DDP builds its buckets in the first steps
            step()
        dist.barrier()
        wire.restart()
        with quiet_stderr():
            with profile(activities=activities, experimental_config=_every_thread()) as p:
                step()
            events = [
                (e.name, e.time_range.start / 1e6, e.time_range.end / 1e6) for e in p.events()
            ]
    t0 = min(s for _, s, _ in events)
    backward = [(s - t0, e - t0) for n, s, e in events if n.endswith(BACKWARD_SUFFIX)]
    comm = [(s - t0, e - t0) for n, s, e in events if n.startswith(COMM_PREFIXES)]
    trace = None
    if trace_dir is not None and dist.get_rank() == 0:
        trace = os.path.join(trace_dir or tempfile.gettempdir(), TRACE_NAME)
        p.export_chrome_trace(trace)
    return {
        "rank": dist.get_rank(),
        "link": link.label,
        "backward": backward,
        "allreduce": comm,
        "seconds": max(e for _, _, e in events) - t0,
        "overlap": overlap_fraction(comm, backward),
        "trace": trace,
    }
