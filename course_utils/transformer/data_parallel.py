"""Data parallel and FSDP on the transformer, counted as the chapter counts (notebook 10).

The other parallelisms of the chapter split the model's activations or its experts; these
two split the batch, so what they send depends on the parameters, not on the batch or the
sequence. They are the baseline the chapter's comparison sets TP, SP, CP and EP against,
measured the same way (every byte read at the boundary, `comm`).

- "dp": every rank holds every parameter, trains on its 1/N of the batch, and all-reduces
  the gradients (notebook 04's DDP in one bucket).
- "fsdp": every rank keeps 1/N of a flat copy of the parameters between steps (FSDP2 with
  `reshard_after_forward=False`, ZeRO-2's traffic): it all-gathers them before the
  forward and reduce-scatters the gradients after the backward, then updates its own 1/N.
  Resharding after the forward too (ZeRO-3, notebook 08) would all-gather again for the
  backward: half as much again on the wire.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from ..core import progress
from ..core.sizes_transformer import TransformerSizes
from ..ranks.bootstrap import device, synchronize
from ..ranks.launch import launch
from . import comm
from .model import batches, build, loss_of, one_process_steps

__all__ = ["KINDS", "BatchSplitRun", "batch_split_bytes", "train_batch_split"]

KINDS = ("dp", "fsdp")
FP32 = 4


@dataclass(frozen=True)
class BatchSplitRun:
    kind: str
    world_size: int
    max_diff: float  # largest |parameter - one process's|, over every rank
    parameters: int  # of the model
    step_log: list[comm.Message]  # rank 0's messages during the first step
    step_seconds: float = 0.0  # rank 0's wall time per step, averaged over the steps


def batch_split_bytes(parameters: int, ranks: int, kind: str) -> int:
    """Bytes one rank sends per step: a ring all-reduce of the gradients (dp), or an
    all-gather of the parameters and a reduce-scatter of the gradients (fsdp), each
    (N-1)/N of the padded flat vector: the same total."""
    padded = -(-parameters // ranks) * ranks
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} is not one of {', '.join(KINDS)}.")
    return 2 * (ranks - 1) * padded * FP32 // ranks


def _my_sequences(sequence: torch.Tensor) -> torch.Tensor:
    n, rank = dist.get_world_size(), dist.get_rank()
    if len(sequence) % n:
        raise ValueError(f"batch {len(sequence)} does not split over {n} ranks: make it a multiple")
    return sequence.chunk(n)[rank]


def _all_reduce(t: torch.Tensor) -> torch.Tensor:
    dist.all_reduce(t)
    return t


def _all_gather(mine: torch.Tensor) -> torch.Tensor:
    whole = mine.new_empty(mine.numel() * dist.get_world_size())
    dist.all_gather_into_tensor(whole, mine)
    return whole


def _reduce_scatter(t: torch.Tensor) -> torch.Tensor:
    mine = t.new_empty(t.numel() // dist.get_world_size())
    dist.reduce_scatter_tensor(mine, t)
    return mine


def _train(sizes: TransformerSizes, kind: str, steps: int) -> tuple[torch.nn.Module, list]:
    """SGD with momentum, as `model.train_steps`, on this rank's share of every batch."""
    n, rank, dev = dist.get_world_size(), dist.get_rank(), device()
    model = build(sizes, device=dev)
    params = list(model.parameters())
    flat = parameters_to_vector(params).detach()
    padded = -(-flat.numel() // n) * n
    full = torch.zeros(padded, device=dev)
    full[: flat.numel()] = flat
    mine = full.chunk(n)[rank].clone()  # fsdp: what this rank keeps between steps
    momentum = torch.zeros_like(full if kind == "dp" else mine)
    logs = []
    started = time.perf_counter()
    for sequence in batches(sizes, steps):
        with comm.count_communication() as log:
            if kind == "fsdp":
                with comm.labelled("parameters", "forward"):
                    gathered = _all_gather(mine)
                vector_to_parameters(gathered[: flat.numel()], params)
            for p in params:
                p.grad = None
            loss_of(model, _my_sequences(sequence).to(dev)).backward()
            grad = torch.zeros(padded, device=dev)
            grad[: flat.numel()] = parameters_to_vector([p.grad for p in params])
            with comm.labelled("gradients", "backward"):
                grad = _all_reduce(grad) if kind == "dp" else _reduce_scatter(grad)
            grad /= n
            theirs = full if kind == "dp" else mine
            momentum.mul_(0.9).add_(grad)
            theirs.sub_(sizes.lr * momentum)
            if kind == "dp":
                vector_to_parameters(full[: flat.numel()], params)
        logs.append(log)
    synchronize()
    seconds = (time.perf_counter() - started) / steps
    if kind == "fsdp":  # the trained model, whole, to compare
        vector_to_parameters(_all_gather(mine)[: flat.numel()], params)
    return model, logs[0], seconds


def _train_rank(sizes: TransformerSizes, kinds, steps: int, reference: dict) -> dict:
    out = {}
    bar = progress.bar(len(kinds), f"batch-split models on {dist.get_world_size()} ranks", "model")
    for kind in kinds:
        bar.set_postfix(training=kind)
        model, log, seconds = _train(sizes, kind, steps)
        bar.update()
        want = {k: v.to(device()) for k, v in reference.items()}
        diff = max((p.detach() - want[k]).abs().max().item() for k, p in model.named_parameters())
        out[kind] = {
            "max_diff": diff,
            "log": log,
            "parameters": sum(p.numel() for p in model.parameters()),
            "seconds": seconds,
        }
    bar.close()
    return out


def train_batch_split(
    sizes: TransformerSizes, kinds=KINDS, world_sizes=None, steps=None, backend="gloo"
) -> dict[tuple[str, int], BatchSplitRun]:
    """Each kind at each N, trained `steps` SGD steps on the same batches as one process
    (each rank on its 1/N of every batch) and compared with it; keyed by (kind, N)."""
    steps = sizes.steps if steps is None else steps
    reference = one_process_steps(sizes, steps)["params"]
    runs = {}
    for n in world_sizes or sizes.world_sizes:
        out = launch(_train_rank, n, backend=backend, timeout=sizes.timeout,
                     args=(sizes, tuple(kinds), steps, reference))  # fmt: skip
        for kind in kinds:
            mine = [r[kind] for r in out]
            runs[kind, n] = BatchSplitRun(
                kind, n, max(r["max_diff"] for r in mine), mine[0]["parameters"], mine[0]["log"],
                mine[0]["seconds"],
            )  # fmt: skip
    return runs
