"""Chapter 5 (`05_allreduce_algorithms.ipynb`): allreduce written on send/recv.

Parameter server, tree, butterfly and ring (`algorithms`), traced round by round and timed
against `dist.all_reduce` (`runs`, `explorer`), and compared with the alpha-beta cost
model fitted on the learner's machine (`cost_model`).
"""

from . import charts, cost_model, exercises
from .algorithms import ALGORITHMS
from .charts import (
    allreduce_round,
    allreduce_rounds,
    allreduce_timings,
    bytes_per_rank_bars,
    pingpong_fit,
)
from .exercises import check_ring, check_tree
from .explorer import step_through
from .runs import BUILTIN, compare_with_builtin, pingpong, time_allreduce, traced_run

__all__ = [
    "ALGORITHMS",
    "BUILTIN",
    "allreduce_round",
    "allreduce_rounds",
    "allreduce_timings",
    "bytes_per_rank_bars",
    "charts",
    "check_ring",
    "check_tree",
    "compare_with_builtin",
    "cost_model",
    "exercises",
    "pingpong",
    "pingpong_fit",
    "step_through",
    "time_allreduce",
    "traced_run",
]
