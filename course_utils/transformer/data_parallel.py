"""Data parallel and FSDP on the transformer, counted as the chapter counts (notebook 10).

The other parallelisms of the chapter split the model's activations or its experts; these
two split the batch, so what they send depends on the parameters, not on the batch or the
sequence. They are the baseline the chapter's comparison sets TP, SP, CP and EP against,
measured the same way (every byte read at the boundary, `comm`).

- "dp": every rank holds every parameter, trains on its 1/N of the batch, and all-reduces
  the gradients while the backward pass runs (`parallel.data_parallel.DataParallel`).
- "fsdp": every rank keeps 1/N of a flat copy of the parameters between steps (FSDP2 with
  `reshard_after_forward=False`, ZeRO-2's traffic): it all-gathers them before the
  forward and reduce-scatters the gradients after the backward, then updates its own 1/N.
  Resharding after the forward too (ZeRO-3, notebook 08) would all-gather again for the
  backward: half as much again on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from ..core.sizes_model_parallel import TransformerSizes
from ..parallel.data_parallel import DataParallel
from ..parallel.renamed import all_gather_single, reduce_scatter_single
from ..parallel.zero import padded_numel
from ..ranks.bootstrap import device
from . import comm
from .model import batches, build, loss_of, one_process_steps, train_steps
from .tp_runs import counted_steps, launch_kinds

KINDS = ("dp", "fsdp")
FP32 = 4


@dataclass(frozen=True)
class BatchSplitRun:
    kind: str
    world_size: int
    max_diff: float  # largest |parameter - one process's|, over every rank
    parameters: int  # of the model
    tensors: int  # parameter tensors of the model (a tied one once)
    step_log: list[comm.Message]  # rank 0's messages during the first step
    step_seconds: float = 0.0  # rank 0's wall time per step, averaged over the steps


def batch_split_bytes(parameters: int, ranks: int, kind: str, tensors: int = 0) -> int:
    """Bytes one rank sends per step: a ring all-reduce of the gradients and of one "used"
    flag per parameter tensor (dp: `DataParallel`, as DDP's used-parameter map), or an
    all-gather of the parameters and a reduce-scatter of the gradients (fsdp), each
    (N-1)/N of the flat vector padded to N equal chunks."""
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} is not one of {', '.join(KINDS)}.")
    sent = parameters + tensors if kind == "dp" else padded_numel(parameters, ranks)
    return 2 * (ranks - 1) * sent * FP32 // ranks


def _my_sequences(sequence: torch.Tensor) -> torch.Tensor:
    n, rank = dist.get_world_size(), dist.get_rank()
    if len(sequence) % n:
        raise ValueError(f"batch {len(sequence)} does not split over {n} ranks: make it a multiple")
    return sequence.chunk(n)[rank]


def _all_gather(mine: torch.Tensor) -> torch.Tensor:
    whole = mine.new_empty(mine.numel() * dist.get_world_size())
    all_gather_single(whole, mine)
    return whole


def _reduce_scatter(t: torch.Tensor) -> torch.Tensor:
    mine = t.new_empty(t.numel() // dist.get_world_size())
    reduce_scatter_single(mine, t)
    return mine


def _train(sizes: TransformerSizes, kind: str, steps: int, reference: dict) -> dict:
    """How far this rank's trained model (whole) ends from one process's (`reference`), its
    messages of one step and the seconds per step."""
    model = build(sizes, device=device())
    replica = DataParallel(model) if kind == "dp" else None  # rank 0's weights, sent now
    mine, log, seconds = counted_steps(
        lambda: _train_dp(replica, sizes, steps) if replica else _train_fsdp(model, sizes, steps),
        steps,
    )
    params = list(model.parameters())
    if kind == "fsdp":  # the trained model, whole, to compare
        vector_to_parameters(_all_gather(mine)[: sum(p.numel() for p in params)], params)
    want = {k: v.to(device()) for k, v in reference.items()}
    diff = max((p.detach() - want[k]).abs().max().item() for k, p in model.named_parameters())
    return {
        "max_diff": diff,
        "parameters": sum(p.numel() for p in params),
        "tensors": len(params),
        "step_log": log,
        "step_seconds": seconds,
    }


def _train_dp(replica: DataParallel, sizes: TransformerSizes, steps: int) -> None:
    """`parallel.data_parallel.DataParallel`: its buckets all-reduced while backward runs,
    SGD with momentum as `model.train_steps`, on this rank's share of every batch."""
    mine = torch.stack([_my_sequences(s) for s in batches(sizes, steps)])
    with comm.labelled("gradients", "backward"):
        train_steps(replica, mine, sizes.lr, after_backward=DataParallel.finish_gradient_sync)


def _train_fsdp(model: torch.nn.Module, sizes: TransformerSizes, steps: int) -> torch.Tensor:
    """This rank's 1/N of a flat copy of the parameters, kept between steps: all-gathered
    before the forward, the gradients reduce-scattered after the backward, SGD with
    momentum (as `model.train_steps`) on its own 1/N, which it returns."""
    n, rank = dist.get_world_size(), dist.get_rank()
    params = list(model.parameters())
    flat = parameters_to_vector(params).detach()
    pad = (0, padded_numel(flat.numel(), n) - flat.numel())
    mine = F.pad(flat, pad).chunk(n)[rank].clone()
    momentum = torch.zeros_like(mine)
    for sequence in batches(sizes, steps):
        with comm.labelled("parameters", "forward"):
            gathered = _all_gather(mine)
        vector_to_parameters(gathered[: flat.numel()], params)
        for p in params:
            p.grad = None
        loss_of(model, _my_sequences(sequence).to(flat.device)).backward()
        grad = F.pad(parameters_to_vector([p.grad for p in params]), pad)
        with comm.labelled("gradients", "backward"):
            grad = _reduce_scatter(grad) / n
        momentum.mul_(0.9).add_(grad)
        mine.sub_(sizes.lr * momentum)
    return mine


def train_batch_split(
    sizes: TransformerSizes, kinds=KINDS, world_sizes=None, steps=None, backend="gloo"
) -> dict[tuple[str, int], BatchSplitRun]:
    """Each kind at each N, trained `steps` SGD steps on the same batches as one process
    (each rank on its 1/N of every batch) and compared with it; keyed by (kind, N)."""
    steps = sizes.steps if steps is None else steps
    reference = one_process_steps(sizes, steps)["params"]
    runs = launch_kinds(
        _train, "batch-split models", sizes, kinds, world_sizes, backend, steps, reference
    )
    return {key: BatchSplitRun(*key, **run) for key, run in runs.items()}
