"""Chapter 6 (`06_model_parallel_pipelining.ipynb`): model parallelism and pipelining.

Tensor parallelism (each layer's neurons split across ranks, `tensor_parallel`), a
pipeline of stages on real ranks (`pipeline`), and the schedules themselves, GPipe and
1F1B, with their bubble and the activations they hold (`schedules`).
"""

from . import charts, exercises
from .bubble import bubble_matches, measure_bubble, real_compute_run, typical_run
from .charts import activations_held, bubble_vs_microbatches, layer_traffic, pipeline_timeline
from .exercises import check_bubble, check_gpipe_order
from .pipeline import mlp, run_pipeline, serial_step
from .schedules import SCHEDULES, simulate
from .tensor_parallel import STYLES, bytes_per_layer, compare_with_unsplit

__all__ = [
    "SCHEDULES",
    "STYLES",
    "activations_held",
    "bubble_vs_microbatches",
    "bytes_per_layer",
    "charts",
    "check_bubble",
    "check_gpipe_order",
    "compare_with_unsplit",
    "exercises",
    "layer_traffic",
    "bubble_matches",
    "measure_bubble",
    "real_compute_run",
    "mlp",
    "pipeline_timeline",
    "run_pipeline",
    "serial_step",
    "simulate",
    "typical_run",
]
