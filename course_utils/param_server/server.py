"""Notebook 07's parameter server runs: `parallel.parameter_server`'s workers and servers on
real ranks, with what a lesson needs around them.

Around a worker: its batches, a slower worker's pause, and a worker told to die that kills
itself. Around a server: each update's staleness, senders and time, snapshots of the
parameters, and a watch on the workers. Gloo cannot poll a receive, and one from a dead
peer never returns, so each server receives from any worker (`dist.recv` without a
source) on a helper thread (`_Watch`) and waits on a queue with a deadline: a worker silent
for `worker_timeout` seconds is lost. Async training goes on without it; sync cannot.
Messages cross `cfg.link` (`network.wire`) and are counted where they cross
`torch.distributed` (`network.recorder`).
"""

from __future__ import annotations

import os
import queue
import signal
import threading
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
from ..network.recorder import recording
from ..parallel import parameter_server
from ..ranks.bootstrap import device

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
    """A worker (`parameter_server.work`), its gradients computed here: a slower one pauses,
    the one told to die kills itself after its `kill_after`-th gradient."""
    worker = dist.get_rank() - cfg.servers + 1
    model = build(cfg.model, input_shape, num_classes, hidden=cfg.hidden, seed=cfg.seed)
    batches = worker_batches(train, cfg.batch_size, worker - 1, cfg.workers, cfg.seed)
    losses = []

    def next_gradient(at: torch.Tensor) -> torch.Tensor:
        if cfg.kill_worker == worker and len(losses) == cfg.kill_after:
            os.kill(os.getpid(), signal.SIGKILL)  # for real: no goodbye, sockets just close
        grad, loss = gradient(model, at, *next(batches))
        losses.append(loss)
        _pause(cfg.delay_of(worker))
        return grad

    with recording() as log:  # every message counted where it crosses torch.distributed
        pushed = parameter_server.work(next_gradient, params, shards)
    moved = log.bytes_sent() + log.bytes_received()
    return {"worker": worker, "gradients": pushed, "losses": losses, "bytes": moved}


def _serve(cfg: ServerConfig, params: torch.Tensor, bounds: tuple[int, int], bar) -> ServerLog:
    """A server (`parameter_server.serve`), its updates logged here, and its workers watched:
    one silent for `worker_timeout` seconds is lost. Async goes on as if it had said goodbye;
    sync stops the others and gives up."""
    shard = parameter_server.Shard(params, bounds, cfg.lr)
    log = ServerLog()
    workers = {cfg.rank_of(w): w for w in range(1, cfg.workers + 1)}
    with recording() as counted:  # before the inbox's thread starts receiving
        watch = _Watch(cfg, shard, workers, log)
        log.snapshots.append((0, 0.0, shard.params.clone()))
        updates = parameter_server.serve(
            shard, list(workers), cfg.updates, cfg.mode == "sync", watch.receive
        )
        for staleness, ranks in updates:
            log.staleness.append(staleness)
            log.senders.append(sorted(workers[r] for r in ranks))
            log.seconds.append(time.perf_counter() - watch.start)
            bar.update(1)
            if shard.version % cfg.snapshot_every == 0 or shard.version == cfg.updates:
                log.snapshots.append((shard.version, log.seconds[-1], shard.params.clone()))
    log.bytes_sent, log.bytes_received = counted.bytes_sent(), counted.bytes_received()
    log.params = shard.params
    return log


class _Watch:
    """The server's `receive`: the next message from any worker, from the inbox (a queue its
    helper thread fills), with a deadline per worker."""

    def __init__(self, cfg: ServerConfig, shard, workers: dict, log: ServerLog):
        self.cfg, self.shard, self.workers, self.log = cfg, shard, workers, log
        self.inbox: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True, name="ps-inbox").start()
        self.start = time.perf_counter()
        self.heard = dict.fromkeys(workers, self.start)
        self.delivered: dict[int, int] = {}  # rank -> the version its last gradient was for
        self.said_bye: set[int] = set()
        self.goodbyes: list[int] = []  # lost workers, handed to the server as goodbyes

    def _pump(self) -> None:
        size = self.shard.message_size
        try:
            while True:
                message = torch.empty(size, device=device())
                sender = dist.recv(message)
                self.inbox.put((sender, message))
        except Exception:  # the group is torn down at the end of the run: nothing to report
            return

    def receive(self):
        while not self.goodbyes:
            try:
                rank, message = self.inbox.get(timeout=0.05)
            except queue.Empty:
                self._look_for_lost()
                continue
            self.heard[rank] = time.perf_counter()
            if self.workers[rank] in self.log.lost:  # given up on: it is told to stop
                if message[0] != parameter_server.BYE:
                    self._reply(rank, parameter_server.STOP)
                continue
            if message[0] == parameter_server.BYE:
                self.said_bye.add(rank)
            else:
                self.delivered[rank] = self.shard.version
            return rank, message
        rank = self.goodbyes.pop(0)
        goodbye = torch.zeros(self.shard.message_size, device=self.shard.params.device)
        goodbye[0] = parameter_server.BYE
        return rank, goodbye

    def _owing(self, rank: int) -> bool:
        """Whether the server waits for something from `rank`: a gradient, or its goodbye."""
        if rank in self.said_bye or self.workers[rank] in self.log.lost:
            return False
        synchronous = self.cfg.mode == "sync" and self.shard.version < self.cfg.updates
        return not synchronous or self.delivered.get(rank) != self.shard.version

    def _look_for_lost(self) -> None:
        now, cfg, version = time.perf_counter(), self.cfg, self.shard.version
        if version >= cfg.updates:
            note = "(it never said goodbye)"
        elif cfg.mode == "sync":
            note = f"while update {version + 1} waited for it"
        else:
            note = "(no gradient, no goodbye)"
        for rank in self.workers:
            if self._owing(rank) and now - self.heard[rank] > cfg.worker_timeout:
                silence = f"sent nothing for {cfg.worker_timeout:g} s {note}"
                self.log.lost[self.workers[rank]] = silence
                self.goodbyes.append(rank)
        if self.goodbyes and cfg.mode == "sync" and version < cfg.updates:
            self._give_up()

    def _reply(self, rank: int, kind: float) -> None:
        try:
            self.shard.reply(rank, kind)
        except RuntimeError as exc:  # the worker's connection is gone
            why = f"could not take its reply ({_short(exc)})"
            self.log.lost.setdefault(self.workers[rank], why)

    def _give_up(self):
        """A synchronous server cannot update without every gradient: stop the rest, name
        the lost. A STOP sent before a worker's gradient arrives is read as the answer to
        it, so every live worker finishes; the helper thread keeps swallowing what they
        still send."""
        cfg, log = self.cfg, self.log
        for rank in self.workers:
            if self.workers[rank] not in log.lost:
                self._reply(rank, parameter_server.STOP)
        lost = sorted(log.lost)
        names = ", ".join(f"worker {w} (rank {cfg.rank_of(w)})" for w in lost)
        raise WorkerLost(
            f"{names} did not deliver its gradient for update {self.shard.version + 1}: it "
            f"{log.lost[lost[0]]}. A synchronous parameter server cannot apply an update "
            "without every worker's gradient, so it stopped the other workers and gave up.",
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
