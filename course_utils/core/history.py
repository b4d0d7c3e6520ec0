"""What a training run did, as plain lists that travel back from a rank and plot directly."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch


@dataclass
class Phases:
    """Where the timed updates' seconds went (the warm-up updates before them not counted)."""

    forward: float = 0.0
    backward: float = 0.0  # with after_backward, and under DDP the wait for the all-reduce
    optimizer: float = 0.0
    steps: int = 0  # timed updates
    samples: int = 0  # samples in the timed updates
    seconds: float = 0.0  # training clock over the timed updates, data loading included


class PhaseClock:
    """Seconds per phase of every micro-batch of the updates after the first `after` (None: off).

    On a GPU each reading waits for the queued kernels, so a phase gets its own work.
    """

    def __init__(self, after: int | None, device: torch.device):
        self.after, self.cuda, self.phases = after, device.type == "cuda", Phases()
        self.timing, self.last = False, 0.0

    def _now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    def start(self, steps_done: int) -> None:
        self.timing = self.after is not None and steps_done >= self.after
        if self.timing:
            self.last = self._now()

    def tick(self, phase: str, samples: int = 0) -> None:
        if self.timing:
            now = self._now()
            setattr(self.phases, phase, getattr(self.phases, phase) + now - self.last)
            self.phases.samples += samples
            self.last = now

    def result(self, step_seconds: list[float]) -> Phases | None:
        if self.after is None:
            return None
        timed = len(step_seconds) - self.after
        if timed > 0:
            before = step_seconds[self.after - 1] if self.after else 0.0
            self.phases.steps, self.phases.seconds = timed, step_seconds[-1] - before
        return self.phases


@dataclass
class History:
    """What a run did, as plain lists: per step, per epoch, at evaluation points, and totals."""

    step_loss: list[float] = field(default_factory=list)  # mini-batch loss (mean of micro-batches)
    step_seconds: list[float] = field(default_factory=list)  # training clock after each update
    epoch_train_loss: list[float] = field(default_factory=list)  # mean over the epoch's batches
    epoch_train_acc: list[float] = field(default_factory=list)
    epoch_val_loss: list[float] = field(default_factory=list)
    epoch_val_acc: list[float] = field(default_factory=list)
    epoch_seconds: list[float] = field(default_factory=list)  # training clock at each epoch's end
    eval_step: list[int] = field(default_factory=list)  # every `eval_every` updates, and at 0
    eval_samples: list[int] = field(default_factory=list)
    eval_seconds: list[float] = field(default_factory=list)
    eval_loss: list[float] = field(default_factory=list)
    test_loss: float | None = None
    test_acc: float | None = None
    steps: int = 0
    samples: int = 0
    seconds: float = 0.0
    epochs: int = 0  # completed passes over the loader
    config: dict = field(default_factory=dict)
    phases: Phases | None = None  # with train(clock_after=...)

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds else 0.0

    @property
    def samples_per_second(self) -> float:
        return self.samples / self.seconds if self.seconds else 0.0

    @property
    def seconds_per_epoch(self) -> float:
        """Mean training time of a full pass (the sweep chart's runtime)."""
        return self.epoch_seconds[-1] / len(self.epoch_seconds) if self.epoch_seconds else 0.0

    def loss_at(self, x: float, axis: str = "seconds") -> float:
        """The evaluated loss after `x` updates, samples or seconds (interpolated; held after)."""
        axes = {"updates": self.eval_step, "samples": self.eval_samples}
        xs = axes.get(axis, self.eval_seconds)
        if axis not in (*axes, "seconds") or not xs:
            raise ValueError("loss_at needs eval_every and axis in updates/samples/seconds.")
        return float(np.interp(x, xs, self.eval_loss))

    def as_dict(self) -> dict:
        return {
            **asdict(self),
            "steps_per_second": self.steps_per_second,
            "samples_per_second": self.samples_per_second,
        }
