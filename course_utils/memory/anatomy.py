"""Where one rank's bytes go during a training step with mixed-precision Adam (notebook 08).

Two layouts, each measured from the tensors a real step leaves behind. The paper's
(Micikevicius et al. 2018, and ZeRO's 16 bytes per parameter): a bf16 model, and
`torch.optim.Adam` stepping an fp32 master copy with its two fp32 moments. PyTorch's own,
`torch.autocast`: the model, its gradients and Adam's moments stay fp32, and the bf16
copies of the weights live only during the step, among what autograd saves. The
activations are what autograd keeps for backward, caught as it saves them with
`torch.autograd.graph.saved_tensors_hooks` and counted once per storage.
"""

from __future__ import annotations

import contextlib

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ..ranks.launch import launch
from .zero import mlp, rank_share, storage_bytes


class SavedBytes(contextlib.AbstractContextManager):
    """Inside this block, count the bytes autograd saves for backward (each storage once).

    Weights are saved too (a layer needs them for its input's gradient), but they are
    held anyway: tensors sharing a storage with one of `params` are not activations.
    """

    def __init__(self, params=()):
        self.storages: dict[int, int] = {}
        self.shapes: dict[int, tuple] = {}  # storage -> (shape, dtype) of what was saved
        self._params = {p.untyped_storage().data_ptr() for p in params}
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        key = t.untyped_storage().data_ptr()
        if key not in self._params:  # a view of a larger buffer counts only what it shows
            self.storages[key] = max(self.storages.get(key, 0), t.numel() * t.element_size())
            self.shapes[key] = (tuple(t.shape), t.dtype)
        return t

    @property
    def nbytes(self) -> int:
        return sum(self.storages.values())

    def copies_of(self, params, dtype: torch.dtype) -> int:
        """Bytes saved in `dtype` with the shape of one of `params` (or its transpose, as a
        linear layer saves it): their cast copies."""
        shapes = {tuple(p.shape) for p in params} | {tuple(p.shape)[::-1] for p in params}
        return sum(
            self.storages[k] for k, (shape, kind) in self.shapes.items()
            if kind == dtype and shape in shapes
        )  # fmt: skip

    def __enter__(self):
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        return self._hooks.__exit__(*exc)


def measure_rank(widths, x: torch.Tensor, y: torch.Tensor, lr: float = 1e-3) -> dict:
    """One mixed-precision step on this rank: the bytes of each kind it held, and Ψ."""
    model = mlp(widths).to(torch.bfloat16)
    master = [p.detach().float().requires_grad_() for p in model.parameters()]
    optimizer = torch.optim.Adam(master, lr=lr)
    with SavedBytes(model.parameters()) as saved:
        loss = F.cross_entropy(model(x.to(torch.bfloat16)).float(), y)
    loss.backward()
    for m, p in zip(master, model.parameters(), strict=True):
        m.grad = p.grad.float()
    optimizer.step()
    with torch.no_grad():
        for m, p in zip(master, model.parameters(), strict=True):
            p.copy_(m)
    moments = [t for s in optimizer.state.values() for k, t in s.items() if k != "step"]
    return {
        "rank": dist.get_rank() if dist.is_initialized() else 0,
        "numel": sum(p.numel() for p in model.parameters()),
        "params": storage_bytes(model.parameters()),
        "grads": storage_bytes(p.grad for p in model.parameters()),
        "optimizer": storage_bytes(master) + storage_bytes(moments),
        "activations": saved.nbytes,
        "batch": len(x),
    }


def _anatomy_on_rank(widths, x, y) -> dict:
    part = rank_share(len(x))
    row = measure_rank(widths, x[part], y[part])
    dist.barrier()  # a rank that never communicates must not leave while peers still connect
    return row


def rank_anatomy(widths, world_size: int, x: torch.Tensor, y: torch.Tensor, timeout=60.0) -> list:
    """Every rank's bytes by kind, for one DDP-style step on its share of the batch (x, y)."""
    return launch(
        _anatomy_on_rank, world_size, backend="gloo", args=(widths, x, y), timeout=timeout
    )


def autocast_anatomy(widths, x: torch.Tensor, y: torch.Tensor, lr: float = 1e-3) -> dict:
    """The second of two fp32 Adam steps under `torch.autocast` (bf16), in a rank of its own
    (the allocator's count needs the profiler, `peak`): the bytes of each kind it holds,
    the bf16 weight copies among what autograd saved, and the step's peak beyond the model
    state (the first step creates Adam's moments)."""
    return launch(_autocast_on_rank, 1, backend="gloo", args=(widths, x, y, lr))[0]


def _autocast_on_rank(widths, x: torch.Tensor, y: torch.Tensor, lr: float) -> dict:
    from .peak import peak_bytes_during

    model = mlp(widths)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def step() -> SavedBytes:
        with SavedBytes(model.parameters()) as saved, torch.autocast("cpu", torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)
        return saved

    step()
    saved, peak = peak_bytes_during(step)
    moments = [t for s in optimizer.state.values() for k, t in s.items() if k != "step"]
    params = list(model.parameters())
    return {
        "numel": sum(p.numel() for p in params),
        "params": storage_bytes(params),
        "grads": storage_bytes(p.grad for p in params),
        "optimizer": storage_bytes(moments),
        "bf16_weight_copies": saved.copies_of(params, torch.bfloat16),
        "activations": saved.nbytes,
        "peak_beyond_state": peak,
    }
