"""Resharding: a checkpoint written by N ranks, loaded by fewer, and the training goes on.

DCP stores where every piece of every tensor lives, so a job of another size loads the
same files: each new rank reads what it now holds. The sampler's position is global (the
same global batches whatever the number of ranks), so 2 ranks continue exactly where 4
stopped; per-rank RNG streams cannot be split that way, so the runs here draw no noise.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace

from ..ranks.launch import launch
from .resume import RunConfig, checkpointed_training


def reshard(cfg: RunConfig, saved_by: int, loaded_by: int, save_at: int,
            timeout: float = 60.0) -> dict:  # fmt: skip
    """`saved_by` ranks train to `save_at` and save; `loaded_by` ranks load and finish.

    Returns the digests of the saved and the loaded weights, the step resumed from, and
    the largest difference between the final weights and an uninterrupted `saved_by`-rank
    run's (only the order of the floating-point sums differs).
    """
    cfg = replace(cfg, noise=0.0, kill_rank=None, kill_at=None, resume=False, log_dir=None)
    with tempfile.TemporaryDirectory(prefix="course-reshard-") as root:
        full = launch(checkpointed_training, saved_by, args=(replace(cfg, every=None),),
                      timeout=timeout)  # fmt: skip
        first = replace(cfg, steps=save_at, every=save_at, checkpoint_dir=root)
        saved = launch(checkpointed_training, saved_by, args=(first,), timeout=timeout)
        then = replace(cfg, every=None, checkpoint_dir=root, resume=True)
        resumed = launch(checkpointed_training, loaded_by, args=(then,), timeout=timeout)
    return {
        "saved_digest": saved[0]["digest"],
        "loaded_digests": [r["loaded_digest"] for r in resumed],
        "start": resumed[0]["start"],
        "world_sizes": (saved_by, loaded_by),
        "gap": (full[0]["params"] - resumed[0]["params"]).abs().max().item(),
    }
