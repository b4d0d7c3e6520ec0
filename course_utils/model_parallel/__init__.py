"""Chapter 6 (`06_model_parallel_pipelining.ipynb`): model parallelism and pipelining.

Tensor parallelism (each layer's neurons split across ranks, `tensor_parallel`), a
pipeline of stages on real ranks (`pipeline`), the schedules themselves, GPipe and 1F1B,
with their bubble and the activations they hold (`schedules`, `activations`), runs paced
by sleep for the pictures or with real compute for the measurements (`bubble`), and the
notebook's claims as verdicts (`verdicts`).
"""

from . import charts, exercises, verdicts
from .bubble import (
    HANDOFF_LINK,
    least_disturbed_steps,
    measure_bubble,
    on_the_real_clock,
    real_clock_stages,
    real_compute_run,
    typical_run,
)
from .charts import (
    activations_held,
    bubble_note,
    bubble_vs_microbatches,
    layer_traffic,
    paced_note,
    pipeline_timeline,
    real_note,
    step_ratio,
)
from .exercises import check_bubble, check_gpipe_order
from .pipeline import mlp, run_pipeline, serial_step
from .schedules import SCHEDULES, simulate
from .tensor_parallel import STYLES, bytes_per_layer, collectives_per_layer, compare_with_unsplit
from .verdicts import bubble_matches

__all__ = [
    "HANDOFF_LINK",
    "SCHEDULES",
    "STYLES",
    "activations_held",
    "bubble_matches",
    "bubble_note",
    "bubble_vs_microbatches",
    "bytes_per_layer",
    "charts",
    "check_bubble",
    "check_gpipe_order",
    "collectives_per_layer",
    "compare_with_unsplit",
    "exercises",
    "layer_traffic",
    "measure_bubble",
    "on_the_real_clock",
    "real_clock_stages",
    "mlp",
    "paced_note",
    "pipeline_timeline",
    "real_compute_run",
    "least_disturbed_steps",
    "real_note",
    "run_pipeline",
    "serial_step",
    "simulate",
    "step_ratio",
    "typical_run",
    "verdicts",
]
