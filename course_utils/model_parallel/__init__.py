"""Chapter 6 (`06_model_parallel_pipelining.ipynb`): model parallelism and pipelining.

Tensor parallelism (each layer's neurons split across ranks, `tensor_parallel`); every
pipeline schedule's order, naive, GPipe, 1F1B, interleaved 1F1B and ZB-H1 (`schedules`),
played out on paper by one function (`schedule_play.play_out`) and run on real ranks on the
course's one engine, `parallel.pipeline`, watched from outside (`virtual_pipeline`) and by
`torch.distributed.pipelining` (`torch_pipelining`); a step as a `timeline`, the
activations each stage holds (`activations`), runs paced by sleep for the pictures or with
real compute for the measurements (`bubble`), and the notebook's claims as verdicts
(`verdicts`).
"""

from __future__ import annotations

from . import charts, exercises, verdicts
from .bubble import (
    HANDOFF_LINK,
    least_disturbed_steps,
    measure_bubble,
    measure_schedules,
    on_the_real_clock,
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
from .exercises import (
    check_bubble,
    check_gpipe_order,
    check_interleaved_order,
    check_split_backward,
)
from .pipeline import Work, mlp, serial_step
from .schedule_charts import bubble_by_schedule, schedule_timelines
from .schedule_play import play_out, simulate
from .schedules import NAMES as SCHEDULE_NAMES
from .schedules import SCHEDULES, handoffs_per_step
from .tensor_parallel import (
    STYLES,
    SplitLayer,
    bytes_per_layer,
    collectives_per_layer,
    compare_with_unsplit,
)
from .torch_pipelining import (
    KNOWN_DIFFERENCES,
    order_differences,
    train_both_ways,
    train_with_torch,
    unexplained_differences,
)
from .virtual_pipeline import Pacing, run_pipeline, serial_training, train_pipeline
