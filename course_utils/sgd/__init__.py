"""Chapter 1 (`01_sgd_vs_minibatch.ipynb`): gradient descent, SGD and mini-batch SGD.

It shows the noise of each, what an update and a second buy, the batch-size sweep of the
report, the gradient noise scale, and the report's parallel hyperparameter search: trials
run several at a time from a Comet-style JSON config (`sweep`), which chapters 2 and 3
reuse for their own sweeps.
"""

from . import charts, critical_batch, epoch_time, exercises, search_speed, trajectory
from .charts import (
    gd_sgd_minibatch,
    noise_vs_batch,
    runtime_and_accuracy,
    steps_to_target,
    sweep_timeline,
)
from .exercises import check_sgd_epoch, check_sweep_config, check_updates_per_epoch
from .gradient_noise import measure as measure_gradient_noise
from .sweep import SweepConfigError, SweepResult, read_config, train_trial
from .sweep import run as run_sweep
from .sweep import run_command as run_sweep_command
