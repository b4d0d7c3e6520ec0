"""Mixed precision on the CPU: bf16 autocast against fp32, fp16 underflow, fp32 master weights.

Micikevicius et al. (2018) keep three things in fp32 when the arithmetic runs in 16 bits:
a master copy of the weights (small updates vanish when added to 16-bit weights), the
loss scale's unscaled gradients (tiny gradients flush to zero in fp16, whose smallest
positive value is 2^-24), and sums of many terms. Each function shows one of them.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from ..core import progress
from ..core.training import torch_threads
from .zero import mlp


def _flat_grads(model) -> torch.Tensor:
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def _loss(model, x, y, dtype, shrink: float) -> torch.Tensor:
    with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
        return F.cross_entropy(model(x), y) * shrink


def underflow(widths, x, y, shrink: float, scale: float) -> dict:
    """The share of gradients fp16 loses (zero where fp32's are not), without and with scaling.

    `shrink` multiplies the loss so that this small model's gradients are as small as a
    large model's; `torch.amp.GradScaler` multiplies it back up by `scale` before backward
    and divides the gradients after (`unscale_`), in fp32.
    """
    model = mlp(widths)
    _loss(model, x, y, torch.float32, shrink).backward()
    exact = _flat_grads(model)
    model.zero_grad(set_to_none=True)
    _loss(model, x, y, torch.float16, shrink).backward()
    plain = _flat_grads(model)
    model.zero_grad(set_to_none=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    scaler = torch.amp.GradScaler("cpu", init_scale=scale)
    scaler.scale(_loss(model, x, y, torch.float16, shrink)).backward()
    scaler.unscale_(optimizer)
    scaled = _flat_grads(model)
    alive = exact != 0
    return {
        "numel": int(exact.numel()),
        "fp32_zero": float((exact == 0).float().mean()),
        "fp16_lost": float(((plain == 0) & alive).float().mean()),
        "scaled_lost": float(((scaled == 0) & alive).float().mean()),
        "scaled_error": float((scaled - exact).norm() / exact.norm()),
        "plain_error": float((plain - exact).norm() / exact.norm()),
        "scale": float(scale),
    }


def small_sums(terms: int, value: float) -> dict:
    """Add `value` to 0 (a running sum) and to 1 (a weight) `terms` times, in fp16 and fp32.

    In fp16 the running sum stops growing once `value` is less than half its spacing, and
    a weight of 1 (spacing 2^-10) does not move at all: that is why the master weights and
    the sums stay in fp32.
    """
    out = {"exact_sum": terms * value, "exact_weight": 1.0 + terms * value}
    for name, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16), ("fp32", torch.float32)):
        step = torch.tensor(value, dtype=dtype)
        total, weight = torch.zeros((), dtype=dtype), torch.ones((), dtype=dtype)
        for _ in range(terms):
            total += step
            weight += step
        out[f"{name}_sum"], out[f"{name}_weight"] = float(total), float(weight)
    return out


def autocast_race(widths, data, epochs: int, batch: int, lr: float = 1e-3) -> dict:
    """Train the same MLP on the same batches in fp32 and under bf16 autocast: accuracy, and
    the training thread's CPU time (a kernel's other threads, sending its output and watching
    the bar, are not counted)."""
    x, y = data.train.tensors
    xt, yt = data.test.tensors
    out = {}
    with progress.bar(2 * epochs, "fp32, then bf16", "epoch") as bar:
        for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            model = mlp(widths)
            optimizer = torch.optim.Adam(model.parameters(), lr=lr)
            start = time.thread_time()
            with torch_threads(1):
                _train(model, optimizer, x, y, dtype, epochs, batch, bar)
            seconds = time.thread_time() - start
            autocast = torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32)
            with torch.no_grad(), autocast:
                accuracy = float((model(xt.float()).argmax(1) == yt).float().mean())
            out[name] = {"accuracy": accuracy, "seconds": seconds}
    return out


def _train(model, optimizer, x, y, dtype, epochs: int, batch: int, bar) -> None:
    g = torch.Generator().manual_seed(0)
    for _ in range(epochs):
        for idx in torch.randperm(len(x), generator=g).split(batch):
            optimizer.zero_grad()
            _loss(model, x[idx].float(), y[idx], dtype, 1.0).backward()
            optimizer.step()
        bar.update(1)
