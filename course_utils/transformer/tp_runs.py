"""The tensor and sequence parallel experiments of notebook 10: launches and their results.

Each run trains one kind of split model on N ranks from the one-process model's weights
and compares every rank's parameters with the same slice of the one-process model
trained on the same batches; one training step's messages come home with it. The
results are plain dataclasses and dicts of numbers, pickled home from the ranks.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from ..core import progress
from ..core.sizes_model_parallel import TransformerSizes
from ..memory.peak import allocated_during
from ..ranks.bootstrap import device, synchronize
from ..ranks.launch import launch
from . import comm
from .model import batches, build, one_process_steps, train_steps
from .sequence_parallel import sequence_parallel_model, sync_sequence_parallel_grads
from .tensor_parallel import tensor_parallel_model

KINDS = ("tp", "sp", "torch_tp", "torch_sp")


def split(model: nn.Module, kind: str) -> nn.Module:
    """`model` split over the launched ranks: by hand ("tp", "sp") or by PyTorch
    ("torch_tp", "torch_sp")."""
    if kind == "tp":
        return tensor_parallel_model(model)
    if kind == "sp":
        return sequence_parallel_model(model)
    if kind in ("torch_tp", "torch_sp"):
        from .torch_tp import torch_parallel_model

        return torch_parallel_model(model, sequence_parallel=kind == "torch_sp")
    raise ValueError(f"kind={kind!r} is not one of {', '.join(KINDS)}.")


def _local(t: torch.Tensor) -> torch.Tensor:
    """This rank's part of a parameter (a DTensor's local shard, or the tensor itself)."""
    return t.to_local() if hasattr(t, "to_local") else t


@dataclass(frozen=True)
class TrainRun:
    kind: str
    world_size: int
    max_diff: float  # largest |parameter - one process's| over every rank and parameter
    losses: list[float]  # rank 0's, one per step
    reference_losses: list[float]  # one process's
    step_log: list[comm.Message]  # rank 0's messages during the first training step
    step_seconds: float = 0.0  # rank 0's wall time per step, averaged over the steps


def counted_steps(train, steps: int):
    """Run `train()`, `steps` training steps on this rank, counting what it sends: its result,
    this rank's messages of one step (every step must send the same) and seconds per step."""
    started = time.perf_counter()
    with comm.count_communication() as log:
        result = train()
    synchronize()
    seconds = (time.perf_counter() - started) / steps
    if len(log) % steps:
        raise RuntimeError(f"{len(log)} messages in {steps} steps: the steps sent different ones")
    return result, log[: len(log) // steps], seconds


def _train_one(sizes: TransformerSizes, kind: str, steps: int, reference: dict) -> dict:
    dev = device()
    model = split(build(sizes, device=dev), kind)
    after = _sync_labelled if kind == "sp" else None
    comm.label_parts(model)
    losses, log, seconds = counted_steps(
        lambda: train_steps(model, batches(sizes, steps), sizes.lr, after), steps
    )
    trained = build(sizes, device=dev)
    trained.load_state_dict(reference)
    twin = dict(split(trained, kind).named_parameters())
    diff = max(
        (_local(p.detach()) - _local(twin[name].detach())).abs().max().item()
        for name, p in model.named_parameters()
    )
    return {"max_diff": diff, "losses": losses, "step_log": log, "step_seconds": seconds}


def _sync_labelled(model) -> None:
    with comm.labelled("sequence-parallel parameters", "backward"):
        sync_sequence_parallel_grads(model)


def _each_kind(train_one, what: str, sizes: TransformerSizes, kinds, *args) -> dict:
    """On a rank: `train_one(sizes, kind, *args)` for every kind, under one bar."""
    out = {}
    with progress.bar(len(kinds), f"{what} on {dist.get_world_size()} ranks", "model") as bar:
        for kind in kinds:
            bar.set_postfix(training=kind)
            out[kind] = train_one(sizes, kind, *args)
            bar.update()
    return out


def launch_kinds(train_one, what: str, sizes, kinds, world_sizes, backend, *args) -> dict:
    """`train_one(sizes, kind, *args)` on every rank for every kind at every N (default: the
    profile's), one launch per N; keyed by (kind, N), rank 0's result with the largest
    `max_diff` of every rank's."""
    out, job = {}, (train_one, what, sizes, tuple(kinds), *args)
    for n in world_sizes or sizes.world_sizes:
        ranks = launch(_each_kind, n, backend=backend, timeout=sizes.timeout, args=job)
        for kind in kinds:
            out[kind, n] = {**ranks[0][kind], "max_diff": max(r[kind]["max_diff"] for r in ranks)}
    return out


def train_and_compare(
    sizes: TransformerSizes, kinds=("tp", "sp"), world_sizes=None, steps=None, backend="gloo"
) -> dict[tuple[str, int], TrainRun]:
    """Every kind (`KINDS`) at every N (default: the profile's), trained `steps` steps
    (default: the profile's) from one process's initial weights and compared with one
    process trained alike; keyed by (kind, N). One launch per N runs every kind. The
    reference trains here, on the CPU; `backend="auto"` puts the ranks on GPUs where there
    are enough (not checked yet against the 1e-5 tolerance)."""
    steps = sizes.steps if steps is None else steps
    reference = one_process_steps(sizes, steps)
    runs = launch_kinds(
        _train_one, "split models", sizes, kinds, world_sizes, backend, steps, reference["params"]
    )
    return {
        key: TrainRun(*key, reference_losses=reference["losses"], **run)
        for key, run in runs.items()
    }


_BLOCK = re.compile(r"block (\d+) ")


def bytes_per_block(log: list[comm.Message]) -> dict[int, dict[str, dict[str, int]]]:
    """Bytes this rank sent for each block, {block: {direction: {op: bytes}}}, from the
    messages whose `where` names a block (the embedding's, head's and the parameter sync's
    messages are not a block's)."""
    table: dict[int, dict[str, dict[str, int]]] = {}
    for m in log:
        found = _BLOCK.match(m.where)
        if found:
            ops = table.setdefault(int(found[1]), {}).setdefault(m.direction, {})
            ops[m.op] = ops.get(m.op, 0) + m.sent
    return table


@dataclass(frozen=True)
class MemoryRun:
    kind: str  # "one" (one process), "tp" or "sp"
    world_size: int
    saved: int  # activation bytes the forward keeps for the backward (autograd's own list)
    forward_peak: int  # most bytes held at once during the forward, beyond what was before
    forward_kept: int  # bytes still held after it: the saved activations and the logits


def _forward_remembering_saves(model: nn.Module, tokens: torch.Tensor):
    """The logits, and the bytes of every distinct tensor autograd saved on the way that is
    not a parameter: the activations this rank holds until its backward."""
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(t):
        store = t.untyped_storage()
        if store.data_ptr() not in weights:
            saved.setdefault(store.data_ptr(), store.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logits = model(tokens)
    return logits, sum(saved.values())


def _memory_one(sizes: TransformerSizes, kind: str) -> dict:
    dev = device()
    model = build(sizes, device=dev)
    if kind != "one":
        model = split(model, kind)
    tokens = batches(sizes, 1)[0, :, :-1].to(dev)
    model(tokens)  # a first forward makes whatever is made once (buffers, caches)
    (_, saved), peak, kept = allocated_during(
        lambda: _forward_remembering_saves(model, tokens), dev
    )
    return {"saved": saved, "peak": peak, "kept": kept}


def _memory_rank(sizes: TransformerSizes, kinds) -> dict:
    return {kind: _memory_one(sizes, kind) for kind in kinds}


def measure_memory(sizes: TransformerSizes, world_sizes=None, backend="gloo") -> list[MemoryRun]:
    """Activation memory per rank of one forward: one process, then TP and SP at every N.

    `saved` is the measure to compare: what autograd keeps, the same on every run. The
    profiler's peak on a CPU also counts frees it missed in gloo's threads, by a few
    activations now and then; on a GPU it is the caching allocator's own figure. Every
    rank of a run holds the same, so rank 0's numbers stand for all."""
    runs = []
    for n, kinds in [(1, ("one",))] + [(n, ("tp", "sp")) for n in world_sizes or sizes.world_sizes]:
        out = launch(_memory_rank, n, backend=backend, timeout=sizes.timeout, args=(sizes, kinds))
        for kind in kinds:
            r = out[0][kind]
            runs.append(MemoryRun(kind, n, r["saved"], r["peak"], r["kept"]))
    return runs
