"""Notebook 11 (`11_putting_it_together.ipynb`): data, tensor and pipeline parallel together.

The transformer of notebook 10 trained on a 2 x 2 x 2 device mesh of 8 ranks and checked
against one process; the same function under torchrun on several nodes; and a planner that
lists, for a model and a cluster, the layouts that fit (memory per rank from notebook 08's
formulas, step time from compute, the bubble of notebook 06's schedules and each
collective on the cluster's links) and picks one, checked against runs of its layouts on
the simulated clock (`plan_check`, `bench mesh`).

The names a notebook calls are resolved on first use: `python -m course_utils plan`
imports this package and should not pay for torch's distributed modules.
"""

from __future__ import annotations

from ..core.lazy import names_on_first_use

_EXPORTS = {
    "plan": "planner",
    "evaluate": "planner",
    "model": "plan_model",
    "cluster": "plan_model",
    "planner_widget": "plan_widget",
    "check_memory_per_rank": "plan_exercises",
    "check_stage_boundaries": "stage_exercises",
    "check_planner": "plan_check",
    "planner_verdicts": "plan_check",
    "plan_check": None,
    "planner_vs_runs": "plan_check_charts",
    "published": None,
    "run_mesh": "mesh_runs",
    "train_mesh": "mesh_runs",
    "bytes_formula": "mesh_runs",
    "bytes_lines": "mesh_runs",
    "check_mesh_groups": "mesh_exercises",
    "mesh_groups": "groups",
    "mesh_charts": None,
    "mesh_verdicts": None,
}

__all__ = sorted(_EXPORTS)


__getattr__ = names_on_first_use(
    __name__,
    {name: (module, name) if module else (name, None) for name, module in _EXPORTS.items()},
    globals(),
)
