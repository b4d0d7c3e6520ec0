"""Runs of the allreduce algorithms on real ranks: traced demos, checks, ping-pong, timings.

Each public function here starts its own ranks with `launch` and hands back plain data
(traces, tables of times) that the charts and the cost model take; the rank-side halves
are the `_on_rank` functions below it.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist

from ..ranks.bootstrap import device
from ..ranks.launch import launch
from .algorithms import ALGORITHMS, Trace, known

BUILTIN = "builtin"


def traced_run(
    algorithm: str, values: list, timeout: float = 60.0, backend: str = "gloo"
) -> list[Trace]:
    """Run `algorithm` with rank r holding `values[r]`; every rank's trace, values kept."""
    known(algorithm)
    return launch(
        _traced_on_rank, len(values), args=(algorithm, values), timeout=timeout, backend=backend
    )


def _traced_on_rank(algorithm: str, values: list) -> Trace:
    t = torch.as_tensor(values[dist.get_rank()]).to(device()).clone()
    trace = Trace(keep_values=True)
    trace.next_round("start")
    trace.done(t.view(-1))
    ALGORITHMS[algorithm](t, trace)
    return trace


def compare_with_builtin(
    world_size: int, numels: tuple, dtypes: tuple, timeout: float = 60.0, backend: str = "gloo"
) -> list[dict]:
    """Each algorithm against `dist.all_reduce` on the same random inputs.

    One row per (algorithm, numel, dtype): whether every rank's result equals the built-in
    one (exactly for integers, to rounding for floats), whether all ranks agree bit for
    bit, and the rounds and bytes each rank moved.
    """
    rows = launch(
        _compare_on_rank, world_size, args=(numels, dtypes), timeout=timeout, backend=backend
    )
    merged = []
    for i, row in enumerate(rows[0]):
        per_rank = [r[i] for r in rows]
        merged.append(
            {
                **{k: row[k] for k in ("algorithm", "world_size", "numel", "dtype", "rounds")},
                "equal": all(r["equal"] for r in per_rank),
                "ranks_agree": all(torch.equal(r["result"], row["result"]) for r in per_rank),
                "max_abs_error": max(r["max_abs_error"] for r in per_rank),
                "bytes": [(r["bytes_sent"], r["bytes_received"]) for r in per_rank],
            }
        )
    return merged


def _compare_on_rank(numels: tuple, dtypes: tuple) -> list[dict]:
    rank, world = dist.get_rank(), dist.get_world_size()
    rows = []
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        for numel in numels:
            g = torch.Generator().manual_seed(1000 * rank + numel)
            if dtype.is_floating_point:
                x = torch.randn(numel, generator=g, dtype=torch.float64).to(dtype)
            else:
                x = torch.randint(-(10**6), 10**6, (numel,), generator=g, dtype=dtype)
            x = x.to(device())
            expected = x.clone()
            dist.all_reduce(expected)
            for name, allreduce in ALGORITHMS.items():
                trace = Trace()
                got = allreduce(x.clone(), trace)
                if dtype.is_floating_point:
                    tol = 1e-5 if dtype == torch.float32 else 1e-12
                    equal = torch.allclose(got, expected, rtol=tol, atol=tol * world)
                else:
                    equal = torch.equal(got, expected)
                error = (got - expected).abs().max().item() if numel else 0
                rows.append(
                    {
                        "algorithm": name,
                        "world_size": world,
                        "numel": numel,
                        "dtype": dtype_name,
                        "rounds": len(trace.rounds),
                        "equal": bool(equal),
                        "max_abs_error": float(error),
                        "bytes_sent": trace.bytes_sent,
                        "bytes_received": trace.bytes_received,
                        "result": got.cpu(),
                    }
                )
    return rows


def pingpong(
    nbytes: tuple, repeats: int = 10, timeout: float = 60.0, backend: str = "gloo"
) -> list[float]:
    """One-way time of a message of each size between two ranks: the fastest round trip / 2.

    The fastest, not the median: it is what the link itself needs, while the slower runs
    measure how busy the machine's other programs kept the cores.
    """
    args = (tuple(nbytes), repeats)
    return launch(_pingpong_on_rank, 2, args=args, timeout=timeout, backend=backend)[0]


def _pingpong_on_rank(nbytes: tuple, repeats: int) -> list[float]:
    rank = dist.get_rank()
    out = []
    for n in nbytes:
        buf = torch.zeros(max(1, n // 4), dtype=torch.float32, device=device())
        times = []
        for i in range(repeats + 1):
            dist.barrier()
            start = time.perf_counter()
            if rank == 0:
                dist.send(buf, 1)
                dist.recv(buf, 1)
            else:
                dist.recv(buf, 0)
                dist.send(buf, 0)
            if buf.is_cuda:  # NCCL returns before the GPU has moved the bytes
                torch.cuda.synchronize()
            if i:  # the first is a warm-up
                times.append((time.perf_counter() - start) / 2)
        out.append(min(times))
    return out


def time_allreduce(
    world_size: int,
    nbytes: tuple,
    repeats: int = 5,
    algorithms: tuple = (*ALGORITHMS, BUILTIN),
    timeout: float = 300.0,
    backend: str = "gloo",
) -> dict:
    """{algorithm: [median seconds per size]} for float32 tensors of each size in bytes.

    A run's time is the slowest rank's, from a common barrier; the algorithms take turns
    within each repeat so that noise from other programs falls on all of them alike.
    """
    for name in algorithms:
        if name != BUILTIN:
            known(name)
    return launch(
        _time_on_rank,
        world_size,
        args=(tuple(nbytes), repeats, tuple(algorithms)),
        timeout=timeout,
        backend=backend,
    )[0]


def _time_on_rank(nbytes: tuple, repeats: int, algorithms: tuple) -> dict:
    table = {name: [] for name in algorithms}
    for n in nbytes:
        x = torch.ones(max(1, n // 4), dtype=torch.float32, device=device())
        times = {name: [] for name in algorithms}
        for i in range(repeats + 1):
            for name in algorithms:
                seconds = _time_once(name, x)
                if i:  # the first round warms up buffers and connections
                    times[name].append(seconds)
        for name in algorithms:
            table[name].append(statistics.median(times[name]))
    return table


def _time_once(name: str, x: torch.Tensor) -> float:
    work = x.clone()
    dist.barrier()
    start = time.perf_counter()
    if name == BUILTIN:
        dist.all_reduce(work)
    else:
        ALGORITHMS[name](work)
    if work.is_cuda:
        torch.cuda.synchronize()
    elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64, device=x.device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return float(elapsed.item())
