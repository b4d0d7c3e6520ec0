"""Pipeline parallelism: a model cut into stages, one per rank, micro-batches flowing through.

Each rank holds one stage, a few consecutive layers. The batch is cut into M micro-batches;
a stage runs a forward ("F", i) or a backward ("B", i) of micro-batch i in the order its
schedule gives (GPipe: every forward, then every backward; 1F1B: one forward, one backward
once the pipe is full). A forward's activations go on to the next stage, and a backward's
input gradient back to the one before, point to point. The loss of each micro-batch is
divided by M, so the gradients left in `.grad` are those of the whole batch on one process.

Every hand-off goes in one `batch_isend_irecv` with the receive the next op waits for, as
picotron's `pipeline_communicate` and Megatron's send-forward-receive-backward do: NCCL
matches a pair of ranks' sends and receives in the order they were posted, so two stages
that both sent before receiving would wait for each other forever; in one batch they are
matched together. gloo takes the same calls.

`pipeline_step` is one engine for notebook 06's MLP and for 11's transformer stages on a
3D mesh, whose pipeline ranks (`ranks`) are one dimension's group.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist
from torch import nn

FORWARD, BACKWARD = "F", "B"


def pipeline_step(
    stage: nn.Module,
    order: Sequence[tuple[str, int]],
    batches: Sequence[tuple[torch.Tensor, torch.Tensor]],
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    sample_shape: Sequence[int],
    ranks: Sequence[int] | None = None,
    hold_sends: bool = False,
) -> float | None:
    """This rank's share of one training step: `stage`'s ops, in `order`.

    `batches`: the micro-batches, (input, target) each; the first stage reads the inputs,
    the last the targets. `sample_shape`: one sample's activations as they enter this
    stage (what its receive buffers hold, times the micro-batch's length). `ranks`: the
    global ranks of the pipeline, stage by stage (default: every rank, rank r = stage r).
    `hold_sends`: pass results on only when a run of forwards (or backwards) is done, the
    whole batch at once, as a pipeline that does not pipeline would.
    Returns the batch's loss on the last stage, else None."""
    ranks = list(range(dist.get_world_size())) if ranks is None else list(ranks)
    here, m = ranks.index(dist.get_rank()), len(batches)
    before = ranks[here - 1] if here > 0 else None
    after = ranks[here + 1] if here < len(ranks) - 1 else None
    dev = next(stage.parameters()).device
    kept = {}  # micro-batch: (its input, its output), from its forward until its backward
    outbox, sending, arriving = [], [], {}
    loss = 0.0

    def incoming(n: int):
        """What op n receives from another stage: P2POp's (buffer, peer, tag), or None."""
        if n == len(order):
            return None
        kind, i = order[n]
        if kind == FORWARD and before is not None:
            return torch.empty(len(batches[i][0]), *sample_shape, device=dev), before, i
        if kind == BACKWARD and after is not None:
            return torch.empty_like(kept[i][1]), after, m + i
        return None

    def exchange(n: int, send: bool = True) -> None:
        """Send what waits in the outbox (if `send`), and post op n's receive, in one batch."""
        receive, sends = incoming(n), list(outbox) if send else []
        ops = [dist.P2POp(dist.isend, t, peer, tag=tag) for t, peer, tag in sends]
        ops += [dist.P2POp(dist.irecv, *receive[:2], tag=receive[2])] if receive else []
        works = dist.batch_isend_irecv(ops) if ops else []
        if receive:  # the batch's last op (on NCCL the batch is one work: the same wait)
            arriving[n] = receive[0], works[-1]
            works = works[:-1]
        sending.extend(zip(works, sends, strict=False))  # each send's tensor lives until done
        del outbox[: len(sends)]

    def take(n: int) -> torch.Tensor:
        buffer, work = arriving.pop(n)
        work.wait()
        return buffer

    exchange(0)
    for n, (kind, i) in enumerate(order):
        x_i, y_i = batches[i]
        if kind == FORWARD:
            x = x_i.to(dev) if before is None else take(n).requires_grad_()
            out = stage(x)
            if after is None:
                out = loss_fn(out, y_i.to(dev)) / m
                loss += out.item()
            else:
                outbox.append((out.detach(), after, i))
            kept[i] = (x, out)
        else:
            x, out = kept.pop(i)
            out.backward(None if after is None else take(n))
            if before is not None:
                outbox.append((x.grad, before, m + i))
        following = order[n + 1][0] if n + 1 < len(order) else None
        exchange(n + 1, send=not (hold_sends and following == kind))
    for work, _ in sending:
        work.wait()
    return loss if after is None else None
