"""Chapter 8 (`08_memory_zero_fsdp.ipynb`): where each rank's memory goes, and how to shrink it.

The bytes of weights, gradients, Adam state and activations measured on every rank
(`anatomy`), against the 16-bytes-per-parameter rule of mixed-precision Adam; ZeRO-1, 2
and 3 written by hand on 05's ring phases (`parallel.zero`; built and measured by `zero`,
`runs`) and checked against
DDP and the paper's formulas (`formulas`), their peaks counted by the allocator (`peak`);
PyTorch's FSDP2 on gloo (`fsdp`, `fsdp_options`), every run against one fp64 process and
torch's DDP (`reference`); bf16, fp16
and loss scaling (`precision`); activation checkpointing (`checkpointing`); a memory
calculator (`calculator`) and the exercise's checker (`exercises`).
"""

from . import charts, formulas, reference, verdicts
from .anatomy import SavedBytes, autocast_anatomy, rank_anatomy
from .calculator import Transformer, memory_calculator, per_rank_bytes
from .charts import (
    anatomy_bars,
    checkpoint_curve,
    fsdp_timeline,
    precision_panels,
    zero_bytes,
    zero_peaks,
    zero_traffic,
)
from .checkpointing import checkpointed_steps
from .exercises import MOMENTUM, check_shard_optimizer
from .formulas import accounting, comm_multiple, layout_pairs, model_state_bytes, peak_bytes
from .fsdp import fsdp_training, prefetched_layers
from .fsdp_options import fsdp_settings
from .precision import autocast_race, small_sums, underflow
from .runs import batches, compare_stages
from .zero import STAGES, mlp
