"""Pipeline parallelism: a model cut into stages, one per rank, micro-batches flowing through.

Each rank holds one stage, a few consecutive layers. The batch is cut into M micro-batches;
a stage runs a forward ("F", i) or a backward ("B", i) of micro-batch i in the order its
schedule gives (GPipe: every forward, then every backward; 1F1B: one forward, one backward
once the pipe is full). A forward's activations go on to the next stage, and a backward's
input gradient back to the one before, point to point. The loss of each micro-batch is
divided by M, so the gradients left in `.grad` are those of the whole batch on one process.

Two schedules ask more of the engine. Interleaved 1F1B (Narayanan et al. 2021) gives each
rank v chunks: the model is cut into K·v pieces and rank s holds pieces s, s + K, ..., so an
op names its chunk, ("F", i, c). Zero bubble (Qi et al. 2023) splits a backward in two: B,
the gradient of the chunk's input, that the stage before waits for, and W, the gradient of
its weights, that nobody waits for and that can fill an idle slot. B asks autograd for the
input's gradient and each block's output's; W, later, for each block's weights from its
output's gradient, so no product is computed twice.

Every hand-off goes in one `batch_isend_irecv` with the receive the next op waits for, as
picotron's `pipeline_communicate` and Megatron's send-forward-receive-backward do: NCCL
matches a pair of ranks' sends and receives in the order they were posted, so two stages
that both sent before receiving would wait for each other forever; in one batch they are
matched together. gloo takes the same calls. With interleaved chunks the next op's receive
is not always what the neighbour sends next, so on NCCL two stages could each wait for the
other's next batch (Megatron pairs every forward with a backward to avoid it); the engine
refuses that case there rather than hang.

`pipeline_step` is one engine for notebook 06's schedules and for 11's transformer stages on
a 3D mesh, whose pipeline ranks (`ranks`) are one dimension's group.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist
from torch import nn

FORWARD, BACKWARD, WEIGHT = "F", "B", "W"


def pipeline_step(
    stage: nn.Module | Sequence[nn.Module],
    order: Sequence[tuple],
    batches: Sequence[tuple[torch.Tensor, torch.Tensor]],
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    sample_shape: Sequence,
    ranks: Sequence[int] | None = None,
    hold_sends: bool = False,
    post_ahead: bool = False,
) -> float | None:
    """This rank's share of one training step: `stage`'s ops, in `order`.

    `stage`: this rank's layers, or a list of its chunks (chunk c is piece c·K + s of the
    model, s this rank's place in `ranks`); a split backward needs each to be an
    `nn.Sequential` of blocks. `order`: ("F", i), ("B", i), or with chunks and W,
    (kind, i, c). `batches`: the micro-batches, (input, target) each; the first piece reads
    the inputs, the last the targets. `sample_shape`: one sample's activations as they enter
    each chunk (one shape for all, or a list). `ranks`: the global ranks of the pipeline,
    stage by stage (default: every rank). `hold_sends`: pass results on only when a run of
    forwards (or backwards) is done, the whole batch at once, as a pipeline that does not
    pipeline would. `post_ahead`: post every receive as soon as its buffer's shape is known
    (each forward's at the start, each backward's after its forward), so that a hand-off
    lands while the stage computes; gloo only, as NCCL matches receives in posting order.
    Returns the batch's loss on the rank holding the last piece, else None."""
    ranks = list(range(dist.get_world_size())) if ranks is None else list(ranks)
    chunks, ops = chunks_and_ops(stage, order)
    if (len(chunks) > 1 or post_ahead) and dist.get_backend() == "nccl":
        raise ValueError(
            "interleaved chunks and receives posted ahead cannot hand off on NCCL in this "
            "engine: NCCL completes a batch only when the peer posts its match, in posting "
            "order, and two neighbours would each wait for the other's next batch. Run them "
            "on gloo, or use torch.distributed.pipelining's ScheduleInterleaved1F1B."
        )
    shapes = sample_shape if isinstance(sample_shape[0], Sequence) else [sample_shape] * len(chunks)
    k, here, m = len(ranks), ranks.index(dist.get_rank()), len(batches)
    last = k * len(chunks) - 1  # the last piece
    split = any(kind == WEIGHT for kind, _, _ in ops)
    dev = next(chunks[0].parameters()).device
    kept = {}  # (i, c): (input, block outputs, root) from its forward until its backward ends
    out_grads = {}  # (i, c): each block's output gradient, from B until W
    outbox, sending, arriving = [], [], {}
    loss = 0.0

    def piece(c: int) -> int:
        return c * k + here

    def tag(kind: str, i: int, cut: int) -> int:
        """Tells apart the messages across the cut after piece `cut` (gloo matches by tag)."""
        return 2 * (cut * m + i) + (kind == BACKWARD)

    def incoming(n: int):
        """What op n receives from another stage: P2POp's (buffer, peer, tag), or None."""
        if n == len(ops):
            return None
        kind, i, c = ops[n]
        g = piece(c)
        if kind == FORWARD and g > 0:
            buffer = torch.empty(len(batches[i][0]), *shapes[c], device=dev)
            return buffer, ranks[(g - 1) % k], tag(FORWARD, i, g - 1)
        if kind == BACKWARD and g < last:
            return torch.empty_like(kept[i, c][2]), ranks[(g + 1) % k], tag(BACKWARD, i, g)
        return None

    def exchange(n: int, send: bool = True) -> None:
        """Send what waits in the outbox (if `send`), and post op n's receive (unless it was
        posted ahead), in one batch."""
        receive = None if n in arriving else incoming(n)
        sends = list(outbox) if send else []
        p2p = [dist.P2POp(dist.isend, t, peer, tag=tag) for t, peer, tag in sends]
        p2p += [dist.P2POp(dist.irecv, *receive[:2], tag=receive[2])] if receive else []
        works = dist.batch_isend_irecv(p2p) if p2p else []
        if receive:  # the batch's last op (on NCCL the batch is one work: the same wait)
            arriving[n] = receive[0], works[-1]
            works = works[:-1]
        sending.extend(zip(works, sends, strict=False))  # each send's tensor lives until done
        del outbox[: len(sends)]

    def take(n: int) -> torch.Tensor:
        buffer, work = arriving.pop(n)
        work.wait()
        return buffer

    for n, (kind, _, _) in enumerate(ops):
        if post_ahead and kind == FORWARD:
            exchange(n, send=False)
    exchange(0)
    for n, (kind, i, c) in enumerate(ops):
        g, (x_i, y_i) = piece(c), batches[i]
        if kind == FORWARD:
            x = x_i.to(dev) if g == 0 else take(n).requires_grad_()
            outs = run_blocks(chunks[c], x) if split else [chunks[c](x)]
            root = outs[-1]
            if g == last:
                root = loss_fn(root, y_i.to(dev)) / m
                loss += root.item()
            else:
                outbox.append((root.detach(), ranks[(g + 1) % k], tag(FORWARD, i, g)))
            kept[i, c] = (x, outs, root)
            if post_ahead:
                exchange(ops.index((BACKWARD, i, c)), send=False)
        elif kind == BACKWARD:
            x, outs, root = kept[i, c] if split else kept.pop((i, c))
            grad = None if g == last else take(n)
            if split:
                x_grad, out_grads[i, c] = backward_input(x, outs, root, grad)
            else:
                root.backward(grad)
                x_grad = x.grad
            if g > 0:
                outbox.append((x_grad, ranks[(g - 1) % k], tag(BACKWARD, i, g - 1)))
        else:
            _, outs, _ = kept.pop((i, c))
            backward_weight(chunks[c], outs, out_grads.pop((i, c)))
        following = ops[n + 1][0] if n + 1 < len(ops) else None
        exchange(n + 1, send=not (hold_sends and following == kind))
    for work, _ in sending:
        work.wait()
    return loss if last % k == here else None


def chunks_and_ops(stage, order) -> tuple[list[nn.Module], list[tuple[str, int, int]]]:
    """A rank's pieces as a list (one module is one chunk) and its ops as (kind, i, chunk)."""
    chunks = list(stage) if isinstance(stage, (list, tuple)) else [stage]
    return chunks, [(*op, 0)[:3] for op in order]


def run_blocks(blocks: nn.Sequential, x: torch.Tensor) -> list[torch.Tensor]:
    """Each block's output, in turn: a split backward starts W from each of them."""
    outs = []
    for block in blocks:
        x = block(x)
        outs.append(x)
    return outs


def backward_input(x, outs, root, grad):
    """B: the gradient of the chunk's input (None for one that needs none: the model's
    input), and of each block's output, for W; the graph is kept for W."""
    wanted = [x] if x.requires_grad else []
    tail = [outs[-1]] if grad is None else []  # on the last piece the root is the loss
    grads = torch.autograd.grad(root, [*wanted, *outs[:-1], *tail], grad, retain_graph=True)
    x_grad = grads[0] if wanted else None
    return x_grad, [*grads[len(wanted) :], *([] if grad is None else [grad])]


def backward_weight(blocks: nn.Sequential, outs, out_grads) -> None:
    """W: each block's weight gradients from its output's gradient, into `.grad`; from the
    last block back, as a backward goes."""
    for block, out, grad in reversed(list(zip(blocks, outs, out_grads, strict=True))):
        params = [p for p in block.parameters() if p.requires_grad]
        if params:
            torch.autograd.backward(out, grad, inputs=params)
