"""Runs of the allreduce algorithms on real ranks: traced demos, checks, ping-pong, timings.

Each public function here starts its own ranks with `launch` and hands back plain data
(traces, tables of times) that the charts and the cost model take; the rank-side halves
are the `_on_rank` functions below it.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..core import progress
from ..network import wire
from ..network.recorder import recording
from ..ranks.bootstrap import device
from ..ranks.launch import launch
from .algorithms import ALGORITHMS, implementation, known, summed
from .trace import Trace, round_label, traces

BUILTIN = "builtin"
LONG = 0.15  # seconds: over an emulated link, a run this long is timed only once


def traced_run(
    algorithm: str, values: list, timeout: float = 60.0, backend: str = "gloo"
) -> list[Trace]:
    """Run `algorithm` with rank r holding `values[r]`; every rank's trace, values kept."""
    known(algorithm)
    ranks = launch(
        _traced_on_rank, len(values), args=(algorithm, values), timeout=timeout, backend=backend
    )
    logs, finals = zip(*ranks, strict=True)
    return traces(list(logs), list(finals), round_label(algorithm, len(values), logs))


def _traced_on_rank(algorithm: str, values: list) -> tuple:
    t = torch.as_tensor(values[dist.get_rank()], device=device()).clone()
    with recording(watch=t) as log:
        summed(algorithm, t)
    return log.messages, t.cpu()


def compare_with_builtin(
    world_sizes: tuple, numels: tuple, dtypes: tuple, timeout: float = 60.0,
    backend: str = "gloo", algorithms: tuple = tuple(ALGORITHMS),
) -> list[dict]:  # fmt: skip
    """Each of `algorithms` against `dist.all_reduce` on the same random inputs, on each of
    `world_sizes` ranks (a launch each).

    One row per (algorithm, N, numel, dtype): whether every rank's result equals the
    built-in one (exactly for integers, to rounding for floats), whether all ranks agree bit
    for bit, and the rounds and bytes each rank moved, as counted at the torch.distributed
    boundary.
    """
    names, merged = tuple(known(a) for a in algorithms), []
    with progress.bar(len(world_sizes), "each N against dist.all_reduce", "launch") as bar:
        for n in world_sizes:
            args = (numels, dtypes, names)
            rows = launch(_compare_on_rank, n, args=args, timeout=timeout, backend=backend)
            merged += [_merged([r[i] for r in rows]) for i in range(len(rows[0]))]
            bar.update(1)
    return merged


def _merged(per_rank: list[dict]) -> dict:
    """One comparison's row from every rank's."""
    row = per_rank[0]
    counted = traces([r["messages"] for r in per_rank], [r["result"] for r in per_rank], str)
    return {
        **{k: row[k] for k in ("algorithm", "world_size", "numel", "dtype")},
        "rounds": len(counted[0].rounds) - 1,
        "equal": all(r["equal"] for r in per_rank),
        "ranks_agree": all(torch.equal(r["result"], row["result"]) for r in per_rank),
        "max_abs_error": max(r["max_abs_error"] for r in per_rank),
        "bytes": [(t.bytes_sent, t.bytes_received) for t in counted],
    }


def _compare_on_rank(numels: tuple, dtypes: tuple, algorithms: tuple) -> list[dict]:
    rank, world = dist.get_rank(), dist.get_world_size()
    rows = []
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        for numel in numels:
            g = torch.Generator().manual_seed(1000 * rank + numel)
            if dtype.is_floating_point:
                x = torch.randn(numel, generator=g, dtype=torch.float64).to(dtype)  # cpu: seeded
            else:
                x = torch.randint(-(10**6), 10**6, (numel,), generator=g, dtype=dtype)  # cpu
            x = x.to(device())
            expected = x.clone()
            dist.all_reduce(expected)
            for name in algorithms:
                with recording() as log:
                    got = summed(name, x.clone())
                if dtype.is_floating_point:
                    tol = 1e-5 if dtype == torch.float32 else 1e-12
                    equal = torch.allclose(got, expected, rtol=tol, atol=tol * world)
                else:
                    equal = torch.equal(got, expected)
                error = (got - expected).abs().max().item() if numel else 0
                row = {"algorithm": name, "world_size": world, "numel": numel, "dtype": dtype_name}
                row |= {"equal": bool(equal), "max_abs_error": float(error)}
                rows.append({**row, "messages": log.messages, "result": got.cpu()})
    return rows


def pingpong(
    nbytes: tuple,
    repeats: int = 10,
    timeout: float = 60.0,
    backend: str = "gloo",
    link: wire.Link | str | None = "real",
) -> list[float]:
    """One-way time of a message of each size between two ranks: the fastest round trip / 2.

    The fastest, not the median: it is what the link itself needs, while the slower runs
    measure how busy the machine's other programs kept the cores.
    """
    args = (tuple(nbytes), repeats, wire.resolve(link, 2, backend))
    return launch(_pingpong_on_rank, 2, args=args, timeout=timeout, backend=backend)[0]


def _pingpong_on_rank(nbytes: tuple, repeats: int, link: wire.Link) -> list[float]:
    with wire.active(link):
        return _pingpong_times(nbytes, repeats)


def _pingpong_times(nbytes: tuple, repeats: int) -> list[float]:
    """On the real link, several round trips back to back per run (the first message
    after a barrier also wakes a sleeping peer); over a simulated one, one (its clock
    already charges each message exactly). Timed from when this rank leaves the barrier."""
    rank = dist.get_rank()
    clock = wire.timer()
    round_trips = 1 if wire.current().emulated else 8
    buffers = [torch.zeros(max(1, n // 4), dtype=torch.float32, device=device()) for n in nbytes]
    times = [[] for _ in nbytes]
    for i in range(repeats + 1):  # every size in turn; the first pass warms them all up
        for k, buf in enumerate(buffers):
            dist.barrier()
            wire.restart()
            start = clock()
            for _ in range(round_trips):
                if rank == 0:
                    dist.send(buf, 1)
                    dist.recv(buf, 1)
                else:
                    dist.recv(buf, 0)
                    dist.send(buf, 0)
            if buf.is_cuda:  # NCCL returns before the GPU has moved the bytes
                torch.cuda.synchronize()
            if i:
                times[k].append((clock() - start) / (2 * round_trips))
    return [min(t) for t in times]


def time_allreduce(
    world_size: int,
    nbytes: tuple,
    repeats: int = 5,
    algorithms: tuple = (*ALGORITHMS, BUILTIN),
    timeout: float = 300.0,
    backend: str = "gloo",
    link: wire.Link | str | None = None,
    every_repeat: bool = False,
) -> dict:
    """{algorithm: [seconds per size]} for float32 tensors of each size in bytes.

    A run's time is the slowest rank's, from a common barrier; the algorithms take turns
    within each repeat so that noise from other programs falls on all of them alike, and
    the fastest repeat counts, as in `pingpong`: what the link needs, not what a busy
    machine's scheduler added (a woken rank can wait a whole scheduler tick). Over
    an emulated `link` (None: the profile's) every message pays its wire time, the
    built-in a ring's. `every_repeat`: {algorithm: [[seconds of each repeat] per size]},
    the repeats in the order they ran, so that two algorithms can be compared pairwise.
    """
    for name in algorithms:
        if name != BUILTIN:
            known(name)
    return launch(
        _time_on_rank,
        world_size,
        args=(
            tuple(nbytes),
            repeats,
            tuple(algorithms),
            wire.resolve(link, world_size, backend),
            every_repeat,
        ),
        timeout=timeout,
        backend=backend,
    )[0]


def _time_on_rank(
    nbytes: tuple, repeats: int, algorithms: tuple, link: wire.Link, every_repeat: bool
) -> dict:
    with wire.active(link, virtual=True):  # a simulated time: CPU and wire, no scheduler
        table = _time_table(nbytes, repeats, algorithms, warm_every_size=not link.emulated)
    return table if every_repeat else {k: [min(ts) for ts in v] for k, v in table.items()}


def _time_table(nbytes: tuple, repeats: int, algorithms: tuple, warm_every_size: bool) -> dict:
    """The first round warms up buffers and connections: at every size on the real link,
    once on an emulated one (where a round at the largest size costs seconds). There a
    size whose every run took over LONG seconds is timed once: its wire hides the noise.
    Rank 0's bar counts the rounds (every algorithm once)."""
    table = {name: [] for name in algorithms}
    warms = [1 if warm_every_size or k == 0 else 0 for k in range(len(nbytes))]
    rounds = len(nbytes) * repeats + sum(warms)
    with progress.bar(rounds, f"all-reduce on {dist.get_world_size()} ranks", "round") as bar:
        for n, warm in zip(nbytes, warms, strict=True):
            bar.set_postfix(bytes=f"{n:,}")
            times = _time_size(n, repeats, warm, algorithms, warm_every_size, bar)
            for name in algorithms:
                table[name].append(times[name])
    return table


def _time_size(n: int, repeats: int, warm: int, algorithms: tuple, warm_every_size: bool, bar):
    """{algorithm: [seconds of each timed round]} for `n` bytes, after `warm` untimed rounds."""
    x = torch.ones(max(1, n // 4), dtype=torch.float32, device=device())
    times = {name: [] for name in algorithms}
    for i in range(repeats + warm):
        for name in algorithms:
            seconds = _time_once(name, x)
            if i >= warm:
                times[name].append(seconds)
        bar.update(1)
        if i >= warm and not warm_every_size and min(t[-1] for t in times.values()) > LONG:
            bar.update(repeats + warm - i - 1)  # the rounds this size skips
            break  # every rank saw the same (slowest-rank) times, so all stop here
    return times


def _time_once(name: str, x: torch.Tensor) -> float:
    """Over an emulated link the time is the rank's link clock: its CPU time plus the wires,
    so a rank that the scheduler wakes late (8 ranks on 2 cores) adds nothing to it. On the
    real link, the wall clock."""
    clock = wire.timer()
    allreduce = wire.all_reduce if name == BUILTIN else implementation(name)
    work = x.clone()
    dist.barrier()
    wire.restart()  # every rank's clock from one moment; the time starts as it leaves
    start = clock()
    allreduce(work)
    if work.is_cuda:
        torch.cuda.synchronize()
    elapsed = torch.tensor([clock() - start], dtype=torch.float64, device=x.device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return float(elapsed.item())
