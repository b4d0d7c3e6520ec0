"""Notebook 11 (`11_putting_it_together.ipynb`): data, tensor and pipeline parallel together.

The transformer of notebook 10 trained on a 2 x 2 x 2 device mesh of 8 ranks and checked
against one process; the same function under torchrun on several nodes; and a planner that
lists, for a model and a cluster, the layouts that fit (memory per rank from notebook 08's
formulas, step time from compute, the bubble of notebook 06's schedules and each
collective on the cluster's links) and picks one, checked against runs of its layouts on
the simulated clock (`plan_check`, `bench mesh`).
"""

from __future__ import annotations

from . import mesh_charts, mesh_verdicts, plan_check, published
from .groups import mesh_groups
from .mesh_exercises import check_mesh_groups
from .mesh_runs import bytes_formula, bytes_lines, run_mesh, train_mesh
from .plan_check import check_planner, planner_verdicts
from .plan_check_charts import planner_vs_runs
from .plan_exercises import check_memory_per_rank
from .plan_model import cluster, model
from .plan_widget import planner_widget
from .planner import evaluate, plan
from .stage_exercises import check_stage_boundaries
