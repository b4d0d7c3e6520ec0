"""Notebook 10 (`10_transformer_parallelism.ipynb`): how a transformer is split over ranks.

A small causal transformer (`model`) split four ways, each written by hand on the
course's layers (`parallel.tensor_parallel`, `parallel.sequence_parallel`), counted where
they cross `torch.distributed` (`comm`) and checked against one process: tensor parallel
(Megatron's column then row split, heads across ranks), sequence parallel (LayerNorm and
dropout sharded along the sequence, all-reduce turned into reduce-scatter + all-gather),
context parallel (ring attention with a zigzag split) and expert parallel (a mixture of
experts whose tokens travel by all-to-all); then PyTorch's own `parallelize_module`, and
what each costs in bytes per step.
"""

from __future__ import annotations

from . import charts, cp_ep_charts, cp_ep_verdicts, tp_charts, tp_verdicts
from .comm import count_communication
from .compare import FABRICS, comparison, every_row_matches_its_formula
from .cp_ep_exercises import check_block_mask, check_combine, check_merge
from .cp_ep_runs import moe_runs, ring_runs, work_by_layout
from .data_parallel import train_batch_split
from .tp_exercises import check_f_and_g
from .tp_formulas import block_bytes, layernorm_bytes_saved
from .tp_runs import bytes_per_block, measure_memory, train_and_compare
