"""The rank side of cluster_check's simulator check, run under torchrun on namespace nodes
(`course_utils.ranks.torchrun tests/cluster/sim_worker.py:FUNCTION`).

`time_algorithms` times the course's all-reduce algorithms on the wall clock, every rank
on its own node behind a shaped link, and records the largest CPU time any rank spent in
the same run: a run whose CPU time is a fair share of its wall time measured the cores,
not the wire. `link_probe` is the point-to-point measurement the simulator is set from.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from course_utils.allreduce.algorithms import implementation
from course_utils.network.fit import measure_on_ranks

ALGORITHMS = ("parameter_server", "tree", "butterfly", "ring", "halving_doubling")
SIZES = (1 << 20, 4 << 20)
# the fastest of five runs: with three, one check in three timed the ring at N = 8, 1 MiB
# at 0.278 s where the other checks took 0.200 to 0.231 s
REPEATS = 5
PROBE_BYTES = (1 << 10, 1 << 20)


def algorithms_for(world_size: int) -> list[str]:
    """Halving-doubling runs where N is a power of two above 2; the others on any N."""
    return [a for a in ALGORITHMS if a != "halving_doubling" or world_size in (4, 8)]


def time_algorithms() -> dict:
    """{"ALGORITHM BYTES": [wall seconds, cpu seconds]}: the fastest of REPEATS runs (the
    slowest rank's wall time from a common barrier) and the largest CPU time of a rank in it.
    The algorithms take turns within each repeat; a first, untimed round warms them up."""
    names, best = algorithms_for(dist.get_world_size()), {}
    for size in SIZES:
        x = torch.ones(size // 4)  # cpu: gloo across the nodes
        for repeat in range(REPEATS + 1):
            for name in names:
                work = x.clone()
                dist.barrier()
                cpu, start = time.process_time(), time.perf_counter()
                implementation(name)(work)
                took = torch.tensor([time.perf_counter() - start, time.process_time() - cpu])
                dist.all_reduce(took, op=dist.ReduceOp.MAX)
                key = f"{name} {size}"
                if repeat and (key not in best or took[0] < best[key][0]):
                    best[key] = took.tolist()
    return best


def link_probe() -> dict:
    """The course's point-to-point probes (`network.fit`) between two nodes: a ping-pong and
    a simultaneous exchange of 1 KiB and 1 MiB, the fastest of 3 runs each."""
    return measure_on_ranks(PROBE_BYTES, 3)
