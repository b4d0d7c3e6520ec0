"""Chapter 2 (`02_sharp_minima.ipynb`): large batches end in sharper minima (Keskar et al. 2017).

It trains a small and a large batch to the same training loss and measures where each
landed: epsilon-sharpness, the top Hessian eigenvalue, and the loss along the line between
the two solutions (`landscape`), with the test accuracy that goes with them.
"""

from . import charts, exercises, results
from .charts import line_between_solutions, sharpness_by_batch
from .exercises import check_box_sharpness, check_top_eigenvalue
from .experiments import (
    along_line,
    build_model,
    line_alphas,
    problem,
    sweep_config,
    trial_for,
    valley_width,
    with_weights,
)
from .landscape import epsilon_sharpness, loss_along_line, top_hessian_eigenvalue
from .results import by_batch, by_seed, control_config, table

__all__ = [
    "along_line",
    "build_model",
    "by_batch",
    "by_seed",
    "control_config",
    "results",
    "charts",
    "check_box_sharpness",
    "check_top_eigenvalue",
    "epsilon_sharpness",
    "exercises",
    "line_alphas",
    "line_between_solutions",
    "loss_along_line",
    "problem",
    "sharpness_by_batch",
    "sweep_config",
    "table",
    "top_hessian_eigenvalue",
    "trial_for",
    "valley_width",
    "with_weights",
]
