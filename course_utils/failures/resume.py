"""The run a failure interrupts: DDP training that checkpoints, can be killed, and resumes.

`checkpointed_training(cfg)` is one rank's part; it runs the same under `launch` and
under torchrun (`elastic`). It trains with the course's `train` loop, saves a DCP
checkpoint every `cfg.every` updates from `after_step`, kills its own process when told
to (a real SIGKILL, no goodbye), and with `cfg.resume` first loads the latest
checkpoint. `kill_and_resume` runs the whole story on real ranks: an uninterrupted run,
a run that loses a rank, and its resumption.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import signal
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from ..core import data, models
from ..core.backends import GLOO
from ..core.errors import LaunchError
from ..core.training import Recipe, train
from ..parallel import checkpoint
from ..ranks.launch import launch
from .batches import GlobalBatches, NoisyLoader


@dataclass(frozen=True)
class RunConfig:
    """Everything one rank needs: plain data, so it travels to a rank or on a command line."""

    steps: int = 40
    every: int | None = 8  # updates between checkpoints (None: never save)
    hidden: int = 64
    train_samples: int = 1024
    global_batch: int = 64
    lr: float = 0.05
    momentum: float = 0.9
    noise: float = 0.05
    seed: int = 0
    threads: int = 1
    checkpoint_dir: str | None = None
    resume: bool = False  # load the latest checkpoint in checkpoint_dir first, if any
    kill_rank: int | None = None
    kill_at: int | None = None  # after this update, kill_rank SIGKILLs itself
    log_dir: str | None = None  # rank 0 appends "step loss time" lines here


def config_from(sizes, **changes) -> RunConfig:
    """The run a profile's `FailuresSizes` describes, with `changes` applied."""
    names = RunConfig.__dataclass_fields__
    base = {k: getattr(sizes, k) for k in names if hasattr(sizes, k)}
    return replace(RunConfig(**base), **changes)


def training_tensors(cfg: RunConfig) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = data.mnist1d().train.tensors
    return x[: cfg.train_samples], y[: cfg.train_samples]


def build(cfg: RunConfig, forget_epoch: bool = False):
    """A fresh model, optimizer and sampler for this rank (the same on every rank)."""
    x, y = training_tensors(cfg)
    model = models.build("mlp", (x.shape[1],), 10, hidden=cfg.hidden, seed=cfg.seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum)
    rank, world = dist.get_rank(), dist.get_world_size()
    batches = GlobalBatches(len(x), cfg.global_batch, rank, world, cfg.seed, forget_epoch)
    torch.manual_seed(cfg.seed * 1000 + rank + 1)  # each rank's own augmentation noise
    return model, optimizer, batches, NoisyLoader(x, y, batches, cfg.noise)


def params_digest(model: torch.nn.Module) -> str:
    """A hash of every parameter's bytes: equal digests mean bit-for-bit equal models."""
    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def replica(model: torch.nn.Module) -> DDP:
    """DDP with one gradient bucket per parameter, so a resumed run adds in the same order.

    DDP lays its buckets out again after its first update. With several parameters in a
    bucket, the allreduce then adds the ranks' gradients in another order, which changes
    the last bit of some sums: a restarted run's first update would differ from the
    uninterrupted run's by about 1e-7. One parameter per bucket keeps every sum the same.
    """
    params = list(model.parameters())
    if "bucket_cap_mb_list" in inspect.signature(DDP).parameters:
        return DDP(model, bucket_cap_mb_list=[1e-6] * len(params))
    ddp = DDP(model, bucket_cap_mb=1e-6)  # older torch: one bucket until the first backward
    _settle_buckets(ddp, params[0])
    return ddp


def _settle_buckets(ddp: DDP, first: torch.Tensor) -> None:
    """Before torch had `bucket_cap_mb_list`, DDP started with one bucket and laid out its
    small ones after the first backward. A backward of a zero loss (no update) does that
    first, so every run, resumed or not, updates with the same buckets from its first step."""
    x = torch.zeros(1, first.shape[1], dtype=first.dtype, device=first.device)
    (ddp(x).sum() * 0).backward()
    ddp.zero_grad(set_to_none=True)


def checkpointed_training(cfg: RunConfig) -> dict:
    """One rank: (resume,) train to `cfg.steps` with checkpoints; this rank's view of the run."""
    model, optimizer, batches, loader = build(cfg)
    state = checkpoint.TrainingState(model, optimizer, batches)
    start = 0
    if cfg.resume and cfg.checkpoint_dir and checkpoint.latest(cfg.checkpoint_dir) is not None:
        start = checkpoint.load(state, cfg.checkpoint_dir)
    ddp = replica(model)
    losses, saves, first_step, update_ends = [], [], [], []
    began = time.perf_counter()

    def after_step(steps: int, loss: float) -> None:
        state.step = start + steps
        losses.append(loss)
        if not first_step:
            first_step.append(time.time())
        if cfg.log_dir and dist.get_rank() == 0:
            with open(Path(cfg.log_dir) / "losses.txt", "a") as log:
                log.write(f"{state.step} {loss!r}\n")
        if cfg.every and cfg.checkpoint_dir and state.step % cfg.every == 0:
            saving = time.perf_counter()
            checkpoint.save(state, cfg.checkpoint_dir)
            saves.append(time.perf_counter() - saving)
        update_ends.append(time.perf_counter() - began)
        if state.step == cfg.kill_at and dist.get_rank() == cfg.kill_rank:
            if cfg.log_dir:
                (Path(cfg.log_dir) / "killed_at.txt").write_text(repr(time.time()))
            os.kill(os.getpid(), signal.SIGKILL)

    history = None
    if cfg.steps > start:
        history = train(
            ddp,
            loader,
            Recipe(max_steps=cfg.steps - start, optimizer=optimizer, threads=cfg.threads),
            after_step=after_step,
        )
    return {
        "rank": dist.get_rank(),
        "start": start,
        "losses": losses,
        "save_seconds": saves,
        "update_ends": update_ends,  # seconds from the start to the end of each update (and save)
        "seconds": history.seconds if history else 0.0,
        "first_step_at": first_step[0] if first_step else None,
        "digest": params_digest(model),
        "params": torch.nn.utils.parameters_to_vector(model.parameters()).detach(),
    }


@dataclass
class ResumeRun:
    """What `kill_and_resume` saw: the three runs of rank 0, the error, and the clock."""

    full: dict
    killed_losses: list[float]
    resumed: dict
    error: str
    every: int
    kill_at: int
    killed_at: float
    digests: dict = field(default_factory=dict)  # run -> every rank's digest

    @property
    def resumed_from(self) -> int:
        return self.resumed["start"]

    @property
    def kill_to_resume_seconds(self) -> float:
        """From the SIGKILL to the first update of the resumed run."""
        return self.resumed["first_step_at"] - self.killed_at

    @property
    def redone_steps(self) -> int:
        return self.kill_at - self.resumed_from

    def tail_equal(self) -> bool:
        """The resumed losses equal the uninterrupted run's from the checkpoint on, bit for bit."""
        return self.resumed["losses"] == self.full["losses"][self.resumed_from :]


def kill_and_resume(cfg: RunConfig, world_size: int, timeout: float = 60.0) -> ResumeRun:
    """Uninterrupted run; the same run with `cfg.kill_rank` SIGKILLed; resumption from disk."""
    with tempfile.TemporaryDirectory(prefix="course-ckpt-") as root:
        plain = replace(cfg, every=None, kill_rank=None, kill_at=None)
        full = launch(
            checkpointed_training, world_size, args=(plain,), timeout=timeout, backend=GLOO
        )
        doomed = replace(cfg, checkpoint_dir=root, log_dir=root, resume=False)
        try:
            launch(checkpointed_training, world_size, args=(doomed,), timeout=timeout, backend=GLOO)
            error = "no rank failed"
        except LaunchError as exc:
            error = str(exc).splitlines()[0]
        log = (Path(root) / "losses.txt").read_text().split("\n")
        killed_losses = [float(line.split()[1]) for line in log if line]
        killed_file = Path(root) / "killed_at.txt"
        killed_at = float(killed_file.read_text()) if killed_file.exists() else float("nan")
        again = replace(doomed, resume=True, kill_rank=None, kill_at=None, log_dir=None)
        resumed = launch(
            checkpointed_training, world_size, args=(again,), timeout=timeout, backend=GLOO
        )
    return ResumeRun(
        full=full[0],
        killed_losses=killed_losses,
        resumed=resumed[0],
        error=error,
        every=cfg.every,
        kill_at=cfg.kill_at,
        killed_at=killed_at,
        digests={"full": [r["digest"] for r in full], "resumed": [r["digest"] for r in resumed]},
    )
