"""Chapter 9 (`09_failures_checkpoints_restarts.ipynb`): training that survives failures.

A DDP run checkpoints with `torch.distributed.checkpoint` (model, optimizer, sampler
position, each rank's RNG), loses a rank to SIGKILL and resumes bit for bit (`resume`),
also under torchrun's elastic agent, which restarts the whole group (`elastic`, its workers
in `elastic_worker`); how often to save, against Young's formula (`young`); an FSDP2
checkpoint of 4 ranks, sharded, loaded by 2 (`resharding`); and the rank to blame when one
hangs, lags or silently differs (`culprits`).

The names a notebook calls are resolved on first use: torchrun's workers start by running
`elastic_worker` inside this package, and must tie themselves to their agent before paying
for torch and the chapter's imports.
"""

from __future__ import annotations

from ..core.lazy import names_on_first_use

_EXPORTS = {
    "charts": None,
    "exercises": None,
    "verdicts": None,
    "checkpoint_interval": "charts",
    "resume_timeline": "charts",
    "shard_layout": "charts",
    "straggler_table": "charts",
    "compare_ranks": "culprits",
    "find_hung_rank": "culprits",
    "first_disagreement": "culprits",
    "time_ranks": "culprits",
    "elastic_restart": "elastic",
    "check_resume": "exercises",
    "check_slowest_rank": "exercises",
    "reshard": "resharding",
    "RunConfig": "resume",
    "config_from": "resume",
    "kill_and_resume": "resume",
    "lost_time": "young",
    "time_intervals": "young",
    "young_interval": "young",
}

__all__ = sorted(_EXPORTS)


__getattr__ = names_on_first_use(
    __name__,
    {name: (module or name, None if module is None else name) for name, module in _EXPORTS.items()},
    globals(),
)
