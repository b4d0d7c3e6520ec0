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

from ..core.lazy import names_on_first_use

_EXPORTS = {
    "count_communication": "comm",
    "comparison": "compare",
    "every_row_matches_its_formula": "compare",
    "FABRICS": "compare",
    "train_batch_split": "data_parallel",
    "train_and_compare": "tp_runs",
    "bytes_per_block": "tp_runs",
    "measure_memory": "tp_runs",
    "block_bytes": "tp_formulas",
    "layernorm_bytes_saved": "tp_formulas",
    "ring_runs": "cp_ep_runs",
    "work_by_layout": "cp_ep_runs",
    "moe_runs": "cp_ep_runs",
    "check_f_and_g": "tp_exercises",
    "check_merge": "cp_ep_exercises",
    "check_block_mask": "cp_ep_exercises",
    "check_combine": "cp_ep_exercises",
    "tp_charts": None,
    "cp_ep_charts": None,
    "charts": None,
    "tp_verdicts": None,
    "cp_ep_verdicts": None,
}

__all__ = sorted(_EXPORTS)


__getattr__ = names_on_first_use(
    __name__,
    {name: (module, name) if module else (name, None) for name, module in _EXPORTS.items()},
    globals(),
)
