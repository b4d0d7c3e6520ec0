"""Data parallel: every rank holds the whole model, trains on its share of each batch, and
the ranks average their gradients before each step (notebooks 04 and 10).

Averaged gradients are the whole batch's gradient, so N ranks take the same steps as one
process with the N-times batch. Two ways to average:

- `average_gradients(model)`, after the backward pass: one all-reduce per parameter, as
  PyTorch's `dist_tuto` writes it. The ranks sit idle while it runs.
- `DataParallel(module)`, what `DistributedDataParallel` does to hide that time: the
  gradients are grouped in buckets, in the order the backward pass produces them (the last
  layers first), and a bucket's all-reduce starts, without waiting, as soon as its last
  gradient is ready, while the backward pass computes the earlier layers' gradients.
  `finish_gradient_sync()` waits for every bucket and hands back the averages.

What a learner's model may hold: a parameter used twice (tied weights) has its gradient
ready once both uses have added to it (autograd accumulates a leaf once per backward
pass), and a parameter that got no gradient on this rank (an unused layer) is sent as
zeros at the end, so that every rank starts the same all-reduces in the same order, as
they must. The buckets also sum, per parameter, how many ranks used it: one no rank used
keeps no gradient, so an optimizer skips it, as one process would. After the first step
the parameters no rank used leave the buckets (DDP's `static_graph` does the same), so
that a bucket never waits for a gradient that will not come, and the others overlap.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

BUCKET_BYTES = 25 * 2**20  # DistributedDataParallel's default bucket_cap_mb


def average_gradients(model: nn.Module, group=None) -> None:
    """Sum every gradient over the ranks, then divide by their number."""
    world = dist.get_world_size(group)
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, group=group)
            p.grad /= world


def buckets_in_backward_order(params: list[nn.Parameter], bucket_bytes: int) -> list[list]:
    """The parameters, last registered first (roughly the order their gradients come in),
    in consecutive groups of at most `bucket_bytes` (a larger parameter is a bucket alone)."""
    buckets, size = [[]], 0
    for p in reversed(params):
        nbytes = p.numel() * p.element_size()
        if buckets[-1] and size + nbytes > bucket_bytes:
            buckets.append([])
            size = 0
        buckets[-1].append(p)
        size += nbytes
    return buckets if buckets[0] else []


class DataParallel(nn.Module):
    """`module` on this rank, its gradients averaged over `group` while backward runs."""

    def __init__(self, module: nn.Module, bucket_bytes: int = BUCKET_BYTES, group=None):
        super().__init__()
        self.module, self.group, self.bucket_bytes = module, group, bucket_bytes
        params = [p for p in module.parameters() if p.requires_grad]  # a tied one once
        for p in params:  # every replica starts from rank 0's weights
            dist.broadcast(p.detach(), src=dist.get_global_rank(group, 0) if group else 0)
            p.register_post_accumulate_grad_hook(self._gradient_ready)
        self._bucket(params)
        self.first_step = True
        self._new_pass()

    def _bucket(self, params: list[nn.Parameter]) -> None:
        self.buckets = buckets_in_backward_order(params, self.bucket_bytes)
        self.bucket_of = {p: b for b, bucket in enumerate(self.buckets) for p in bucket}

    def _new_pass(self) -> None:
        self.waiting = [set(bucket) for bucket in self.buckets]  # gradients not ready yet
        self.sent: list[tuple[torch.Tensor, object]] = []  # (bucket, its all-reduce)

    def forward(self, *args, **kwargs):
        self._new_pass()
        return self.module(*args, **kwargs)

    def _gradient_ready(self, p: nn.Parameter) -> None:
        if p not in self.bucket_of:
            raise RuntimeError(
                "a parameter that no rank used in the first step has a gradient now; "
                "DataParallel sends only those used in the first step: use every parameter "
                "from the first step on, or leave the unused ones out of the model."
            )
        self.waiting[self.bucket_of[p]].discard(p)
        while len(self.sent) < len(self.buckets) and not self.waiting[len(self.sent)]:
            self._send(len(self.sent))  # buckets start in order: the same on every rank

    def _send(self, b: int) -> None:
        bucket = self.buckets[b]
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in bucket]
        used = [float(p.grad is not None) for p in bucket]
        flat = torch.cat(
            [g.flatten() for g in grads] + [torch.tensor(used, device=grads[0].device)]
        )
        self.sent.append((flat, dist.all_reduce(flat, group=self.group, async_op=True)))

    def finish_gradient_sync(self) -> None:
        """Call after backward: start the buckets still waiting (parameters unused here),
        wait for every all-reduce, and give each parameter the ranks' average gradient."""
        while len(self.sent) < len(self.buckets):
            self._send(len(self.sent))
        world, used = dist.get_world_size(self.group), []
        for bucket, (flat, work) in zip(self.buckets, self.sent, strict=True):
            work.wait()
            *grads, users = flat.split([p.numel() for p in bucket] + [len(bucket)])
            for p, g, n in zip(bucket, grads, users.tolist(), strict=True):
                p.grad = (g / world).view_as(p) if n else None
                used += [p] if n else []
        if self.first_step:  # the same on every rank: the flags were summed over them
            self._bucket([p for p in reversed(list(self.bucket_of)) if p in set(used)])
            self.first_step = False
        self._new_pass()
