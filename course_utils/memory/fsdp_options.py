"""FSDP2's two memory knobs, measured on one step each (notebook 08).

`reshard_after_forward=False` keeps each layer's gathered weights from its forward to its
backward: one all-gather per layer and step instead of two, paid in memory held through
the step. `MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)` gathers and computes
with bf16 weights while the shards Adam steps stay fp32: the paper's 2 + 2 + 12 layout,
done by the library. Each setting trains the same MLP; a profiled step counts its
all-gathers (FSDP names them `FSDP::all_gather (k)`), the allocator counts what the next
forward still holds when it returns (`peak`: the activations, and the gathered layers if
they are kept), and a hook on the first layer sees the dtype it computes with. (The peak
of a whole step is not compared: gloo's threads allocate while FSDP computes, and on 2
ranks it moved by a quarter from run to run.)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..ranks.bootstrap import device
from ..ranks.launch import launch
from ..ranks.rank_output import quiet_stderr
from .fsdp import shard_layers
from .peak import allocated_during
from .zero import mlp, rank_share

SETTINGS = ("default", "reshard_after_forward=False", "bf16 MixedPrecisionPolicy")


def _options(setting: str) -> dict:
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if setting == "reshard_after_forward=False":
        return {"reshard_after_forward": False}
    if setting == "bf16 MixedPrecisionPolicy":
        return {"mp_policy": MixedPrecisionPolicy(torch.bfloat16, torch.float32)}
    return {}


def _measure_on_rank(widths, setting: str, x, y, lr: float) -> dict:
    from torch.profiler import ProfilerActivity, profile

    model = shard_layers(mlp(widths).to(device()), **_options(setting))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    computes_in = set()
    model[0].register_forward_pre_hook(lambda layer, _: computes_in.add(layer.weight.dtype))
    part = rank_share(x.shape[1])
    x, y = x[:, part].to(device()), y[:, part].to(device())

    def step(s: int) -> None:
        optimizer.zero_grad()
        F.cross_entropy(model(x[s]), y[s]).backward()
        optimizer.step()

    step(0)  # Adam's moments are made here, not in the steps measured
    with quiet_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
        step(1)
    gathers = sum(1 for e in prof.events() if e.name.startswith("FSDP::all_gather ("))
    held = sum(p.to_local().untyped_storage().nbytes() for p in model.parameters())
    loss, _, kept = allocated_during(
        lambda: F.cross_entropy(model(x[2]), y[2]), device(), transient=("FSDP::all_gather (",)
    )
    loss.backward()
    return {
        "setting": setting,
        "all_gathers": gathers,
        "stored": held,
        "kept_after_forward": kept,
        "computes_in": str(computes_in.pop()).removeprefix("torch."),
    }


def fsdp_settings(widths, world_size: int, x, y, lr: float, timeout: float = 120.0) -> dict:
    """{setting: rank 0's all-gathers per step, parameter bytes it stores, bytes a forward
    still holds when it returns, the dtype its layers compute in}; `x, y`: at least 3
    global batches."""
    return {
        setting: launch(
            _measure_on_rank, world_size, backend="gloo", args=(widths, setting, x, y, lr),
            timeout=timeout,
        )[0]
        for setting in SETTINGS
    }  # fmt: skip
