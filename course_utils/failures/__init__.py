"""Chapter 9 (`09_failures_checkpoints_restarts.ipynb`): training that survives failures.

A DDP run checkpoints with `torch.distributed.checkpoint` (model, optimizer, sampler
position, each rank's RNG), loses a rank to SIGKILL and resumes bit for bit (`resume`),
also under torchrun's elastic agent, which restarts the whole group (`elastic`, its workers
in `elastic_worker`); how often to save, against Young's formula (`young`); an FSDP2
checkpoint of 4 ranks, sharded, loaded by 2 (`resharding`); and the rank to blame when one
hangs, lags or silently differs (`culprits`).

torchrun's workers run `elastic_worker`, inside this package, whose imports cost seconds of
torch: the course's jobs start them through `ranks.agent.TIED_WORKER`, tied to their agent
before any of it.
"""

from __future__ import annotations

from . import charts, exercises, verdicts
from .charts import checkpoint_interval, resume_timeline, shard_layout, straggler_table
from .culprits import compare_ranks, find_hung_rank, first_disagreement, time_ranks
from .elastic import elastic_restart
from .exercises import check_resume, check_slowest_rank
from .resharding import reshard
from .resume import RunConfig, config_from, kill_and_resume
from .young import lost_time, time_intervals, young_interval
