"""Run the parameter server from a notebook, and its twins: allreduce and one process.

`run_parameter_server(cfg, data)` launches the servers and workers, evaluates the
parameters the servers kept along the way on the test set, and returns a `PSRun` of
plain lists. A worker the launcher saw die is reported, not fatal, in asynchronous mode;
in synchronous mode the server's `WorkerLost` is raised here, naming the worker.
`allreduce_training` runs the same workers without a server (gradients averaged with an
allreduce on every rank), and `serial_twin` one process with the workers' batches joined:
all three apply the same updates.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.utils import vector_to_parameters

from ..core.errors import LaunchError
from ..core.models import build
from ..core.training import torch_threads
from ..network import wire
from ..network.recorder import recording
from ..parallel.allreduce import ring_allreduce
from ..ranks.launch import RankFailure, launch
from .server import ServerConfig, WorkerLost, gradient, initial_params, node, worker_batches


@dataclass
class PSRun:
    """One run, seen from the servers: the test loss along the way and every update's story."""

    mode: str
    workers: int
    snapshot_updates: list[int] = field(default_factory=list)
    snapshot_seconds: list[float] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)  # test loss at each snapshot
    staleness: list[int] = field(default_factory=list)  # server 0's, one per update
    senders: list[list[int]] = field(default_factory=list)
    update_seconds: list[float] = field(default_factory=list)
    server_bytes: int = 0  # received + sent by every server together
    shard_bytes: list[int] = field(default_factory=list)  # received + sent by each server
    worker_gradients: dict[int, int] = field(default_factory=dict)
    worker_bytes: dict[int, int] = field(default_factory=dict)  # sent + received by each
    lost: dict[int, str] = field(default_factory=dict)  # worker -> what the server saw
    died: dict[int, str] = field(default_factory=dict)  # worker -> what the launcher saw
    params: torch.Tensor | None = None
    seconds: float = 0.0  # training time on the server's clock
    clock: str = "real"  # which clock that is: "simulated" over an emulated link (`Link.clock`)

    @property
    def updates(self) -> int:
        return len(self.staleness)

    @property
    def snapshot_gradients(self) -> list[int]:
        """Gradients computed by the workers at each snapshot: the budget both modes share. A
        synchronous update averages one gradient per worker; an asynchronous one is one."""
        return [u * (self.workers if self.mode == "sync" else 1) for u in self.snapshot_updates]

    @property
    def final_loss(self) -> float:
        return self.loss[-1]

    def staleness_of(self, worker: int) -> list[int]:
        return [s for s, who in zip(self.staleness, self.senders, strict=True) if worker in who]

    def loss_at_seconds(self, seconds: float) -> float:
        """The last evaluated loss at or before `seconds` of training."""
        seen = [
            loss for t, loss in zip(self.snapshot_seconds, self.loss, strict=True) if t <= seconds
        ]
        return seen[-1] if seen else self.loss[0]


def one_clock(runs) -> str:
    """The clock all of `runs` were timed on: their times are compared or drawn together."""
    clocks = {run.clock for run in runs}
    if len(clocks) > 1:
        raise ValueError(f"runs on the {' and the '.join(sorted(clocks))} clock: use one link")
    return clocks.pop()


def server_config(sizes, **changes) -> ServerConfig:
    """A ServerConfig from the profile's `param_server` sizes, with `changes` on top."""
    base = {
        "workers": sizes.workers,
        "updates": sizes.gradients,
        "lr": sizes.lr,
        "batch_size": sizes.batch_size,
        "model": sizes.model,
        "hidden": sizes.hidden,
        "worker_timeout": sizes.worker_timeout,
        "snapshot_every": sizes.snapshot_every,
        "timeout": sizes.timeout,
    }
    return ServerConfig(**{**base, **changes})


def traffic(sizes, data) -> dict[str, list[float]]:
    """Bytes per update through the server, through one of its workers, and per allreduce rank."""
    series = {"parameter server": [], "one worker of the server": [], "one ring-allreduce rank": []}
    for workers in sizes.traffic_workers:
        cfg = server_config(sizes, mode="sync", workers=workers, updates=sizes.traffic_updates)
        run = run_parameter_server(cfg, data, eval_samples=1)
        ring = allreduce_training(cfg, data)
        series["parameter server"].append(run.server_bytes / run.updates)
        series["one worker of the server"].append(max(run.worker_bytes.values()) / run.updates)
        series["one ring-allreduce rank"].append(max(r["bytes"] for r in ring) / cfg.updates)
    return series


def evaluate(params: torch.Tensor, cfg, data, samples: int | None = None) -> tuple[float, float]:
    """Test loss and accuracy of flattened `params` in the run's model.

    It runs in the notebook's kernel, on one thread like a rank (`serial_twin` says why).
    """
    model = build(cfg.model, data.input_shape, data.num_classes, hidden=cfg.hidden, seed=cfg.seed)
    vector_to_parameters(params, model.parameters())
    x, y = data.test.tensors
    x, y = x[:samples], y[:samples]
    with torch.no_grad(), torch_threads(1):
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y).item()
    return loss, (logits.argmax(1) == y).float().mean().item()


def run_parameter_server(cfg: ServerConfig, data, eval_samples: int | None = None) -> PSRun:
    """Launch `cfg.servers` servers and `cfg.workers` workers; see the module docstring."""
    args = (cfg, data.train, data.input_shape, data.num_classes)
    results = launch(
        node, cfg.world_size, args=args, backend="gloo", allow_failures=True, timeout=cfg.timeout
    )
    servers, workers = results[: cfg.servers], results[cfg.servers :]
    died = {
        w: r.message
        for w, r in enumerate(workers, start=1)
        if isinstance(r, RankFailure) and r.kind == "died"
    }
    for failure in servers:
        if isinstance(failure, RankFailure):
            _raise_server_failure(failure, cfg, died)
    clock = wire.resolve(cfg.link, cfg.world_size).clock
    run = PSRun(mode=cfg.mode, workers=cfg.workers, died=died, clock=clock)
    lead = servers[0]
    run.staleness, run.senders, run.update_seconds = lead.staleness, lead.senders, lead.seconds
    run.seconds = lead.seconds[-1] if lead.seconds else 0.0
    run.shard_bytes = [s.bytes_received + s.bytes_sent for s in servers]
    run.server_bytes = sum(run.shard_bytes)
    run.lost = {w: why for s in servers for w, why in s.lost.items()}
    alive = [r for r in workers if not isinstance(r, RankFailure)]
    run.worker_gradients = {r["worker"]: r["gradients"] for r in alive}
    run.worker_bytes = {r["worker"]: r["bytes"] for r in alive}
    run.params = torch.cat([s.params for s in servers])
    for i, (update, seconds, _) in enumerate(lead.snapshots):
        if any(i >= len(s.snapshots) for s in servers):
            break
        loss, _ = evaluate(torch.cat([s.snapshots[i][2] for s in servers]), cfg, data, eval_samples)
        run.snapshot_updates.append(update)
        run.snapshot_seconds.append(seconds)
        run.loss.append(loss)
    return run


def _raise_server_failure(failure: RankFailure, cfg: ServerConfig, died: dict):
    seen = "".join(
        f" The launcher saw worker {w} (rank {cfg.rank_of(w)}): it {how}."
        for w, how in died.items()
    )
    if failure.exc_type == "WorkerLost":
        original = failure.original
        rank = getattr(original, "rank", None)
        raise WorkerLost(failure.message + seen, rank=rank, world_size=cfg.world_size) from None
    raise LaunchError(
        f"server rank {failure.rank} failed: {failure.exc_type or failure.kind}: "
        f"{failure.message}\n{failure.traceback}",
        rank=failure.rank,
        world_size=cfg.world_size,
    )


# ---------------------------------------------------------------- the twins


def _allreduce_node(cfg: ServerConfig, train, input_shape, num_classes) -> dict:
    worker, world = dist.get_rank() + 1, dist.get_world_size()
    params = initial_params(cfg, input_shape, num_classes)
    model = build(cfg.model, input_shape, num_classes, hidden=cfg.hidden, seed=cfg.seed)
    batches = worker_batches(train, cfg.batch_size, worker - 1, world, cfg.seed)
    dist.barrier()
    with recording() as log:  # every message counted where it crosses torch.distributed
        start = time.perf_counter()
        for _ in range(cfg.updates):
            grad, _ = gradient(model, params, *next(batches))
            ring_allreduce(grad)
            params.add_(grad / world, alpha=-cfg.lr)
        seconds = time.perf_counter() - start
    return {"params": params, "seconds": seconds, "bytes": log.bytes_sent() + log.bytes_received()}


def allreduce_training(cfg: ServerConfig, data) -> list[dict]:
    """The same workers and batches with no server: a ring allreduce averages the gradients."""
    args = (cfg, data.train, data.input_shape, data.num_classes)
    return launch(_allreduce_node, cfg.workers, args=args, backend="gloo", timeout=cfg.timeout)


def serial_twin(cfg: ServerConfig, data, snapshots: list | None = None) -> torch.Tensor:
    """One process, each update on all workers' batches joined: what synchronous SGD computes.

    With a `snapshots` list, (update, parameters) is appended at the server's snapshot times.
    It runs in the notebook's kernel on one thread: torch's default of one per core made
    each of these small steps wait on a thread that a busy machine had descheduled, and a
    0.2 s run took up to 18 s beside two CPU hogs (the lr sweep's cell passed 300 s).
    """
    with torch_threads(1):
        return _serial_steps(cfg, data, snapshots)


def _serial_steps(cfg: ServerConfig, data, snapshots: list | None) -> torch.Tensor:
    params = initial_params(cfg, data.input_shape, data.num_classes)
    model = build(cfg.model, data.input_shape, data.num_classes, hidden=cfg.hidden, seed=cfg.seed)
    streams = [
        worker_batches(data.train, cfg.batch_size, w, cfg.workers, cfg.seed)
        for w in range(cfg.workers)
    ]
    for update in range(cfg.updates + 1):
        if snapshots is not None and (update % cfg.snapshot_every == 0 or update == cfg.updates):
            snapshots.append((update, params.clone()))
        if update == cfg.updates:
            break
        batches = [next(s) for s in streams]
        x = torch.cat([b[0] for b in batches])
        y = torch.cat([b[1] for b in batches])
        grad, _ = gradient(model, params, x, y)
        params.add_(grad, alpha=-cfg.lr)
    return params
