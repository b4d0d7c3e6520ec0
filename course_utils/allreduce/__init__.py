"""Chapter 5 (`05_allreduce_algorithms.ipynb`): allreduce written on send/recv.

Parameter server, tree, butterfly and ring (`algorithms`), traced round by round and timed
against `dist.all_reduce` (`runs`, `explorer`), and compared with the alpha-beta cost
model (`cost_model`): on the real link with a core per rank, and in the network simulator
(`network`), which N ranks on 2 cores wait on like N machines (`verdicts`, `link_charts`,
`dial`). `simulator_check` is why the simulator may be trusted: set to the link fitted
here, it gives the real link's times. Halving-doubling, the fifth algorithm, runs on a
power-of-two number of ranks and is checked on its sums, rounds and bytes.
"""

from . import (
    charts,
    cost_model,
    counted_verdicts,
    exercises,
    simulator_check,
    verdicts,
    walkthrough_verdicts,
)
from .algorithms import ALGORITHMS
from .charts import (
    allreduce_round,
    allreduce_rounds,
    allreduce_timings,
    bytes_per_rank_bars,
    pingpong_fit,
)
from .dial import link_dial
from .exercises import check_ring, check_tree
from .explorer import step_through
from .link_charts import bus_bandwidth_sweep, simulator_against_real, time_against_ranks
from .runs import BUILTIN, compare_with_builtin, pingpong, time_allreduce, traced_run
