"""Chapter 4 (`04_data_parallel_ddp.ipynb`): data parallelism with DistributedDataParallel.

`equivalence`: N ranks with batch b make exactly the update of one process with batch N*b,
by hand and with DDP. `experiments`: the report's runs (DistributedSampler, effective
batch, lr scaling). `cost`: where a DDP step's time goes and what cuts the communication.
`scaling`: the lecture's layouts priced by alpha-beta and strong scaling over 1..8 ranks.
`trace`: a DDP step under torch.profiler, backward ops against all-reduces.
`torchrun_train`: the same training as a script for torchrun on several nodes.
"""

from . import charts, exercises, replica_verdicts, scaling, scaling_charts, trace, verdicts
from .charts import (
    accuracy_vs_effective_batch,
    backward_overlap,
    compute_vs_communication,
    curves_overlaid,
    overlap_saving_bars,
    profiled_timeline,
    step_breakdown,
    step_losses,
)
from .cost import bare_allreduce, measure, measure_single, overlap_timeline, standard_variants
from .data_parallel import data_parallel_vs_one_device
from .equivalence import Setup, average_gradients
from .equivalence import equivalence as run_equivalence
from .exercises import check_average_gradients, check_updates_per_epoch
from .experiments import compare_with_single, lr_scaling, split_global_batch
from .overlap import overlap_saving
