"""Chapter 2 (`02_sharp_minima.ipynb`): do large batches end in sharper minima (Keskar et al.
2017), or does the lr/B they run at?

It trains arms that differ in the batch, the lr and lr/B (`arms`) until each fits the
training set, and measures where each landed: epsilon-sharpness, the top Hessian eigenvalue,
the test accuracy, and the loss along the line between a small- and a large-batch solution
(`landscape`). `verdicts` holds the claims the notebook checks.
"""

from . import arms, charts, exercises, results, verdicts
from .arms import ARMS, label, lr_of, sweep_config, sweep_configs
from .charts import line_between_solutions, sharpness_by_arm
from .exercises import check_box_sharpness, check_top_eigenvalue
from .experiments import (
    along_line,
    build_model,
    line_alphas,
    problem,
    trial_for,
    valley_width,
    with_weights,
)
from .landscape import epsilon_sharpness, loss_along_line, top_hessian_eigenvalue
from .results import by_arm, gaps, points, table
