"""The same MLP under PyTorch's FSDP2 (`fully_shard`) on gloo, to set beside ZeRO-3 (notebook 08).

FSDP2 turns each parameter into a DTensor sharded along its first dimension: a rank
stores only its rows (`to_local()`), all-gathers a layer before using it and reshards it
after, and reduce-scatters the gradients; it is ZeRO-3 as a library. Its hooks are named
in the profiler (`FSDP::all_gather (k)`, `FSDP::backward_prefetch for k`, ...), which
gives the timeline of one step and shows which all-gathers were issued early.
"""

from __future__ import annotations

import contextlib
import re
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from ..ranks.bootstrap import device
from ..ranks.launch import launch
from ..ranks.rank_output import quiet_stderr
from .zero import mlp, rank_share

_KINDS = {
    "all_gather": "all-gather",
    "post_backward_reduce": "reduce-scatter",
    "pre_forward": "forward",
    "pre_backward": "backward",
    "backward_prefetch": "prefetch",
}
_EVENT = re.compile(r"FSDP::(\w+?)(?: for)? \(?(\d+)\)?$")


def shard_layers(model: nn.Module, **options) -> nn.Module:
    """`model` with every Linear layer and the whole model wrapped by `fully_shard` over all
    ranks (`options`: its keywords, e.g. `reshard_after_forward`, `mp_policy`)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device().type, (dist.get_world_size(),))
    for layer in model.modules():
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh, **options)
    return fully_shard(model, mesh=mesh, **options)


def _train_on_rank(widths, x, y, lr: float) -> dict:
    rank = dist.get_rank()
    model = shard_layers(mlp(widths).to(device()))
    x, y = x.to(device()), y.to(device())
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    stored = sum(p.to_local().untyped_storage().nbytes() for p in model.parameters())
    part = rank_share(x.shape[1])
    times = []
    for step in range(x.shape[0]):
        last = step == x.shape[0] - 1
        with _profiled(last) as events:
            start = time.perf_counter()
            optimizer.zero_grad()
            F.cross_entropy(model(x[step, part]), y[step, part]).backward()
            optimizer.step()
            times.append(time.perf_counter() - start)
    full = torch.cat([p.full_tensor().detach().reshape(-1) for p in model.parameters()]).cpu()
    return {"rank": rank, "params": full, "stored": stored, "steps": times, "events": events}


@contextlib.contextmanager
def _profiled(on: bool):
    """Collect FSDP's named events as (kind, layer, start, stop) seconds, when `on`."""
    events = []
    if not on:
        yield events
        return
    from torch.profiler import ProfilerActivity, profile

    with quiet_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
        yield events
    for e in prof.events():
        match = _EVENT.match(e.name)
        if match and match.group(1) in _KINDS:
            span = (e.time_range.start / 1e6, e.time_range.end / 1e6)
            events.append((_KINDS[match.group(1)], int(match.group(2)), *span))
    first = min((e[2] for e in events), default=0.0)
    events[:] = sorted((k, n, a - first, b - first) for k, n, a, b in events)


def fsdp_training(widths, world_size: int, x, y, lr: float, timeout: float = 120.0) -> list:
    """Every rank's FSDP2 run on the batches (x, y): final parameters, bytes stored, timeline."""
    return launch(
        _train_on_rank, world_size, backend="gloo", args=(widths, x, y, lr), timeout=timeout
    )


def prefetched_layers(events: list) -> list[int]:
    """Layers whose backward all-gather was issued early, while a later layer's backward ran."""
    return sorted({layer for kind, layer, *_ in events if kind == "prefetch"})
