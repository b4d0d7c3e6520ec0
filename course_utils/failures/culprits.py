"""Finding the rank to blame: one that hangs, one that is slow, one that silently differs.

A hang: `dist.monitored_barrier` on rank 0 names the rank that never arrived, and the
launcher's stack dump at its timeout shows the line that rank was stuck on. A straggler:
each rank times its own work and its wait in the allreduce; the slow rank is the one
that waits least, and every rank's step lasts as long as its work. A silent difference:
every few updates the ranks compare a checksum of their parameters (a replica that drifted
from the others) and which samples each took this pass (a sampler that replays an old
order).
"""

from __future__ import annotations

import re
import tempfile
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from ..core.backends import GLOO
from ..core.errors import LaunchTimeout
from ..core.training import Recipe, train
from ..parallel.data_parallel import average_gradients
from ..ranks.launch import launch
from ..ranks.rank_output import quiet_stderr
from .resume import RunConfig, build, replica

_BARRIER = re.compile(r"[Rr]anks? ([\d, ]+) failed to pass monitoredBarrier")


def stuck_reading_a_shard(seconds: float) -> None:
    """Where the hung rank spends its time: a read from a file system that stopped answering."""
    time.sleep(seconds)


def _hanging_worker(hang_rank: int, barrier_timeout: float, hang_seconds: float, out: str):
    if dist.get_rank() == hang_rank:
        stuck_reading_a_shard(hang_seconds)
    try:  # gloo also logs the failure in red on stderr: the exception says it once, plainly
        with quiet_stderr():
            dist.monitored_barrier(timeout=timedelta(seconds=barrier_timeout))
        message = ""
    except RuntimeError as exc:
        message = str(exc).splitlines()[0]
    if dist.get_rank() == 0:
        Path(out).write_text(message)
    return message


def find_hung_rank(world_size: int, hang_rank: int, barrier_timeout: float, timeout: float):
    """Run a job where `hang_rank` hangs; what monitored_barrier and the launcher said.

    Returns a dict: the barrier's message and the ranks it names, the launcher's
    message, the rank it blames and the line where that rank was.
    """
    with tempfile.TemporaryDirectory(prefix="course-hang-") as folder:
        out = str(Path(folder) / "barrier.txt")
        args = (hang_rank, barrier_timeout, 4 * timeout, out)
        try:
            launch(
                _hanging_worker,
                world_size,
                args=args,
                timeout=timeout,
                allow_failures=True,
                backend=GLOO,
            )
            launcher, blamed = "the launch finished", None
        except LaunchTimeout as exc:
            launcher, blamed = str(exc), exc.rank
        barrier = Path(out).read_text() if Path(out).exists() else ""
    named = _BARRIER.search(barrier)
    where = re.search(rf"rank {blamed} was \w+ at (.*)", launcher) if blamed is not None else None
    return {
        "barrier": barrier,
        "barrier_names": [int(r) for r in re.findall(r"\d+", named.group(1))] if named else [],
        "launcher": launcher,
        "launcher_names": blamed,
        "where": where.group(1) if where else "",
    }


def _straggler_worker(cfg: RunConfig, slow_rank: int, delay: float, steps: int) -> dict:
    model, optimizer, _, loader = build(cfg)
    waits = []

    def average(net) -> None:
        if dist.get_rank() == slow_rank:
            time.sleep(delay)  # this rank's extra work: a slower GPU, a busy host
        started = time.perf_counter()
        average_gradients(net)
        waits.append(time.perf_counter() - started)

    history = train(
        model,
        loader,
        Recipe(max_steps=steps, optimizer=optimizer, threads=cfg.threads),
        after_backward=average,
    )
    ends = history.step_seconds
    step = [b - a for a, b in zip([0.0, *ends[:-1]], ends, strict=True)]
    return {"step": step, "wait": waits}


def time_ranks(cfg: RunConfig, world_size: int, slow_rank: int | None, delay: float, steps: int,
               timeout: float = 60.0) -> dict[int, dict[str, float]]:  # fmt: skip
    """Each rank's mean seconds per update: its work, its wait in the allreduce, the step."""
    args = (cfg, slow_rank, delay, steps)
    out = launch(_straggler_worker, world_size, args=args, timeout=timeout, backend=GLOO)
    table = {}
    for rank, times in enumerate(out):
        skip = 2  # the first updates include start-up
        step = times["step"][skip:]
        wait = times["wait"][skip:]
        table[rank] = {
            "step": sum(step) / len(step),
            "wait": sum(wait) / len(wait),
            "work": sum(s - w for s, w in zip(step, wait, strict=True)) / len(step),
        }
    return table


def _checksum_worker(cfg: RunConfig, every: int, steps: int, forget: int | None, drift: tuple):
    rank = dist.get_rank()
    model, optimizer, batches, loader = build(cfg, forget_epoch=rank == forget)
    ddp = replica(model)
    records = []

    def after_step(step: int, loss: float) -> None:
        if drift and (rank, step) == drift:  # say, an old checkpoint restored on this rank alone
            with torch.no_grad():
                for p in model.parameters():
                    p.mul_(1.001)
        if step % every:
            return
        flat = torch.nn.utils.parameters_to_vector(model.parameters()).detach().double()
        positions = torch.arange(len(flat), device=flat.device)
        mine = torch.stack([flat.sum(), (flat * positions).sum() / len(flat)])
        sums = [torch.zeros_like(mine) for _ in range(dist.get_world_size())]
        dist.all_gather(sums, mine)
        seen = [torch.zeros_like(batches.seen) for _ in sums]
        dist.all_gather(seen, batches.seen)
        took = [t > 0 for t in seen]
        pairs = [
            [i, j]
            for i in range(len(took))
            for j in range(i + 1, len(took))
            if bool((took[i] & took[j]).any())
        ]
        records.append({"step": step, "checksums": [s.tolist() for s in sums], "pairs": pairs})

    train(
        ddp,
        loader,
        Recipe(max_steps=steps, optimizer=optimizer, threads=cfg.threads),
        after_step=after_step,
    )
    return records


def compare_ranks(cfg: RunConfig, world_size: int, every: int, steps: int,
                  forget_epoch_rank: int | None = None, drift: tuple = (),
                  timeout: float = 60.0) -> list[dict]:  # fmt: skip
    """Every `every` updates: each rank's parameter checksum, and which pairs of ranks took
    a sample in common this pass (none should). `forget_epoch_rank` never tells its
    sampler the epoch; `drift=(rank, step)` nudges that rank's weights after that update."""
    args = (replace(cfg, noise=0.0), every, steps, forget_epoch_rank, tuple(drift))
    return launch(_checksum_worker, world_size, args=args, timeout=timeout, backend=GLOO)[0]


def first_disagreement(records: list[dict]) -> dict | None:
    """The first check where the ranks differ, and the rank that differs from the rest: on
    data, the one rank that shares samples with every rank that shares any, or None when
    every pair of ranks shares samples (a sampler built without the rank, say)."""
    for record in records:
        sums = record["checksums"]
        split = len({tuple(s) for s in sums}) > 1
        odd = [r for r, s in enumerate(sums) if split and sums.count(s) == 1]
        if odd:
            return {"step": record["step"], "kind": "parameters", "rank": odd[0]}
        pairs = [set(p) for p in record["pairs"]]
        common = set.intersection(*pairs) if pairs else set()
        if len(common) == 1:  # one rank shares samples with every rank that shares any
            return {"step": record["step"], "kind": "data", "rank": common.pop()}
        if pairs and len(pairs) == len(sums) * (len(sums) - 1) // 2:
            return {"step": record["step"], "kind": "data", "rank": None}
    return None
