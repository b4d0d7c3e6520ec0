"""DDP's communication hooks over the emulated link: what a hook sends pays its wire time.

Each hook runs for real (DDP's allreduce, the fp16 compression hook, PowerSGD), and its
bucket is handed back to DDP only when the allreduces it makes would have crossed the
rank's link (`network.wire`): one ring for the plain and the fp16 hook (half the bytes),
and for PowerSGD one ring for its uncompressed vectors and one each for its low-rank
factors P and Q, which are small but each pays the latency.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

from ..network.hook import deliver_after
from ..network.wire import Link, ring_allreduce_seconds, wire_deadline

HOOKS = {
    "allreduce": default_hooks.allreduce_hook,
    "fp16": default_hooks.fp16_compress_hook,
    "powersgd": powerSGD_hook.powerSGD_hook,
}
POWERSGD_RANK = 1


def powersgd_state() -> powerSGD_hook.PowerSGDState:
    """PowerSGD from the first timed steps (its default waits 1000 steps with plain allreduce)."""
    return powerSGD_hook.PowerSGDState(
        process_group=None, matrix_approximation_rank=POWERSGD_RANK, start_powerSGD_iter=2
    )


def _message_sizes(hook: str, gradients: list) -> list[int]:
    """Bytes of each allreduce the hook makes for one bucket."""
    floats = sum(g.numel() for g in gradients)
    if hook == "allreduce":
        return [4 * floats]
    if hook == "fp16":
        return [2 * floats]
    matrices = [g for g in gradients if g.dim() > 1]
    p = sum(m.shape[0] * POWERSGD_RANK for m in matrices)
    q = sum(m.numel() // m.shape[0] * POWERSGD_RANK for m in matrices)
    vectors = sum(g.numel() for g in gradients if g.dim() <= 1)
    return [4 * n for n in (vectors, p, q) if n]


def wire_seconds(link: Link, hook: str, gradients: list, world: int) -> float:
    """Wire time of one bucket's allreduces under `hook`, one ring after the other."""
    return sum(ring_allreduce_seconds(link, n, world) for n in _message_sizes(hook, gradients))


@dataclass
class OnLink:
    """A hook and its state, and the link its messages cross."""

    hook: str
    link: Link
    state: object = None


def on_link_hook(on: OnLink, bucket):
    """Run `on.hook` for real; complete when its messages would have crossed `on.link`."""
    work = HOOKS[on.hook](on.state, bucket)
    if not on.link.emulated:
        return work
    seconds = wire_seconds(on.link, on.hook, bucket.gradients(), dist.get_world_size())
    return deliver_after(wire_deadline(seconds), work)
