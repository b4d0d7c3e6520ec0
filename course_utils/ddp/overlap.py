"""What overlapping the all-reduce with the backward pass saves, measured over a link.

Four timings of the same DDP step on each rank: the forward pass alone, the step's
computation alone (forward and backward under `no_sync`, no communication), the bucket
all-reduces alone (one after another, as after a backward pass), and DDP's real step,
where a bucket's all-reduce starts as soon as it is full while earlier layers still
back-propagate. Sequential minus overlapped is the saving. Only the backward pass can hide
communication (the first bucket is full after the forward pass and the last layers'
gradients), and the last bucket's all-reduce cannot start before the backward pass ends, so
`hideable` is the shorter of the backward pass and the other buckets' all-reduces (timed:
the last bucket's alone too); and no overlap can make a step shorter than the longer of
computation and communication.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist
from torch import nn

from ..core.machine import ATTEMPTS, on_a_quiet_machine
from ..network import wire
from ..ranks.bootstrap import device, synchronize
from ..ranks.launch import launch
from .equivalence import wrap
from .verdicts import link_clock
from .wire import OnLink, on_link_hook


def stacked_mlp(layers: int, width: int, classes: int = 10) -> nn.Sequential:
    """`layers` linear layers of `width` with ReLUs between: gradients ready back to front."""
    hidden = [m for _ in range(layers - 1) for m in (nn.Linear(width, width), nn.ReLU())]
    return nn.Sequential(*hidden, nn.Linear(width, classes))


def overlap_saving(
    world_size: int = 2, layers: int = 6, width: int = 512, batch: int = 256,
    bucket_cap_mb: float = 1.0, steps: int = 8, link="1gbit,1ms", backend: str = "gloo",
    attempts: int = ATTEMPTS,
) -> dict:  # fmt: skip
    """Seconds per step: backward alone, communication alone, their sum, and DDP's overlapped
    step (the slowest rank's fastest step each), and what overlap saved. These are wall
    times, so `machine` says what other programs took of the ranks' cores meanwhile (the
    launch is repeated while they took them, see `core.machine`)."""
    args = (layers, width, batch, bucket_cap_mb, steps, wire.resolve(link, world_size, backend))
    result, machine = on_a_quiet_machine(
        lambda: launch(_saving_on_rank, world_size, args=args, backend=backend)[0],
        world_size,
        attempts,
    )
    return {**result, "machine": machine}


def _once(step) -> float:
    """One run of `step`, the slowest rank's seconds."""
    dist.barrier()
    start = wire.restart()
    step()
    synchronize()
    elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64, device=device())
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return elapsed.item()


def _timed(steps_by_name: dict, rounds: int) -> dict:
    """The fastest of `rounds` runs of each step after a warm-up round. The steps take turns
    within a round, so a slow stretch of the machine slows all of them alike rather than
    only the one being timed then: the saving is a small difference of large times."""
    times = {name: [] for name in steps_by_name}
    for _ in range(rounds + 1):
        for name, step in steps_by_name.items():
            times[name].append(_once(step))
    return {name: min(runs[1:]) for name, runs in times.items()}


def _saving_on_rank(layers, width, batch, bucket_cap_mb, steps, link) -> dict:
    torch.manual_seed(0)
    model = wrap(stacked_mlp(layers, width), bucket_cap_mb=bucket_cap_mb)
    on, buckets = OnLink("allreduce", link), {}

    def hook(state, bucket):
        buckets[bucket.index()] = bucket.buffer().numel()
        return on_link_hook(state, bucket)

    model.register_comm_hook(on, hook)
    where = device()
    x, y = torch.randn(batch, width, device=where), torch.randint(0, 10, (batch,), device=where)

    def backward():
        nn.functional.cross_entropy(model(x), y).backward()

    def backward_alone():
        with model.no_sync():
            backward()

    def forward_alone():
        with model.no_sync():
            nn.functional.cross_entropy(model(x), y)

    def communication_alone():
        for numel in buckets.values():
            wire.all_reduce(torch.zeros(numel, device=where))

    def last_bucket_alone():  # the first layers' gradients, ready as the backward pass ends
        wire.all_reduce(torch.zeros(buckets[max(buckets)], device=where))

    with wire.active(link):
        backward()  # DDP learns its buckets in the first step; the others reuse them
        seconds = _timed(
            {
                "overlapped": backward,
                "compute": backward_alone,
                "forward": forward_alone,
                "communication": communication_alone,
                "last_bucket": last_bucket_alone,
            },
            steps,
        )
    backward_only = seconds["compute"] - seconds["forward"]
    sequential = seconds["compute"] + seconds["communication"]
    return {
        **seconds,
        "link": link.label,
        "clock": link_clock(link),
        "buckets": len(buckets),
        "hideable": max(0.0, min(backward_only, seconds["communication"] - seconds["last_bucket"])),
        "sequential": sequential,
        "saving": sequential - seconds["overlapped"],
    }
