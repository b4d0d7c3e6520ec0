"""Counting GPUs without starting the CUDA runtime, so the kernel can still fork its ranks.

`torch.cuda.is_available()` and `device_count()` initialise CUDA's driver API in the
calling process; from then on every forked child is in PyTorch's "bad fork" state and
dies at its first CUDA call. The course counts through NVML instead (the driver's
management library, which forks safely), read with ctypes so that no extra package is
needed, and honours `CUDA_VISIBLE_DEVICES` as CUDA would.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

import torch

NVML_LIBRARIES = ("libnvidia-ml.so.1", "libnvidia-ml.so", "nvml.dll")


@dataclass(frozen=True)
class GpuCount:
    count: int
    how: str  # how it was counted, for `doctor`


def visible_gpus() -> GpuCount:
    """The GPUs this process may use, counted without touching the CUDA runtime."""
    if torch.version.cuda is None:
        return GpuCount(0, "this torch build has no CUDA")
    if torch.cuda.is_initialized():  # already started here: asking costs nothing more
        return GpuCount(torch.cuda.device_count(), "CUDA runtime (already initialised)")
    found = nvml_device_count()
    if found is None:
        return GpuCount(0, "NVML not found (no NVIDIA driver)")
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return GpuCount(found, "NVML")
    return GpuCount(min(found, visible_entries(listed)), "NVML and CUDA_VISIBLE_DEVICES")


def visible_device_ids() -> list[str]:
    """The ids to put in a child's CUDA_VISIBLE_DEVICES, one GPU each (the sweep's trials)."""
    count = visible_gpus().count
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return [str(i) for i in range(count)]
    return [entry.strip() for entry in listed.split(",")][:count]


def visible_entries(listed: str) -> int:
    """How many devices CUDA_VISIBLE_DEVICES lets through: CUDA stops at the first bad entry."""
    count = 0
    for entry in listed.split(","):
        entry = entry.strip()
        if not entry or entry.startswith("-"):
            break
        count += 1
    return count


def nvml_device_count() -> int | None:
    """The driver's count of NVIDIA GPUs, or None where there is no NVML library."""
    for name in NVML_LIBRARIES:
        try:
            nvml = ctypes.CDLL(name)
        except OSError:
            continue
        if nvml.nvmlInit_v2() != 0:
            return 0
        try:
            count = ctypes.c_uint(0)
            return count.value if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) == 0 else 0
        finally:
            nvml.nvmlShutdown()
    return None
