"""The most bytes a step holds at once, from the allocator's own accounting (notebook 08).

Between two steps a rank holds its model state; during one it holds more: activations,
the gradient of a layer before it is reduce-scattered, ZeRO-3's gathered layer, Adam's
temporaries. Only the peak says whether a model fits. On a GPU the CUDA caching allocator
counts it (`torch.cuda.max_memory_allocated`); on a CPU `torch.profiler` with
`profile_memory=True` records every allocation and free of the CPU allocator, in order,
and the largest running sum is the peak. The profiler asks the CUDA runtime how many
devices there are, which the learner's kernel never does (it would poison fork on a GPU
machine): call it inside a launched rank.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from itertools import accumulate
from typing import TypeVar

import torch
from torch.profiler import ProfilerActivity, profile

from ..ranks.rank_output import quiet_stderr

T = TypeVar("T")


def peak_bytes_during(work: Callable[[], T], device: torch.device | None = None) -> tuple[T, int]:
    """`work()`'s result, and the most bytes it held at once beyond what was held before it
    (what it allocated and had not yet freed, at its worst moment)."""
    result, peak, _ = allocated_during(work, device)
    return result, peak


def allocated_during(
    work: Callable[[], T], device: torch.device | None = None, transient: tuple[str, ...] = ()
) -> tuple[T, int, int]:
    """`work()`'s result, its peak (as `peak_bytes_during`), and the bytes it still held
    when it returned (what it allocated and never freed: a forward's saved activations).

    On a CPU the profiler sees only the thread it runs on: a buffer that a collective's
    own thread (gloo's) happens to drop last looks never freed. `transient` names the
    ranges (prefixes of the profiler's op names) whose buffers live only inside the step,
    such as FSDP's all-gather output: they and their frees are left out of both counts."""
    where = torch.device(device or "cpu")
    if where.type == "cuda":
        torch.cuda.synchronize(where)
        before = torch.cuda.memory_allocated(where)
        torch.cuda.reset_peak_memory_stats(where)
        result = work()
        torch.cuda.synchronize(where)
        kept = torch.cuda.memory_allocated(where) - before
        return result, torch.cuda.max_memory_allocated(where) - before, kept
    with quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = work()
    changes = _allocations(prof, transient)
    return result, running_peak(changes), sum(changes)


def running_peak(changes) -> int:
    """The largest running sum of allocations (+bytes) and frees (-bytes), from 0."""
    return max(accumulate(changes, initial=0))


def _allocations(prof, transient: tuple[str, ...] = ()) -> list[int]:
    """The CPU allocator's events in the order they happened, from the exported trace (its
    documented form: instant events named '[memory]' with the bytes allocated, < 0 a free,
    at an address), less those of buffers allocated inside a `transient` range."""
    handle, path = tempfile.mkstemp(suffix=".json")
    os.close(handle)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    finally:
        os.unlink(path)
    memory = [
        e for e in events if e.get("name") == "[memory]" and e["args"].get("Device Type") == 0
    ]
    ranges = [
        (e["ts"], e["ts"] + e.get("dur", 0))
        for e in events
        if e.get("ph") == "X" and e.get("name", "").startswith(transient or "\0")
    ]
    left_out, changes = set(), []
    for e in sorted(memory, key=lambda e: e["ts"]):
        address, size = e["args"].get("Addr"), e["args"]["Bytes"]
        if size > 0 and any(start <= e["ts"] <= end for start, end in ranges):
            left_out.add(address)
        elif size < 0 and address in left_out:
            left_out.discard(address)
        else:
            changes.append(size)
    return changes
