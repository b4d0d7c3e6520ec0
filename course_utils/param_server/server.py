"""A parameter server on point-to-point messages: synchronous, or asynchronous (Downpour).

Ranks 0..S-1 are servers, each owning one slice of the flattened parameters; the other
ranks are workers. A worker computes a gradient with the parameters it last pulled,
pushes each slice to its server, and waits for the new slice back. A synchronous server
waits for every worker, averages and applies one update; an asynchronous one applies each
gradient the moment it arrives, so a gradient may be *stale* (computed on parameters that
other updates have since changed); each one's staleness (updates since its pull) is kept.

Messages cross `cfg.link` (`network.wire`). Gloo cannot poll a receive, and one from a dead
peer never returns, so each server receives from any worker (`dist.recv` without a
source) on a helper thread and waits on a queue with a deadline: a worker silent for
`worker_timeout` seconds is lost. Async training goes on without it; sync cannot.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from ..allreduce.algorithms import chunk_bounds
from ..core import progress
from ..core.errors import LaunchError
from ..core.models import build
from ..network import wire
from .inbox import Inbox

GRADIENT, BYE = 0.0, 1.0  # what a worker's message carries
PARAMS, STOP = 0.0, 1.0  # what a server's reply carries
HEADER = 2  # [kind, version] in front of every message
MODES = ("sync", "async")


class WorkerLost(LaunchError):
    """A synchronous server gave up: a worker never delivered its gradient."""


@dataclass(frozen=True)
class ServerConfig:
    """One parameter-server run: who does what, how long, and what goes wrong."""

    mode: str = "async"
    workers: int = 3
    servers: int = 1
    updates: int = 300  # updates each server applies before it stops the workers
    lr: float = 0.1
    batch_size: int = 32
    model: str = "mlp"
    hidden: int = 64
    seed: int = 0
    delays: tuple[float, ...] = ()  # extra seconds per gradient, one entry per worker
    kill_worker: int | None = None  # worker index (1-based) that SIGKILLs itself ...
    kill_after: int = 0  # ... after pushing this many gradients
    link: str = "real"  # the network every message crosses (`network.wire`): "real" or emulated
    worker_timeout: float = 3.0  # seconds of silence after which a worker is lost
    snapshot_every: int = 10  # keep the parameters every this many updates
    timeout: float = 60.0  # the whole launch

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}.")
        if self.workers < 1 or self.servers < 1:
            raise ValueError("a parameter server needs at least one server and one worker.")
        if self.kill_worker is not None and not 1 <= self.kill_worker <= self.workers:
            raise ValueError(f"kill_worker must be between 1 and {self.workers}.")

    @property
    def world_size(self) -> int:
        return self.servers + self.workers

    def rank_of(self, worker: int) -> int:
        return self.servers + worker - 1

    def delay_of(self, worker: int) -> float:
        return self.delays[worker - 1] if worker <= len(self.delays) else 0.0


@dataclass
class ServerLog:
    """What one server saw, as plain data that travels back from its rank."""

    shard: tuple[int, int]
    staleness: list[int] = field(default_factory=list)  # one per applied update
    senders: list[list[int]] = field(default_factory=list)  # worker(s) behind each update
    seconds: list[float] = field(default_factory=list)  # clock at each update
    snapshots: list[tuple[int, float, torch.Tensor]] = field(default_factory=list)
    bytes_received: int = 0
    bytes_sent: int = 0
    lost: dict[int, str] = field(default_factory=dict)  # worker -> what the server saw
    params: torch.Tensor | None = None


def worker_batches(dataset, batch_size: int, shard: int, shards: int, seed: int):
    """Endless mini-batches from this worker's shard, reshuffled each pass the same way anywhere."""
    x, y = dataset.tensors
    epoch = 0
    while True:
        seeded = torch.Generator().manual_seed(seed + epoch)  # cpu: one order on every device
        order = torch.randperm(len(y), generator=seeded).to(y.device)  # cpu, then the data's
        mine = order[shard::shards]
        for start in range(0, len(mine) - batch_size + 1, batch_size):
            index = mine[start : start + batch_size]
            yield x[index], y[index]
        epoch += 1


def gradient(model: nn.Module, params: torch.Tensor, x, y) -> tuple[torch.Tensor, float]:
    """The loss gradient at `params` on one batch, flattened like the parameters."""
    vector_to_parameters(params, model.parameters())
    model.zero_grad(set_to_none=False)
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return parameters_to_vector(p.grad for p in model.parameters()), loss.item()


def initial_params(cfg: ServerConfig, input_shape, num_classes) -> torch.Tensor:
    model = build(cfg.model, input_shape, num_classes, hidden=cfg.hidden, seed=cfg.seed)
    return parameters_to_vector(model.parameters()).detach().clone()


def node(cfg: ServerConfig, train, input_shape, num_classes):
    """What every rank runs: serve if its rank is below `servers`, else work."""
    params = initial_params(cfg, input_shape, num_classes)
    shards = chunk_bounds(params.numel(), cfg.servers)
    dist.barrier()
    with wire.active(cfg.link):
        if dist.get_rank() < cfg.servers:  # rank 0, server 0, shows the updates it applies
            desc = f"{cfg.mode} server, {cfg.workers} workers"
            with progress.bar(cfg.updates, desc, "update") as bar:
                return _serve(cfg, params, shards[dist.get_rank()], bar)
        return _work(cfg, params, shards, train, input_shape, num_classes)


def _work(cfg, params, shards, train, input_shape, num_classes) -> dict:
    worker = dist.get_rank() - cfg.servers + 1
    model = build(cfg.model, input_shape, num_classes, hidden=cfg.hidden, seed=cfg.seed)
    batches = worker_batches(train, cfg.batch_size, worker - 1, cfg.workers, cfg.seed)
    versions = [0] * cfg.servers
    active = set(range(cfg.servers))
    pushed, losses, moved = 0, [], 0
    while active:
        if cfg.kill_worker == worker and pushed == cfg.kill_after:
            os.kill(os.getpid(), signal.SIGKILL)  # for real: no goodbye, sockets just close
        grad, loss = gradient(model, params, *next(batches))
        losses.append(loss)
        _pause(cfg.delay_of(worker))
        for s in sorted(active):
            a, b = shards[s]
            header = torch.tensor([GRADIENT, versions[s]], device=grad.device)
            message = torch.cat([header, grad[a:b]])
            dist.send(message, s)
            moved += message.numel() * message.element_size()
        for s in sorted(active):
            a, b = shards[s]
            reply = torch.empty(HEADER + b - a, device=params.device)
            dist.recv(reply, s)
            moved += reply.numel() * reply.element_size()
            if reply[0] == STOP:
                active.discard(s)
            else:
                versions[s] = int(reply[1])
                params[a:b] = reply[HEADER:]
        pushed += 1
    for s in range(cfg.servers):
        a, b = shards[s]
        goodbye = torch.zeros(HEADER + b - a, device=params.device)
        goodbye[0] = BYE
        dist.send(goodbye, s)
    return {"worker": worker, "gradients": pushed, "losses": losses, "bytes": moved}


def _serve(cfg: ServerConfig, params: torch.Tensor, shard: tuple[int, int], bar) -> ServerLog:
    a, b = shard
    mine = params[a:b].clone()
    log = ServerLog(shard=shard)
    inbox = Inbox(HEADER + b - a)
    workers = {cfg.rank_of(w): w for w in range(1, cfg.workers + 1)}
    start = time.perf_counter()
    heard = dict.fromkeys(workers, start)
    done: set[int] = set()
    version = 0

    def reply(rank: int, kind: float) -> None:
        message = torch.cat([torch.tensor([kind, float(version)], device=mine.device), mine])
        try:
            dist.send(message, rank)
            log.bytes_sent += message.numel() * message.element_size()
        except RuntimeError as exc:  # the worker's connection is gone
            log.lost.setdefault(workers[rank], f"could not take its reply ({_short(exc)})")

    def receive(owing: set[int], deadline_note: str):
        """The next gradient, or (None, None); a worker in `owing` silent too long is lost."""
        rank, message = inbox.get(timeout=0.05)
        now = time.perf_counter()
        if rank is None:
            for r in owing:
                if workers[r] not in log.lost and now - heard[r] > cfg.worker_timeout:
                    log.lost[workers[r]] = (
                        f"sent nothing for {cfg.worker_timeout:g} s {deadline_note}"
                    )
            return None, None
        heard[rank] = now
        if message[0] == BYE:
            done.add(rank)
        elif workers[rank] in log.lost or version >= cfg.updates:
            reply(rank, STOP)  # a late gradient, or one from a worker given up for lost
        else:
            log.bytes_received += message.numel() * message.element_size()
            return rank, message
        return None, None

    def record(staleness: int, senders: list[int]) -> None:
        log.staleness.append(staleness)
        log.senders.append(senders)
        log.seconds.append(time.perf_counter() - start)
        bar.update(1)
        if version % cfg.snapshot_every == 0 or version == cfg.updates:
            log.snapshots.append((version, log.seconds[-1], mine.clone()))

    log.snapshots.append((0, 0.0, mine.clone()))
    if cfg.mode == "async":
        while version < cfg.updates and len(log.lost) < len(workers):
            owing = {r for r in workers if r not in done}
            rank, message = receive(owing, "(no gradient, no goodbye)")
            if rank is None:
                continue
            stale = version - int(message[1])
            mine.add_(message[HEADER:], alpha=-cfg.lr)
            version += 1
            record(stale, [workers[rank]])
            reply(rank, STOP if version >= cfg.updates else PARAMS)
    else:
        while version < cfg.updates:
            pending, total = {r for r in workers if r not in done}, torch.zeros_like(mine)
            while pending and not log.lost:
                rank, message = receive(pending, f"while update {version + 1} waited for it")
                if rank is not None:
                    total += message[HEADER:]
                    pending.discard(rank)
            if log.lost:
                return _give_up(cfg, log, workers, version, reply)
            mine.add_(total / len(workers), alpha=-cfg.lr)
            version += 1
            record(0, sorted(workers.values()))
            for r in workers:
                reply(r, STOP if version >= cfg.updates else PARAMS)
    while any(r not in done and workers[r] not in log.lost for r in workers):
        receive({r for r in workers if r not in done}, "(it never said goodbye)")
    log.params = mine
    return log


def _give_up(cfg, log, workers, version, reply):
    """A synchronous server cannot update without every gradient: stop the rest, name the lost.

    A STOP sent before a worker's gradient arrives is read as the answer to it, so every
    live worker finishes; the helper thread keeps swallowing what they still send.
    """
    lost = sorted(log.lost)
    for r in workers:
        if workers[r] not in log.lost:
            reply(r, STOP)
    names = ", ".join(f"worker {w} (rank {cfg.rank_of(w)})" for w in lost)
    raise WorkerLost(
        f"{names} did not deliver its gradient for update {version + 1}: it "
        f"{log.lost[lost[0]]}. A synchronous parameter server cannot apply an update without "
        "every worker's gradient, so it stopped the other workers and gave up.",
        rank=cfg.rank_of(lost[0]),
        world_size=cfg.world_size,
    )


def _pause(seconds: float) -> None:
    """A slower worker sleeps `seconds`; over an emulated link its clock (which counts CPU
    time and would miss a short sleep) moves on too, so its gradient leaves that much later."""
    until = time.perf_counter() + seconds
    if wire.current().emulated:
        until = wire.wire_deadline(seconds)
    time.sleep(max(0.0, until - time.perf_counter()))


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
    return text[-80:]
