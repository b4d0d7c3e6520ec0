"""Batches that know where they are: the sampler position a checkpoint must carry.

Each pass draws one permutation of the training set from `seed + epoch`, cuts it into
global batches, and gives rank r of N its slice of each. The global batches are the same
whatever N, so a checkpoint written by 4 ranks can be resumed by 2. The position is
`(epoch, batches_done)`, the same on every rank; `train` tells the sampler each pass
through `set_epoch`, counted from the pass it resumes.
"""

from __future__ import annotations

import torch


class GlobalBatches:
    """This rank's index lists, pass after pass, resumable from `state_dict()`.

    `forget_epoch=True` is the classic bug: the sampler is never told the epoch, so this
    rank replays the first pass's order while the others move on.
    """

    def __init__(
        self, n: int, global_batch: int, rank: int, world_size: int, seed: int = 0,
        forget_epoch: bool = False,
    ):  # fmt: skip
        if global_batch % world_size:
            raise ValueError(
                f"global_batch={global_batch} must split evenly over {world_size} ranks."
            )
        self.n, self.global_batch, self.seed = n, global_batch, seed
        self.rank, self.world_size, self.forget_epoch = rank, world_size, forget_epoch
        self.per_rank = global_batch // world_size
        self.epoch, self.batches_done = 0, 0
        self._resume_epoch, self._resume_at = 0, 0
        self.seen = torch.zeros(n, dtype=torch.int32)  # samples this rank took this pass

    def __len__(self) -> int:
        return self.n // self.global_batch

    def set_epoch(self, passes_done: int) -> None:
        """Start pass `passes_done` of this run (train counts from 0 after a resume)."""
        self.epoch = self._resume_epoch + passes_done
        self.batches_done = self._resume_at if passes_done == 0 else 0
        self.seen.zero_()

    def order(self) -> torch.Tensor:
        epoch = 0 if self.forget_epoch else self.epoch
        return torch.randperm(self.n, generator=torch.Generator().manual_seed(self.seed + epoch))

    def __iter__(self):
        order = self.order()
        start = self.batches_done
        for i in range(start, len(self)):
            first = i * self.global_batch + self.rank * self.per_rank
            indices = order[first : first + self.per_rank]
            self.seen[indices] += 1
            self.batches_done = i + 1
            yield indices

    def state_dict(self) -> dict:
        """The next batch to train on: a finished pass points at the start of the next."""
        if self.batches_done >= len(self):
            return {"epoch": self.epoch + 1, "batches_done": 0}
        return {"epoch": self.epoch, "batches_done": self.batches_done}

    def load_state_dict(self, state: dict) -> None:
        self._resume_epoch, self._resume_at = int(state["epoch"]), int(state["batches_done"])
        self.set_epoch(0)


class NoisyLoader:
    """(x, y) batches of in-memory tensors, with noise drawn from this rank's global RNG.

    The noise is a light augmentation; it makes the RNG state part of what a resumed run
    must restore to continue bit for bit.
    """

    def __init__(self, x: torch.Tensor, y: torch.Tensor, batches: GlobalBatches, noise: float):
        self.x, self.y, self.batch_sampler, self.noise = x, y, batches, noise

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def __iter__(self):
        for indices in self.batch_sampler:
            x = self.x[indices]
            if self.noise:
                x = x + self.noise * torch.randn_like(x)
            yield x, self.y[indices]
