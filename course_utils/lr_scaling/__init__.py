"""Chapter 3 (`03_linear_lr_scaling.ipynb`): the linear learning-rate scaling rule and warmup.

Goyal et al. 2017: k times the batch, k times the learning rate, with a gradual warmup;
the notebook sweeps the batch under four rules (fixed, linear, linear + warmup, sqrt), finds
where linear scaling stops keeping the accuracy, and tells instability from too few updates.
"""

from . import charts, exercises, limits, verdicts
from .charts import accuracy_vs_batch, curves_by_rule, warmup_rescue
from .exercises import check_curve_distance, check_warmup_lr
from .experiments import (
    RULE_LABELS,
    RULES,
    base_config,
    controls_config,
    rule_lr,
    scaled_lr,
    sweep_config,
    trial_for,
    warmup_for,
)
from .limits import controls, summarize
