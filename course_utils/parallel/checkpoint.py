"""A distributed checkpoint of everything a run needs to go on as if nothing happened.

`torch.distributed.checkpoint` (DCP) writes one file per rank plus a metadata file, and
loads in place into tensors that already exist, resharding when the number of ranks
changed. What goes in: the model and the optimizer (through `get_state_dict`, which
names them the same whatever wraps the model), the sampler's position, the step, and
each rank's RNG state. The last is per rank, so it is saved under the rank's own key;
under DDP the rest is the same on every rank and DCP writes it once (under FSDP each rank
writes the rows of the model and optimizer it holds: `resharding`).
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    get_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.checkpoint.stateful import Stateful

PARTS = ("model", "optimizer", "sampler", "rng")


class TrainingState(Stateful):
    """Model, optimizer, sampler position, step and this rank's RNG, as DCP saves them.

    `parts` chooses what a load restores (all of `PARTS` by default), to show what goes
    wrong when one is left out. DCP loads in place, into the very tensors `state_dict`
    hands it (the parameters, the momentum buffers), so while `restoring` a part left out
    is not handed over at all: a load can only leave it alone that way.
    """

    def __init__(self, model, optimizer, batches, step: int = 0, parts=PARTS):
        self.model, self.optimizer, self.batches, self.step = model, optimizer, batches, step
        self.parts = tuple(parts)
        self.rank = dist.get_rank()
        self.restoring = False

    def state_dict(self) -> dict:
        model_state, optimizer_state = get_state_dict(self.model, self.optimizer)
        state = {
            "model": model_state,
            "optimizer": optimizer_state,
            "sampler": self.batches.state_dict(),
            "step": self.step,
            f"rng_rank{self.rank}": torch.get_rng_state(),
        }
        if not self.restoring:
            return state
        return {k: v for k, v in state.items() if k == "step" or _part(k) in self.parts}

    def load_state_dict(self, state: dict) -> None:
        if "model" in state:
            set_model_state_dict(self.model, state["model"])
        if "optimizer" in state:
            set_optimizer_state_dict(self.model, self.optimizer, state["optimizer"])
        if "sampler" in state:
            self.batches.load_state_dict(state["sampler"])
        self.step = int(state["step"])
        if f"rng_rank{self.rank}" in state:
            torch.set_rng_state(state[f"rng_rank{self.rank}"])


def _part(key: str) -> str:
    return "rng" if key.startswith("rng_rank") else key


def step_folder(root: str | Path, step: int) -> Path:
    return Path(root) / f"step-{step:06d}"


def save(state: TrainingState, root: str | Path) -> None:
    """Write `state` under `root/step-NNNNNN`, on every rank together."""
    dcp.save({"train": state}, checkpoint_id=str(step_folder(root, state.step)))


def latest(root: str | Path) -> int | None:
    """The step of the newest complete checkpoint under `root` (its metadata is written last)."""
    done = [int(p.parent.name.split("-")[1]) for p in Path(root).glob("step-*/.metadata")]
    return max(done, default=None)


def load(state: TrainingState, root: str | Path, step: int | None = None) -> int:
    """Restore `state` from the checkpoint at `step` (default: the latest); returns its step.

    With `state.parts` short of everything, the parts left out keep their fresh values.
    """
    step = latest(root) if step is None else step
    if step is None:
        raise FileNotFoundError(f"no complete checkpoint under {root}")
    parts = state.parts
    if "rng" in parts and dist.get_world_size() != _saved_world_size(root, step):
        state.parts = tuple(p for p in parts if p != "rng")  # one RNG per old rank
    state.restoring = True
    try:
        dcp.load({"train": state}, checkpoint_id=str(step_folder(root, step)))
    finally:
        state.restoring, state.parts = False, parts
    return state.step


def _saved_world_size(root: str | Path, step: int) -> int:
    """How many ranks wrote the checkpoint: one RNG entry each."""
    metadata = dcp.FileSystemReader(str(step_folder(root, step))).read_metadata()
    return sum(1 for key in metadata.state_dict_metadata if key.startswith("train.rng_rank"))
